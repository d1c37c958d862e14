"""The policies the local stack enforces are the ones the stack deploys (``infra/iam_export.py``)."""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING

from infra import iam_export
from skyloop import manifest

if TYPE_CHECKING:
    from tests.infra.conftest import Synth


def test_the_committed_export_is_what_the_stack_synthesizes(synth: Synth) -> None:
    # Given the stack as synthesized now, Then skyloop/local/iam_policies.json is its export:
    # a grant changed in infra/ without `make iam-policies` fails here
    assert iam_export.OUTPUT.read_text() == iam_export.render(synth.template), (
        "shared/skyloop/local/iam_policies.json is stale: run `make iam-policies` and commit it"
    )


def test_the_export_follows_a_changed_grant(synth: Synth) -> None:
    # Given a grant taken out of the synthesized template
    template = copy.deepcopy(synth.template)
    exported = iam_export.export(template)
    role = exported["functions"]["lifecycle_events"]["role"]
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role} in resource["Properties"]["Roles"]:
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                if isinstance(statement["Action"], list) and "dynamodb:UpdateItem" in statement["Action"]:
                    statement["Action"].remove("dynamodb:UpdateItem")
    # Then the export differs from the committed file (and the test above would fail)
    assert iam_export.render(template) != iam_export.OUTPUT.read_text()


def test_every_function_and_what_its_statements_name(synth: Synth) -> None:
    exported = iam_export.export(synth.template)
    assert set(exported["functions"]) == {spec.name for spec in manifest.FUNCTIONS}
    kinds = {locator["type"] for locator in exported["resources"].values()}
    # the table, the bucket, the state machine, functions, the schedule group and role, the bus, queues
    assert {
        "AWS::DynamoDB::Table",
        "AWS::S3::Bucket",
        "AWS::StepFunctions::StateMachine",
        "AWS::Lambda::Function",
        "AWS::Scheduler::ScheduleGroup",
        "AWS::IAM::Role",
        "AWS::Events::EventBus",
        "AWS::SQS::Queue",
    } <= kinds
    by_env = {s["env"]: loc for loc in exported["resources"].values() for s in loc.get("from", [])}
    assert by_env["SKYLOOP_TABLE_NAME"]["type"] == "AWS::DynamoDB::Table"
    # what stays unresolved locally: log groups, the WebSocket API, queues only an event source uses
    assert all(
        synth.template["Resources"][lid]["Type"]
        in {"AWS::Logs::LogGroup", "AWS::ApiGatewayV2::Api", "AWS::SQS::Queue"}
        for lid in exported["unresolved"]
    )


def test_a_secrets_prefix_is_written_as_its_variable(synth: Synth) -> None:
    statements = json.dumps(iam_export.export(synth.template)["functions"]["api"]["statements"])
    assert '{"Env": "SKYLOOP_SECRETS_PREFIX"}' in statements
    assert "Skyloop/agents" not in statements  # the stack's own name would never match locally
