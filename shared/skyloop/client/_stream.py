"""Live session streams that survive drops: resume with ``Last-Event-ID``, never yield an event twice.

:class:`StreamCursor` holds the I/O-free part (cursor, dedupe, the retry
policy's backoff) and :class:`_StreamState` the bookkeeping both iterators
share; the sync :class:`EventStream` and the async :class:`AsyncEventStream`
only read chunks and connect through their transport. Both are resumable
iterators: if a read is abandoned mid-way (Ctrl-C, task cancellation), the
next call reconnects from the last delivered id instead of trusting a
half-read connection.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import httpx

from skyloop.client._errors import APIError, StreamDisconnectedError
from skyloop.client._models import parse_event
from skyloop.client._requests import get_session, stream_path
from skyloop.client._retry import apause, pause
from skyloop.client._sse import ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from types import TracebackType

    from skyloop.client._retry import ReconnectPolicy
    from skyloop.client._transport import AsyncTransport, SyncTransport

__all__ = ["AsyncEventStream", "EventStream", "StreamCursor"]


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


class _StreamState:
    """What :class:`EventStream` and :class:`AsyncEventStream` share: cursor, queue, flags (no I/O)."""

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


class EventStream(_StreamState):
    """Typed events of one session, across as many connections as it takes.

    Iterate it (it never ends by itself; the server keeps streams open) and
    close it, or use it as a context manager. ``last_event_id`` is the cursor
    to resume from later; ``reconnects`` counts transparent resumptions.
    Made by :meth:`Client.stream`.
    """

    def __init__(
        self, transport: SyncTransport, session_id: str, *, after: int | None, policy: ReconnectPolicy
    ) -> None:
        super().__init__(session_id, after=after, policy=policy)
        self._transport = transport
        self._chunks: Iterator[bytes] | None = None

    def __enter__(self) -> EventStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Any:
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._closed:
                raise StopIteration
            if self._busy:
                self._drop()  # the last read was abandoned mid-way: do not trust that connection
            if self._chunks is None:
                self._connect()
                continue
            self._busy = True
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self._finish(None)
                continue
            except httpx.TransportError as exc:
                self._finish(exc)
                continue
            self._busy = False
            self._absorb(chunk)

    def next_event(self) -> Any:
        """The next event (blocks until one arrives)."""
        return next(self)

    def close(self) -> None:
        """Stop the stream and give its connection back; iteration then ends."""
        self._closed = True
        self._drop()

    def _drop(self) -> None:
        self._chunks = None
        response = self._take_response()
        if response is not None:
            self._transport.release(response)

    def _finish(self, error: BaseException | None) -> None:
        self._drop()
        self._cursor.ended(error)

    def _connect(self) -> None:
        cursor = self._cursor
        if not self._resolved:
            # "From now" means from the snapshot's cursor, so even a drop before the first
            # stored event resumes without a gap.
            cursor.last_event_id = self._transport.send(get_session(self.session_id)).last_event_id
            self._resolved = True
        while self._chunks is None and not self._closed:
            pause(cursor.policy, cursor.take_delay())
            try:
                response = self._transport.open_stream(
                    stream_path(self.session_id),
                    headers=cursor.headers(),
                    read_timeout=cursor.policy.read_timeout,
                )
            except httpx.TransportError as exc:
                cursor.ended(exc)
                continue
            except APIError as exc:
                cursor.refused(exc)
                continue
            cursor.connected()
            self._response = response
            self._chunks = response.iter_bytes()


class AsyncEventStream(_StreamState):
    """The async twin of :class:`EventStream`: ``async for`` / ``async with``; made by :meth:`AsyncClient.stream`."""

    def __init__(
        self, transport: AsyncTransport, session_id: str, *, after: int | None, policy: ReconnectPolicy
    ) -> None:
        super().__init__(session_id, after=after, policy=policy)
        self._transport = transport
        self._chunks: AsyncIterator[bytes] | None = None

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Any:
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._closed:
                raise StopAsyncIteration
            if self._busy:
                await self._drop()
            if self._chunks is None:
                await self._connect()
                continue
            self._busy = True
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                await self._finish(None)
                continue
            except httpx.TransportError as exc:
                await self._finish(exc)
                continue
            self._busy = False
            self._absorb(chunk)

    async def next_event(self) -> Any:
        """The next event (waits until one arrives)."""
        return await self.__anext__()

    async def aclose(self) -> None:
        """Stop the stream and give its connection back; iteration then ends."""
        self._closed = True
        await self._drop()

    async def _drop(self) -> None:
        self._chunks = None
        response = self._take_response()
        if response is not None:
            await self._transport.release(response)

    async def _finish(self, error: BaseException | None) -> None:
        await self._drop()
        self._cursor.ended(error)

    async def _connect(self) -> None:
        cursor = self._cursor
        if not self._resolved:
            snapshot = await self._transport.send(get_session(self.session_id))
            cursor.last_event_id = snapshot.last_event_id
            self._resolved = True
        while self._chunks is None and not self._closed:
            await apause(cursor.policy, cursor.take_delay())
            try:
                response = await self._transport.open_stream(
                    stream_path(self.session_id),
                    headers=cursor.headers(),
                    read_timeout=cursor.policy.read_timeout,
                )
            except httpx.TransportError as exc:
                cursor.ended(exc)
                continue
            except APIError as exc:
                cursor.refused(exc)
                continue
            cursor.connected()
            self._response = response
            self._chunks = response.aiter_bytes()
