"""Webhook endpoints and their deliveries in the table (keys: :func:`skyloop.store.keys.webhook_key`).

Not part of :class:`skyloop.store.Store`: only the webhook routes, the
lifecycle publisher and the delivery worker use it. A delivery is keyed by
its event's id, so the publisher creates it with a conditional put: an event
derived twice (a stream batch retried) is enqueued once. Attempts are
appended to the delivery row (a list: at most the schedule's length plus
redeliveries), so one read shows a delivery's whole history.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from skyloop.store import codec, keys, notifier
from skyloop.store.dynamodb.base import TableBase, error_code
from skyloop.store.records import StoredEvent
from skyloop.webhooks.models import Attempt, Delivery, Endpoint

if TYPE_CHECKING:
    from skyloop.webhooks.models import DeliveryStatus

ENDPOINT_FIELDS = tuple(Endpoint.model_fields)
MAX_ATTEMPTS_KEPT = 50  # a delivery redelivered again and again keeps its newest attempts
ROUTES_CHANGED = "webhook-routes"  # notifier kind: an endpoint was written (the local publisher's cue)


def _routes_changed() -> None:
    """Tell this process's listeners (the local stack's publisher caches routes) after a committed write.

    A Lambda worker's notification reaches the stack before the invocation's answer does (one
    ordered channel), so no event appended after a client saw its 2xx is routed by the old list.
    In the cloud nobody listens.
    """
    notifier.notify("", ROUTES_CHANGED)


def _owner_value(endpoint: Endpoint) -> str:
    if endpoint.all_sessions:
        return keys.WEBHOOK_ALL_OWNERS
    return keys.owner_index_value("webhook", endpoint.owner)


class WebhookRecords(TableBase):
    # ------------------------------------------------------------------ endpoints
    def put_endpoint(self, endpoint: Endpoint) -> None:
        item = {
            **endpoint.model_dump(mode="json", exclude_none=True),
            **keys.webhook_key(endpoint.id),
            "kind": "webhook",
            keys.OWNER_KEY: _owner_value(endpoint),
            keys.CREATED_KEY: keys.created_key(endpoint.created_at * 10**9, endpoint.id),
        }
        self.client.put_item(TableName=self.table, Item=codec.to_item(item))
        _routes_changed()

    def get_endpoint(self, endpoint_id: str) -> Endpoint | None:
        attrs = self._get(keys.webhook_key(endpoint_id))
        return _endpoint(attrs) if attrs is not None else None

    def list_endpoints(self, owner: str) -> list[Endpoint]:
        """``owner``'s endpoints, oldest first (those open to every session included)."""
        found = [e for e in self.routes(owner) if e.owner == owner]
        return sorted(found, key=lambda e: (e.created_at, e.id))

    def routes(self, owner: str) -> list[Endpoint]:
        """Every endpoint an event of ``owner``'s sessions may go to: theirs, and those open to all."""
        out: list[Endpoint] = []
        for value in (keys.owner_index_value("webhook", owner), keys.WEBHOOK_ALL_OWNERS):
            rows = self._query_all(
                {
                    "TableName": self.table,
                    "IndexName": keys.INDEX_BY_OWNER,
                    "KeyConditionExpression": "#o = :o",
                    "ExpressionAttributeNames": {"#o": keys.OWNER_KEY},
                    "ExpressionAttributeValues": {":o": codec.attr(value)},
                }
            )
            out += [_endpoint(r) for r in rows if r.get("kind") == "webhook"]
        return out

    def update_endpoint(self, endpoint: Endpoint, *, expected_updated_at: int | None = None) -> bool:
        """Write the endpoint back whole; with ``expected_updated_at``, only if nobody changed it since."""
        item = {
            **endpoint.model_dump(mode="json", exclude_none=True),
            **keys.webhook_key(endpoint.id),
            "kind": "webhook",
            keys.OWNER_KEY: _owner_value(endpoint),
            keys.CREATED_KEY: keys.created_key(endpoint.created_at * 10**9, endpoint.id),
        }
        kwargs: dict[str, Any] = {"TableName": self.table, "Item": codec.to_item(item)}
        if expected_updated_at is not None:
            kwargs["ConditionExpression"] = "attribute_exists(pk) AND updated_at = :u"
            kwargs["ExpressionAttributeValues"] = {":u": codec.attr(expected_updated_at)}
        else:
            kwargs["ConditionExpression"] = "attribute_exists(pk)"
        try:
            self.client.put_item(**kwargs)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        _routes_changed()
        return True

    def note_result(self, endpoint_id: str, *, succeeded: bool, at: int) -> None:
        """Track whether the endpoint is failing: a success clears ``failing_since``, a failure sets it once."""
        if succeeded:
            expression, values = "REMOVE failing_since", None
        else:
            expression, values = (
                "SET failing_since = if_not_exists(failing_since, :t)",
                {":t": codec.attr(at)},
            )
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "Key": codec.to_item(keys.webhook_key(endpoint_id)),
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(pk)",
        }
        if values:
            kwargs["ExpressionAttributeValues"] = values
        try:
            self.client.update_item(**kwargs)
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":  # deleted meanwhile
                raise

    def disable(self, endpoint_id: str, reason: str, *, at: int) -> bool:
        """Disable an enabled endpoint; False when it was not enabled (or is gone)."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.webhook_key(endpoint_id)),
                UpdateExpression="SET #s = :d, disabled_reason = :r, updated_at = :t",
                ConditionExpression="#s = :e",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":d": codec.attr("disabled"),
                    ":e": codec.attr("enabled"),
                    ":r": codec.attr(reason),
                    ":t": codec.attr(at),
                },
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        _routes_changed()
        return True

    def delete_endpoint(self, endpoint_id: str) -> None:
        """The endpoint first (nothing routes to it after), then its deliveries."""
        self.client.delete_item(TableName=self.table, Key=codec.to_item(keys.webhook_key(endpoint_id)))
        _routes_changed()
        rows = self._query_all(
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": codec.attr(keys.webhook_pk(endpoint_id))},
                "ProjectionExpression": "pk, sk",
            }
        )
        self._delete_keys([codec.to_item({keys.PK: r[keys.PK], keys.SK: r[keys.SK]}) for r in rows])

    # ----------------------------------------------------------------- deliveries
    def create_delivery(self, delivery: Delivery, *, ttl_s: int) -> bool:
        """Put a new delivery; False when this event was already enqueued for this endpoint."""
        item = {
            **keys.delivery_key(delivery.endpoint_id, delivery.id),
            "kind": "delivery",
            "id": delivery.id,
            "endpoint_id": delivery.endpoint_id,
            "event_type": delivery.event_type,
            "session_id": delivery.session_id,
            "status": delivery.status,
            "attempts": [],
            "queued": False,
            "created_at": delivery.created_at,
            **self._text_out("body", delivery.body, f"webhooks/{delivery.endpoint_id}/"),
            keys.TTL_ATTRIBUTE: int(time.time()) + ttl_s,
        }
        return self._put_new({k: v for k, v in item.items() if v is not None})

    def mark_queued(self, delivery: Delivery) -> None:
        """The delivery's message was sent: a publisher deriving the event again leaves it alone.

        Conditional on the row: a delivery removed meanwhile (its endpoint deleted) is not
        brought back as a row holding only ``queued``.
        """
        try:
            self.client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.delivery_key(delivery.endpoint_id, delivery.id)),
                UpdateExpression="SET queued = :t",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":t": codec.attr(True)},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return

    def get_delivery(self, endpoint_id: str, event_id: str) -> Delivery | None:
        attrs = self._get(keys.delivery_key(endpoint_id, event_id))
        return self._delivery(attrs) if attrs is not None else None

    def record_attempt(
        self, delivery: Delivery, attempt: Attempt, status: DeliveryStatus, next_retry_at: float | None
    ) -> None:
        """Append an attempt and move the delivery's status (unconditional: attempts are facts)."""
        names = {"#s": "status", "#a": "attempts"}
        values: dict[str, Any] = {
            ":s": codec.attr(status),
            ":a": {"L": [{"S": attempt.model_dump_json(exclude_none=True)}]},  # JSON: floats stay floats
            ":empty": codec.attr([]),
        }
        sets = ["#s = :s", "#a = list_append(if_not_exists(#a, :empty), :a)"]
        removes = []
        if next_retry_at is None:
            removes.append("next_retry_at")
        else:
            values[":n"] = {"N": f"{next_retry_at:.3f}"}
            sets.append("next_retry_at = :n")
        self.client.update_item(
            TableName=self.table,
            Key=codec.to_item(keys.delivery_key(delivery.endpoint_id, delivery.id)),
            UpdateExpression="SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else ""),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def set_delivery_status(self, delivery: Delivery, status: DeliveryStatus) -> None:
        self.client.update_item(
            TableName=self.table,
            Key=codec.to_item(keys.delivery_key(delivery.endpoint_id, delivery.id)),
            UpdateExpression="SET #s = :s REMOVE next_retry_at",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": codec.attr(status)},
        )

    def list_deliveries(
        self, endpoint_id: str, *, limit: int = 20, after: str | None = None, status: str | None = None
    ) -> tuple[list[Delivery], bool]:
        """Newest first (event ids begin with their time); ``after`` is the last id of the previous page."""
        upper = keys.delivery_key(endpoint_id, after)[keys.SK] if after else keys.DELIVERY_PREFIX + "\uffff"
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":p": codec.attr(keys.webhook_pk(endpoint_id)),
                ":lo": codec.attr(keys.DELIVERY_PREFIX),
                ":hi": codec.attr(upper),
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        if status:
            kwargs["FilterExpression"] = "#s = :s"
            kwargs["ExpressionAttributeNames"] = {"#s": "status"}
            kwargs["ExpressionAttributeValues"][":s"] = codec.attr(status)
        rows = [codec.from_item(r) for r in self._query_page(kwargs, limit + 1)]
        rows = [r for r in rows if r[keys.SK] != upper]
        return [self._delivery(r) for r in rows[:limit]], len(rows) > limit

    def unfinished_deliveries(self) -> list[Delivery]:
        """Every pending or retrying delivery, oldest first: what ``skyloop dev`` resumes after a restart.

        A scan, so for the local stack only (in the cloud the queue holds what is unfinished).
        """
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "kind = :k AND #s IN (:p, :r)",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {
                ":k": codec.attr("delivery"),
                ":p": codec.attr("pending"),
                ":r": codec.attr("retrying"),
            },
        }
        rows: list[dict[str, Any]] = []
        while True:
            page = self.client.scan(**kwargs)
            rows += [codec.from_item(r) for r in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return sorted((self._delivery(r) for r in rows), key=lambda d: (d.created_at, d.id))

    def event_from_image(self, image: dict[str, Any]) -> StoredEvent:
        """A stored event from a stream record's ``NewImage`` (large payloads resolved from the bucket)."""
        attrs = codec.from_item(image)
        return StoredEvent(
            seq=int(attrs["seq"]), type=attrs["type"], data=codec.loads(self._text_in(attrs, "data"), {})
        )

    def _delivery(self, attrs: dict[str, Any]) -> Delivery:
        return Delivery(
            id=attrs["id"],
            endpoint_id=attrs["endpoint_id"],
            event_type=attrs["event_type"],
            session_id=attrs.get("session_id"),
            body=self._text_in(attrs, "body") or "{}",
            status=attrs.get("status", "pending"),
            attempts=[
                Attempt.model_validate_json(a) for a in (attrs.get("attempts") or [])[-MAX_ATTEMPTS_KEPT:]
            ],
            next_retry_at=attrs.get("next_retry_at"),
            created_at=int(attrs.get("created_at", 0)),
            queued=bool(attrs.get("queued", True)),
        )


def _endpoint(attrs: dict[str, Any]) -> Endpoint:
    return Endpoint.model_validate({k: v for k, v in attrs.items() if k in ENDPOINT_FIELDS})


def webhook_records() -> WebhookRecords:
    from skyloop import deps
    from skyloop.store.blobs import S3Blobs

    settings = deps.get_settings()
    blobs = S3Blobs(deps.client("s3"), settings.blob_bucket) if settings.blob_bucket else None
    return WebhookRecords(settings.table_name, deps.client("dynamodb"), blobs=blobs)
