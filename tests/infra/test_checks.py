"""Linters on the synthesized stack: cfn-lint, cdk-nag (AwsSolutions), and the edge function's JavaScript."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from infra import constants as C
from infra.checks.routing import run_viewer_function
from infra.constructs.edge import STREAM_VIEWER_REQUEST_JS

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

# Every acknowledged AwsSolutions finding, by construct. A new acknowledgment must be added
# here on purpose (its reason lives next to it in infra/stack.py).
BUCKET_DEPLOYMENT = "/Skyloop/Custom::CDKBucketDeployment8693BB64968944B69AAFB0CC9EB8756C256MiB"
ACKNOWLEDGED = {
    ("/Skyloop/Functions", "AwsSolutions-IAM5[Resource::*]"),
    ("/Skyloop/Functions", "AwsSolutions-L1"),
    (
        "/Skyloop/Functions/ApiRole",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:"
        '<AWS::AccountId>:execution:{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"TurnsStateMachine4CCEF635"}]}]}:*]',
    ),
    (
        "/Skyloop/Functions/ReconcileTurnsRole",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:"
        '<AWS::AccountId>:execution:{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"TurnsStateMachine4CCEF635"}]}]}:*]',
    ),
    *(
        ("/Skyloop/Functions", f"AwsSolutions-IAM5[Resource::<BlobsBucket1038ED5D.Arn>/{prefix}/*]")
        for prefix in ("sessions", "agents", "files", "webhooks")
    ),
    *(
        (
            "/Skyloop/Functions",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:"
            f"<AWS::AccountId>:secret:Skyloop/{name}-??????]",
        )
        for name in ("agents/*/api_key", "tools/*")
    ),
    (
        "/Skyloop/Functions",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:"
        "<LiveApi149456B6>/live/POST/@connections/*]",
    ),
    ("/Skyloop/Live/Api", "AwsSolutions-APIG4"),
    ("/Skyloop/Live/FanoutFailures", "AwsSolutions-SQS3"),
    ("/Skyloop/Lifecycle/PublisherFailures", "AwsSolutions-SQS3"),
    ("/Skyloop/Lifecycle/DeadDeliveries", "AwsSolutions-SQS3"),
    ("/Skyloop/Schedules/DeadLetters", "AwsSolutions-SQS3"),
    *(
        (
            f"/Skyloop/Functions/{role}",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:"
            "schedule/<SchedulesGroupC7F67308>/*]",
        )
        for role in ("ApiRole", "ScheduleRunRole", "ReconcileTurnsRole")
    ),
    # the schedule repair pass lists the group's schedules: scheduler:ListSchedules takes no resource
    ("/Skyloop/Functions/ReconcileTurnsRole", "AwsSolutions-IAM5[Resource::*]"),
    ("/Skyloop/Blobs/Bucket", "AwsSolutions-S1"),
    # the web console: its bucket, and CDK's BucketDeployment handler that uploads console/dist
    ("/Skyloop/Console/Bucket", "AwsSolutions-S1"),
    *(
        (BUCKET_DEPLOYMENT, rule)
        for rule in (
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "AwsSolutions-L1",
            "AwsSolutions-IAM5[Action::s3:GetObject*]",
            "AwsSolutions-IAM5[Action::s3:GetBucket*]",
            "AwsSolutions-IAM5[Action::s3:List*]",
            "AwsSolutions-IAM5[Action::s3:DeleteObject*]",
            "AwsSolutions-IAM5[Action::s3:Abort*]",
            "AwsSolutions-IAM5[Resource::<ConsoleBucket86B6957C.Arn>/*]",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*]",
            "AwsSolutions-IAM5[Resource::*]",
        )
    ),
    ("/Skyloop/SmokeTool/Echo", "AwsSolutions-L1"),
    ("/Skyloop/Turns/StateMachine", "AwsSolutions-IAM5[Resource::*]"),
    ("/Skyloop/Api/Api", "AwsSolutions-APIG4"),
    ("/Skyloop/Edge/Distribution", "AwsSolutions-CFR1"),
    ("/Skyloop/Edge/Distribution", "AwsSolutions-CFR2"),
    ("/Skyloop/Edge/Distribution", "AwsSolutions-CFR3"),
    ("/Skyloop/Edge/Distribution", "AwsSolutions-CFR4"),
}


def test_synth_succeeds_offline_with_cdk_nag_attached(synth: Synth) -> None:
    # Given the app synthesized as `make synth` does, AwsSolutions checks included
    # Then synth succeeded: cdk-nag fails it on any finding the stack does not acknowledge
    assert synth.returncode == 0, synth.stderr[-4000:]


def test_cdk_nag_reports_no_unacknowledged_finding(synth: Synth) -> None:
    report = synth.validation_report
    plugins = {p["pluginName"]: p for p in report["pluginReports"]}
    assert "AwsSolutions" in plugins
    for name, plugin in plugins.items():
        assert plugin["violations"] == [], (name, [v["ruleName"] for v in plugin["violations"]])
        assert plugin["conclusion"] == "success", name


def _acknowledgments(metadata: dict[str, Any]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for path, entries in metadata.items():
        for entry in entries:
            if entry["type"] == "aws:cdk:acknowledged-rules":
                for rule, reason in entry["data"].items():
                    out[(path, rule.removeprefix("AwsSolutions::"))] = reason
    return out


def test_every_acknowledgment_is_expected_and_justified(synth: Synth) -> None:
    acks = _acknowledgments(synth.metadata)
    # Then the acknowledged findings are exactly the reviewed ones
    assert set(acks) == ACKNOWLEDGED
    # And each says why in a sentence, not a placeholder
    for key, reason in acks.items():
        assert len(reason.split()) >= 8, key


def test_cfn_lint_finds_no_error_or_warning(synth: Synth) -> None:
    # W3005 is ignored: CDK adds DependsOn on a function's role next to the Fn::GetAtt of that
    # role, which cfn-lint calls redundant; it is harmless and not ours to remove.
    from cfnlint.api import ManualArgs, lint_file

    matches = lint_file(synth.template_path, config=ManualArgs(ignore_checks=["W3005"]))
    assert [str(m) for m in matches] == []


def _run_edge_function(
    request_headers: dict[str, str], method: str = "GET"
) -> tuple[dict[str, Any], list[Any]]:
    """The stream behaviours' viewer-request function run in node: (the request it passes on, origins selected)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    request = {
        "method": method,
        "uri": "/v1/sessions/x/stream",
        "headers": {k: {"value": v} for k, v in request_headers.items()},
    }
    stub = "var cf = {selectRequestOriginById: function (id) { selected.push(id); }};"
    code = STREAM_VIEWER_REQUEST_JS.replace("import cf from 'cloudfront';", stub)
    event = json.dumps({"request": request})
    script = f"var selected = [];\n{code}\nvar out = handler({event});\n"
    script += "process.stdout.write(JSON.stringify({request: out, selected: selected}));"
    out = subprocess.run(
        [shutil.which("node") or "node", "-e", script], capture_output=True, text=True, timeout=30, check=True
    )
    result = json.loads(out.stdout)
    return {k: v["value"] for k, v in result["request"]["headers"].items()}, result["selected"]


