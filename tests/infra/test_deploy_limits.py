"""The synthesized stack against the limits AWS enforces at deploy (``infra.checks.template``).

The real assembly has no finding; then, for each rule, a copy of the real template
(or of its asset index) is changed as little as possible to cross one limit, and
exactly that rule must fire. Limits sit at their exact boundary where that is cheap
to show (a value at the limit passes, one byte more fails). ``infra/app.py`` runs the
same checks after every synth; the last test shows it refusing a configuration end to
end: with 120 ``bedrockModelArns`` the model step's role outgrows its 10,240 characters of
inline policy, CDK moves the one long statement into an "overflow" managed policy, and that
policy is over IAM's 6,144 (CloudFormation would fail creating it).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from infra import constants as C
from infra.checks import asl, check_assembly, check_template
from infra.checks import intrinsics as I
from infra.checks import names as N
from infra.checks import template as T
from infra.checks.findings import Finding
from tests.infra.helpers import by_prefix, function, one

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

ROOT = Path(__file__).resolve().parents[2]
Template = dict[str, Any]


@pytest.fixture(scope="module")
def assets(synth: Synth) -> dict[str, Path]:
    return T.asset_paths(synth.outdir)


@pytest.fixture
def cfn(synth: Synth) -> Template:
    """A fresh copy of the real template to plant one defect in."""
    return copy.deepcopy(synth.template)


def rules(findings: list[Finding]) -> set[str]:
    return {f.rule for f in findings}


def props(template: Template, logical_id: str) -> dict[str, Any]:
    return template["Resources"][logical_id]["Properties"]


def api(template: Template) -> tuple[str, dict[str, Any]]:
    logical_id, _ = function(template, "api")
    return logical_id, props(template, logical_id)


# ---------------------------------------------------------------- the real stack
def test_the_synthesized_assembly_has_no_finding(synth: Synth) -> None:
    assert check_assembly(synth.outdir) == []


def test_every_resource_type_of_the_stack_has_name_rules(cfn: Template) -> None:
    # A type missing from NAME_RULES is only reported when it sets a name: list them all anyway
    types = {r["Type"] for r in cfn["Resources"].values() if not r["Type"].startswith("Custom::")}
    assert types - set(N.NAME_RULES) == set()


# (type, property) -> (botocore service, operation, input member) whose "max" is the API's limit
API_NAME_SHAPES = {
    ("AWS::IAM::Role", "RoleName"): ("iam", "CreateRole", "RoleName"),
    ("AWS::IAM::Role", "Path"): ("iam", "CreateRole", "Path"),
    ("AWS::IAM::Policy", "PolicyName"): ("iam", "PutRolePolicy", "PolicyName"),
    ("AWS::IAM::ManagedPolicy", "ManagedPolicyName"): ("iam", "CreatePolicy", "PolicyName"),
    ("AWS::Logs::LogGroup", "LogGroupName"): ("logs", "CreateLogGroup", "logGroupName"),
    ("AWS::Logs::QueryDefinition", "Name"): ("logs", "PutQueryDefinition", "name"),
    ("AWS::StepFunctions::StateMachine", "StateMachineName"): ("stepfunctions", "CreateStateMachine", "name"),
    ("AWS::CloudFront::Function", "Name"): ("cloudfront", "CreateFunction", "Name"),
    ("AWS::Events::Rule", "Name"): ("events", "PutRule", "Name"),
    ("AWS::Scheduler::ScheduleGroup", "Name"): ("scheduler", "CreateScheduleGroup", "Name"),
    ("AWS::CloudWatch::Alarm", "AlarmName"): ("cloudwatch", "PutMetricAlarm", "AlarmName"),
    ("AWS::Cognito::UserPool", "UserPoolName"): ("cognito-idp", "CreateUserPool", "PoolName"),
    ("AWS::Cognito::UserPoolClient", "ClientName"): ("cognito-idp", "CreateUserPoolClient", "ClientName"),
    ("AWS::Cognito::UserPoolDomain", "Domain"): ("cognito-idp", "CreateUserPoolDomain", "Domain"),
}


def _rule(kind: str, prop: str) -> N.NameRule:
    (rule,) = [r for r in N.NAME_RULES[kind] if r.path == prop]
    return rule


def test_name_limits_agree_with_the_service_models() -> None:
    # botocore's models carry the APIs' length constraints: NAME_RULES says the same
    import botocore.session

    session = botocore.session.get_session()

    def member(service: str, operation: str, name: str) -> Any:
        return session.get_service_model(service).operation_model(operation).input_shape.members[name]

    for (kind, prop), (service, operation, name) in API_NAME_SHAPES.items():
        assert _rule(kind, prop).max_length == member(service, operation, name).metadata["max"], (kind, prop)
    # Lambda's shapes admit whole ARNs: the name part of a layer is [a-zA-Z0-9-_]{1,140}; a
    # function name is 64 characters (the Lambda quotas page; the ARN form may be 140)
    assert "[a-zA-Z0-9-_]{1,140}" in member("lambda", "PublishLayerVersion", "LayerName").metadata["pattern"]
    assert _rule("AWS::Lambda::LayerVersion", "LayerName").max_length == 140
    assert _rule("AWS::Lambda::Function", "FunctionName").max_length == 64


def test_worst_case_region_matches_the_stacks_name_budget() -> None:
    # infra/constructs/_common.regional_name cuts names for the longest region: same figure here
    assert len(I.REGION) == C.NAME_MAX_REGION_LENGTH


# ---------------------------------------------------------------- Lambda: code and layers
def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.truncate(size)  # no blocks written: st_size is what Lambda would unpack


@pytest.mark.parametrize("over", [0, 1])
def test_code_and_layers_over_262144000_bytes_unzipped(
    cfn: Template, assets: dict[str, Path], tmp_path: Path, over: int
) -> None:
    # Given the api function's real code plus a sparse file that brings code + layers to the limit (+1)
    lid, fn = api(cfn)
    code = tmp_path / "code"
    shutil.copytree(assets[fn["Code"]["S3Key"]], code)
    layers = sum(
        T.unzipped_size(assets[props(cfn, layer["Ref"])["Content"]["S3Key"]]) for layer in fn["Layers"]
    )
    _sparse(code / "big.bin", T.LAMBDA_UNZIPPED_MAX - T.unzipped_size(code) - layers + over)
    planted = {**assets, fn["Code"]["S3Key"]: code}
    findings = check_template(cfn, planted)
    if over:
        assert rules(findings) == {"lambda/code-size"}
        assert [f.resource for f in findings] == [lid]
    else:
        assert findings == []


def test_a_251_mib_asset_is_refused(cfn: Template, assets: dict[str, Path], tmp_path: Path) -> None:
    _lid, fn = api(cfn)
    code = tmp_path / "code"
    shutil.copytree(assets[fn["Code"]["S3Key"]], code)
    _sparse(code / "model.bin", 251 * T.MIB)
    findings = check_template(cfn, {**assets, fn["Code"]["S3Key"]: code})
    assert rules(findings) == {"lambda/code-size"}
    assert "262,144,000" in findings[0].message


def test_the_web_adapter_layer_counts_with_its_allowance(cfn: Template, assets: dict[str, Path]) -> None:
    lid, _ = function(cfn, "stream")
    layers = props(cfn, lid)["Layers"]
    adapter = I.WorstCase(cfn).string(layers[1])
    assert T._Measure(assets).layer(layers[1], {}, I.WorstCase(cfn)) == 16 * T.MIB, adapter


def test_an_external_layer_without_an_allowance_is_reported(cfn: Template, assets: dict[str, Path]) -> None:
    _lid, fn = api(cfn)
    fn["Layers"].append("arn:aws:lambda:us-east-1:123456789012:layer:SomeoneElses:3")
    findings = check_template(cfn, assets)
    assert rules(findings) == {"lambda/code-unmeasured"}
    assert "SomeoneElses" in findings[0].message


def test_code_without_a_staged_asset_is_reported(cfn: Template, assets: dict[str, Path]) -> None:
    _lid, fn = api(cfn)
    fn["Code"]["S3Key"] = "not-in-this-assembly.zip"
    assert rules(check_template(cfn, assets)) == {"lambda/code-unmeasured"}


def test_a_zip_asset_is_measured_unzipped(tmp_path: Path) -> None:
    import zipfile

    archive = tmp_path / "code.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.txt", "x" * 100_000)
    assert archive.stat().st_size < 10_000
    assert T.unzipped_size(archive) == 100_000


# ---------------------------------------------------------------- Lambda: environment
def test_environment_is_measured_as_lambda_measures_it() -> None:
    # Lambda's error quotes what it measured: the compact JSON of the map
    assert T.environment_size({"A": "1", "BB": "22"}) == len('{"A":"1","BB":"22"}')
    assert T.environment_size({"K": "é"}) == len('{"K":"é"}'.encode())


def test_intrinsic_values_are_measured_at_their_worst_case(cfn: Template) -> None:
    _lid, fn = api(cfn)
    wc = I.WorstCase(cfn)
    variables = fn["Environment"]["Variables"]
    assert wc.string(variables["SKYLOOP_TABLE_NAME"]) == "x" * 255  # a DynamoDB table name, at most
    assert wc.string(variables["SKYLOOP_BLOB_BUCKET"]) == "x" * 63
    assert wc.string(variables["SKYLOOP_STATE_MACHINE_ARN"]) == (
        f"arn:aws-us-gov:states:ap-southeast-4:123456789012:stateMachine:{'x' * 80}"
    )


@pytest.mark.parametrize("over", [0, 1])
def test_environment_over_4_kb(cfn: Template, assets: dict[str, Path], over: int) -> None:
    _lid, fn = api(cfn)
    wc = I.WorstCase(cfn)
    variables = {k: wc.string(v) for k, v in fn["Environment"]["Variables"].items()}
    padding = T.LAMBDA_ENV_MAX - T.environment_size({**variables, "PAD": ""}) + over
    fn["Environment"]["Variables"]["PAD"] = "p" * padding
    findings = check_template(cfn, assets)
    assert rules(findings) == ({"lambda/env-size"} if over else set())


def test_a_5_kb_environment_is_refused(cfn: Template, assets: dict[str, Path]) -> None:
    lid, fn = api(cfn)
    fn["Environment"]["Variables"]["SKYLOOP_BIG"] = "v" * 5 * 1024
    findings = check_template(cfn, assets)
    assert rules(findings) == {"lambda/env-size"}
    assert findings[0].resource == lid
    assert "SKYLOOP_BIG" in findings[0].message


def test_a_value_without_a_known_worst_case_is_reported(cfn: Template, assets: dict[str, Path]) -> None:
    _lid, fn = api(cfn)
    fn["Environment"]["Variables"]["FROM_ELSEWHERE"] = {"Fn::ImportValue": "SomeExport"}
    findings = check_template(cfn, assets)
    assert rules(findings) == {"estimate/unknown"}
    assert "Fn::ImportValue" in findings[0].message


# ---------------------------------------------------------------- Lambda: settings
@pytest.mark.parametrize(
    ("key", "ok", "bad", "rule"),
    [
        ("MemorySize", 10_240, 10_241, "lambda/memory"),
        ("MemorySize", 128, 127, "lambda/memory"),
        ("Timeout", 900, 901, "lambda/timeout"),
        ("Description", "d" * 256, "d" * 257, "lambda/description"),
        ("EphemeralStorage", {"Size": 10_240}, {"Size": 10_241}, "lambda/ephemeral-storage"),
    ],
)
def test_function_settings_within_lambdas_ranges(
    cfn: Template, assets: dict[str, Path], key: str, ok: Any, bad: Any, rule: str
) -> None:
    _lid, fn = api(cfn)
    fn[key] = ok
    assert check_template(cfn, assets) == []
    fn[key] = bad
    assert rules(check_template(cfn, assets)) == {rule}


def test_more_than_five_layers(cfn: Template, assets: dict[str, Path]) -> None:
    _lid, fn = api(cfn)
    fn["Layers"] = fn["Layers"] * 6
    assert rules(check_template(cfn, assets)) == {"lambda/layers"}


def test_reserved_concurrency_leaves_100_unreserved(cfn: Template, assets: dict[str, Path]) -> None:
    _api_id, fn = api(cfn)
    stream_id, _ = function(cfn, "stream")
    fn["ReservedConcurrentExecutions"] = 450
    props(cfn, stream_id)["ReservedConcurrentExecutions"] = 450
    assert check_template(cfn, assets) == []
    props(cfn, stream_id)["ReservedConcurrentExecutions"] = 451
    assert rules(check_template(cfn, assets)) == {"lambda/concurrency"}


# ---------------------------------------------------------------- CloudFront Functions
def _edge_function(cfn: Template) -> dict[str, Any]:
    """The stream's viewer-request function (the console's client-route function is checked alike)."""
    return by_prefix(cfn, "AWS::CloudFront::Function", "EdgeStreamAuthorization")[1]["Properties"]


@pytest.mark.parametrize("over", [0, 1])
def test_cloudfront_function_over_10_kb(cfn: Template, assets: dict[str, Path], over: int) -> None:
    edge = _edge_function(cfn)
    code = edge["FunctionCode"]
    comment = "// " + "c" * (T.CF_FUNCTION_MAX - len(code.encode()) - 4 + over) + "\n"
    edge["FunctionCode"] = code + comment  # still valid JavaScript: only the size changes
    assert len(edge["FunctionCode"].encode()) == T.CF_FUNCTION_MAX + over
    assert rules(check_template(cfn, assets)) == ({"cloudfront/function-size"} if over else set())


def test_an_11_kb_cloudfront_function_is_refused(cfn: Template, assets: dict[str, Path]) -> None:
    edge = _edge_function(cfn)
    edge["FunctionCode"] += "// " + "c" * 11 * 1024 + "\n"
    assert rules(check_template(cfn, assets)) == {"cloudfront/function-size"}


@pytest.mark.parametrize("runtime", ["cloudfront-js-1.0", "nodejs20.x", None])
def test_cloudfront_function_runtime(cfn: Template, assets: dict[str, Path], runtime: str | None) -> None:
    _edge_function(cfn)["FunctionConfig"]["Runtime"] = runtime
    assert rules(check_template(cfn, assets)) == {"cloudfront/function-runtime"}


@pytest.mark.parametrize(
    "breakage",
    [
        lambda code: code.replace("return request;", "return request;;}"),  # syntax
        lambda code: code.replace("function handler(", "function handle("),  # no handler
        lambda code: code + "\nundefinedName.call();\n",  # throws at load
    ],
    ids=["syntax", "no-handler", "throws"],
)
def test_cloudfront_function_must_parse_and_define_handler(
    cfn: Template, assets: dict[str, Path], breakage: Any
) -> None:
    edge = _edge_function(cfn)
    edge["FunctionCode"] = breakage(edge["FunctionCode"])
    findings = check_template(cfn, assets)
    assert rules(findings) == {"cloudfront/function-parse"}


def test_a_keyvaluestore_import_is_accepted() -> None:
    code = "import cf from 'cloudfront';\nconst kvs = cf.kvs;\nasync function handler(event) { return event.request; }\n"
    assert T.javascript_error(code) is None


# ---------------------------------------------------------------- physical names
def test_a_65_character_function_name(cfn: Template, assets: dict[str, Path]) -> None:
    lid, fn = api(cfn)
    fn["FunctionName"] = "f" * 64
    assert check_template(cfn, assets) == []
    fn["FunctionName"] = "f" * 65
    findings = check_template(cfn, assets)
    assert rules(findings) == {"name/length"}
    assert findings[0].resource == lid


def test_a_name_built_from_intrinsics_is_measured_at_its_worst_case(
    cfn: Template, assets: dict[str, Path]
) -> None:
    # Given the CloudFront function's name (stack-purpose-region) with a longer purpose: fits in
    # us-east-1 (9 characters) but not in ap-southeast-4 (14)
    edge = _edge_function(cfn)
    prefix = "p" * (64 - len("-ap-southeast-4") + 1)
    edge["Name"] = {"Fn::Join": ["", [prefix, "-", {"Ref": "AWS::Region"}]]}
    assert len(prefix) + len("-us-east-1") <= 64
    findings = check_template(cfn, assets)
    assert rules(findings) == {"name/length"}
    assert "ap-southeast-4" in findings[0].message


def test_names_follow_the_services_characters(cfn: Template, assets: dict[str, Path]) -> None:
    bucket = by_prefix(cfn, "AWS::S3::Bucket", "BlobsBucket")[1]["Properties"]
    bucket["BucketName"] = "Skyloop-Blobs"  # S3 bucket names are lowercase
    assert rules(check_template(cfn, assets)) == {"name/pattern"}


def test_the_turns_log_group_name_is_measured_through_the_stack_id(cfn: Template) -> None:
    (group,) = [
        r["Properties"]["LogGroupName"]
        for r in cfn["Resources"].values()
        if r["Type"] == "AWS::Logs::LogGroup" and "LogGroupName" in r["Properties"]
    ]
    # the first 8 hex digits of the stack id's UUID, exactly
    assert I.WorstCase(cfn).string(group) == "/aws/vendedlogs/states/Skyloop-turns-ap-southeast-4-00000000"


def test_an_unknown_type_with_a_name_fails_loudly(cfn: Template, assets: dict[str, Path]) -> None:
    cfn["Resources"]["Firehose"] = {
        "Type": "AWS::KinesisFirehose::DeliveryStream",
        "Properties": {"DeliveryStreamName": "skyloop-events"},
    }
    findings = check_template(cfn, assets)
    assert rules(findings) == {"name/unknown-type"}
    assert "NAME_RULES" in findings[0].message


# ---------------------------------------------------------------- IAM
def _padding_statement(characters: int) -> dict[str, Any]:
    """A statement of ``characters`` characters as IAM counts them (compact JSON, no white space)."""
    statement: dict[str, Any] = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": ""}
    base = len(json.dumps(statement, separators=(",", ":")))
    statement["Resource"] = "arn:aws:s3:::" + "r" * (characters - base - len("arn:aws:s3:::"))
    return statement


def test_an_11_kb_inline_policy(cfn: Template, assets: dict[str, Path]) -> None:
    # Given the api role's policy grown to 11 KB
    role_id = props(cfn, api(cfn)[0])["Role"]["Fn::GetAtt"][0]
    _policy_id, policy = by_prefix(cfn, "AWS::IAM::Policy", "FunctionsApiRoleDefaultPolicy")
    policy["Properties"]["PolicyDocument"]["Statement"].append(_padding_statement(11 * 1024))
    findings = check_template(cfn, assets)
    assert rules(findings) == {"iam/inline-policy-size"}
    assert findings[0].resource == role_id


@pytest.mark.parametrize("over", [0, 1])
def test_inline_policies_of_a_role_count_together(cfn: Template, assets: dict[str, Path], over: int) -> None:
    # Given a second policy on the api role: each below 10,240 characters, together at the limit (+1)
    role_id = props(cfn, api(cfn)[0])["Role"]["Fn::GetAtt"][0]
    wc = I.WorstCase(cfn)
    _, policy = by_prefix(cfn, "AWS::IAM::Policy", "FunctionsApiRoleDefaultPolicy")
    first = T.policy_size(policy["Properties"]["PolicyDocument"], wc)
    empty = {"Version": "2012-10-17", "Statement": []}
    second = {"PolicyName": "Extra", "Roles": [{"Ref": role_id}], "PolicyDocument": empty}
    room = T.IAM_INLINE_MAX["Roles"] - first - T.policy_size(empty, wc) + over
    empty["Statement"] = [_padding_statement(room)]
    cfn["Resources"]["ExtraPolicy"] = {"Type": "AWS::IAM::Policy", "Properties": second}
    assert T.policy_size(empty, wc) < T.IAM_INLINE_MAX["Roles"]
    assert rules(check_template(cfn, assets)) == ({"iam/inline-policy-size"} if over else set())


def test_white_space_is_not_counted() -> None:
    wc = I.WorstCase({})
    assert T.policy_size({"Statement": [{"Sid": "a b c"}]}, wc) == len('{"Statement":[{"Sid":"abc"}]}')


def test_a_role_inline_policy_in_the_role_itself_counts(cfn: Template, assets: dict[str, Path]) -> None:
    role_id = props(cfn, api(cfn)[0])["Role"]["Fn::GetAtt"][0]
    props(cfn, role_id)["Policies"] = [
        {
            "PolicyName": "own",
            "PolicyDocument": {"Version": "2012-10-17", "Statement": [_padding_statement(9000)]},
        }
    ]
    assert rules(check_template(cfn, assets)) == {"iam/inline-policy-size"}


def test_a_managed_policy_over_6144_characters(cfn: Template, assets: dict[str, Path]) -> None:
    document = {"Version": "2012-10-17", "Statement": [_padding_statement(6200)]}
    cfn["Resources"]["Managed"] = {
        "Type": "AWS::IAM::ManagedPolicy",
        "Properties": {"PolicyDocument": document},
    }
    assert rules(check_template(cfn, assets)) == {"iam/managed-policy-size"}


def test_more_than_ten_managed_policies_on_a_role(cfn: Template, assets: dict[str, Path]) -> None:
    role_id = props(cfn, api(cfn)[0])["Role"]["Fn::GetAtt"][0]
    props(cfn, role_id)["ManagedPolicyArns"] = [f"arn:aws:iam::aws:policy/P{i}" for i in range(11)]
    assert rules(check_template(cfn, assets)) == {"iam/managed-policy-count"}


def test_a_trust_policy_over_2048_characters(cfn: Template, assets: dict[str, Path]) -> None:
    role_id = props(cfn, api(cfn)[0])["Role"]["Fn::GetAtt"][0]
    statement = props(cfn, role_id)["AssumeRolePolicyDocument"]["Statement"][0]
    statement["Condition"] = {"StringEquals": {"aws:SourceAccount": ["1" * 12] * 150}}
    assert rules(check_template(cfn, assets)) == {"iam/trust-policy-size"}


def test_a_bucket_policy_over_20_kb(cfn: Template, assets: dict[str, Path]) -> None:
    policy = by_prefix(cfn, "AWS::S3::BucketPolicy", "BlobsBucketPolicy")[1]["Properties"]["PolicyDocument"]
    policy["Statement"].append(_padding_statement(21 * 1024))
    assert rules(check_template(cfn, assets)) == {"s3/bucket-policy-size"}


# ---------------------------------------------------------------- the state machine in the template
def _machine(cfn: Template) -> dict[str, Any]:
    return one(cfn, "AWS::StepFunctions::StateMachine")[1]["Properties"]


def test_the_definition_is_checked_after_substitution(cfn: Template, assets: dict[str, Path]) -> None:
    # Given a definition of about 300 KB whose placeholders, substituted with function ARNs at their
    # worst case, bring it over 1 MB
    machine = _machine(cfn)
    key = next(iter(machine["DefinitionSubstitutions"]))
    arn = I.WorstCase(cfn).string(machine["DefinitionSubstitutions"][key])
    placeholder = "${" + key + "}"
    copies = asl.MAX_DEFINITION_BYTES // len(arn) + 1
    definition = json.loads(machine["DefinitionString"])
    definition["Comment"] += placeholder * copies
    machine["DefinitionString"] = json.dumps(definition)
    assert len(machine["DefinitionString"].encode()) < asl.MAX_DEFINITION_BYTES / 3
    findings = check_template(cfn, assets)
    assert rules(findings) == {"asl/size"}
    assert findings[0].resource.startswith(one(cfn, "AWS::StepFunctions::StateMachine")[0])


def test_the_definition_rules_run_on_the_template(cfn: Template, assets: dict[str, Path]) -> None:
    machine = _machine(cfn)
    definition = json.loads(machine["DefinitionString"])
    definition["States"]["AwaitClient"]["Next"] = "NoSuchState"  # nothing else becomes unreachable
    machine["DefinitionString"] = json.dumps(definition)
    assert rules(check_template(cfn, assets)) == {"asl/next-missing"}


# ---------------------------------------------------------------- CloudFormation
def test_the_template_file_is_measured(synth: Synth, assets: dict[str, Path]) -> None:
    size = synth.template_path.stat().st_size
    assert T.CFN_TEMPLATE_MAX // 20 < size < T.CFN_TEMPLATE_MAX  # checked for real, well within
    assert rules(check_template(synth.template, assets, template_bytes=T.CFN_TEMPLATE_MAX + 1)) == {
        "cfn/template-size"
    }


def test_a_template_over_1_mb(cfn: Template, assets: dict[str, Path]) -> None:
    one(cfn, "AWS::DynamoDB::Table")[1]["Metadata"] = {"padding": "m" * T.CFN_TEMPLATE_MAX}
    assert rules(check_template(cfn, assets)) == {"cfn/template-size"}


def test_more_than_500_resources(cfn: Template, assets: dict[str, Path]) -> None:
    for i in range(T.CFN_COUNTS["Resources"] - len(cfn["Resources"])):
        cfn["Resources"][f"Topic{i}"] = {"Type": "AWS::SNS::Topic", "Properties": {}}
    assert check_template(cfn, assets) == []
    cfn["Resources"]["OneTooMany"] = {"Type": "AWS::SNS::Topic", "Properties": {}}
    assert rules(check_template(cfn, assets)) == {"cfn/count"}


def test_a_description_over_1024_bytes(cfn: Template, assets: dict[str, Path]) -> None:
    cfn["Description"] = "d" * 1025
    assert rules(check_template(cfn, assets)) == {"cfn/description"}


# ---------------------------------------------------------------- wiring: synth refuses
def test_synth_exits_1_listing_what_aws_would_refuse(tmp_path: Path) -> None:
    # Given a prod-like configuration with 120 inference profiles for the model step (they used to
    # overflow the turn role's policy into one managed policy over IAM's 6,144 characters: now they are
    # granted in managed policies of 40), and an outbound allow-list every function carries in its
    # environment that is longer than Lambda's 4 KB for all its variables
    models = [
        f"arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.vendor.model-{i:03d}-v1:0"
        for i in range(120)
    ]
    hosts = [f"models-{i:03d}.inference.internal.example.com" for i in range(100)]
    context = {
        "prod": "true",
        "lwaLayerVersion": 25,
        "alarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:alarms",
        "cognito": "true",
        "jwtAuthorizerOnApi": "true",
        "corsOrigins": "https://app.example.com",
        "quotaRunningTurns": "2",
        "outboundAllow": ",".join(hosts),
        "lambdaToolArns": "arn:aws:lambda:eu-west-1:123456789012:function:refund",
        "bedrockModelArns": models,
    }
    env = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "SKYLOOP_LAYER_DIR": str(tmp_path / "no-layer-here"),
        "CDK_CONTEXT_JSON": json.dumps(context),
    }
    proc = subprocess.run(
        [sys.executable, str(ROOT / "infra" / "app.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    # Then synth fails, naming each function whose environment is too large, and nothing else (no
    # policy over its limit)
    assert proc.returncode == 1, proc.stderr[-3000:]
    listed = [line.strip() for line in proc.stderr.splitlines() if line.strip().startswith("[")]
    assert listed, proc.stderr[-3000:]
    assert all(line.startswith("[lambda/env-size] ") for line in listed), listed
    assert any("Turn" in line for line in listed), listed
    assert "4,096" in listed[0]
    assert "synth stops here" in proc.stderr
    # And the 120 models went to the turn role in three managed policies of 40, each within its limit
    template = json.loads((tmp_path / "cdk.out" / "Skyloop.template.json").read_text())
    managed = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::ManagedPolicy" and "bedrock:InvokeModel" in json.dumps(r)
    ]
    assert sorted(len(p["PolicyDocument"]["Statement"][0]["Resource"]) for p in managed) == [40, 40, 40]
    assert all(len(p["Roles"]) == 1 and "FunctionsTurnRole" in json.dumps(p["Roles"]) for p in managed)
