"""Session handles: a session id plus the tools and hooks its turns use by default."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from skyloop.client._tools import ToolBox
from skyloop.client._turn import AsyncTurn, Turn

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from skyloop.client._async_client import AsyncClient
    from skyloop.client._client import Client
    from skyloop.client._hooks import (
        AsyncConfirmTool,
        AsyncToolEndHook,
        AsyncToolStartHook,
        ConfirmTool,
        ToolEndHook,
        ToolStartHook,
    )
    from skyloop.client._live import AsyncLiveEventStream, LiveEventStream
    from skyloop.client._models import Agent, EventAccepted, Item, SessionSnapshot
    from skyloop.client._stream import AsyncEventStream, EventStream
    from skyloop.client._tools import ToolsSpec
    from skyloop.client._tracker import TurnResult

__all__ = ["AsyncSession", "Session"]

T = TypeVar("T")

_UNSET: Any = object()
"""``send``'s default for each option: the session's own value (``None`` would mean "none")."""


def _or(value: T, default: T) -> T:
    return default if value is _UNSET else value


class Session:
    """A handle on one session, carrying default tools and hooks for its turns.

    Examples:
        >>> session = client.session(session_id, tools="coding")
        >>> for event in session.send("List the Python files here"):
        ...     if isinstance(event, OutputTextDelta):
        ...         print(event.delta, end="")
        >>> session.run("And now summarise them").text
    """

    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        tools: ToolsSpec = None,
        confirm: ConfirmTool | None = None,
        on_tool_start: ToolStartHook | None = None,
        on_tool_end: ToolEndHook | None = None,
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
        tools: ToolsSpec = _UNSET,
        confirm: ConfirmTool | None = _UNSET,
        on_tool_start: ToolStartHook | None = _UNSET,
        on_tool_end: ToolEndHook | None = _UNSET,
        model_override: str | None = None,
    ) -> Turn:
        """Start a turn lazily: nothing is sent until the returned :class:`Turn` is iterated.

        Options left out take the session's defaults.
        """
        return Turn(
            self._client,
            self.id,
            text,
            tools=self._tools if tools is _UNSET else ToolBox.from_spec(tools),
            confirm=_or(confirm, self._confirm),
            on_tool_start=_or(on_tool_start, self._on_tool_start),
            on_tool_end=_or(on_tool_end, self._on_tool_end),
            model_override=model_override,
        )

    def run(self, text: str, **kwargs: Any) -> TurnResult:
        """Send ``text`` and wait for the turn to end (tools included); ``kwargs`` as for :meth:`send`."""
        with self.send(text, **kwargs) as turn:
            return turn.run()

    def snapshot(self) -> SessionSnapshot:
        """The session's current snapshot."""
        return self._client.get_session(self.id)

    def items(self, *, order: str = "asc") -> Iterator[Item]:
        """Every item of the session, fetching pages as needed."""
        return self._client.iter_items(self.id, order=order)

    def agent(self) -> Agent:
        """The agent version the session runs."""
        return self._client.get_session_agent(self.id)

    def interrupt(self) -> EventAccepted:
        """Stop whatever turn the session is running (harmless when idle)."""
        return self._client.interrupt(self.id)

    def stream(self, *, after: int | None = None) -> EventStream:
        """The session's typed events (see ``Client.stream``); a turn from :meth:`send` opens its own."""
        return self._client.stream(self.id, after=after)

    def watch(self, *, after: int | None = None) -> LiveEventStream | EventStream:
        """The session's typed events over the live channel when there is one (see ``Client.watch``)."""
        return self._client.watch(self.id, after=after)


class AsyncSession:
    """The async twin of :class:`Session`; hooks may be plain or awaitable."""

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
        tools: ToolsSpec = _UNSET,
        confirm: ConfirmTool | AsyncConfirmTool | None = _UNSET,
        on_tool_start: ToolStartHook | AsyncToolStartHook | None = _UNSET,
        on_tool_end: ToolEndHook | AsyncToolEndHook | None = _UNSET,
        model_override: str | None = None,
    ) -> AsyncTurn:
        """Start a turn lazily: nothing is sent until the returned :class:`AsyncTurn` is iterated.

        Options left out take the session's defaults.
        """
        return AsyncTurn(
            self._client,
            self.id,
            text,
            tools=self._tools if tools is _UNSET else ToolBox.from_spec(tools),
            confirm=_or(confirm, self._confirm),
            on_tool_start=_or(on_tool_start, self._on_tool_start),
            on_tool_end=_or(on_tool_end, self._on_tool_end),
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
        """The session's typed events (see ``Client.stream``); a turn from :meth:`send` opens its own."""
        return self._client.stream(self.id, after=after)

    async def watch(self, *, after: int | None = None) -> AsyncLiveEventStream | AsyncEventStream:
        """The session's typed events over the live channel when there is one (see ``Client.watch``)."""
        return await self._client.watch(self.id, after=after)