def test_edge_function_copies_the_viewers_bearer_token() -> None:
    # Given a viewer request with a bearer token (and a forged copy header)
    headers, selected = _run_edge_function(
        {"authorization": "Bearer sky_abc", C.STREAM_AUTH_HEADER: "Bearer forged"}
    )
    # Then the copy header carries the viewer's Authorization, which origin signing will replace
    assert headers[C.STREAM_AUTH_HEADER] == "Bearer sky_abc"
    assert headers["authorization"] == "Bearer sky_abc"
    assert selected == []  # and the request stays on the stream function's origin


def test_edge_function_drops_a_forged_copy_header() -> None:
    headers, _ = _run_edge_function({C.STREAM_AUTH_HEADER: "Bearer forged", "last-event-id": "7"})
    assert C.STREAM_AUTH_HEADER not in headers
    assert headers["last-event-id"] == "7"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_edge_function_sends_a_request_with_a_body_to_the_api(method: str) -> None:
    # Origin Access Control cannot sign a body the viewer did not hash: the API's origin takes it
    headers, selected = _run_edge_function({"authorization": "Bearer sky_abc"}, method)
    assert selected == [C.API_ORIGIN_ID]
    assert headers["authorization"] == "Bearer sky_abc"


@pytest.mark.parametrize("method", C.STREAM_ORIGIN_METHODS)
def test_edge_function_keeps_body_less_methods_on_the_stream_function(method: str) -> None:
    _, selected = _run_edge_function({}, method)
    assert selected == []


def test_the_routing_checks_runner_sees_the_same_selection() -> None:
    # infra.checks.routing runs the function through its own stub of `cloudfront`: it must agree
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    requests = [{"method": m, "uri": "/x", "headers": {}} for m in ("GET", "POST")]
    assert [r["selected"] for r in run_viewer_function(STREAM_VIEWER_REQUEST_JS, requests)] == [
        [],
        [{"id": C.API_ORIGIN_ID}],
    ]
