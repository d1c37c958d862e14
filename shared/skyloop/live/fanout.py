"""The ``push_fanout`` function: every new event from the table's stream, posted to its watchers.

The table's stream (``NEW_IMAGE``) feeds this function through an event
source mapping whose filter passes only inserted ``EVENT#`` rows; records of
any other kind that reach it anyway are skipped at the cost of a string test.
Per session in a batch it reads the subscribers once (strongly consistent),
then posts each event, in seq order, to all of them at once.

Failure is per record and never stops the rest: a connection API Gateway
says is gone is forgotten; any other failed post marks the record failed,
delivery goes on to everyone else, and the function reports the failed
records (``batchItemFailures``) so Lambda retries from the earliest one. A
retry posts again to connections that already got the event, which the
protocol allows (clients dedupe by id). Retries are bounded by the mapping
(attempts, record age, then the on-failure queue), so a broken connection
can never hold the shard; its client heals the gap by subscribing again
with its cursor, and the event log replays what it missed.

The lifecycle publisher (webhooks, EventBridge) will be a consumer of the
same stream with its own mapping: this module knows nothing of it.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skyloop.live import protocol
from skyloop.live.poster import ConnectionGone
from skyloop.store import keys

if TYPE_CHECKING:
    from skyloop.live.poster import Poster
    from skyloop.store import StoredEvent
    from skyloop.store.dynamodb.live import LiveRecords

log = logging.getLogger("skyloop.live")
POST_THREADS = 16  # concurrent posts of one event to its watchers
_pool: ThreadPoolExecutor | None = None


@dataclass
class FanoutReport:
    posted: int = 0
    skipped: int = 0  # records that are not new events
    gone: set[str] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)  # stream sequence numbers, in batch order

    def batch_item_failures(self) -> dict[str, Any]:
        return {"batchItemFailures": [{"itemIdentifier": s} for s in self.failed]}


def new_event(record: dict[str, Any]) -> tuple[str, str] | None:
    """``(session_id, stream sequence number)`` when the record inserts an event, else None."""
    change = record.get("dynamodb") or {}
    key = change.get("Keys") or {}
    pk = (key.get(keys.PK) or {}).get("S", "")
    sk = (key.get(keys.SK) or {}).get("S", "")
    if record.get("eventName") != "INSERT" or not sk.startswith(keys.EVENT_PREFIX):
        return None
    if not pk.startswith(keys.SESSION_PREFIX):
        return None
    return keys.session_id_of(pk), str(change.get("SequenceNumber", ""))


def fan_out(records: list[dict[str, Any]], live: LiveRecords, poster: Poster) -> FanoutReport:
    report = FanoutReport()
    failed: set[str] = set()
    by_session: dict[str, list[tuple[str, StoredEvent]]] = {}
    for record in records:
        found = new_event(record)
        if found is None:
            report.skipped += 1
            continue
        session_id, seqno = found
        try:
            event = live.event_from_image(record["dynamodb"]["NewImage"])
        except Exception:
            log.exception("unreadable event record %s", seqno)
            failed.add(seqno)
            continue
        by_session.setdefault(session_id, []).append((seqno, event))
    for session_id, events in by_session.items():
        _deliver(session_id, sorted(events, key=lambda e: e[1].seq), live, poster, report, failed)
    report.failed = [s for s in _order(records) if s in failed]
    return report


def _deliver(
    session_id: str,
    events: list[tuple[str, StoredEvent]],
    live: LiveRecords,
    poster: Poster,
    report: FanoutReport,
    failed: set[str],
) -> None:
    try:
        watchers = live.subscribers(session_id)
    except Exception:
        log.exception("reading the subscribers of session %s failed", session_id)
        failed.update(seqno for seqno, _ in events)
        return
    failing: set[str] = set()  # a connection that failed once is not tried again in this batch
    for seqno, event in events:
        if failing:
            failed.add(seqno)  # not tried on a failing connection: the retry will post it
        targets = [c for c in watchers if c not in report.gone and c not in failing]
        if not targets:
            continue
        data = protocol.event_message(session_id, event)
        for connection_id, outcome in _post_all(poster, targets, data):
            if outcome is None:
                report.posted += 1
            elif isinstance(outcome, ConnectionGone):
                report.gone.add(connection_id)
                _forget(live, session_id, connection_id)
            else:
                log.warning(
                    "posting event %s of session %s to %s failed: %r",
                    event.seq,
                    session_id,
                    connection_id,
                    outcome,
                )
                failing.add(connection_id)
                failed.add(seqno)


def _post_all(poster: Poster, targets: list[str], data: bytes) -> list[tuple[str, BaseException | None]]:
    """Post ``data`` to every target at once; each target's outcome (None when delivered)."""

    def post(connection_id: str) -> tuple[str, BaseException | None]:
        try:
            poster.post(connection_id, data)
        except Exception as exc:
            return connection_id, exc
        return connection_id, None

    if len(targets) == 1:
        return [post(targets[0])]
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=POST_THREADS, thread_name_prefix="skyloop-post")
    return list(_pool.map(post, targets))


def _forget(live: LiveRecords, session_id: str, connection_id: str) -> None:
    try:
        live.forget_subscriber(session_id, connection_id)
    except Exception:  # the rows expire anyway; delivery to the others matters more
        log.exception("forgetting gone connection %s failed", connection_id)


def _order(records: list[dict[str, Any]]) -> list[str]:
    return [str((r.get("dynamodb") or {}).get("SequenceNumber", "")) for r in records]


def handle(event: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB stream batch -> posts; the partial-batch answer the mapping expects."""
    from skyloop import deps
    from skyloop.live import poster

    settings = deps.get_settings()
    if not settings.live_endpoint:
        raise RuntimeError("SKYLOOP_LIVE_ENDPOINT is not set: the fan-out does not know where to post")
    report = fan_out(
        event.get("Records") or [], deps.live_records(), poster.for_endpoint(settings.live_endpoint)
    )
    if report.failed:
        log.warning("fan-out: %d record(s) failed and will be retried", len(report.failed))
    return report.batch_item_failures()
