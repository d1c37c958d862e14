"""Scheduled tasks: a schedule group of the stack, the role schedules invoke the run function with, a DLQ.

Each task is one EventBridge Scheduler schedule in the group (the API puts and
deletes it, ``skyloop.schedules.engine``); every schedule targets the
``schedule_run`` function, retries a failed invocation
(``SCHEDULE_RETRIES`` within ``SCHEDULE_MAX_EVENT_AGE_S``) and then sends it to
the dead-letter queue, which has an alarm (``Monitoring``).

The reconciler (``reconcile_turns``, every few minutes) also repairs the tasks
whose schedule stopped firing (``skyloop.schedules.repair``), and an hourly
rule sends it ``{"job": "orphan_schedules"}``: delete the schedules whose task
is gone. Its repairs are counted (``ScheduledTasksRepaired``, alarmed in
``Monitoring``).

Least privilege: the invoke role may be assumed by EventBridge Scheduler for
this account only, and may invoke the run function and send to the queue,
nothing else; the API, the run function and the reconciler may touch
schedules of this group only (the actions ``infra.permissions.SCHEDULER_ACCESS``
gives each), and pass that role only to EventBridge Scheduler; the reconciler
may list schedules (an action without resources) and invoke the run function
(an occurrence it catches up on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants as C
from infra import permissions
from skyloop.schedules import ORPHAN_SCHEDULES_JOB

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

RUN_FUNCTION = "schedule_run"
REPAIR_FUNCTION = "reconcile_turns"  # the repair pass and the orphan job (skyloop.schedules.repair)


class ScheduledTasks(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, functions: dict[str, lambda_.Function]
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        run = functions[RUN_FUNCTION]
        # CloudFormation names the group (unique per account and region, whatever the stack is called)
        self.group = scheduler.CfnScheduleGroup(self, "Group")
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(C.SCHEDULE_DLQ_RETENTION_DAYS),
        )
        self.invoke_role = iam.Role(
            self,
            "InvokeRole",
            description="skyloop: EventBridge Scheduler invokes the scheduled tasks' run function",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
        )
        self.invoke_role.add_to_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[run.function_arn])
        )
        # a dead letter is sent, nothing more (grant_send_messages adds GetQueueAttributes and GetQueueUrl)
        self.invoke_role.add_to_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.dead_letters.queue_arn])
        )
        for name, actions in permissions.SCHEDULER_ACCESS.items():
            fn = functions[name]
            fn.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=[self.schedules_arn]))
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["iam:PassRole"],
                    resources=[self.invoke_role.role_arn],
                    conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
                )
            )
            fn.add_environment("SKYLOOP_SCHEDULE_GROUP", self.group.ref)
            fn.add_environment("SKYLOOP_SCHEDULE_ROLE_ARN", self.invoke_role.role_arn)
            fn.add_environment("SKYLOOP_SCHEDULE_DLQ_ARN", self.dead_letters.queue_arn)
            fn.add_environment("SKYLOOP_SCHEDULE_RETRIES", str(C.SCHEDULE_RETRIES))
            fn.add_environment("SKYLOOP_SCHEDULE_MAX_EVENT_AGE_S", str(C.SCHEDULE_MAX_EVENT_AGE_S))
            if name != RUN_FUNCTION:  # the run function re-arms with its own ARN (its context's)
                fn.add_environment("SKYLOOP_SCHEDULE_TARGET_ARN", run.function_arn)
        for name in permissions.SCHEDULE_LISTERS:
            # ListSchedules supports no resource-level permission (acknowledged in the stack's cdk-nag)
            functions[name].add_to_role_policy(
                iam.PolicyStatement(actions=["scheduler:ListSchedules"], resources=["*"])
            )
        for name in permissions.SCHEDULE_DISPATCHERS:
            functions[name].add_to_role_policy(
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[run.function_arn])
            )
        self.orphan_rule = events.Rule(
            self,
            "OrphanSchedules",
            description="skyloop: delete the schedules whose scheduled task is gone",
            schedule=events.Schedule.rate(cdk.Duration.hours(C.ORPHAN_SCHEDULES_HOURS)),
            targets=[
                targets.LambdaFunction(
                    functions[REPAIR_FUNCTION],
                    event=events.RuleTargetInput.from_object({"job": ORPHAN_SCHEDULES_JOB}),
                    retry_attempts=0,  # the next hour's run is the retry
                    max_event_age=cdk.Duration.hours(C.ORPHAN_SCHEDULES_HOURS),
                )
            ],
        )

    @property
    def schedules_arn(self) -> str:
        """Every schedule of the group, nothing else (schedule names are task ids, made at run time)."""
        # pseudo parameters, not the stack's env: the same ARN (and cdk-nag finding) in every account
        return (
            f"arn:{cdk.Aws.PARTITION}:scheduler:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:"
            f"schedule/{self.group.ref}/*"
        )
