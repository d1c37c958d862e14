"""The SSE event stream's I/O: connect and read; :mod:`skyloop.client._stream` decides the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from skyloop.client._async._closing import AsyncClosing
from skyloop.client._errors import APIError
from skyloop.client._requests import get_session, stream_path
from skyloop.client._retry import apause
from skyloop.client._stream import StreamState

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from skyloop.client._async._transport import AsyncTransport
    from skyloop.client._retry import ReconnectPolicy

__all__ = ["AsyncEventStream"]


class AsyncEventStream(AsyncClosing, StreamState):
    """Typed events of one session, across as many connections as it takes.

    Iterate it (it never ends by itself; the server keeps streams open) and
    close it, or use it as a context manager. ``last_event_id`` is the cursor
    to resume from later; ``reconnects`` counts transparent resumptions.
    Made by :meth:`AsyncClient.stream`.
    """

    def __init__(
        self, transport: AsyncTransport, session_id: str, *, after: int | None, policy: ReconnectPolicy
    ) -> None:
        super().__init__(session_id, after=after, policy=policy)
        self._transport = transport
        self._chunks: AsyncIterator[bytes] | None = None

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Any:
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._closed:
                raise StopAsyncIteration
            if self._busy:
                await self._drop()  # the last read was abandoned mid-way: do not trust that connection
            if self._chunks is None:
                await self._connect()
                continue
            self._busy = True
            try:
                chunk = await anext(self._chunks)
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
        return await anext(self)

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
            # "From now" means from the snapshot's cursor, so even a drop before the first
            # stored event resumes without a gap.
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
