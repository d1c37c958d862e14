"""Scheduled tasks in the stack: the schedule group, the role schedules invoke the run function with, the
dead-letter queue and its alarm, and who may touch schedules (least privilege, as infra/permissions.py says)."""

from __future__ import annotations

from typing import Any

from infra import constants as C
from infra import permissions
from skyloop import manifest
from tests.infra.helpers import actions, as_list, by_prefix, function, one, resources, role_statements

Template = dict[str, Any]
SCHEDULER_ACTIONS = {"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"}


def _role_of(t: Template, name: str) -> str:
    return str(function(t, name)[1]["Properties"]["Role"]["Fn::GetAtt"][0])


def _ids(t: Template) -> tuple[str, str, str, str]:
    group, _ = one(t, "AWS::Scheduler::ScheduleGroup")
    queue, _ = by_prefix(t, "AWS::SQS::Queue", "SchedulesDeadLetters")
    role, _ = by_prefix(t, "AWS::IAM::Role", "SchedulesInvokeRole")
    run, _ = function(t, "schedule_run")
    return group, queue, role, run


def test_one_schedule_group_named_by_cloudformation_and_output(template_json: Template) -> None:
    group_id, group = one(template_json, "AWS::Scheduler::ScheduleGroup")
    # CloudFormation names it: unique per account and region, whatever the stack's name
    assert "Name" not in group.get("Properties", {})
    _, queue, _, _ = _ids(template_json)
    assert template_json["Outputs"]["ScheduleGroupName"]["Value"] == {"Ref": group_id}
    assert template_json["Outputs"]["ScheduleDeadLetterQueueUrl"]["Value"] == {"Ref": queue}


def test_schedules_invoke_the_run_function_with_a_role_only_the_scheduler_of_this_account_assumes(
    template_json: Template,
) -> None:
    group, queue, role, run = _ids(template_json)
    trust = template_json["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
            "Effect": "Allow",
            "Principal": {"Service": "scheduler.amazonaws.com"},
        }
    ]
    statements = role_statements(template_json, role)
    assert sorted(((s["Action"], str(s["Resource"])) for s in statements), key=str) == sorted(
        [
            ("lambda:InvokeFunction", str({"Fn::GetAtt": [run, "Arn"]})),
            ("sqs:SendMessage", str({"Fn::GetAtt": [queue, "Arn"]})),
        ],
        key=str,
    )
    del group


def test_only_the_api_and_the_run_function_touch_schedules_of_the_group_and_pass_only_that_role(
    template_json: Template,
) -> None:
    group, _, role, _ = _ids(template_json)
    schedules = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":scheduler:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":schedule/",
                {"Ref": group},
                "/*",
            ],
        ]
    }
    for spec in manifest.FUNCTIONS:
        statements = role_statements(template_json, _role_of(template_json, spec.name))
        touching = [s for s in statements if any(a.startswith("scheduler:") for a in as_list(s["Action"]))]
        passing = [s for s in statements if "iam:PassRole" in as_list(s["Action"])]
        if spec.name not in permissions.SCHEDULER_ACCESS:
            assert (touching, passing) == ([], []), spec.name
            continue
        assert actions(touching) == SCHEDULER_ACTIONS == set(permissions.SCHEDULER_ACCESS[spec.name])
        assert [s["Resource"] for s in touching] == [schedules], spec.name
        assert passing == [
            {
                "Action": "iam:PassRole",
                "Condition": {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
                "Effect": "Allow",
                "Resource": {"Fn::GetAtt": [role, "Arn"]},
            }
        ], spec.name


def test_the_api_arms_schedules_at_the_run_function_with_retries_and_the_dead_letter_queue(
    template_json: Template,
) -> None:
    group, queue, role, run = _ids(template_json)
    expected = {
        "SKYLOOP_SCHEDULE_GROUP": {"Ref": group},
        "SKYLOOP_SCHEDULE_ROLE_ARN": {"Fn::GetAtt": [role, "Arn"]},
        "SKYLOOP_SCHEDULE_DLQ_ARN": {"Fn::GetAtt": [queue, "Arn"]},
        "SKYLOOP_SCHEDULE_RETRIES": str(C.SCHEDULE_RETRIES),
        "SKYLOOP_SCHEDULE_MAX_EVENT_AGE_S": str(C.SCHEDULE_MAX_EVENT_AGE_S),
    }
    api = function(template_json, "api")[1]["Properties"]["Environment"]["Variables"]
    assert {k: api[k] for k in expected} == expected
    assert api["SKYLOOP_SCHEDULE_TARGET_ARN"] == {"Fn::GetAtt": [run, "Arn"]}
    # the run function re-arms with its own ARN (from its context: its environment cannot name itself)
    own = function(template_json, "schedule_run")[1]["Properties"]["Environment"]["Variables"]
    assert {k: own[k] for k in expected} == expected
    assert "SKYLOOP_SCHEDULE_TARGET_ARN" not in own


def test_the_dead_letter_queue_is_encrypted_tls_only_kept_14_days_and_alarmed(
    template_json: Template,
) -> None:
    _, queue, _, _ = _ids(template_json)
    props = template_json["Resources"][queue]["Properties"]
    assert props["SqsManagedSseEnabled"] is True
    assert props["MessageRetentionPeriod"] == C.SCHEDULE_DLQ_RETENTION_DAYS * 86400
    (policy,) = [
        p
        for p in resources(template_json, "AWS::SQS::QueuePolicy").values()
        if {"Ref": queue} in p["Properties"]["Queues"]
    ]
    (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert (deny["Effect"], deny["Condition"]) == ("Deny", {"Bool": {"aws:SecureTransport": "false"}})
    alarms = [
        a["Properties"]
        for a in resources(template_json, "AWS::CloudWatch::Alarm").values()
        if {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}
        in a["Properties"].get("Dimensions", [])
    ]
    assert len(alarms) == 1
    assert (alarms[0]["MetricName"], alarms[0]["Threshold"]) == ("ApproximateNumberOfMessagesVisible", 1)
