"""Session handles: a session id plus the tools and hooks its turns use by default."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyloop.client._async._turn import AsyncTurn
from skyloop.client._session import UNSET, or_default
from skyloop.client._tools import ToolBox

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from skyloop.client._async._client import AsyncClient
    from skyloop.client._async._live import AsyncLiveEventStream
    from skyloop.client._async._stream import AsyncEventStream
    from skyloop.client._hooks import (
        AsyncConfirmTool,
        AsyncToolEndHook,
        AsyncToolStartHook,
        ConfirmTool,
        ToolEndHook,
        ToolStartHook,
    )
    from skyloop.client._models import Agent, EventAccepted, Item, SessionSnapshot
    from skyloop.client._tools import ToolsSpec
    from skyloop.client._tracker import TurnResult

__all__ = ["AsyncSession"]


class AsyncSession:
    """A handle on one session, carrying default tools and hooks for its turns.

    Examples:
        >>> session = client.session(session_id, tools="coding")
        >>> async for event in session.send("List the Python files here"):
        ...     if isinstance(event, OutputTextDelta):
        ...         print(event.delta, end="")
        >>> result = await session.run("And now summarise them")
        >>> result.text
    """

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        *,
        tools: ToolsSpec = None,
        confirm: ConfirmTool | AsyncConfirmTool | None = None,
        on_tool_start: ToolStartHook | AsyncToolStartHook | None = None,
        on_tool_end: ToolEndHook | AsyncToolEndHook | None = None,
    ) -> None:
        self._client = client
        self.id = session_id
        self._tools = ToolBox.from_spec(tools)
        self._confirm = confirm
        self._on_tool_start = on_tool_start
        self._on_tool_end = on_tool_end

    def send(
        self,
        text: str,
        *,
        tools: ToolsSpec = UNSET,
        confirm: ConfirmTool | AsyncConfirmTool | None = UNSET,
        on_tool_start: ToolStartHook | AsyncToolStartHook | None = UNSET,
        on_tool_end: ToolEndHook | AsyncToolEndHook | None = UNSET,
        model_override: str | None = None,
    ) -> AsyncTurn:
        """Start a turn lazily: nothing is sent until the returned :class:`AsyncTurn` is iterated.

        Options left out take the session's defaults.
        """
        return AsyncTurn(
            self._client,
            self.id,
            text,
            tools=self._tools if tools is UNSET else ToolBox.from_spec(tools),
            confirm=or_default(confirm, self._confirm),
            on_tool_start=or_default(on_tool_start, self._on_tool_start),
            on_tool_end=or_default(on_tool_end, self._on_tool_end),
            model_override=model_override,
        )

    async def run(self, text: str, **kwargs: Any) -> TurnResult:
        """Send ``text`` and wait for the turn to end (tools included); ``kwargs`` as for :meth:`send`."""
        async with self.send(text, **kwargs) as turn:
            return await turn.run()

    async def snapshot(self) -> SessionSnapshot:
        """The session's current snapshot."""
        return await self._client.get_session(self.id)

    def items(self, *, order: str = "asc") -> AsyncIterator[Item]:
        """Every item of the session, fetching pages as needed."""
        return self._client.iter_items(self.id, order=order)

    async def agent(self) -> Agent:
        """The agent version the session runs."""
        return await self._client.get_session_agent(self.id)

    async def interrupt(self) -> EventAccepted:
        """Stop whatever turn the session is running (harmless when idle)."""
        return await self._client.interrupt(self.id)

    def stream(self, *, after: int | None = None) -> AsyncEventStream:
        """The session's typed events (see ``AsyncClient.stream``); a turn from :meth:`send` opens its own."""
        return self._client.stream(self.id, after=after)

    async def watch(self, *, after: int | None = None) -> AsyncLiveEventStream | AsyncEventStream:
        """The session's typed events over the live channel when there is one (see ``AsyncClient.watch``)."""
        return await self._client.watch(self.id, after=after)
