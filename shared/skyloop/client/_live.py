"""Watching a session over the live channel (a WebSocket): gapless, exactly once, reconnecting.

The server pushes each event at least once and may push them out of order
(a replayed and a live copy, posts from different invocations), but a
session's ids are contiguous. So :class:`LiveCursor` (no I/O) delivers an
event only when every lower id was delivered: it drops ids at or below its
cursor, holds later ones until the gap fills, and when a gap lasts
:data:`GAP_WAIT_S` it subscribes again from its cursor, which replays the
missing events from the log. It also keeps the connection alive (a ``ping``
every :data:`PING_INTERVAL_S`: API Gateway closes a connection idle for ten
minutes) and notices a dead one (no ``pong`` in :data:`PONG_TIMEOUT_S`).

:class:`~skyloop.client.AsyncLiveEventStream` (``_async/_live.py``, and its
generated sync twin :class:`~skyloop.client.LiveEventStream`) only moves frames:
connect (``websockets``), authenticate with a frame (the token never goes in
the URL), subscribe after the cursor, read, and reconnect with the cursor
when API Gateway ends the connection (it does after two hours) or the
network drops, under the client's :class:`~skyloop.client.ReconnectPolicy`.
The first item it yields is a ``session.heartbeat``, once the server
confirmed the subscription: from then on nothing the session appends can be
missed, exactly as with the SSE stream's first frame. An event too large for
a WebSocket message is fetched over the SSE stream.
"""

from __future__ import annotations

import json
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from skyloop.client._errors import StreamDisconnectedError, error_from_code
from skyloop.client._models import parse_event

if TYPE_CHECKING:
    from skyloop.client._retry import ReconnectPolicy

__all__ = ["LiveCursor", "close_code"]

PING_INTERVAL_S = 240.0  # well under API Gateway's 10-minute idle timeout
PONG_TIMEOUT_S = 30.0
GAP_WAIT_S = 1.0
OPEN_TIMEOUT_S = 10.0
MAX_MESSAGE_BYTES = 1 << 20  # the server sends at most 128 KB per message
PLANNED_CLOSE_CODES = frozenset({1000, 1001, 1012})  # normal, going away (the 2-hour limit), restart


class _Dead(Exception):
    """The connection stopped answering pings."""


