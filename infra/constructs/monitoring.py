"""Observability: alarms on failed turns, function errors and throttles, API 5xx, and one dashboard."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra import constants as C
from infra.constructs._common import pascal

if TYPE_CHECKING:
    from aws_cdk import aws_apigatewayv2 as apigwv2
    from aws_cdk import aws_cloudfront as cloudfront
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sqs as sqs
    from aws_cdk import aws_stepfunctions as sfn

    from infra.config import StackConfig
    from infra.constructs.lifecycle import LifecycleEvents
    from infra.constructs.live import LiveChannel

PERIOD = cdk.Duration.minutes(C.ALARM_PERIOD_MINUTES)


class Monitoring(Construct):
    """Alarms fire on the first occurrence in a period (missing data is fine: scale to zero).

    They notify ``alarmTopicArn`` when that context value names an SNS topic.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: dict[str, lambda_.Function],
        machine: sfn.StateMachine,
        api: apigwv2.HttpApi,
        table: dynamodb.Table,
        distribution: cloudfront.Distribution,
        config: StackConfig,
        live: LiveChannel | None = None,
        lifecycle: LifecycleEvents | None = None,
        schedule_dead_letters: sqs.IQueue | None = None,
        schedule_repairs: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cw.Alarm] = []
        self._alarm(
            "TurnsFailed",
            machine.metric_failed(period=PERIOD, statistic="Sum"),
            C.FAILED_EXECUTIONS_THRESHOLD,
            "Turn executions failed (a step raised past its retries)",
        )
        for name, fn in functions.items():
            cid = pascal(name)
            self._alarm(
                f"{cid}Errors",
                fn.metric_errors(period=PERIOD, statistic="Sum"),
                C.FUNCTION_ERRORS_THRESHOLD,
                f"The {name} function raised unhandled errors",
            )
            self._alarm(
                f"{cid}Throttles",
                fn.metric_throttles(period=PERIOD, statistic="Sum"),
                C.THROTTLES_THRESHOLD,
                f"The {name} function was throttled (account or reserved concurrency)",
            )
        self._alarm(
            "ApiServerErrors",
            api.metric_server_error(period=PERIOD, statistic="Sum"),
            C.FUNCTION_ERRORS_THRESHOLD,
            "The HTTP API answered 5xx",
        )
        if live is not None:
            self._alarm(
                "LiveFanoutLagging",
                functions["push_fanout"].metric(
                    "IteratorAge", period=PERIOD, statistic="Maximum", unit=cw.Unit.MILLISECONDS
                ),
                C.FANOUT_ITERATOR_AGE_MS,
                "The live channel's fan-out is behind the table stream (viewers see events late)",
            )
            self._alarm(
                "LiveFanoutGaveUp",
                live.failures.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic="Maximum"
                ),
                1,
                "The fan-out gave up on stream records after its retries (clients re-subscribe to heal)",
            )
        if lifecycle is not None:
            self._alarm(
                "LifecycleLagging",
                functions["lifecycle_events"].metric(
                    "IteratorAge", period=PERIOD, statistic="Maximum", unit=cw.Unit.MILLISECONDS
                ),
                C.LIFECYCLE_ITERATOR_AGE_MS,
                "Lifecycle events are behind the table stream (webhooks and EventBridge rules see them late)",
            )
            self._alarm(
                "LifecyclePublisherGaveUp",
                lifecycle.failures.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic="Maximum"
                ),
                1,
                "The lifecycle publisher gave up on stream records after a day of retries",
            )
            self._alarm(
                "WebhookDeliveriesDead",
                lifecycle.dead.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic="Maximum"
                ),
                1,
                "Webhook deliveries exhausted their retries (GET /v1/webhooks/{id}/deliveries; redeliver)",
            )
        if schedule_dead_letters is not None:
            self._alarm(
                "ScheduledRunsGaveUp",
                schedule_dead_letters.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic="Maximum"
                ),
                1,
                "EventBridge Scheduler gave up invoking the scheduled tasks' run function (an occurrence "
                "did not run: the message in the dead-letter queue names the task and the time)",
            )
        if schedule_repairs:
            self._alarm(
                C.SCHEDULE_REPAIRED_METRIC,
                cw.Metric(
                    namespace=C.SERVICE_NAME,  # Powertools metrics of the reconciler's repair pass
                    metric_name=C.SCHEDULE_REPAIRED_METRIC,
                    dimensions_map={"service": C.SERVICE_NAME},
                    period=PERIOD,
                    statistic="Sum",
                ),
                1,
                "The repair pass re-armed scheduled tasks whose schedule had stopped firing (missing, "
                "disabled or drifted: a re-arm that failed, or a change in the console); their missed "
                "occurrences are recorded as missed runs. The reconciler's log says which and why.",
            )
        if config.alarm_topic_arn:
            topic = sns.Topic.from_topic_arn(self, "AlarmTopic", config.alarm_topic_arn)
            for alarm in self.alarms:
                alarm.add_alarm_action(cw_actions.SnsAction(topic))
                alarm.add_ok_action(cw_actions.SnsAction(topic))

        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=cdk.Duration.hours(3))
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24, height=4),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Turns (executions)",
                left=[
                    machine.metric_started(period=PERIOD, statistic="Sum"),
                    machine.metric_succeeded(period=PERIOD, statistic="Sum"),
                    machine.metric_failed(period=PERIOD, statistic="Sum"),
                    machine.metric_aborted(period=PERIOD, statistic="Sum"),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="HTTP API",
                left=[
                    api.metric_count(period=PERIOD, statistic="Sum"),
                    api.metric_client_error(period=PERIOD, statistic="Sum"),
                    api.metric_server_error(period=PERIOD, statistic="Sum"),
                ],
                right=[api.metric_latency(period=PERIOD, statistic="p90")],
                width=8,
            ),
            cw.GraphWidget(
                title="Edge (CloudFront)",
                left=[
                    distribution.metric_requests(period=PERIOD, statistic="Sum"),
                ],
                right=[
                    distribution.metric4xx_error_rate(period=PERIOD),
                    distribution.metric5xx_error_rate(period=PERIOD),
                ],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Function invocations",
                left=[
                    fn.metric_invocations(period=PERIOD, statistic="Sum", label=n)
                    for n, fn in functions.items()
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Function errors and throttles",
                left=[
                    fn.metric_errors(period=PERIOD, statistic="Sum", label=n) for n, fn in functions.items()
                ],
                right=[
                    fn.metric_throttles(period=PERIOD, statistic="Sum", label=f"{n} throttles")
                    for n, fn in functions.items()
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Function duration p90 (ms)",
                left=[
                    fn.metric_duration(period=PERIOD, statistic="p90", label=n) for n, fn in functions.items()
                ],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Table capacity",
                left=[
                    table.metric_consumed_read_capacity_units(period=PERIOD, statistic="Sum"),
                    table.metric_consumed_write_capacity_units(period=PERIOD, statistic="Sum"),
                ],
                width=12,
            ),
            cw.GraphWidget(
                title="Table throttled requests",
                left=[table.metric_throttled_requests_for_operations(period=PERIOD)],
                width=12,
            ),
        )

    def _alarm(self, construct_id: str, metric: cw.IMetric, threshold: float, description: str) -> None:
        self.alarms.append(
            cw.Alarm(
                self,
                construct_id,
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
        )
