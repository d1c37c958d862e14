"""Context switches: ``prod`` keeps data, ``lwaLayerVersion`` picks the adapter, ``alarmTopicArn`` notifies,
``corsOrigins`` lets browsers in.

Builds the stack in-process once for this module, with production context, a
concrete account and region, and cdk-nag attached (synth fails on any
unacknowledged finding, so the fixture itself is the check for that env).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra import assets, permissions
from infra import constants as C
from infra.config import StackConfig
from skyloop import manifest
from tests.infra.helpers import as_list, by_prefix, function, one, resources, role_statements, statements_with

TOPIC = "arn:aws:sns:eu-west-1:123456789012:skyloop-alarms"
ORIGINS = ("https://app.example.com", "http://localhost:5173")
MODELS = (
    "arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-3-5-sonnet-20240620-v1:0",
    "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-5-sonnet-20240620-v1:0",
)
TOOLS = (
    "arn:aws:lambda:eu-west-1:123456789012:function:lookup-order",
    "arn:aws:lambda:eu-west-1:123456789012:function:refund:live",
)
ISSUER = "https://login.example.com/realms/skyloop"


@pytest.fixture(scope="module")
def prod_template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import aws_cdk as cdk

    from infra.stack import SkyloopStack, attach_nag

    outdir = tmp_path_factory.mktemp("cdk.out.prod")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(assets.LAYER_DIR_ENV, str(outdir / "no-layer-here"))  # never copy a built layer
        app = cdk.App(
            outdir=str(outdir),
            context={
                "prod": "true",
                "lwaLayerVersion": "27",
                "alarmTopicArn": TOPIC,
                "powertoolsTracer": "true",
                "corsOrigins": " , ".join(ORIGINS) + ",",  # as typed after -c, spaces and all
                "reconcileMinutes": "5",
                "bedrockModelArns": list(MODELS),  # a JSON list, as in cdk.json
                "lambdaToolArns": ",".join(TOOLS),  # a comma-separated string, as after -c
                "cognito": "true",
                "jwtAuthorizerOnApi": "true",
                "quotaRunningTurns": "2",
                "quotaTurnsPerMinute": "30",
                "quotaSessions": "100",
                "quotaScheduledTasks": "5",
                "quotaScheduledRunsPerHour": "60",
                "outboundAllow": "10.0.0.0/8, models.internal",
                "streamConcurrency": "200",
            },
        )
        env = cdk.Environment(account="123456789012", region="eu-west-1")
        stack = SkyloopStack(app, "SkyloopProd", env=env)
        # cdk-nag again: with a concrete account and region, ARNs (and finding ids) render differently
        attach_nag(app)
        return app.synth().get_stack_by_name(stack.stack_name).template


def test_context_values_are_parsed() -> None:
    import aws_cdk as cdk

    assert StackConfig.from_context(cdk.App().node) == StackConfig(
        prod=False, lwa_layer_version=C.LWA_DEFAULT_LAYER_VERSION, alarm_topic_arn=None
    )
    node = cdk.App(context={"prod": "True", "lwaLayerVersion": "28"}).node
    assert StackConfig.from_context(node) == StackConfig(prod=True, lwa_layer_version=28)
    assert StackConfig.from_context(cdk.App(context={"prod": False}).node).prod is False


def test_prod_keeps_the_table_and_protects_it(prod_template: dict[str, Any]) -> None:
    _, table = one(prod_template, "AWS::DynamoDB::Table")
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    assert table["Properties"]["DeletionProtectionEnabled"] is True


def test_prod_keeps_logs(prod_template: dict[str, Any]) -> None:
    groups = resources(prod_template, "AWS::Logs::LogGroup").values()
    assert {g["DeletionPolicy"] for g in groups} == {"Retain"}


def test_lwa_layer_version_and_region_come_from_context(prod_template: dict[str, Any]) -> None:
    spec = next(f for f in manifest.FUNCTIONS if f.streaming)
    layers = function(prod_template, spec.name)[1]["Properties"]["Layers"]
    literal = [layer for layer in layers if isinstance(layer, str)]
    assert literal == [f"arn:aws:lambda:eu-west-1:{C.LWA_LAYER_ACCOUNT}:layer:LambdaAdapterLayerArm64:27"]


def _adapter_arn(region: str, override: str | None = None) -> str:
    import aws_cdk as cdk

    from infra.constructs.stream import lwa_layer_arn

    stack = cdk.Stack(cdk.App(), "Regional", env=cdk.Environment(account="123456789012", region=region))
    return lwa_layer_arn(stack, 25, override)


def test_the_adapter_layer_comes_from_the_account_that_publishes_it_in_each_region() -> None:
    assert _adapter_arn("eu-central-2") == (
        "arn:aws:lambda:eu-central-2:753240598075:layer:LambdaAdapterLayerArm64:25"
    )
    # China: another partition, and one publishing account per region
    assert _adapter_arn("cn-north-1") == (
        "arn:aws-cn:lambda:cn-north-1:041581134020:layer:LambdaAdapterLayerArm64:25"
    )
    assert _adapter_arn("cn-northwest-1") == (
        "arn:aws-cn:lambda:cn-northwest-1:069767869989:layer:LambdaAdapterLayerArm64:25"
    )


def test_a_region_without_a_published_adapter_stops_synth_saying_what_to_do() -> None:
    from infra.constructs.stream import UnknownAdapterRegionError

    with pytest.raises(UnknownAdapterRegionError, match=r"us-gov-west-1.*-c lwaLayerArn="):
        _adapter_arn("us-gov-west-1")
    # And an own copy of the layer is used as given
    own = "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:layer:LambdaAdapterLayerArm64:3"
    assert _adapter_arn("us-gov-west-1", own) == own


def test_a_malformed_adapter_arn_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="lwaLayerArn"):
        StackConfig(lwa_layer_arn="arn:aws:lambda:us-east-1:123:layer:x")


def test_a_region_agnostic_stack_looks_the_adapter_up_and_refuses_other_regions_at_deploy(
    template_json: dict[str, Any],
) -> None:
    # Given the stack synthesized without a region (as make synth does without credentials)
    (mapping,) = [m for name, m in template_json["Mappings"].items() if "WebAdapterAccounts" in name]
    assert {region: v["account"] for region, v in mapping.items()} == C.LWA_LAYER_ACCOUNTS
    # Then the adapter's account is looked up by region, in the stack's partition
    spec = next(f for f in manifest.FUNCTIONS if f.streaming)
    (layer,) = [x for x in function(template_json, spec.name)[1]["Properties"]["Layers"] if "Fn::Join" in x]
    parts = layer["Fn::Join"][1]
    assert {"Ref": "AWS::Partition"} in parts
    assert any("Fn::FindInMap" in p for p in parts if isinstance(p, dict))
    # And a deploy to a region with no published layer fails at once, with the advice
    (rule,) = [r for name, r in template_json["Rules"].items() if "WebAdapterRegion" in name]
    (assertion,) = rule["Assertions"]
    assert "lwaLayerArn" in assertion["AssertDescription"]
    contains = assertion["Assert"]["Fn::Contains"]
    assert sorted(contains[0]) == sorted(C.LWA_LAYER_ACCOUNTS)
    assert contains[1] == {"Ref": "AWS::Region"}


def test_alarms_notify_the_topic_from_context(prod_template: dict[str, Any]) -> None:
    alarms = [a["Properties"] for a in resources(prod_template, "AWS::CloudWatch::Alarm").values()]
    assert alarms
    for alarm in alarms:
        assert alarm["AlarmActions"] == [TOPIC]
        assert alarm["OKActions"] == [TOPIC]


def test_app_reads_cdk_json_context_without_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.app import default_context

    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    context = json.loads((manifest.PROJECT_ROOT / "cdk.json").read_text())["context"]
    assert default_context() == context
    # And under the CDK CLI, which passes cdk.json and -c values itself, it adds nothing
    monkeypatch.setenv("CDK_CONTEXT_JSON", "{}")
    assert default_context() == {}


def test_powertools_tracer_is_opt_in_by_context() -> None:
    from infra.config import StackConfig

    class _Node:
        def __init__(self, ctx: dict[str, str]) -> None:
            self.ctx = ctx

        def try_get_context(self, key: str) -> str | None:
            return self.ctx.get(key)

    assert StackConfig.from_context(_Node({})).powertools_tracer is False  # type: ignore[arg-type]
    assert StackConfig.from_context(_Node({"powertoolsTracer": "true"})).powertools_tracer is True  # type: ignore[arg-type]


# ------------------------------------------------------------------------------- CORS
def test_cors_origins_are_parsed_from_a_list_or_a_comma_separated_string() -> None:
    from infra.config import parse_origins

    assert parse_origins(None) == ()
    assert parse_origins("") == ()
    assert parse_origins("https://a.example, http://localhost:3000,") == (
        "https://a.example",
        "http://localhost:3000",
    )
    assert parse_origins(["https://a.example", "https://a.example"]) == ("https://a.example",)
    assert parse_origins("*") == ("*",)


@pytest.mark.parametrize(
    "bad", ["a.example", "https://a.example/", "https://a.example/app", "ftp://a.example"]
)
def test_a_malformed_cors_origin_stops_synth(bad: str) -> None:
    from infra.config import parse_origins

    with pytest.raises(ValueError, match="corsOrigins"):
        parse_origins(f"https://ok.example,{bad}")


def test_cors_on_the_http_api_allows_exactly_the_listed_origins(prod_template: dict[str, Any]) -> None:
    # Given corsOrigins with two origins
    (api,) = [
        a
        for a in resources(prod_template, "AWS::ApiGatewayV2::Api").values()
        if a["Properties"]["ProtocolType"] == "HTTP"
    ]
    cors = api["Properties"]["CorsConfiguration"]
    # Then the HTTP API answers preflights for them, with the methods and headers the REST API uses
    assert cors["AllowOrigins"] == list(ORIGINS)
    assert set(cors["AllowMethods"]) == {"GET", "POST", "PATCH", "DELETE"}
    assert {"authorization", "content-type", "idempotency-key"} <= set(cors["AllowHeaders"])
    assert cors["ExposeHeaders"] == ["x-request-id"]
    assert cors["AllowCredentials"] is False
    assert cors["MaxAge"] == C.CORS_MAX_AGE_S


def test_cors_on_the_stream_url_allows_the_listed_origins(prod_template: dict[str, Any]) -> None:
    _, url = one(prod_template, "AWS::Lambda::Url")
    cors = url["Properties"]["Cors"]
    # Then a browser may open the stream with its bearer token and resume with Last-Event-ID
    assert cors["AllowOrigins"] == list(ORIGINS)
    assert cors["AllowMethods"] == ["GET", "POST"]  # POST: the preflight of OpenAI's event post
    assert set(cors["AllowHeaders"]) == {
        "authorization",
        "last-event-id",
        "content-type",
        "idempotency-key",
        "openai-beta",
        "anthropic-beta",
        "anthropic-version",
        "x-api-key",
    }
    assert cors["AllowCredentials"] is False


def test_cors_allows_the_headers_the_compatible_apis_sdks_send(prod_template: dict[str, Any]) -> None:
    # A browser preflight names every header the request carries; one not allowed fails the request.
    (api,) = [
        a
        for a in resources(prod_template, "AWS::ApiGatewayV2::Api").values()
        if a["Properties"]["ProtocolType"] == "HTTP"
    ]
    rest = {h.lower() for h in api["Properties"]["CorsConfiguration"]["AllowHeaders"]}
    _, url = one(prod_template, "AWS::Lambda::Url")
    stream = {h.lower() for h in url["Properties"]["Cors"]["AllowHeaders"]}
    # Anthropic's SDK on /anthropic/v1 (its REST paths on the HTTP API, its events stream on the URL)
    anthropic = {"anthropic-beta", "anthropic-version", "x-api-key", "authorization", "content-type"}
    assert anthropic <= rest
    assert anthropic <= stream
    # OpenAI's on /openai/v1 (OpenAI-Beta: agents=v1 on every call)
    assert {"openai-beta", "authorization", "content-type"} <= rest
    assert {"openai-beta", "authorization"} <= stream


def test_cors_preflights_and_origin_pass_through_the_edge(prod_template: dict[str, Any]) -> None:
    _, distribution = one(prod_template, "AWS::CloudFront::Distribution")
    config = distribution["Properties"]["DistributionConfig"]
    # (the console's behaviors serve its own files on the same origin: no CORS there)
    console_origin = config["DefaultCacheBehavior"]["TargetOriginId"]
    api_behaviors = [b for b in config["CacheBehaviors"] if b["TargetOriginId"] != console_origin]
    assert len(api_behaviors) == len(C.API_PATH_PATTERNS) + 1 + len(C.COMPAT_STREAM_PATH_PATTERNS)
    for behavior in api_behaviors:
        # Then OPTIONS reaches the origins, which answer the preflight
        assert "OPTIONS" in behavior["AllowedMethods"]
        # And every viewer header but Host is forwarded: Origin, Access-Control-Request-Method/-Headers
        assert behavior["OriginRequestPolicyId"] == "b689b0a8-53d0-40ab-baf2-68738e2966ac"
        # And nothing is cached, so no answer for one origin is served to another
        assert behavior["CachePolicyId"] == "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_powertools_tracer_switch_turns_the_tracer_on(prod_template: dict[str, Any], spec: Any) -> None:
    # Given -c powertoolsTracer=true: every function builds Powertools' Tracer (tests/infra/
    # test_artifacts.py imports each handler that way from the layer)
    env = function(prod_template, spec.name)[1]["Properties"]["Environment"]["Variables"]
    assert env["POWERTOOLS_TRACE_DISABLED"] == "false"


# ------------------------------------------------------------------- blobs in production
def test_prod_keeps_the_blob_bucket_and_its_objects(prod_template: dict[str, Any]) -> None:
    bucket_id, bucket = by_prefix(prod_template, "AWS::S3::Bucket", "BlobsBucket")
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket["UpdateReplacePolicy"] == "Retain"
    # And nothing empties it on delete (only the console's bucket, which holds build output, is emptied)
    emptied = [
        e["Properties"]["BucketName"]
        for e in resources(prod_template, "Custom::S3AutoDeleteObjects").values()
    ]
    console_id, console = by_prefix(prod_template, "AWS::S3::Bucket", "ConsoleBucket")
    assert emptied == [{"Ref": console_id}]
    assert console["DeletionPolicy"] == "Delete"
    assert {"Ref": bucket_id} not in emptied


def test_secrets_prefix_carries_the_stack_name(prod_template: dict[str, Any]) -> None:
    env = function(prod_template, "api")[1]["Properties"]["Environment"]["Variables"]
    assert env["SKYLOOP_SECRETS_PREFIX"] == "SkyloopProd/agents"


# ---------------------------------------------------------------------------- reconciler
def test_reconcile_minutes_sets_the_schedule(prod_template: dict[str, Any]) -> None:
    _, rule = by_prefix(prod_template, "AWS::Events::Rule", "ReconcilerSchedule")
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"


@pytest.mark.parametrize("bad", ["0", "6", "60"])
def test_reconcile_minutes_out_of_range_stops_synth(bad: str) -> None:
    import aws_cdk as cdk

    with pytest.raises(ValueError, match="reconcileMinutes"):
        StackConfig.from_context(cdk.App(context={"reconcileMinutes": bad}).node)


# ------------------------------------------------------------------------------- Bedrock
def _role_statements_of(template: dict[str, Any], name: str) -> list[dict[str, Any]]:
    role = function(template, name)[1]["Properties"]["Role"]["Fn::GetAtt"][0]
    return role_statements(template, role)


def test_bedrock_invoke_is_granted_to_the_model_step_on_exactly_the_listed_arns(
    prod_template: dict[str, Any],
) -> None:
    for spec in manifest.FUNCTIONS:
        bedrock = [
            s for s in _role_statements_of(prod_template, spec.name) if "bedrock:" in json.dumps(s["Action"])
        ]
        if spec.name != "turn":
            assert bedrock == [], spec.name
            continue
        (statement,) = bedrock
        assert sorted(statement["Action"]) == ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]
        assert statement["Resource"] == list(MODELS)
        assert "*" not in json.dumps(statement["Resource"])


def test_the_local_iam_check_grants_the_models_the_deploy_would(
    prod_template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the same bedrockModelArns, as the developer's cdk.json (or -c) would give them
    from skyloop.local import iam as local_iam

    monkeypatch.setenv(local_iam.CONTEXT_ENV, json.dumps({C.CTX_BEDROCK_MODEL_ARNS: list(MODELS)}))
    for spec in manifest.FUNCTIONS:
        deployed = [
            (sorted(s["Action"]), s["Resource"])
            for s in _role_statements_of(prod_template, spec.name)
            if "bedrock:" in json.dumps(s["Action"])
        ]
        # Then the local stack's check (the committed export's context grants) allows exactly those
        local = [
            (sorted(s.actions), list(s.resources))
            for s in local_iam.context_statements(local_iam.policies(), spec.name)
        ]
        assert local == deployed, spec.name


@pytest.mark.parametrize(
    "bad",
    [
        "*",
        "arn:aws:bedrock:eu-west-1::foundation-model/*",
        "arn:aws:bedrock:eu-west-1::foundation-model/anthropic.*",
        "arn:aws:lambda:eu-west-1:123456789012:function:x",
    ],
)
def test_a_wildcard_or_foreign_bedrock_arn_stops_synth(bad: str) -> None:
    import aws_cdk as cdk

    with pytest.raises(ValueError, match="bedrockModelArns"):
        StackConfig.from_context(cdk.App(context={"bedrockModelArns": [MODELS[0], bad]}).node)


# --------------------------------------------------------------------------- Lambda tools
def test_machine_may_invoke_exactly_the_listed_lambda_tools(prod_template: dict[str, Any]) -> None:
    _, machine = one(prod_template, "AWS::StepFunctions::StateMachine")
    role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    invoke = statements_with(role_statements(prod_template, role_id), "lambda:InvokeFunction")
    # Then one statement for its own steps, one for exactly the stack's smoke tool and the listed
    # tools, nothing else
    steps = {
        json.dumps({"Fn::GetAtt": [function(prod_template, f.name)[0], "Arn"]})
        for f in manifest.FUNCTIONS
        if f.asl_key
    }
    tool_statements = [s for s in invoke if not {json.dumps(r) for r in as_list(s["Resource"])} <= steps]
    (tools,) = tool_statements
    smoke_id, _ = by_prefix(prod_template, "AWS::Lambda::Function", "SmokeToolEcho")
    assert tools["Resource"] == [{"Fn::GetAtt": [smoke_id, "Arn"]}, *TOOLS]
    assert "*" not in json.dumps(tools)
    # And no function may invoke a tool itself (the machine does): a function may invoke only the
    # functions it pre-warms, and the schedule repair pass (the reconciler) the scheduled tasks' run function
    tool_arns = set(TOOLS)
    run = {"Fn::GetAtt": [function(prod_template, "schedule_run")[0], "Arn"]}
    for spec in manifest.FUNCTIONS:
        prewarmed = [{"Fn::GetAtt": [function(prod_template, name)[0], "Arn"]} for name in spec.prewarm]
        for statement in statements_with(
            _role_statements_of(prod_template, spec.name), "lambda:InvokeFunction"
        ):
            resources = as_list(statement["Resource"])
            assert not tool_arns & {r for r in resources if isinstance(r, str)}, spec.name
            if spec.name in permissions.SCHEDULE_DISPATCHERS and resources == [run]:
                continue
            assert resources == prewarmed, spec.name


@pytest.mark.parametrize(
    "bad",
    [
        "*",
        "arn:aws:lambda:eu-west-1:123456789012:function:*",
        "arn:aws:lambda:eu-west-1:123456789012:function:x:*",
        "lookup-order",
    ],
)
def test_a_wildcard_lambda_tool_arn_stops_synth(bad: str) -> None:
    import aws_cdk as cdk

    with pytest.raises(ValueError, match="lambdaToolArns"):
        StackConfig.from_context(cdk.App(context={"lambdaToolArns": bad}).node)


# ------------------------------------------------------------------------ sign-in, quotas
def test_cognito_user_pool_and_client_issue_the_jwts_api_and_stream_accept(
    prod_template: dict[str, Any],
) -> None:
    pool_id, pool = one(prod_template, "AWS::Cognito::UserPool")
    client_id, client = one(prod_template, "AWS::Cognito::UserPoolClient")
    assert pool["Properties"]["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert pool["Properties"]["MfaConfiguration"] == "ON"
    assert pool["DeletionPolicy"] == "Retain"  # prod keeps its users
    assert client["Properties"]["GenerateSecret"] is False
    assert client["Properties"]["ExplicitAuthFlows"] == ["ALLOW_USER_SRP_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"]
    for spec in manifest.FUNCTIONS:
        env = function(prod_template, spec.name)[1]["Properties"]["Environment"]["Variables"]
        if spec.name in ("api", "stream"):
            assert env["SKYLOOP_JWT_AUDIENCE"] == {"Ref": client_id}
            assert env["SKYLOOP_JWT_ISSUER"] == {
                "Fn::Join": [
                    "",
                    [
                        "https://cognito-idp.",
                        {"Ref": "AWS::Region"},
                        ".",
                        {"Ref": "AWS::URLSuffix"},
                        "/",
                        {"Ref": pool_id},
                    ],
                ]
            }
        else:
            assert not [k for k in env if k.startswith("SKYLOOP_JWT_")], spec.name


def test_jwt_authorizer_on_the_api_checks_the_same_issuer_and_audience(prod_template: dict[str, Any]) -> None:
    _, authorizer = one(prod_template, "AWS::ApiGatewayV2::Authorizer")
    props = authorizer["Properties"]
    assert props["AuthorizerType"] == "JWT"
    assert props["IdentitySource"] == ["$request.header.Authorization"]
    api_env = function(prod_template, "api")[1]["Properties"]["Environment"]["Variables"]
    assert props["JwtConfiguration"]["Audience"] == [api_env["SKYLOOP_JWT_AUDIENCE"]]
    assert props["JwtConfiguration"]["Issuer"] == api_env["SKYLOOP_JWT_ISSUER"]
    _, route = by_prefix(
        prod_template, "AWS::ApiGatewayV2::Route", "ApiDefaultRoute"
    )  # the HTTP API's one route
    assert route["Properties"]["AuthorizationType"] == "JWT"


def test_quotas_reach_the_api_and_outbound_allow_every_function(prod_template: dict[str, Any]) -> None:
    for spec in manifest.FUNCTIONS:
        env = function(prod_template, spec.name)[1]["Properties"]["Environment"]["Variables"]
        assert env["SKYLOOP_OUTBOUND_ALLOW"] == "10.0.0.0/8,models.internal"
        quotas = {k: v for k, v in env.items() if k.startswith("SKYLOOP_QUOTA_")}
        if spec.name in ("api", "schedule_run"):  # where quotas.before_turn / before_session run
            assert quotas == {
                "SKYLOOP_QUOTA_RUNNING_TURNS": "2",
                "SKYLOOP_QUOTA_TURNS_PER_MINUTE": "30",
                "SKYLOOP_QUOTA_SESSIONS": "100",
                "SKYLOOP_QUOTA_SCHEDULED_TASKS": "5",
                "SKYLOOP_QUOTA_SCHEDULED_RUNS_PER_HOUR": "60",
            }
        else:
            assert quotas == {}, spec.name
    # And the names are the ones skyloop.settings reads
    from skyloop.settings import Settings

    known = {f.alias for f in Settings.model_fields.values()}
    env = function(prod_template, "api")[1]["Properties"]["Environment"]["Variables"]
    assert {k for k in env if k.startswith("SKYLOOP_")} <= known


@pytest.fixture(scope="module")
def issuer_template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import aws_cdk as cdk

    from infra.stack import SkyloopStack, attach_nag

    outdir = tmp_path_factory.mktemp("cdk.out.issuer")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(assets.LAYER_DIR_ENV, str(outdir / "no-layer-here"))
        app = cdk.App(
            outdir=str(outdir),
            context={
                "jwtIssuer": ISSUER,
                "jwtAudience": "skyloop-cli",
                "jwtJwksUrl": f"{ISSUER}/protocol/openid-connect/certs",
                "consoleClientId": "skyloop-console",
            },
        )
        stack = SkyloopStack(app, "SkyloopIssuer")
        attach_nag(app)
        return app.synth().get_stack_by_name(stack.stack_name).template


def test_an_existing_issuer_is_trusted_without_a_user_pool_or_gateway_authorizer(
    issuer_template: dict[str, Any],
) -> None:
    assert resources(issuer_template, "AWS::Cognito::UserPool") == {}
    assert resources(issuer_template, "AWS::ApiGatewayV2::Authorizer") == {}
    for name in ("api", "stream"):
        env = function(issuer_template, name)[1]["Properties"]["Environment"]["Variables"]
        assert env["SKYLOOP_JWT_ISSUER"] == ISSUER
        assert env["SKYLOOP_JWT_AUDIENCE"] == "skyloop-cli"
        assert env["SKYLOOP_JWT_JWKS_URL"] == f"{ISSUER}/protocol/openid-connect/certs"
    assert issuer_template["Outputs"]["JwtIssuer"]["Value"] == ISSUER
    # And the console's public client reaches the API (its /v1/info), nothing else
    assert (
        function(issuer_template, "api")[1]["Properties"]["Environment"]["Variables"][
            "SKYLOOP_CONSOLE_CLIENT_ID"
        ]
        == "skyloop-console"
    )
    stream_env = function(issuer_template, "stream")[1]["Properties"]["Environment"]["Variables"]
    assert "SKYLOOP_CONSOLE_CLIENT_ID" not in stream_env


@pytest.mark.parametrize(
    "context",
    [
        {"cognito": "true", "jwtIssuer": ISSUER, "jwtAudience": "a"},
        {"jwtIssuer": ISSUER},
        {"jwtIssuer": "http://insecure.example", "jwtAudience": "a"},
        {"jwtAuthorizerOnApi": "true"},
        {"quotaSessions": "0"},
        {"cognito": "true", "consoleClientId": "c"},
    ],
)
def test_inconsistent_sign_in_or_quota_context_stops_synth(context: dict[str, str]) -> None:
    import aws_cdk as cdk

    with pytest.raises(ValueError, match=r"jwt|cognito|quota|console"):
        StackConfig.from_context(cdk.App(context=context).node)


def test_stream_concurrency_caps_the_stream_function_alone(
    prod_template: dict[str, Any], template_json: dict[str, Any]
) -> None:
    # Given -c streamConcurrency=200: the stream function may hold at most 200 executions
    for spec in manifest.FUNCTIONS:
        reserved = function(prod_template, spec.name)[1]["Properties"].get("ReservedConcurrentExecutions")
        assert reserved == (200 if spec.streaming else None), spec.name
    # And without it nothing is reserved (an account with a small quota could not deploy)
    for spec in manifest.FUNCTIONS:
        assert "ReservedConcurrentExecutions" not in function(template_json, spec.name)[1]["Properties"]


def test_stream_concurrency_must_be_a_positive_integer() -> None:
    import aws_cdk as cdk

    with pytest.raises(ValueError, match="streamConcurrency"):
        StackConfig.from_context(cdk.App(context={"streamConcurrency": "0"}).node)
