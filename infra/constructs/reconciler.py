"""Reconciler: the scheduled pass that re-sends lost wake-ups and resets turns whose execution ended."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

    from infra.config import StackConfig


class Reconciler(Construct):
    """An EventBridge rule invoking the scheduled function every ``reconcileMinutes``.

    One pass is idempotent (skyloop.turns.reconcile), so a late or doubled
    invocation changes nothing twice; a pass that fails is not retried by
    EventBridge, the next one a few minutes later does the same work.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, function: lambda_.IFunction, config: StackConfig
    ) -> None:
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "Schedule",
            description="skyloop: reconcile stranded turns",
            schedule=events.Schedule.rate(cdk.Duration.minutes(config.reconcile_minutes)),
            targets=[
                targets.LambdaFunction(
                    function,
                    retry_attempts=0,  # the next scheduled pass is the retry
                    max_event_age=cdk.Duration.minutes(config.reconcile_minutes),
                )
            ],
        )
