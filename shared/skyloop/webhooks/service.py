"""Webhook endpoints behind the REST routes: create, read, edit, rotate, list deliveries, redeliver, test.

Endpoints are owned like agents and sessions: another principal's id is
"not found" exactly as an unknown one; an admin sees all, and only an admin
may open an endpoint to every principal's sessions (``all_sessions``). Every
check that can refuse a request runs before anything is written: the URL
(http(s), a host, a port, and an address the deployment may call: the
outbound allow-list of :mod:`skyloop.outbound`; the local stack allows
loopback) and the event types.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skyloop import principals
from skyloop.errors import ForbiddenError, InvalidInputError, NotFoundError
from skyloop.ids import is_hex32, new_id
from skyloop.webhooks.models import Delivery, Endpoint

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.settings import Settings
    from skyloop.webhooks.models import (
        CreateWebhookRequest,
        DeliveryListQuery,
        RotateSecretRequest,
        TestWebhookRequest,
        UpdateWebhookRequest,
    )
    from skyloop.webhooks.publisher import DeliveryQueue
    from skyloop.webhooks.records import WebhookRecords


def check_url(url: str, settings: Settings) -> str:
    """A URL the deployment may post to, or 400 (``url_not_allowed`` for where it may not call)."""
    from skyloop import outbound

    if url != url.strip() or any(c.isspace() or ord(c) < 32 for c in url):
        raise InvalidInputError("url: must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
        _ = parts.port  # a malformed port raises here
    except ValueError as exc:
        raise InvalidInputError(f"url: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError("url: must be an http or https URL with a host")
    outbound.check_url(url, settings, what="url")
    return url


def get_endpoint(records: WebhookRecords, endpoint_id: str) -> Endpoint:
    """The endpoint, if the caller may see it; another principal's is "not found" too."""
    missing = NotFoundError(f"Webhook endpoint not found: '{endpoint_id}'")
    if not is_hex32(endpoint_id):
        raise missing
    endpoint = records.get_endpoint(endpoint_id)
    if endpoint is None or not principals.current().owns(endpoint.owner):
        raise missing
    return endpoint


def _require_admin_for_all(all_sessions: bool | None) -> None:
    if all_sessions and not principals.current().is_admin:
        raise ForbiddenError("only an admin token may open an endpoint to every principal's sessions")


def create(
    records: WebhookRecords, settings: Settings, req: CreateWebhookRequest, *, name: str | None = None
) -> dict[str, Any]:
    """A new endpoint (``name``: OpenAI's endpoint name); its answer holds the secret, once."""
    from skyloop.webhooks.delivery import new_secret

    _require_admin_for_all(req.all_sessions)
    check_url(req.url, settings)
    now = int(time.time())
    endpoint = Endpoint(
        id=new_id(),
        owner=principals.current().name,
        url=req.url,
        format=req.format,
        events=req.events or [],
        description=req.description,
        name=name,
        all_sessions=req.all_sessions,
        secret=new_secret(),
        created_at=now,
        updated_at=now,
    )
    records.put_endpoint(endpoint)
    return endpoint.to_api(with_secret=True)


def update(
    records: WebhookRecords, settings: Settings, endpoint_id: str, req: UpdateWebhookRequest, sent: set[str]
) -> dict[str, Any]:
    endpoint = get_endpoint(records, endpoint_id)
    _require_admin_for_all(req.all_sessions)
    changes: dict[str, Any] = _filter_changes(endpoint, req, sent)
    if req.url is not None:
        changes["url"] = check_url(req.url, settings)
    if "description" in sent:
        changes["description"] = req.description
    if req.all_sessions is not None:
        changes["all_sessions"] = req.all_sessions
    if req.enabled is True:
        changes.update(status="enabled", disabled_reason=None, failing_since=None)
    elif req.enabled is False:
        changes.update(status="disabled", disabled_reason="disabled by its owner")
    if changes:
        changes["updated_at"] = max(int(time.time()), endpoint.updated_at + 1)
        changed = endpoint.model_copy(update=changes)
        if not records.update_endpoint(changed, expected_updated_at=endpoint.updated_at):
            from skyloop.errors import ConflictError

            raise ConflictError("the endpoint changed meanwhile; read it and try again")
        endpoint = changed
    return endpoint.to_api()


def _filter_changes(endpoint: Endpoint, req: UpdateWebhookRequest, sent: set[str]) -> dict[str, Any]:
    """``format`` and ``events`` together: a filter names types of the format the endpoint will have, so
    changing the format of an endpoint that filters needs the new filter (nothing widens silently)."""
    from skyloop.webhooks.formats import check_types

    fmt = req.format or endpoint.format
    changes: dict[str, Any] = {}
    if req.format is not None:
        changes["format"] = req.format
    if "events" in sent:
        try:
            changes["events"] = check_types(req.events, fmt) or []
        except ValueError as exc:
            raise InvalidInputError(f"events: {exc}", param="events") from None
    elif fmt != endpoint.format and endpoint.events:
        raise InvalidInputError(
            f"events: the endpoint filters {endpoint.events}, types of '{endpoint.format}': send the "
            f"'{fmt}' types to subscribe to (or [] for all) with the new format",
            param="events",
        )
    return changes


