"""Lifecycle events in ``skyloop dev``: the same derivation and delivery as the cloud, fed by the log.

The local table has no stream (moto's DynamoDB runs in a process of its own,
and a stream there would be read by nobody), but every append in the stack
(in its process or forwarded from a Lambda worker) is notified here
(:mod:`skyloop.store.notifier`), and so is every new session. The publisher
keeps a cursor per session; each wake-up marks the session dirty, and one
thread reads each dirty session's log after its cursor (the same gapless
Query the stream uses), derives lifecycle events with
:func:`skyloop.lifecycle_events.derive` and publishes them with
:func:`skyloop.webhooks.publisher.publish` (moto's EventBridge, and the
deliveries). Nothing runs in a turn's path: an append only sets a flag.

Deliveries run in a thread pool. As the cloud's FIFO message groups do, one
(endpoint, session) group is attempted in order, one delivery at a time: a
delivery waiting for its retry holds the group's later events back, and
other groups go on. The retry schedule is the local stack's short one
(``SKYLOOP_WEBHOOK_RETRY_SCHEDULE``, third attempt within 30 s by default).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from skyloop import function_identity
from skyloop.store import notifier

if TYPE_CHECKING:
    from skyloop.settings import Settings
    from skyloop.store import Store, StoredEvent
    from skyloop.webhooks.models import Delivery, Endpoint
    from skyloop.webhooks.records import WebhookRecords

log = logging.getLogger("skyloop.webhooks")
PAGE = 500
WORKERS = 16
ROUTES_CACHED = 1024  # owners whose routes are kept; past that the cache starts over
OWNERS_KNOWN = 100_000  # sessions whose owner is kept; past that the map starts over
UNHEARD_DELAY_S = 0.25  # how long a session whose owner nobody listens to waits to be read


class LocalDispatcher:
    """Attempts deliveries in a thread pool, one at a time per (endpoint, session), retrying on schedule."""

    def __init__(self, records: WebhookRecords, settings: Settings, *, workers: int = WORKERS) -> None:
        self.records = records
        self.settings = settings
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="skyloop-webhook")
        self._lock = threading.Lock()
        self._groups: dict[str, deque[tuple[str, str]]] = {}  # group -> (endpoint id, event id), head busy
        self._closed = False

    def enqueue(self, delivery: Delivery, *, redelivery: int = 0) -> None:  # noqa: ARG002 (the protocol's)
        job = (delivery.endpoint_id, delivery.id)
        with self._lock:
            waiting = self._groups.get(delivery.group)
            if waiting is not None:  # the group is busy: run after what is ahead of it
                waiting.append(job)
                return
            self._groups[delivery.group] = deque()
        self._submit(delivery.group, job, 0.0)

    def _submit(self, group: str, job: tuple[str, str], delay_s: float) -> None:
        if self._closed:
            return
        if delay_s <= 0:
            self._pool.submit(self._run, group, job)
            return
        timer = threading.Timer(delay_s, lambda: self._submit(group, job, 0.0))
        timer.daemon = True
        timer.start()

    def _run(self, group: str, job: tuple[str, str]) -> None:
        with function_identity.acting_as("webhook_delivery"):  # the cloud's delivery function, and its role
            self._attempt(group, job)

    def _attempt(self, group: str, job: tuple[str, str]) -> None:
        from skyloop.webhooks import delivery as attempts

        endpoint_id, event_id = job
        delay: float | None = None
        try:
            found = self.records.get_delivery(endpoint_id, event_id)
            if found is not None:
                endpoint = self.records.get_endpoint(endpoint_id)
                outcome = attempts.attempt(self.records, endpoint, found, self.settings)
                if outcome.status == "retrying":
                    delay = outcome.delay_s
        except Exception:  # the store failed: try again on the schedule's first delay
            log.exception("webhook delivery %s to %s failed to run", event_id, endpoint_id)
            delay = self.settings.retry_schedule[0] if self.settings.retry_schedule else 1.0
        if delay is not None:
            self._submit(group, job, delay)  # the group waits for its head
            return
        with self._lock:
            waiting = self._groups.get(group)
            if not waiting:
                self._groups.pop(group, None)
                return
            nxt = waiting.popleft()
        self._submit(group, nxt, 0.0)

    def resume(self) -> int:
        """Enqueue every delivery a previous run left pending or retrying (its timers died with it).

        Oldest first, so each (endpoint, session) group keeps its order; each is attempted now
        rather than at its old ``next_retry_at``. Returns how many were resumed.
        """
        unfinished = self.records.unfinished_deliveries()
        for delivery in unfinished:
            self.enqueue(delivery)
        return len(unfinished)

    def close(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)


class LocalPublisher:
    """Follows every session's log in this process and publishes its lifecycle events."""

    def __init__(
        self, store: Store, records: WebhookRecords, queue: Any, settings: Settings, *, bus: Any = None
    ) -> None:
        self.store = store
        self.records = records
        self.queue = queue
        self.settings = settings
        self.bus = bus
        self._cond = threading.Condition()
        self._dirty: dict[str, bool] = {}  # session id -> also created
        self._redeliveries: list[tuple[str, str]] = []  # (endpoint id, event id) the API asked for
        self._cursors: dict[str, int] = {}
        self._last: dict[str, StoredEvent] = {}  # each session's last event read (a run's predecessor)
        # Each owner's routes, as read at a generation of the endpoints (bumped by every endpoint
        # write's notification): two queries per publish were a quarter of a turn's DynamoDB requests.
        self._routes: dict[str, tuple[int, list[Endpoint]]] = {}
        self._routes_generation = 0
        # Sessions whose owner nobody listens to (no endpoint, no rule on the bus): read later, together.
        self._owners: dict[str, str] = {}  # session id -> owner (a session's owner never changes)
        self._deferred: dict[str, tuple[float, bool]] = {}  # session id -> (when to read, also created)
        self._thread = threading.Thread(target=self._loop, name="skyloop-lifecycle", daemon=True)
        self._stopped = False

    def start(self) -> LocalPublisher:
        notifier.add_listener(self.wake)
        self._thread.start()
        return self

    def stop(self) -> None:
        notifier.remove_listener(self.wake)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def wake(self, session_id: str, kind: str) -> None:
        """A notifier listener: mark the session (never blocks an append)."""
        from skyloop.webhooks.records import ROUTES_CHANGED
        from skyloop.webhooks.service import REDELIVER

        with self._cond:
            if kind == ROUTES_CHANGED:
                self._routes_generation += 1
                self._routes.clear()
                self._deferred = {sid: (0.0, created) for sid, (_, created) in self._deferred.items()}
                self._cond.notify()
                return
            if kind == REDELIVER:
                endpoint_id, _, event_id = session_id.partition(":")
                self._redeliveries.append((endpoint_id, event_id))
            elif kind in (notifier.APPEND, notifier.CREATED):
                self._dirty[session_id] = self._dirty.get(session_id, False) or kind == notifier.CREATED
            else:  # another listener's cue (an output recorded): nothing to publish, no wake-up
                return
            self._cond.notify()

    def _loop(self) -> None:
        with function_identity.acting_as("lifecycle_events"):  # the cloud's publisher function, and its role
            self._follow()

    def _follow(self) -> None:
        while True:
            with self._cond:
                while not self._dirty and not self._redeliveries and not self._stopped:
                    due = min((at for at, _ in self._deferred.values()), default=None)
                    if due is not None and due <= time.monotonic():
                        break
                    self._cond.wait(None if due is None else due - time.monotonic())
                if self._stopped:
                    return
                batch = self._take_due()
                redeliveries, self._redeliveries = self._redeliveries, []
            for endpoint_id, event_id in redeliveries:
                try:
                    found = self.records.get_delivery(endpoint_id, event_id)
                    if found is not None:
                        self.queue.enqueue(found)
                except Exception:
                    log.exception("redelivering %s to %s failed", event_id, endpoint_id)
            for session_id, created in batch.items():
                try:
                    self.process(session_id, created=created)
                except Exception:  # try again at the next wake-up; the cursor did not move
                    log.exception("publishing lifecycle events of session %s failed", session_id)

    def _take_due(self) -> dict[str, bool]:
        """Under the lock: the sessions to read now. A session whose owner nobody listens to waits
        ``UNHEARD_DELAY_S`` (its reads publish nothing, they only move its cursor), so the appends of a
        whole turn cost one read instead of one each, while the turn still runs. Nothing is skipped:
        the read covers everything after the cursor, as it would have."""
        now = time.monotonic()
        batch = {sid: created for sid, (at, created) in self._deferred.items() if at <= now}
        for sid in batch:
            del self._deferred[sid]
        for sid, created in self._dirty.items():
            owner = self._owners.get(sid)
            if sid in batch:  # due now: this read covers the new appends too
                batch[sid] = batch[sid] or created
            elif sid in self._deferred or (owner is not None and not self._listened_to(owner)):
                at, was_created = self._deferred.get(sid, (now + UNHEARD_DELAY_S, False))
                self._deferred[sid] = (at, was_created or created)
            else:
                batch[sid] = created
        self._dirty = {}
        return batch

    def _listened_to(self, owner: str) -> bool:
        """Whether an event of ``owner``'s may go anywhere: one of its endpoints, or a rule on the bus."""
        cached = self._routes.get(owner)
        if cached is None or cached[0] != self._routes_generation or cached[1]:
            return True  # routes not known (or some): read now, as before
        return self.bus is not None and bool(self.settings.event_bus) and self._bus_has_rules()

    def _bus_has_rules(self) -> bool:
        has_rules = getattr(self.bus, "has_rules", None)
        return True if has_rules is None else bool(has_rules())

    def process(self, session_id: str, *, created: bool = False) -> None:
        """Publish the session's creation (if told) and every lifecycle event after its cursor."""
        from skyloop.errors import NotFoundError
        from skyloop.lifecycle_events import SessionFacts, derive, session_created
        from skyloop.lifecycle_events.claude import budget_turn
        from skyloop.webhooks.publisher import complete_window, publish

        try:
            session = self.store.get_session(session_id)
        except NotFoundError:  # deleted: forget it
            self._cursors.pop(session_id, None)
            self._last.pop(session_id, None)
            return
        if len(self._owners) >= OWNERS_KNOWN:
            self._owners.clear()
        self._owners[session_id] = session.owner
        if created:
            event = session_created(session, created_at=session.created_at, at=time.time())
            publish(
                [event], session.id, session.owner, self.records, self.queue, self.settings,
                bus=self.bus, endpoints=self.routes(session.owner),
            )  # fmt: skip
        cursor = self._cursors.get(session_id, 0)
        events: list[StoredEvent] = []
        more = True
        while more:
            page, covered, more = self.store.read_event_page(session_id, cursor, limit=PAGE)
            events += page
            cursor = covered
        if not events:
            self._cursors[session_id] = cursor
            return
        if session.last_seq < events[-1].seq:  # it moved on while its events were read: what they derive
            try:  # from the session (a turn's spend, hence Claude's budget_reached) is as of the last one
                session = self.store.get_session(session_id)
            except NotFoundError:
                return
        before = self._last.get(session_id)
        if before is None or before.seq != events[0].seq - 1:
            before, events = complete_window(self.store, session_id, events)
        facts = SessionFacts.of(session)
        derived = derive(facts, events, at=time.time(), before=before)
        if derived:
            publish(
                derived, session.id, session.owner, self.records, self.queue, self.settings,
                bus=self.bus, endpoints=self.routes(session.owner), budget_turn=budget_turn(session),
            )  # fmt: skip
        self._cursors[session_id] = max(cursor, events[-1].seq)
        self._last[session_id] = events[-1]

    def routes(self, owner: str) -> list[Endpoint]:
        """``owner``'s routes, from the cache while no endpoint was written since they were read."""
        with self._cond:
            generation = self._routes_generation
            cached = self._routes.get(owner)
        if cached is not None and cached[0] == generation:
            return cached[1]
        found = self.records.routes(owner)
        with self._cond:
            if self._routes_generation == generation:  # a write meanwhile: the next call reads again
                if len(self._routes) >= ROUTES_CACHED:
                    self._routes.clear()
                self._routes[owner] = (generation, found)
        return found


