"""Live session streams that survive drops: resume with ``Last-Event-ID``, never yield an event twice.

:class:`StreamCursor` holds the I/O-free part (cursor, dedupe, the retry
policy's backoff) and :class:`StreamState` the bookkeeping of a stream;
:class:`~skyloop.client.AsyncEventStream` (``_async/_stream.py``, and its
generated sync twin :class:`~skyloop.client.EventStream`) only reads chunks
and connects through its transport. It is a resumable iterator: if a read is
abandoned mid-way (Ctrl-C, task cancellation), the next call reconnects from
the last delivered id instead of trusting a half-read connection.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from skyloop.client._errors import StreamDisconnectedError
from skyloop.client._models import parse_event
from skyloop.client._sse import ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    import httpx

    from skyloop.client._errors import APIError
    from skyloop.client._retry import ReconnectPolicy

__all__ = ["StreamCursor", "StreamState"]


class StreamCursor:
    """Where a stream is, and whether another reconnect attempt is allowed.

    Stored events carry strictly increasing integer ids (the session's seq),
    so dedupe is one comparison: anything at or below the last delivered id
    was already yielded (a replay overlapping what we saw before a drop).
    """

    def __init__(self, policy: ReconnectPolicy, after: int | None) -> None:
        self.policy = policy
        self.backoff = policy.backoff()
        self.last_event_id: int | None = after
        self.reconnects = 0
        self.connections = 0
        self.decoder = SSEDecoder()
        self.got_frame = False
        self.delay = 0.0

    @property
    def failures(self) -> int:
        """Consecutive failed connection attempts so far."""
        return self.backoff.failures

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = str(self.last_event_id)
        return headers

    def take_delay(self) -> float:
        """Seconds to wait before the next connection attempt (then zero until the next failure)."""
        delay, self.delay = self.delay, 0.0
        return delay

    def connected(self) -> None:
        if self.connections:
            self.reconnects += 1
        self.connections += 1
        self.decoder = SSEDecoder()
        self.got_frame = False

    def accept(self, sse: ServerSentEvent) -> Any | None:
        """The typed event for ``sse``, or ``None`` if it repeats one already delivered."""
        if not self.got_frame:
            self.got_frame = True
            self.backoff.reset()  # a working connection resets the budget
        seq = int(sse.id) if sse.id is not None and sse.id.isdigit() else None
        if seq is not None:
            if self.last_event_id is not None and seq <= self.last_event_id:
                return None
            self.last_event_id = seq
        try:
            payload: Any = sse.json()
        except ValueError:
            payload = {"type": sse.event, "data": sse.data}
        return parse_event(payload, event_id=seq, event=sse.event)

    def ended(self, error: BaseException | None) -> None:
        """Count a finished connection; raise once the budget of consecutive failures is spent.

        A clean end right after the server's ``retry:`` hint is its planned
        close: reconnect at once without counting a failure.
        """
        if error is None and self.got_frame and self.decoder.closing_hint:
            self.delay = 0.0
            return
        delay = self.backoff.failed()
        if delay is None:
            reason = f": {error}" if error else ""
            raise StreamDisconnectedError(
                f"stream lost and {self.policy.max_failures} reconnect attempts failed{reason}"
            ) from error
        self.delay = delay

    def refused(self, error: APIError) -> None:
        """An error answer to a (re)connect: retried within the budget if the policy says so, else raised."""
        if not self.policy.retryable(error):
            raise error
        self.ended(error)


class StreamState:
    """A stream's bookkeeping, apart from its I/O: cursor, queue, flags."""

    def __init__(self, session_id: str, *, after: int | None, policy: ReconnectPolicy) -> None:
        self.session_id = session_id
        self._cursor = StreamCursor(policy, after)
        self._resolved = after is not None
        self._response: httpx.Response | None = None
        self._queue: deque[Any] = deque()
        self._busy = False  # a read is under way; still set on the next call, it was abandoned
        self._closed = False

    @property
    def last_event_id(self) -> int | None:
        """The cursor to resume from later (``client.stream(id, after=...)``)."""
        return self._cursor.last_event_id

    @property
    def reconnects(self) -> int:
        """How many times the stream resumed transparently."""
        return self._cursor.reconnects

    def _absorb(self, chunk: bytes) -> None:
        for sse in self._cursor.decoder.feed(chunk):
            event = self._cursor.accept(sse)
            if event is not None:
                self._queue.append(event)

    def _take_response(self) -> httpx.Response | None:
        """Forget the current connection and hand it over for release."""
        self._busy = False
        response, self._response = self._response, None
        return response