def rotate(records: WebhookRecords, endpoint_id: str, req: RotateSecretRequest) -> dict[str, Any]:
    """A new secret; the old one keeps signing beside it for the grace period (both signatures)."""
    from skyloop.webhooks.delivery import new_secret

    endpoint = get_endpoint(records, endpoint_id)
    now = int(time.time())
    rotated = endpoint.model_copy(
        update={
            "secret": new_secret(),
            "previous_secret": endpoint.secret if req.grace_period_s else None,
            "previous_secret_expires_at": now + req.grace_period_s if req.grace_period_s else None,
            "updated_at": max(now, endpoint.updated_at + 1),
        }
    )
    if not records.update_endpoint(rotated, expected_updated_at=endpoint.updated_at):
        from skyloop.errors import ConflictError

        raise ConflictError("the endpoint changed meanwhile; try again")
    body = rotated.to_api(with_secret=True)
    body["previous_secret_expires_at"] = rotated.previous_secret_expires_at
    return body


def deliveries(
    records: WebhookRecords, endpoint_id: str, q: DeliveryListQuery
) -> tuple[list[Delivery], bool]:
    get_endpoint(records, endpoint_id)
    return records.list_deliveries(endpoint_id, limit=q.limit, after=q.after, status=q.status)


def redeliver(
    records: WebhookRecords, queue: DeliveryQueue, endpoint_id: str, event_id: str
) -> dict[str, Any]:
    """Attempt a dead (or delivered) delivery again from the schedule's start, with the same ``webhook-id``."""
    endpoint = get_endpoint(records, endpoint_id)
    found = records.get_delivery(endpoint.id, event_id) if event_id.startswith("evt_") else None
    if found is None:
        raise NotFoundError(f"Delivery not found: '{event_id}'")
    from skyloop.errors import ConflictError

    if endpoint.status != "enabled":
        raise ConflictError("the endpoint is disabled: PATCH it with enabled=true first")
    if found.status in ("pending", "retrying"):  # its message is queued already: one at a time
        raise ConflictError(f"delivery '{event_id}' is {found.status}: it will be attempted anyway")
    records.set_delivery_status(found, "pending")
    redelivery = 1 + sum(1 for a in found.attempts if a.attempt == 1)
    queue.enqueue(found.model_copy(update={"status": "pending"}), redelivery=redelivery)
    return {"id": found.id, "object": "webhook_delivery", "status": "pending", "queued": True}


def send_test(
    records: WebhookRecords,
    settings: Settings,
    endpoint_id: str,
    req: TestWebhookRequest,
    *,
    sample: Callable[[str, int], Any] | None = None,
) -> dict[str, Any]:
    """Post a signed test event once, now; it is listed with the deliveries.

    ``skyloop.webhook.test`` by default; ``sample(event_id, created_at)`` makes another (OpenAI's
    ``webhooks.test`` sends a sample event of the type asked for). In the endpoint's format, as its
    deliveries are (an ``anthropic`` endpoint's test is a ``session.created`` of no real session).
    """
    from skyloop.lifecycle_events import models as m
    from skyloop.lifecycle_events.derive import event_id as make_id
    from skyloop.webhooks import delivery, formats

    endpoint = get_endpoint(records, endpoint_id)
    now = time.time()
    eid = make_id(endpoint.id, 0, f"test:{new_id()}", now)
    event = (
        sample(eid, int(now))
        if sample is not None
        else m.WebhookTest(
            id=eid, type=req.event_type, created_at=int(now), data=m.TestData(webhook_endpoint_id=endpoint.id)
        )
    )
    payload = formats.render(event, endpoint.format, owner=endpoint.owner)
    if payload is None:  # every lifecycle type has a Claude one; a format without it posts nothing
        raise InvalidInputError(f"format '{endpoint.format}' has no event for '{event.type}'")
    found = Delivery(
        id=payload.id,
        endpoint_id=endpoint.id,
        event_type=payload.type,
        body=payload.body,
        created_at=int(now),
    )
    records.create_delivery(found, ttl_s=settings.webhook_delivery_ttl_s)
    tried = delivery.attempt(
        records, endpoint.model_copy(update={"status": "enabled"}), found, settings, rng=lambda: 0.5
    )
    if tried.status == "retrying":  # a test is tried once: no retries
        records.set_delivery_status(found, "dead")
    record = tried.attempt
    return {
        "object": "webhook_endpoint.test",
        "webhook_endpoint_id": endpoint.id,
        "event_type": found.event_type,
        "event_id": found.id,
        "success": tried.status == "succeeded",
        "status_code": record.response_code if record else None,
        "latency_ms": record.latency_ms if record else None,
        "error": record.error if record else None,
    }


class NotifyQueue:
    """The local stack's API side: redeliveries reach the stack's dispatcher through the notifier."""

    def enqueue(self, delivery: Delivery, *, redelivery: int = 0) -> None:  # noqa: ARG002 (the protocol's)
        from skyloop.store import notifier

        notifier.notify(f"{delivery.endpoint_id}:{delivery.id}", REDELIVER)


REDELIVER = "redeliver"


def queue_for(settings: Settings) -> DeliveryQueue:
    """Where the API enqueues redeliveries: the cloud's queue, the local dispatcher, or nowhere."""
    from skyloop.webhooks import queue

    if settings.webhook_queue_url:
        from skyloop import deps

        return queue.SqsQueue(deps.client("sqs"), settings.webhook_queue_url)
    if settings.webhook_local:
        return NotifyQueue()
    return queue.NoQueue()
