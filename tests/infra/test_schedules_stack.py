"""Scheduled tasks in the stack: the schedule group, the role schedules invoke the run function with, the
dead-letter queue and its alarm, who may touch schedules (least privilege, as infra/permissions.py says),
and the repair: the reconciler's pass, the hourly orphan job and the ScheduledTasksRepaired alarm."""

from __future__ import annotations

import json
from typing import Any

from infra import constants as C
from infra import permissions
from skyloop import manifest
from skyloop.schedules import ORPHAN_SCHEDULES_JOB
from tests.infra.helpers import (
    actions,
    as_list,
    by_prefix,
    function,
    one,
    resources,
    role_statements,
    statements_with,
)

Template = dict[str, Any]
SCHEDULER_ACTIONS = {"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"}
# what each function may do to the group's schedules: the API and the run function put and delete; the
# reconciler's repair pass reads one to compare it with its task, and puts and deletes as well
EXPECTED_SCHEDULER_ACCESS = {
    "api": SCHEDULER_ACTIONS,
    "schedule_run": SCHEDULER_ACTIONS,
    "reconcile_turns": SCHEDULER_ACTIONS | {"scheduler:GetSchedule"},
}


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


def test_only_the_api_the_run_function_and_the_reconciler_touch_schedules_of_the_group(
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
    assert {k: set(v) for k, v in permissions.SCHEDULER_ACCESS.items()} == EXPECTED_SCHEDULER_ACCESS
    for spec in manifest.FUNCTIONS:
        statements = role_statements(template_json, _role_of(template_json, spec.name))
        touching = [s for s in statements if any(a.startswith("scheduler:") for a in as_list(s["Action"]))]
        listing = [s for s in touching if s["Resource"] == "*"]
        scoped = [s for s in touching if s["Resource"] != "*"]
        passing = [s for s in statements if "iam:PassRole" in as_list(s["Action"])]
        if spec.name not in EXPECTED_SCHEDULER_ACCESS:
            assert (touching, passing) == ([], []), spec.name
            continue
        assert actions(scoped) == EXPECTED_SCHEDULER_ACCESS[spec.name], spec.name
        assert [s["Resource"] for s in scoped] == [schedules], spec.name
        # ListSchedules takes no resource: only the repair pass gets it, on "*", and nothing else there
        expected_listing = (
            [{"Action": "scheduler:ListSchedules", "Effect": "Allow", "Resource": "*"}]
            if spec.name == "reconcile_turns"
            else []
        )
        assert listing == expected_listing, spec.name
        assert passing == [
            {
                "Action": "iam:PassRole",
                "Condition": {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
                "Effect": "Allow",
                "Resource": {"Fn::GetAtt": [role, "Arn"]},
            }
        ], spec.name


def test_only_the_reconciler_invokes_the_run_function_and_nothing_else(template_json: Template) -> None:
    """The repair pass runs an occurrence it catches up on as EventBridge Scheduler would: the run function."""
    _, _, _, run = _ids(template_json)
    for spec in manifest.FUNCTIONS:
        statements = role_statements(template_json, _role_of(template_json, spec.name))
        invoking = statements_with(statements, "lambda:InvokeFunction")
        if spec.name != "reconcile_turns":
            assert all(s["Resource"] != {"Fn::GetAtt": [run, "Arn"]} for s in invoking), spec.name
            continue
        assert invoking == [
            {"Action": "lambda:InvokeFunction", "Effect": "Allow", "Resource": {"Fn::GetAtt": [run, "Arn"]}}
        ]


def test_an_hourly_rule_sends_the_reconciler_the_orphan_schedules_job(template_json: Template) -> None:
    reconciler, _ = function(template_json, "reconcile_turns")
    rule_id, rule = by_prefix(template_json, "AWS::Events::Rule", "SchedulesOrphanSchedules")
    props = rule["Properties"]
    assert props["ScheduleExpression"] == f"rate({C.ORPHAN_SCHEDULES_HOURS} hour)"
    assert props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [reconciler, "Arn"]}
    assert json.loads(target["Input"]) == {"job": "orphan_schedules"} == {"job": ORPHAN_SCHEDULES_JOB}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0  # the next hour is the retry
    permissions_ = [
        p["Properties"]
        for p in resources(template_json, "AWS::Lambda::Permission").values()
        if p["Properties"].get("SourceArn") == {"Fn::GetAtt": [rule_id, "Arn"]}
    ]
    assert [(p["Principal"], p["FunctionName"]) for p in permissions_] == [
        ("events.amazonaws.com", {"Fn::GetAtt": [reconciler, "Arn"]})
    ]


def test_repairs_are_alarmed_on_the_reconcilers_metric(template_json: Template) -> None:
    (alarm,) = [
        a["Properties"]
        for a in resources(template_json, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "ScheduledTasksRepaired"
    ]
    # the Powertools metric the reconciler emits (namespace and service dimension as the functions set)
    assert alarm["Namespace"] == C.SERVICE_NAME == "skyloop"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": C.SERVICE_NAME}]
    env = function(template_json, "reconcile_turns")[1]["Properties"]["Environment"]["Variables"]
    assert (env["POWERTOOLS_METRICS_NAMESPACE"], env["POWERTOOLS_SERVICE_NAME"]) == ("skyloop", "skyloop")
    # > 0 in a period: any repair is news (a chain had broken)
    assert (alarm["Statistic"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
        "Sum",
        1,
        "GreaterThanOrEqualToThreshold",
    )
    assert alarm["TreatMissingData"] == "notBreaching"
    # and it is the metric the reconciler's handler emits
    handler = (manifest.by_name("reconcile_turns").code_dir / "handler.py").read_text()
    assert 'name="ScheduledTasksRepaired"' in handler


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
    # the reconciler's repair pass puts schedules as the API does, and invokes the run function
    reconciler = function(template_json, "reconcile_turns")[1]["Properties"]["Environment"]["Variables"]
    assert {k: reconciler[k] for k in expected} == expected
    assert reconciler["SKYLOOP_SCHEDULE_TARGET_ARN"] == {"Fn::GetAtt": [run, "Arn"]}


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
