"""A turn's I/O: watch, post the message, run tools, post outputs (the order: :mod:`skyloop.client._turn`)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from skyloop.client import _turn as shared
from skyloop.client._async._closing import AsyncClosing
from skyloop.client._async._live import AsyncLiveEventStream
from skyloop.client._async._stream import AsyncEventStream
from skyloop.client._concurrency import AsyncWorkers, aheartbeats, resolve
from skyloop.client._retry import aretry_call
from skyloop.client._turn import MESSAGE_REFUSALS, SETTLED_OUTPUTS, TurnState, declined_output, tool_call

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from skyloop.client._async._client import AsyncClient
    from skyloop.client._hooks import (
        AsyncConfirmTool,
        AsyncToolEndHook,
        AsyncToolStartHook,
        ConfirmTool,
        ToolCall,
        ToolEndHook,
        ToolStartHook,
    )
    from skyloop.client._models import EventAccepted
    from skyloop.client._tools import ToolBox
    from skyloop.client._tracker import TurnResult

__all__ = ["AsyncTurn"]


class AsyncTurn(AsyncClosing, TurnState[AsyncEventStream | AsyncLiveEventStream]):
    """One turn of a session, as an iterator of typed events (see :mod:`skyloop.client._turn`).

    ``result`` is set once the terminal event has been yielded. Use it as a
    context manager (or call :meth:`aclose`) to stop early. Made by :meth:`AsyncSession.send`.
    """

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        text: str,
        *,
        tools: ToolBox,
        confirm: ConfirmTool | AsyncConfirmTool | None,
        on_tool_start: ToolStartHook | AsyncToolStartHook | None,
        on_tool_end: ToolEndHook | AsyncToolEndHook | None,
        model_override: str | None = None,
    ) -> None:
        super().__init__(session_id, text, tools=tools, model_override=model_override)
        self._client = client
        self._confirm = confirm
        self._on_tool_start = on_tool_start
        self._on_tool_end = on_tool_end
        self._workers = AsyncWorkers()

    def __aiter__(self) -> AsyncTurn:
        return self

    async def __anext__(self) -> Any:
        if self._closed:
            raise StopAsyncIteration
        if not self._started:
            return await self._start()
        await self._dispatch_pending()
        self._raise_reported()  # an output that could not be delivered
        assert self._stream is not None
        event = await anext(self._stream)
        if self._follow(event):
            await self.aclose()
        return event

    async def run(self) -> TurnResult:
        """Consume the rest of the turn and return its result."""
        async for _ in self:
            pass
        return self._no_result()

    async def interrupt(self) -> EventAccepted:
        """Ask the server to stop this turn; keep iterating to see ``response.cancelled``."""
        self._tracker.drop_pending()
        return await self._client.interrupt(self.session_id)

    async def aclose(self) -> None:
        """Stop following the turn and release its stream (the turn itself goes on: see :meth:`interrupt`)."""
        self._closed = True
        if self._stream is not None:
            await self._stream.aclose()
        # Running tools are left to finish and post: a parked call still gets its answer.

    async def _start(self) -> Any:
        self._started = True
        self._stream = await self._client.watch(self.session_id)  # the live channel when there is one
        try:
            first = await anext(self._stream)  # the subscription is live: now the message may go
            item_id = await aretry_call(self._client.reconnect, self._post_message, final=MESSAGE_REFUSALS)
        except BaseException:
            await self.aclose()
            raise
        self._begin(first, item_id)
        return first

    async def _post_message(self) -> str:
        # Safe to repeat: the Idempotency-Key makes the server answer the first post.
        return await self._client.send_message(
            self.session_id,
            self.text,
            tools=self.tools,
            model_override=self._model_override,
            idempotency_key=self._idempotency_key,
        )

    async def _dispatch_pending(self) -> None:
        """Confirm and start each new call where the turn is iterated, so prompts never interleave."""
        while (item := self._tracker.next_call()) is not None:
            call = tool_call(item)
            if self._confirm is not None and not await resolve(self._confirm(call.name, call.arguments)):
                self._tracker.take_call()
                self._workers.spawn(self._guarded, self._post_output, call, declined_output(call.name))
                continue
            self._tracker.take_call()
            if self._on_tool_start is not None:
                await resolve(self._on_tool_start(call))
            self._workers.spawn(self._guarded, self._run_and_post, call, item.arguments)

    async def _guarded(
        self, work: Callable[[ToolCall, str], Awaitable[None]], call: ToolCall, text: str
    ) -> None:
        """Nothing escapes a tool worker: failures surface from the turn's next step."""
        try:
            await work(call, text)
        except Exception as exc:
            if not self._client.is_closed:  # else the caller closed the client and moved on
                self._report(exc)

    async def _run_and_post(self, call: ToolCall, raw_arguments: str) -> None:
        # Heartbeats while the tool runs: a slow tool is not a vanished client. The interval is read
        # from _turn each time, where a test may tune it.
        async with aheartbeats(shared.HEARTBEAT_S, self._heartbeat):
            output = await self.tools.arun(call.name, raw_arguments)
        if self._on_tool_end is not None:
            with contextlib.suppress(Exception):  # a failing hook must not leave the call unanswered
                await resolve(self._on_tool_end(call, output))
        await self._post_output(call, output)

    async def _heartbeat(self) -> None:
        await self._client.heartbeat(self.session_id)

    async def _post_output(self, call: ToolCall, output: str) -> None:
        try:
            await aretry_call(  # the same output again is a no-op on the server
                self._client.reconnect,
                lambda: self._client.submit_tool_output(self.session_id, call.call_id, output),
            )
        except SETTLED_OUTPUTS:
            return
