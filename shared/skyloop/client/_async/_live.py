"""The live channel's event stream: moves frames; :class:`~skyloop.client._live.LiveCursor` orders them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyloop.client._async._closing import AsyncClosing
from skyloop.client._concurrency import AsyncWebSocket
from skyloop.client._live import MAX_MESSAGE_BYTES, OPEN_TIMEOUT_S, LiveCursor, _Dead, close_code
from skyloop.client._retry import apause

if TYPE_CHECKING:
    from skyloop.client._async._client import AsyncClient

__all__ = ["AsyncLiveEventStream"]


class AsyncLiveEventStream(AsyncClosing):
    """Typed events of one session over the live channel; iterate it, close it (or use ``async with``).

    Made by :meth:`AsyncClient.watch` when the server advertises a live channel.
    """

    def __init__(
        self, client: AsyncClient, url: str, session_id: str, *, after: int | None, token: str | None
    ) -> None:
        self.session_id = session_id
        self._client = client
        self._url = url
        self._after = after
        self._token = token
        self._cursor: LiveCursor | None = None
        self._ws: AsyncWebSocket | None = None
        self._closed = False

    @property
    def last_event_id(self) -> int | None:
        """The cursor to resume from later: every event up to it was delivered."""
        return self._cursor.last_event_id if self._cursor else self._after

    @property
    def reconnects(self) -> int:
        """How many times the watch resumed transparently."""
        return self._cursor.reconnects if self._cursor else 0

    def __aiter__(self) -> AsyncLiveEventStream:
        return self

    async def __anext__(self) -> Any:
        from websockets.exceptions import ConnectionClosed

        while True:
            cursor = self._cursor
            if cursor is not None and cursor.ready():
                return cursor.queue.popleft()
            if self._closed:
                raise StopAsyncIteration
            if cursor is None or self._ws is None:
                await self._connect()
                continue
            try:
                await self._send(cursor.due())
                text = await self._ws.recv(cursor.wait_s())
            except TimeoutError:
                continue
            except (ConnectionClosed, OSError, _Dead) as exc:
                await self._lost(exc)
                continue
            await self._send(cursor.received(text))
            await self._fetch_too_large(cursor)

    async def next_event(self) -> Any:
        """The next event (waits until one arrives)."""
        return await anext(self)

    async def aclose(self) -> None:
        """Stop watching and close the connection; iteration then ends."""
        self._closed = True
        await self._drop()

    async def _connect(self) -> None:
        from websockets.exceptions import InvalidHandshake

        if self._cursor is None:
            after = self._after
            if after is None:  # "from now" is the snapshot's cursor, as for the SSE stream
                snapshot = await self._client.get_session(self.session_id)
                after = snapshot.last_event_id
            self._cursor = LiveCursor(
                self.session_id, after, token=self._token, policy=self._client.reconnect
            )
        cursor = self._cursor
        delay = 0.0
        while self._ws is None and not self._closed:
            await apause(cursor.policy, delay)
            try:
                self._ws = await AsyncWebSocket.connect(
                    self._url, open_timeout=OPEN_TIMEOUT_S, max_size=MAX_MESSAGE_BYTES
                )
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                delay = cursor.closed(exc)
                continue
            await self._send(cursor.opened())

    async def _send(self, frames: list[str]) -> None:
        for frame in frames:
            assert self._ws is not None
            assert self._cursor is not None
            await self._ws.send(frame)
            self._cursor.sent()

    async def _lost(self, exc: BaseException) -> None:
        await self._drop()
        assert self._cursor is not None
        await apause(self._cursor.policy, self._cursor.closed(exc, close_code(exc)))

    async def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.aclose()

    async def _fetch_too_large(self, cursor: LiveCursor) -> None:
        while cursor.too_large:
            seq = cursor.too_large.pop(0)
            async with self._client.stream(self.session_id, after=seq - 1) as events:
                async for event in events:
                    if getattr(event, "event_id", None) == seq:
                        cursor.offer(seq, event)
                        break
