"""Lifecycle events out: onto the EventBridge bus, and into one delivery per subscribed endpoint.

The same code runs in the cloud's ``lifecycle_events`` function (fed by the
table's stream: :func:`handle_stream`) and in the local stack's publisher
(fed by the log itself: :mod:`skyloop.webhooks.local`).

Routing: an event of a session goes to every enabled endpoint of the
session's owner that subscribes to its type, and to every endpoint an admin
opened to all sessions, in the endpoint's format (:mod:`skyloop.webhooks.formats`:
skyloop's event, or Claude's with an id derived from skyloop's). Each (event,
endpoint) pair is one delivery row,
created with a conditional put keyed by the event's id, then sent to the
queue, then marked sent; an event derived again (a stream batch retried)
finds the mark and sends nothing, one whose run died between the put and the
send sends it then (a send twice within five minutes is dropped by the FIFO
queue's deduplication). The queue (SQS FIFO in the
cloud, grouped by endpoint and session, so one session's events reach an
endpoint in order) then runs :func:`skyloop.webhooks.delivery.attempt`.
EventBridge gets every event (``source: skyloop``, ``detail-type`` = its
type, ``detail`` = the event); a retried batch may put one twice, so rules
that must act once dedupe on ``detail.id``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from skyloop.webhooks.formats import Payload, render
from skyloop.webhooks.models import Delivery

if TYPE_CHECKING:
    from skyloop.settings import Settings
    from skyloop.store import Store, StoredEvent
    from skyloop.webhooks.models import Endpoint
    from skyloop.webhooks.records import WebhookRecords

log = logging.getLogger("skyloop.webhooks")
SOURCE = "skyloop"
PUT_EVENTS_BATCH = 10  # EventBridge's limit per PutEvents call
DETAIL_MAX_BYTES = 250_000  # PutEvents takes 256 KB per entry; larger details lose call arguments
READ_AHEAD = 100  # events read past a window's end to finish a run of calls


class DeliveryQueue(Protocol):
    """Where a delivery's next attempt is scheduled (SQS in the cloud, a thread pool locally)."""

    def enqueue(self, delivery: Delivery, *, redelivery: int = 0) -> None: ...


@dataclass
class PublishReport:
    events: int = 0
    put_on_bus: int = 0
    enqueued: int = 0
    duplicates: int = 0
    types: list[str] = field(default_factory=list)


def publish(
    events: list[Any],
    session_id: str | None,
    owner: str,
    records: WebhookRecords,
    queue: DeliveryQueue,
    settings: Settings,
    *,
    bus: Any = None,
    report: PublishReport | None = None,
    endpoints: list[Endpoint] | None = None,
    budget_turn: str | None = None,
) -> PublishReport:
    """Put ``events`` (of one session, in order) on the bus and enqueue them for their endpoints.

    ``endpoints``: ``owner``'s routes when the caller already has them (the local publisher caches
    them); read from the table otherwise. Each endpoint gets the event in its format
    (:mod:`skyloop.webhooks.formats`); ``budget_turn``: the turn that spent the session's budget
    (:func:`skyloop.lifecycle_events.claude.budget_turn`), which Claude's format announces so.
    """
    report = report or PublishReport()
    if not events:
        return report
    report.events += len(events)
    report.types += [e.type for e in events]
    if bus is not None and settings.event_bus:
        report.put_on_bus += put_on_bus(bus, settings.event_bus, events)
    if endpoints is None:
        endpoints = records.routes(owner)
    for event in events:
        payloads: dict[str, Payload | None] = {}  # per format, rendered once for all its endpoints
        for endpoint in endpoints:
            if endpoint.format not in payloads:
                payloads[endpoint.format] = render(
                    event, endpoint.format, owner=owner, budget_turn=budget_turn
                )
            payload = payloads[endpoint.format]
            if payload is not None and endpoint.wants(payload.type):
                _deliver(payload, endpoint, session_id, records, queue, settings, report)
    return report


def _deliver(
    payload: Payload,
    endpoint: Endpoint,
    session_id: str | None,
    records: WebhookRecords,
    queue: DeliveryQueue,
    settings: Settings,
    report: PublishReport,
) -> None:
    """One delivery row (once per event and endpoint), its message, then its mark."""
    delivery = Delivery(
        id=payload.id,
        endpoint_id=endpoint.id,
        event_type=payload.type,
        session_id=session_id,
        body=payload.body,
        created_at=int(time.time()),
    )
    if not records.create_delivery(delivery, ttl_s=settings.webhook_delivery_ttl_s):
        existing = records.get_delivery(endpoint.id, payload.id)
        if existing is None or existing.queued:
            report.duplicates += 1
            return
        delivery = existing  # created by a run that died before sending: send it now
    queue.enqueue(delivery)  # the FIFO queue drops a second send within five minutes
    records.mark_queued(delivery)
    report.enqueued += 1


def put_on_bus(client: Any, bus_name: str, events: list[Any]) -> int:
    """PutEvents in batches; a failed entry raises (the caller's batch is retried: at least once)."""
    entries = [
        {"Source": SOURCE, "DetailType": e.type, "Detail": _detail(e), "EventBusName": bus_name}
        for e in events
    ]
    for start in range(0, len(entries), PUT_EVENTS_BATCH):
        chunk = entries[start : start + PUT_EVENTS_BATCH]
        answer = client.put_events(Entries=chunk)
        if answer.get("FailedEntryCount"):
            failed = [r for r in answer.get("Entries", []) if r.get("ErrorCode")]
            raise RuntimeError(f"EventBridge refused {len(failed)} event(s): {failed[:3]}")
    return len(entries)


