"""Live session streams that survive drops: resume with ``Last-Event-ID``, never yield an event twice.

:class:`StreamCursor` holds the I/O-free part (cursor, dedupe, backoff budget)
shared by the sync :class:`EventStream` and the async :class:`AsyncEventStream`.
Both are resumable iterators: if a read is abandoned mid-way (Ctrl-C, task
cancellation), the next call reconnects from the last delivered id instead of
trusting a half-read connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import httpx

from skyloop.client._errors import (
    APIConnectionError,
    StreamDisconnectedError,
    error_from_response,
    is_retryable_status,
)
from skyloop.client._models import parse_event
from skyloop.client._requests import get_session, stream_path
from skyloop.client._sse import ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from types import TracebackType

    from skyloop.client._async_client import AsyncClient
    from skyloop.client._client import Client
    from skyloop.client._config import ReconnectPolicy

__all__ = ["AsyncEventStream", "EventStream", "StreamCursor"]


class StreamCursor:
    """Where a stream is, and whether another reconnect attempt is allowed.

    Stored events carry strictly increasing integer ids (the session's seq),
    so dedupe is one comparison: anything at or below the last delivered id
    was already yielded (a replay overlapping what we saw before a drop).
    """

    def __init__(self, policy: ReconnectPolicy, after: int | None) -> None:
        self.policy = policy
        self.last_event_id: int | None = after
        self.failures = 0
        self.reconnects = 0
        self.connections = 0
        self.decoder = SSEDecoder()
        self.got_frame = False
        self.delay = 0.0

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = str(self.last_event_id)
        return headers

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
            self.failures = 0  # a working connection resets the budget
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
        self.failures += 1
        if self.failures > self.policy.max_failures:
            reason = f": {error}" if error else ""
            raise StreamDisconnectedError(
                f"stream lost and {self.policy.max_failures} reconnect attempts failed{reason}"
            ) from error
        self.delay = self.policy.delay(self.failures)

    def failed_status(self, response: httpx.Response, content: bytes) -> None:
        """Retry 5xx/429 answers within the budget; raise any other error status at once."""
        error = error_from_response(response.status_code, content)
        if not is_retryable_status(response.status_code):
            raise error
        self.ended(error)


def _not_sse(response: httpx.Response) -> APIConnectionError | None:
    ctype = response.headers.get("content-type", "")
    if ctype.split(";")[0].strip().lower() != "text/event-stream":
        return APIConnectionError(f"expected text/event-stream, got {ctype or 'no content type'!r}")
    return None


class EventStream:
    """Typed events of one session, across as many connections as it takes.

    Iterate it (it never ends by itself; the server keeps streams open) and
    close it, or use it as a context manager. ``last_event_id`` is the cursor
    to resume from later; ``reconnects`` counts transparent resumptions.
    """

    def __init__(
        self, client: Client, session_id: str, *, after: int | None, policy: ReconnectPolicy
    ) -> None:
        self._client = client
        self.session_id = session_id
        self._cursor = StreamCursor(policy, after)
        self._resolved = after is not None
        self._response: httpx.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._queue: deque[Any] = deque()
        self._busy = False
        self._closed = False

    @property
    def last_event_id(self) -> int | None:
        return self._cursor.last_event_id

    @property
    def reconnects(self) -> int:
        return self._cursor.reconnects

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
                self._busy = False
                self._finish(None)
                continue
            except httpx.TransportError as exc:
                self._busy = False
                self._finish(exc)
                continue
            self._busy = False
            for sse in self._cursor.decoder.feed(chunk):
                event = self._cursor.accept(sse)
                if event is not None:
                    self._queue.append(event)

    def next_event(self) -> Any:
        return next(self)

    def close(self) -> None:
        self._closed = True
        self._drop()

    def _drop(self) -> None:
        self._busy = False
        response, self._response, self._chunks = self._response, None, None
        if response is not None:
            with contextlib.suppress(Exception):  # a broken connection may fail to close; it is discarded
                response.close()

    def _finish(self, error: BaseException | None) -> None:
        self._drop()
        self._cursor.ended(error)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            (self._cursor.policy.sleep or time.sleep)(seconds)

    def _connect(self) -> None:
        cursor = self._cursor
        if not self._resolved:
            # "From now" means from the snapshot's cursor, so even a drop before the first
            # stored event resumes without a gap.
            cursor.last_event_id = self._client._call(get_session(self.session_id)).last_event_id
            self._resolved = True
        while self._chunks is None and not self._closed:
            self._sleep(cursor.delay)
            cursor.delay = 0.0
            http = self._client._http
            timeout = httpx.Timeout(self._client.timeout, read=cursor.policy.read_timeout)
            request = http.build_request(
                "GET", stream_path(self.session_id), headers=cursor.headers(), timeout=timeout
            )
            try:
                response = http.send(request, stream=True)
            except httpx.TransportError as exc:
                cursor.ended(exc)
                continue
            if response.status_code != 200:
                try:
                    content = response.read()
                except httpx.TransportError:
                    content = b""
                response.close()
                cursor.failed_status(response, content)
                continue
            wrong = _not_sse(response)
            if wrong is not None:
                response.close()
                raise wrong
            cursor.connected()
            self._response = response
            self._chunks = response.iter_bytes()


class AsyncEventStream:
    """The async twin of :class:`EventStream`: ``async for`` / ``async with``."""

    def __init__(
        self, client: AsyncClient, session_id: str, *, after: int | None, policy: ReconnectPolicy
    ) -> None:
        self._client = client
        self.session_id = session_id
        self._cursor = StreamCursor(policy, after)
        self._resolved = after is not None
        self._response: httpx.Response | None = None
        self._chunks: AsyncIterator[bytes] | None = None
        self._queue: deque[Any] = deque()
        self._busy = False
        self._closed = False

    @property
    def last_event_id(self) -> int | None:
        return self._cursor.last_event_id

    @property
    def reconnects(self) -> int:
        return self._cursor.reconnects

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
                self._busy = False
                await self._finish(None)
                continue
            except httpx.TransportError as exc:
                self._busy = False
                await self._finish(exc)
                continue
            self._busy = False
            for sse in self._cursor.decoder.feed(chunk):
                event = self._cursor.accept(sse)
                if event is not None:
                    self._queue.append(event)

    async def next_event(self) -> Any:
        return await self.__anext__()

    async def aclose(self) -> None:
        self._closed = True
        await self._drop()

    async def _drop(self) -> None:
        self._busy = False
        response, self._response, self._chunks = self._response, None, None
        if response is not None:
            with contextlib.suppress(Exception):  # a broken connection may fail to close; it is discarded
                await response.aclose()

    async def _finish(self, error: BaseException | None) -> None:
        await self._drop()
        self._cursor.ended(error)

    async def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            await (self._cursor.policy.sleep or asyncio.sleep)(seconds)

    async def _connect(self) -> None:
        cursor = self._cursor
        if not self._resolved:
            snapshot = await self._client._call(get_session(self.session_id))
            cursor.last_event_id = snapshot.last_event_id
            self._resolved = True
        while self._chunks is None and not self._closed:
            await self._sleep(cursor.delay)
            cursor.delay = 0.0
            http = self._client._http
            timeout = httpx.Timeout(self._client.timeout, read=cursor.policy.read_timeout)
            request = http.build_request(
                "GET", stream_path(self.session_id), headers=cursor.headers(), timeout=timeout
            )
            try:
                response = await http.send(request, stream=True)
            except httpx.TransportError as exc:
                cursor.ended(exc)
                continue
            if response.status_code != 200:
                try:
                    content = await response.aread()
                except httpx.TransportError:
                    content = b""
                await response.aclose()
                cursor.failed_status(response, content)
                continue
            wrong = _not_sse(response)
            if wrong is not None:
                await response.aclose()
                raise wrong
            cursor.connected()
            self._response = response
            self._chunks = response.aiter_bytes()