class LiveCursor:
    """The I/O-free half of a live watch: frames to send, frames received, order, dedupe, timers."""

    def __init__(
        self,
        session_id: str,
        after: int,
        *,
        token: str | None,
        policy: ReconnectPolicy,
        clock: Any = time.monotonic,
    ) -> None:
        self.session_id = session_id
        self.token = token
        self.policy = policy
        self.backoff = policy.backoff()
        self.clock = clock
        self.last_event_id = after  # every event up to here was delivered, each once
        self.pending: dict[int, Any] = {}  # later events, held until the gap below them fills
        self.gap_since: float | None = None
        self.queue: deque[Any] = deque()
        self.too_large: list[int] = []  # ids to fetch over SSE
        self.confirmed = False  # the first "subscribed" arrived: events may flow to the caller
        self.connections = 0
        self.reconnects = 0
        self.last_sent = 0.0
        self.ping_sent: float | None = None
        self.planned = False

    # --------------------------------------------------------------- connection
    def opened(self) -> list[str]:
        """Frames to send on a new connection: authenticate first when there is a token."""
        if self.connections:
            self.reconnects += 1
        self.connections += 1
        self.ping_sent = None
        self.planned = False
        if self.token:
            return [json.dumps({"action": "auth", "token": self.token})]
        return [self.subscribe_frame()]

    def subscribe_frame(self) -> str:
        self.gap_since = self.clock() if self.pending else None
        return json.dumps({"action": "subscribe", "session_id": self.session_id, "after": self.last_event_id})

    def closed(self, error: BaseException | None, code: int | None = None) -> float:
        """Seconds to wait before reconnecting; raises once the policy's budget of failures is spent.

        API Gateway's planned closes (the two-hour limit) reconnect at once.
        """
        if code in PLANNED_CLOSE_CODES and self.confirmed:
            return 0.0
        delay = self.backoff.failed()
        if delay is None:
            reason = f": {error}" if error else ""
            raise StreamDisconnectedError(
                f"live connection lost and {self.policy.max_failures} reconnect attempts failed{reason}"
            ) from error
        return delay

    def sent(self) -> None:
        self.last_sent = self.clock()

    # ------------------------------------------------------------------ frames
    def received(self, text: str | bytes) -> list[str]:
        """Take one server frame; the frames to answer with."""
        try:
            frame = json.loads(text)
        except ValueError:
            return []
        kind = frame.get("type") if isinstance(frame, dict) else None
        if kind == "pong":
            self.ping_sent = None
            return []
        if kind == "authenticated":
            return [self.subscribe_frame()]
        if kind == "error":
            if frame.get("session_id") in (None, self.session_id):
                raise error_from_code(str(frame.get("code")), str(frame.get("message")), frame)
            return []
        if frame.get("session_id") != self.session_id:
            return []
        return self._session_frame(kind, frame)

    def _session_frame(self, kind: Any, frame: dict[str, Any]) -> list[str]:
        if kind == "event" and isinstance(frame.get("id"), int):
            payload = frame.get("event")
            event_type = payload.get("type") if isinstance(payload, dict) else None
            self.offer(frame["id"], parse_event(payload, event_id=frame["id"], event=event_type))
        elif kind == "event_too_large" and isinstance(frame.get("id"), int):
            if frame["id"] > self.last_event_id and frame["id"] not in self.too_large:
                self.too_large.append(frame["id"])
        elif kind == "subscribed":
            self.backoff.reset()  # a working subscription resets the failure budget
            if not self.confirmed:
                self.confirmed = True
                self.queue.appendleft(parse_event({"type": "session.heartbeat", "sequence_number": None}))
            if frame.get("complete") is False:  # the replay stopped early: ask for the rest
                return [self.subscribe_frame()]
        return []

    def offer(self, seq: int, event: Any) -> None:
        """Deliver ``event`` once, in order: drop a repeat, hold it while a lower id is missing."""
        if seq <= self.last_event_id or seq in self.pending:
            return
        self.pending[seq] = event
        while self.last_event_id + 1 in self.pending:
            self.last_event_id += 1
            self.queue.append(self.pending.pop(self.last_event_id))
        if not self.pending:
            self.gap_since = None
        elif self.gap_since is None:
            self.gap_since = self.clock()

    def ready(self) -> bool:
        return self.confirmed and bool(self.queue)

    # ------------------------------------------------------------------ timers
    def due(self) -> list[str]:
        """What the clock asks for now: a re-subscribe over a lasting gap, a keepalive ping."""
        now = self.clock()
        if self.ping_sent is not None and now - self.ping_sent > PONG_TIMEOUT_S:
            raise _Dead(f"no pong in {PONG_TIMEOUT_S:.0f} s")
        out = []
        if self.confirmed and self.gap_since is not None and now - self.gap_since >= GAP_WAIT_S:
            out.append(self.subscribe_frame())
        if now - self.last_sent >= PING_INTERVAL_S:
            self.ping_sent = now
            out.append(json.dumps({"action": "ping"}))
        return out

    def wait_s(self) -> float:
        """How long a read may block before :meth:`due` has something to do."""
        now = self.clock()
        waits = [PING_INTERVAL_S - (now - self.last_sent)]
        if self.gap_since is not None:
            waits.append(GAP_WAIT_S - (now - self.gap_since))
        if self.ping_sent is not None:
            waits.append(PONG_TIMEOUT_S - (now - self.ping_sent))
        return max(0.05, min(waits))


def close_code(exc: BaseException) -> int | None:
    """The close code the server sent with a lost connection, if it sent one."""
    received = getattr(exc, "rcvd", None)
    return getattr(received, "code", None)