def _detail(event: Any) -> str:
    detail = event.model_dump_json()
    if len(detail.encode()) <= DETAIL_MAX_BYTES:
        return str(detail)
    data = json.loads(detail)  # only call arguments grow without bound: send them on the webhook only
    action = data.get("data", {}).get("required_action") or {}
    for entry in (action.get("calls") or []) + (action.get("approvals") or []):
        entry["arguments"] = ""
    data["data"]["truncated"] = True
    return json.dumps(data, separators=(",", ":"))


def complete_window(
    store: Store, session_id: str, events: list[StoredEvent]
) -> tuple[Any, list[StoredEvent]]:
    """The event before a window that starts with a call, and the rest of a run the window cuts short.

    A run of calls is one append, so the events after its last one in the
    window are committed already: reading on finds the rest of the run.
    """
    from skyloop.lifecycle_events.derive import continues_run, is_action, window_needs

    need_before, need_after = window_needs(events)
    before = None
    if need_before and events[0].seq > 1:
        page, _, _ = store.read_event_page(session_id, events[0].seq - 2, limit=1)
        before = page[0] if page and page[0].seq == events[0].seq - 1 else None
    if need_after:
        page, _, _ = store.read_event_page(session_id, events[-1].seq, limit=READ_AHEAD)
        extra: list[StoredEvent] = []
        for event in page:
            if not (is_action(event) and continues_run(event, (extra or events)[-1])):
                break
            extra.append(event)
        events = events + extra
    return before, events


# --------------------------------------------------------------------------- the cloud
def handle_stream(event: dict[str, Any]) -> dict[str, Any]:
    """A table-stream batch (new ``EVENT#`` rows and session inserts) -> lifecycle events out."""
    from skyloop import deps
    from skyloop.webhooks import queue
    from skyloop.webhooks.records import webhook_records

    settings = deps.get_settings()
    store = deps.store()
    records = webhook_records()
    bus = deps.client("events") if settings.event_bus else None
    sqs = (
        queue.SqsQueue(deps.client("sqs"), settings.webhook_queue_url) if settings.webhook_queue_url else None
    )
    report, failed = publish_records(
        event.get("Records") or [], store, records, sqs or queue.NoQueue(), settings, bus=bus
    )
    log.info("lifecycle batch", extra={"events": report.events, "enqueued": report.enqueued})
    return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}


def publish_records(
    records_in: list[dict[str, Any]],
    store: Store,
    records: WebhookRecords,
    queue: DeliveryQueue,
    settings: Settings,
    *,
    bus: Any = None,
) -> tuple[PublishReport, list[str]]:
    """Derive and publish a stream batch; the stream sequence numbers to retry from (the first failed)."""
    from skyloop.lifecycle_events import SessionFacts, derive, session_created
    from skyloop.lifecycle_events.claude import budget_turn
    from skyloop.store import codec, keys
    from skyloop.store.dynamodb.sessions import session_from

    report = PublishReport()
    windows: dict[str, list[tuple[str, float, StoredEvent]]] = {}
    order: list[tuple[str, str]] = []  # (stream seqno, session id): what to retry from, in batch order
    for record in records_in:
        change = record.get("dynamodb") or {}
        key = codec.from_item(change.get("Keys") or {})
        pk, sk = str(key.get(keys.PK, "")), str(key.get(keys.SK, ""))
        seqno = str(change.get("SequenceNumber", ""))
        at = float(change.get("ApproximateCreationDateTime") or time.time())
        if record.get("eventName") != "INSERT" or not pk.startswith(keys.SESSION_PREFIX):
            continue
        session_id = keys.session_id_of(pk)
        order.append((seqno, session_id))
        if sk == keys.META:
            session = session_from(codec.from_item(change.get("NewImage") or {}))
            created = session_created(session, created_at=session.created_at, at=at)
            try:
                publish(
                    [created], session.id, session.owner, records, queue, settings, bus=bus, report=report
                )
            except Exception:
                log.exception("publishing the creation of session %s failed", session_id)
                return report, _retry_from(order, {session_id}, records_in)
        elif sk.startswith(keys.EVENT_PREFIX):
            stored = records.event_from_image(change.get("NewImage") or {})
            windows.setdefault(session_id, []).append((seqno, at, stored))
    failing: set[str] = set()
    for session_id, rows in windows.items():
        rows.sort(key=lambda r: r[2].seq)
        try:
            session = store.get_session(session_id)
        except Exception as exc:
            from skyloop.errors import NotFoundError

            if isinstance(exc, NotFoundError):
                continue  # deleted since: nobody to route its events to
            log.exception("reading session %s failed", session_id)
            failing.add(session_id)
            continue
        try:
            before, events = complete_window(store, session_id, [r[2] for r in rows])
            times = {r[2].seq: r[1] for r in rows}
            derived = derive(SessionFacts.of(session), events, at=times, before=before)
            publish(
                derived, session_id, session.owner, records, queue, settings,
                bus=bus, report=report, budget_turn=budget_turn(session),
            )  # fmt: skip
        except Exception:
            log.exception("publishing the events of session %s failed", session_id)
            failing.add(session_id)
    return report, _retry_from(order, failing, records_in) if failing else []


def _retry_from(
    order: list[tuple[str, str]], failing: set[str], records_in: list[dict[str, Any]]
) -> list[str]:
    """Lambda retries a stream batch from the first failed record: name the earliest one."""
    for seqno, session_id in order:
        if session_id in failing:
            return [seqno]
    return [str((records_in[0].get("dynamodb") or {}).get("SequenceNumber", ""))] if records_in else []
