"""The cloud's delivery queue: SQS FIFO, one message group per (endpoint, session), retried in place.

A message names a delivery (endpoint, event id; its row counts the attempts). The
``webhook_delivery`` function attempts it; after a failure it hides the
message for the schedule's next delay (``ChangeMessageVisibility``, at most
12 hours, which the schedule respects) and reports it failed, so SQS hands it
back then, and the group's later events wait behind it: one session's events
reach an endpoint in order, as far as retries allow. After the last attempt
the function sends the message to the dead-letter queue itself and deletes
it; the queue's own redrive policy is a backstop for messages the function
cannot handle at all. Batches are one message (``BatchSize: 1``): a failing
message never counts receives against others behind it.

Why not EventBridge API destinations: they sign with a fixed header or
OAuth, not an HMAC over each body with a per-attempt timestamp, so they
cannot speak Standard Webhooks (nor sign with two secrets during a rotation),
and their retries (24 h, 185 attempts) cannot be shown per attempt.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from skyloop.webhooks.models import Delivery

log = logging.getLogger("skyloop.webhooks")
MAX_VISIBILITY_S = 12 * 3600


class DeliveryMessage(BaseModel):
    """The queue message's body."""

    model_config = ConfigDict(extra="forbid")

    endpoint_id: str = Field(min_length=1, max_length=64)
    event_id: str = Field(min_length=1, max_length=64)
    redelivery: int = Field(default=0, ge=0)


class SqsQueue:
    """Enqueue deliveries on the FIFO delivery queue."""

    def __init__(self, client: Any, url: str) -> None:
        self.client = client
        self.url = url

    def enqueue(self, delivery: Delivery, *, redelivery: int = 0) -> None:
        body = DeliveryMessage(endpoint_id=delivery.endpoint_id, event_id=delivery.id, redelivery=redelivery)
        self.client.send_message(
            QueueUrl=self.url,
            MessageBody=body.model_dump_json(),
            MessageGroupId=delivery.group[:128],
            # the same delivery enqueued twice within five minutes (a stream batch retried) is sent once
            MessageDeduplicationId=f"{delivery.endpoint_id}:{delivery.id}:{redelivery}"[:128],
        )


class NoQueue:
    """No delivery queue configured: deliveries are recorded, never attempted (logged once)."""

    warned = False

    def enqueue(self, delivery: Delivery, *, redelivery: int = 0) -> None:  # noqa: ARG002 (the protocol's)
        if not NoQueue.warned:
            log.warning("SKYLOOP_WEBHOOK_QUEUE_URL is not set: webhook deliveries are not attempted")
            NoQueue.warned = True


def handle_queue(event: dict[str, Any]) -> dict[str, Any]:
    """An SQS batch of delivery messages -> attempts; failed ones come back after their delay."""
    from skyloop import deps
    from skyloop.webhooks import delivery
    from skyloop.webhooks.records import webhook_records

    settings = deps.get_settings()
    records = webhook_records()
    sqs = deps.client("sqs")
    failures: list[dict[str, str]] = []
    blocked = False
    for message in event.get("Records") or []:
        message_id = str(message.get("messageId"))
        if blocked:  # FIFO: nothing of a batch goes past a message that is waiting for its retry
            failures.append({"itemIdentifier": message_id})
            continue
        try:
            body = DeliveryMessage.model_validate_json(message.get("body") or "{}")
        except ValueError:
            log.error("dropping a malformed delivery message %s", message_id)
            continue
        found = records.get_delivery(body.endpoint_id, body.event_id)
        if found is None:
            continue  # the endpoint and its deliveries were deleted
        outcome = delivery.attempt(records, records.get_endpoint(body.endpoint_id), found, settings)
        if outcome.status == "retrying" and outcome.delay_s is not None:
            sqs.change_message_visibility(
                QueueUrl=_queue_url(message, settings.webhook_queue_url),
                ReceiptHandle=message["receiptHandle"],
                VisibilityTimeout=min(MAX_VISIBILITY_S, max(1, round(outcome.delay_s))),
            )
            failures.append({"itemIdentifier": message_id})
            blocked = True
        elif outcome.status == "dead" and outcome.attempt is not None and settings.webhook_dlq_url:
            sqs.send_message(
                QueueUrl=settings.webhook_dlq_url,
                MessageBody=json.dumps({**body.model_dump(), "dead_after": outcome.attempt.attempt}),
                MessageGroupId=found.group[:128],
                MessageDeduplicationId=f"dead:{found.endpoint_id}:{found.id}:{body.redelivery}"[:128],
            )
    return {"batchItemFailures": failures}


def _queue_url(message: dict[str, Any], configured: str | None) -> str:
    """The message's queue URL (from its ARN), falling back to the configured one."""
    if configured:
        return configured
    arn = str(message.get("eventSourceARN", ""))
    parts = arn.split(":")
    return f"https://sqs.{parts[3]}.amazonaws.com/{parts[4]}/{parts[5]}"
