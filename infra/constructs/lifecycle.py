"""Lifecycle events: the table stream -> ``lifecycle_events`` -> EventBridge and the webhook delivery queue.

* the table's stream (``NEW_IMAGE``) feeds the ``lifecycle_events`` function through an event source
  mapping of its own (the live fan-out has another): its filter passes inserted ``EVENT#`` rows of the
  types lifecycle events derive from, and inserted session rows; batches that fail are retried, bisected,
  for as long as the stream keeps them, then their coordinates land in a failure queue (alarmed);
* the stack's own EventBridge bus (``EventBusName`` output): every lifecycle event, ``source: skyloop``;
* the FIFO delivery queue: one message per (event, endpoint), grouped by endpoint and session, read one
  at a time by ``webhook_delivery``, which hides a failed one for the schedule's next delay and sends
  exhausted ones to the dead-delivery queue (alarmed); the redrive policy sends what it cannot handle
  at all there too.

Least privilege: only the publisher may put events on the bus; the publisher and the API (redelivery)
may send to the delivery queue; only the delivery function consumes it and sends to the dead one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants as C
from skyloop import events as ev
from skyloop.store import keys

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb

    from infra.config import StackConfig

# The log events lifecycle events derive from (skyloop.lifecycle_events.derive): every call and approval
# event passes, so a run of calls is never cut by the filter.
LIFECYCLE_EVENT_TYPES = (
    ev.SESSION_STATUS,
    ev.RESPONSE_ITEM_DONE,
    ev.ELICITATION_REQUEST,
    ev.RESPONSE_COMPLETED,
    ev.RESPONSE_CANCELLED,
    ev.RESPONSE_FAILED,
)
LIFECYCLE_FILTERS = (
    {
        "eventName": lambda_.FilterRule.is_equal("INSERT"),
        "dynamodb": {
            "Keys": {keys.SK: {"S": lambda_.FilterRule.begins_with(keys.EVENT_PREFIX)}},
            "NewImage": {"type": {"S": lambda_.FilterRule.or_(*LIFECYCLE_EVENT_TYPES)}},
        },
    },
    {
        "eventName": lambda_.FilterRule.is_equal("INSERT"),
        "dynamodb": {
            "Keys": {
                keys.PK: {"S": lambda_.FilterRule.begins_with(keys.SESSION_PREFIX)},
                keys.SK: {"S": lambda_.FilterRule.is_equal(keys.META)},
            }
        },
    },
)


class LifecycleEvents(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        publisher: lambda_.Function,
        delivery: lambda_.Function,
        api: lambda_.Function,
        table: dynamodb.ITable,
        config: StackConfig,  # noqa: ARG002 (every construct takes the stack's config)
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.bus = events.EventBus(
            self,
            "Bus",
            event_bus_name=f"{stack.stack_name}-lifecycle",
            description="skyloop lifecycle events (source: skyloop, detail-type: agent.session.*)",
        )
        self.bus.grant_put_events_to(publisher)
        publisher.add_environment("SKYLOOP_EVENT_BUS", self.bus.event_bus_name)

        self.dead = sqs.Queue(
            self,
            "DeadDeliveries",
            fifo=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(C.WEBHOOK_DEAD_RETENTION_DAYS),
        )
        self.queue = sqs.Queue(
            self,
            "Deliveries",
            fifo=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(C.WEBHOOK_QUEUE_RETENTION_DAYS),
            # Lambda requires at least the function's timeout; a crashed attempt comes back after this
            visibility_timeout=delivery.timeout.plus(cdk.Duration.seconds(30))
            if delivery.timeout
            else cdk.Duration.seconds(60),
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=C.WEBHOOK_MAX_RECEIVES, queue=self.dead),
        )
        for fn in (publisher, api):
            self.queue.grant_send_messages(fn)
        for fn in (publisher, api, delivery):
            fn.add_environment("SKYLOOP_WEBHOOK_QUEUE_URL", self.queue.queue_url)
        self.dead.grant_send_messages(delivery)
        delivery.add_environment("SKYLOOP_WEBHOOK_DLQ_URL", self.dead.queue_url)
        delivery.add_event_source(
            sources.SqsEventSource(self.queue, batch_size=1, report_batch_item_failures=True)
        )

        self.failures = sqs.Queue(
            self,
            "PublisherFailures",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        publisher.add_event_source(
            sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=C.LIFECYCLE_BATCH_SIZE,
                max_batching_window=cdk.Duration.seconds(0),  # latency: action_required within a second
                bisect_batch_on_error=True,
                report_batch_item_failures=True,
                retry_attempts=C.LIFECYCLE_RETRY_ATTEMPTS,
                max_record_age=cdk.Duration.seconds(C.LIFECYCLE_MAX_RECORD_AGE_S),
                parallelization_factor=C.LIFECYCLE_PARALLELIZATION,
                on_failure=sources.SqsDlq(self.failures),
                filters=[lambda_.FilterCriteria.filter(f) for f in LIFECYCLE_FILTERS],
            )
        )
