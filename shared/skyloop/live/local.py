"""The live channel inside ``skyloop dev``: ``ws://<host>:<port>/v1/live`` on the stack's one port.

The same frames (:mod:`skyloop.live.protocol`) and the same authorization
(:mod:`skyloop.live.access`) as the cloud's ``live`` function; what differs
is delivery. There is no table stream locally: each subscription follows its
session through the in-process feed (:mod:`skyloop.stream.feed`), which every
append wakes, so an idle subscription costs nothing and 50 viewers of one
session share one reader. A subscription replays the log after its cursor,
then says ``subscribed``, then delivers live events, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect

from skyloop import principals
from skyloop.live import access, protocol
from skyloop.live.protocol import ERROR_QUOTA, ERROR_UNAUTHORIZED, ProtocolError
from skyloop.stream import feed

if TYPE_CHECKING:
    from skyloop.principals import Principal
    from skyloop.settings import Settings
    from skyloop.store import Store

log = logging.getLogger("skyloop.live")
IDLE_WAIT_S = 60.0
REPLAY_WAIT_S = 10.0  # at most this long for a new feed's first read before "subscribed" goes out  # a feed wait's timeout (wake-ups end it early); nothing is sent on a timeout


class LocalConnection:
    """One WebSocket: its grant and one delivery task per watched session."""

    def __init__(self, websocket: WebSocket, store: Store, settings: Settings) -> None:
        self.websocket = websocket
        self.store = store
        self.settings = settings
        self.grant: access.Grant | None = None
        self.follows: dict[str, asyncio.Task[None]] = {}
        self._send_lock = asyncio.Lock()

    async def run(self) -> None:
        try:
            while True:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                await self.receive(message.get("text") or message.get("bytes"))
        except WebSocketDisconnect:
            return
        finally:
            for task in self.follows.values():
                task.cancel()

    async def receive(self, raw: str | bytes | None) -> None:
        try:
            frame = protocol.parse(raw)
        except ProtocolError as refused:
            await self.send(refused.frame())
            return
        try:
            if isinstance(frame, protocol.Auth):
                self.grant = await anyio.to_thread.run_sync(
                    access.authenticate, self.store, frame.token, self.settings
                )
                await self.send(protocol.authenticated(self.grant.principal.name))
            elif isinstance(frame, protocol.Subscribe):
                await self.subscribe(frame)
            elif isinstance(frame, protocol.Unsubscribe):
                task = self.follows.pop(frame.session_id, None)
                if task is not None:
                    task.cancel()
                await self.send(protocol.unsubscribed(frame.session_id))
            else:
                await self.send(protocol.pong())
        except ProtocolError as refused:
            await self.send(refused.frame(frame))

    async def principal(self) -> Principal:
        if not self.settings.require_token:
            return principals.OPEN
        if self.grant is None:
            raise ProtocolError(ERROR_UNAUTHORIZED, 'authenticate first: {"action": "auth", "token": "..."}')
        valid = await anyio.to_thread.run_sync(access.still_valid, self.store, self.grant, _now())
        if not valid:
            raise ProtocolError(
                ERROR_UNAUTHORIZED, "the token was revoked or has expired: authenticate again"
            )
        return self.grant.principal

    async def subscribe(self, frame: protocol.Subscribe) -> None:
        principal = await self.principal()
        session = await anyio.to_thread.run_sync(
            access.watchable_session, self.store, principal, frame.session_id
        )
        if frame.session_id not in self.follows and len(self.follows) >= protocol.MAX_SUBSCRIPTIONS:
            raise ProtocolError(
                ERROR_QUOTA,
                f"a connection may watch at most {protocol.MAX_SUBSCRIPTIONS} sessions",
                session_id=frame.session_id,
            )
        start = frame.after if frame.after is not None else session.last_seq
        old = self.follows.pop(frame.session_id, None)
        if old is not None:  # subscribing again moves the subscription to the new cursor
            old.cancel()
        # registered with the feed now, before anything else is awaited: nothing appended later is missed
        tail = feed.registry().cursor(
            self.store, self.settings, frame.session_id, start, session.status == "running"
        )
        self.follows[frame.session_id] = asyncio.get_running_loop().create_task(
            self.follow(frame.session_id, start, tail, session.last_seq), name=f"live-{frame.session_id}"
        )

    async def follow(self, session_id: str, start: int, tail: feed.FeedCursor, head: int) -> None:
        """Replay up to the log's end as read at subscribe time (``head``), say ``subscribed``, go live.

        The session's feed may be new and not have read yet: the replay waits for
        it to reach ``head`` (as the cloud's replay reads the log to its end).
        """
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + REPLAY_WAIT_S
            while True:  # the replay: everything after the cursor, page by page
                page, more = await tail.next_page()
                await self.send_events(session_id, page)
                if more:
                    continue
                left = deadline - loop.time()
                if tail.cursor >= head or left <= 0:
                    break
                await tail.wait(left)
            await self.send(protocol.subscribed(session_id, start, tail.cursor))
            while True:  # live: what each wake-up of the feed brings
                await tail.wait(IDLE_WAIT_S)
                page, more = await tail.next_page()
                await self.send_events(session_id, page)
                while more:
                    page, more = await tail.next_page()
                    await self.send_events(session_id, page)
        except (WebSocketDisconnect, RuntimeError):
            return  # the client left (sending on a closed socket raises RuntimeError)
        except Exception:
            log.exception("live delivery of session %s failed", session_id)
            with contextlib.suppress(Exception):
                await self.send(
                    protocol.error(protocol.ERROR_INTERNAL, "delivery failed", session_id=session_id)
                )
        finally:
            tail.close()

    async def send_events(self, session_id: str, page: list[Any]) -> None:
        for event in page:
            await self.send_raw(protocol.event_message(session_id, event))

    async def send(self, frame: dict[str, Any]) -> None:
        await self.send_raw(protocol.encode(frame))

    async def send_raw(self, data: bytes) -> None:
        async with self._send_lock:  # several sessions' tasks share the socket
            await self.websocket.send_text(data.decode())


def _now() -> float:
    import time

    return time.time()


async def live_endpoint(websocket: WebSocket) -> None:
    """The Starlette WebSocket route of the local gateway."""
    from skyloop import deps, function_identity

    with function_identity.acting_as("live"):  # the cloud's live function, and its role (tasks inherit it)
        await websocket.accept()
        await LocalConnection(websocket, deps.store(), deps.get_settings()).run()