class RuledBus:
    """moto's EventBridge, sent to only while the bus has a rule (a user's, a tail's, an archive's).

    PutEvents on a bus with no rule delivers nowhere and keeps nothing (moto's archives are rules
    too), yet building, serving and parsing it was a sixth of the stack process's CPU in a
    client-tool turn. Asked in this process, where moto's EventBridge lives.
    """

    def __init__(self, client: Any, bus_name: str) -> None:
        self.client = client
        self.bus_name = bus_name

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.has_rules():
            return {"FailedEntryCount": 0, "Entries": [{"EventId": str(uuid.uuid4())} for _ in Entries]}
        answer: dict[str, Any] = self.client.put_events(Entries=Entries)
        return answer

    def has_rules(self) -> bool:
        """True unless this process's moto holds the bus and it has no rule (anything else: ask moto)."""
        try:
            from moto.core import DEFAULT_ACCOUNT_ID
            from moto.events.models import events_backends

            account = os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)
            bus = events_backends[account][self.client.meta.region_name].event_buses.get(self.bus_name)
        except Exception:  # not moto's, or laid out otherwise: send, as the cloud does
            return True
        return bus is None or bool(bus.rules)


def start(
    store: Store, settings: Settings, *, resume: bool = False
) -> tuple[LocalPublisher, LocalDispatcher]:
    """The local stack's publisher and dispatcher, started (``skyloop dev`` calls this once).

    ``resume``: the table outlived a previous run (a data directory), so its unfinished
    deliveries are enqueued again.
    """
    from skyloop import deps
    from skyloop.webhooks.records import webhook_records

    records = webhook_records()
    dispatcher = LocalDispatcher(records, settings)
    bus = None
    if settings.event_bus:
        with contextlib.suppress(Exception):
            bus = RuledBus(deps.client("events"), settings.event_bus)
    publisher = LocalPublisher(store, records, dispatcher, settings, bus=bus).start()
    if resume:
        try:
            resumed = dispatcher.resume()
        except Exception:  # the stack still starts; what is unfinished stays listed in the deliveries
            log.exception("resuming unfinished webhook deliveries failed")
        else:
            if resumed:
                log.info("resumed %d unfinished webhook deliveries", resumed)
    return publisher, dispatcher
