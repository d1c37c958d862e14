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

from infra import assets
from infra import constants as C
from infra.config import StackConfig
from skyloop import manifest
from tests.infra.helpers import function, one, resources

TOPIC = "arn:aws:sns:eu-west-1:123456789012:skyloop-alarms"
ORIGINS = ("https://app.example.com", "http://localhost:5173")


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
    joined = [
        "".join("aws" if p == {"Ref": "AWS::Partition"} else p for p in layer["Fn::Join"][1])
        for layer in layers
        if "Fn::Join" in layer
    ]
    assert joined == [f"arn:aws:lambda:eu-west-1:{C.LWA_LAYER_ACCOUNT}:layer:LambdaAdapterLayerArm64:27"]


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
    _, api = one(prod_template, "AWS::ApiGatewayV2::Api")
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
    assert cors["AllowMethods"] == ["GET"]
    assert set(cors["AllowHeaders"]) == {"authorization", "last-event-id"}
    assert cors["AllowCredentials"] is False


def test_cors_preflights_and_origin_pass_through_the_edge(prod_template: dict[str, Any]) -> None:
    _, distribution = one(prod_template, "AWS::CloudFront::Distribution")
    config = distribution["Properties"]["DistributionConfig"]
    for behavior in (config["DefaultCacheBehavior"], *config["CacheBehaviors"]):
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
