"""Names: CloudFront's are global to the account, so the same stack in two regions must not clash.

Builds the stack twice in one app, under the same stack name, in two regions of
one account (as a second-region deploy would), and reads the explicit names.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra import assets
from infra import constants as C
from tests.infra.helpers import by_prefix, one, resources

Template = dict[str, Any]
ACCOUNT = "123456789012"
REGIONS = ("us-east-1", "ap-southeast-4")
# Resource types whose names are global to the account (CloudFront, IAM, dashboards) and the
# property holding the name.
ACCOUNT_GLOBAL_NAMES = {
    "AWS::CloudFront::OriginAccessControl": ("OriginAccessControlConfig", "Name"),
    "AWS::CloudFront::Function": ("Name",),
    "AWS::CloudFront::CachePolicy": ("CachePolicyConfig", "Name"),
    "AWS::CloudFront::OriginRequestPolicy": ("OriginRequestPolicyConfig", "Name"),
    "AWS::CloudFront::ResponseHeadersPolicy": ("ResponseHeadersPolicyConfig", "Name"),
    "AWS::CloudFront::KeyValueStore": ("Name",),
    "AWS::IAM::Role": ("RoleName",),
    "AWS::IAM::ManagedPolicy": ("ManagedPolicyName",),
    "AWS::CloudWatch::Dashboard": ("DashboardName",),
}


@pytest.fixture(scope="module")
def regional_templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Template]:
    import aws_cdk as cdk

    from infra.stack import SkyloopStack

    outdir = tmp_path_factory.mktemp("cdk.out.regions")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(assets.LAYER_DIR_ENV, str(outdir / "no-layer-here"))
        app = cdk.App(outdir=str(outdir))
        stacks = {
            region: SkyloopStack(
                app,
                f"Skyloop-{region}",
                stack_name=C.STACK_NAME,
                env=cdk.Environment(account=ACCOUNT, region=region),
            )
            for region in REGIONS
        }
        assembly = app.synth()
        return {region: assembly.get_stack_artifact(s.artifact_id).template for region, s in stacks.items()}


def _name(resource: dict[str, Any]) -> Any:
    value: Any = resource["Properties"]
    for key in ACCOUNT_GLOBAL_NAMES[resource["Type"]]:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _names(template: Template) -> dict[str, Any]:
    """Logical id -> explicit name, for every account-global resource that has one."""
    return {
        logical_id: _name(r)
        for logical_id, r in template["Resources"].items()
        if r["Type"] in ACCOUNT_GLOBAL_NAMES and _name(r) is not None
    }


# The stack's named CloudFront resources (logical id prefix) and the purpose their names carry.
CLOUDFRONT_NAMES = {
    ("AWS::CloudFront::OriginAccessControl", "EdgeStreamAccess"): (C.OAC_NAME_PURPOSE, C.OAC_NAME_MAX_LENGTH),
    ("AWS::CloudFront::OriginAccessControl", "EdgeConsoleAccess"): (
        C.CONSOLE_OAC_NAME_PURPOSE,
        C.OAC_NAME_MAX_LENGTH,
    ),
    ("AWS::CloudFront::Function", "EdgeStreamAuthorization"): (
        C.EDGE_FUNCTION_NAME_PURPOSE,
        C.EDGE_FUNCTION_NAME_MAX_LENGTH,
    ),
    ("AWS::CloudFront::Function", "EdgeConsoleRoutes"): (
        C.CONSOLE_FUNCTION_NAME_PURPOSE,
        C.EDGE_FUNCTION_NAME_MAX_LENGTH,
    ),
    ("AWS::CloudFront::ResponseHeadersPolicy", "EdgeConsoleHeaders"): (
        C.CONSOLE_HEADERS_NAME_PURPOSE,
        C.CONSOLE_HEADERS_NAME_MAX_LENGTH,
    ),
    ("AWS::CloudFront::ResponseHeadersPolicy", "EdgeConsoleAssetHeaders"): (
        C.CONSOLE_ASSET_HEADERS_NAME_PURPOSE,
        C.CONSOLE_HEADERS_NAME_MAX_LENGTH,
    ),
}


def test_cloudfront_names_differ_between_regions_of_one_account(
    regional_templates: dict[str, Template],
) -> None:
    # Given the same stack name deployed in two regions of one account
    first, second = (regional_templates[r] for r in REGIONS)
    # Then every Origin Access Control, CloudFront Function and response headers policy gets a
    # different name in each
    for (type_, prefix), (purpose, _) in CLOUDFRONT_NAMES.items():
        names = {r: _name(by_prefix(regional_templates[r], type_, prefix)[1]) for r in REGIONS}
        assert names[REGIONS[0]] != names[REGIONS[1]], prefix
        for region, name in names.items():
            assert name == f"{C.STACK_NAME}-{purpose}-{region}"
    # And the stack names nothing else of those types
    for type_ in {t for t, _ in CLOUDFRONT_NAMES}:
        assert len(resources(first, type_)) == sum(1 for t, _ in CLOUDFRONT_NAMES if t == type_), type_
    # And no account-global name is shared between the two stacks
    assert not set(map(json.dumps, _names(first).values())) & set(map(json.dumps, _names(second).values()))


def test_cloudfront_names_fit_their_limits_in_the_longest_region(
    regional_templates: dict[str, Template],
) -> None:
    template = regional_templates["ap-southeast-4"]
    for (type_, prefix), (_, limit) in CLOUDFRONT_NAMES.items():
        assert len(_name(by_prefix(template, type_, prefix)[1])) <= limit, prefix


def test_every_account_global_name_is_region_scoped(template_json: Template) -> None:
    # Given the environment-agnostic template `make synth` writes (the region is a parameter)
    names = _names(template_json)
    # Then the stack names its CloudFront resources, and every account-global name carries the region
    assert {template_json["Resources"][k]["Type"] for k in names} >= {
        "AWS::CloudFront::OriginAccessControl",
        "AWS::CloudFront::Function",
    }
    for logical_id, name in names.items():
        assert {"Ref": "AWS::Region"} in name["Fn::Join"][1], logical_id


def test_long_stack_names_are_cut_to_fit_and_stay_distinct() -> None:
    import aws_cdk as cdk

    from infra.constructs._common import regional_name

    app = cdk.App()
    long_a = cdk.Stack(app, "A", stack_name="Skyloop-" + "a" * 100, env=cdk.Environment(region="eu-west-1"))
    long_b = cdk.Stack(
        app, "B", stack_name="Skyloop-" + "a" * 99 + "b", env=cdk.Environment(region="eu-west-1")
    )
    a = regional_name(long_a, C.OAC_NAME_PURPOSE, C.OAC_NAME_MAX_LENGTH)
    b = regional_name(long_b, C.OAC_NAME_PURPOSE, C.OAC_NAME_MAX_LENGTH)
    assert a != b
    assert len(a) <= C.OAC_NAME_MAX_LENGTH - C.NAME_MAX_REGION_LENGTH + len("eu-west-1")
    assert a.endswith(f"-{C.OAC_NAME_PURPOSE}-eu-west-1")


# ------------------------------------------------------------------------------ logs
def test_state_machine_logs_are_vended_and_unique_per_stack_instance(template_json: Template) -> None:
    _, machine = one(template_json, "AWS::StepFunctions::StateMachine")
    destination = machine["Properties"]["LoggingConfiguration"]["Destinations"][0]
    group_id = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    name = resources(template_json, "AWS::Logs::LogGroup")[group_id]["Properties"]["LogGroupName"]
    parts = name["Fn::Join"][1]
    # Then the group sits under /aws/vendedlogs/states/ (no per-group CloudWatch Logs resource
    # policy, whose account-wide size limit busy accounts hit), named for the stack and region
    assert parts[0] == f"{C.TURNS_LOG_GROUP_PREFIX}{C.STACK_NAME}-{C.TURNS_LOG_GROUP_PURPOSE}-"
    assert parts[0].startswith("/aws/vendedlogs/states/")
    assert parts[1] == {"Ref": "AWS::Region"}
    # And it ends with a piece of the stack id, so a group retained by a deleted stack never
    # blocks a new one
    assert '{"Ref": "AWS::StackId"}' in json.dumps(parts[3])


def test_state_machine_log_group_names_differ_between_regions(
    regional_templates: dict[str, Template],
) -> None:
    names = []
    for region in REGIONS:
        _, machine = one(regional_templates[region], "AWS::StepFunctions::StateMachine")
        group_id = machine["Properties"]["LoggingConfiguration"]["Destinations"][0]["CloudWatchLogsLogGroup"][
            "LogGroupArn"
        ]["Fn::GetAtt"][0]
        names.append(regional_templates[region]["Resources"][group_id]["Properties"]["LogGroupName"])
    assert names[0] != names[1]
    assert f"-turns-{REGIONS[0]}-" in json.dumps(names[0])
