"""The asyncio client: the twin of ``Client``, method for method."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from skyloop.client import _requests as api
from skyloop.client._client import default_headers
from skyloop.client._config import ReconnectPolicy, resolve_config
from skyloop.client._errors import map_transport_errors
from skyloop.client._stream import AsyncEventStream
from skyloop.client._tools import ToolBox
from skyloop.client._turn import AsyncSession

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from types import TracebackType

    from skyloop.client._models import (
        Agent,
        AgentPage,
        CreatedSession,
        DeletedSession,
        EventAccepted,
        Health,
        Item,
        ItemPage,
        Runner,
        RunnerStatus,
        SessionPage,
        SessionSnapshot,
        SessionSummary,
    )
    from skyloop.client._requests import AgentSource, ApiCall
    from skyloop.client._tools import ToolsSpec

T = TypeVar("T")


class AsyncClient:
    """The asyncio twin of :class:`Client`: same configuration, awaitable methods.

    Examples:
        >>> async with AsyncClient() as client:
        ...     session = client.session(session_id, tools="coding")
        ...     async for event in session.send("Which Python files are here?"):
        ...         print(event.type)
        ...     result = await session.run("Thanks!")
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        reconnect: ReconnectPolicy | None = None,
    ) -> None:
        config = resolve_config(base_url, token)
        self.base_url = config.base_url
        self.timeout = timeout
        self.reconnect = reconnect or ReconnectPolicy()
        self._http = httpx.AsyncClient(
            base_url=config.base_url,
            headers=default_headers(config.token),
            timeout=timeout,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"AsyncClient(base_url={self.base_url!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, call: ApiCall[T]) -> T:
        with map_transport_errors():
            response = await self._http.request(call.method, call.path, **call.request_kwargs())
        return api.read_response(call, response)

    # -------------------------------------------------------------------- service
    async def health(self) -> Health:
        return await self._call(api.health())

    async def list_runners(self) -> list[Runner]:
        return await self._call(api.list_runners())

    async def runner_status(self, runner_id: str) -> RunnerStatus:
        return await self._call(api.runner_status(runner_id))

    # --------------------------------------------------------------------- agents
    async def register_agent(
        self, spec: AgentSource, *, title: str | None = None, labels: dict[str, str] | None = None
    ) -> CreatedSession:
        """Upload an agent bundle (spec dict, ``<name>.yaml`` or a directory with ``config.yaml``).

        Creates a new agent version and its first idle session.
        """
        return await self._call(api.register_agent(spec, title=title, labels=labels))

    async def create_agent(self, spec: AgentSource) -> Agent:
        """Register an agent version without a session (``POST /v1/agents``)."""
        return await self._call(api.create_agent(spec))

    async def list_agents(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        order: str | None = None,
        name: str | None = None,
    ) -> AgentPage:
        """Agents newest first; with ``name``, only the newest version of that name."""
        return await self._call(api.list_agents(limit=limit, after=after, order=order, name=name))

    async def iter_agents(self, *, order: str | None = None, page_size: int = 100) -> AsyncIterator[Agent]:
        after: str | None = None
        while True:
            page = await self.list_agents(limit=page_size, after=after, order=order)
            for agent in page.data:
                yield agent
            if not page.has_more or not page.last_id:
                return
            after = page.last_id

    async def get_agent(self, agent_id: str) -> Agent:
        return await self._call(api.get_agent(agent_id))

    # ------------------------------------------------------------------- sessions
    async def create_session(
        self, agent_id: str, *, title: str | None = None, labels: dict[str, str] | None = None
    ) -> SessionSnapshot:
        return await self._call(api.create_session(agent_id, title=title, labels=labels))

    async def list_sessions(
        self,
        *,
        agent_name: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        after: str | None = None,
        order: str | None = None,
        include_archived: bool | None = None,
    ) -> SessionPage:
        return await self._call(
            api.list_sessions(
                agent_name=agent_name,
                agent_id=agent_id,
                limit=limit,
                after=after,
                order=order,
                include_archived=include_archived,
            )
        )

    async def iter_sessions(self, *, page_size: int = 100, **filters: Any) -> AsyncIterator[SessionSummary]:
        after: str | None = None
        while True:
            page = await self.list_sessions(limit=page_size, after=after, **filters)
            for summary in page.data:
                yield summary
            if not page.has_more or not page.last_id:
                return
            after = page.last_id

    async def get_session(self, session_id: str) -> SessionSnapshot:
        return await self._call(api.get_session(session_id))

    async def update_session(
        self,
        session_id: str,
        *,
        runner_id: str | None = None,
        title: str | None = None,
        labels: dict[str, str] | None = None,
        archived: bool | None = None,
    ) -> SessionSnapshot:
        """Change only the fields given; ``runner_id=""`` unbinds the runner."""
        changes = api.update_changes(runner_id=runner_id, title=title, labels=labels, archived=archived)
        return await self._call(api.update_session(session_id, changes))

    async def delete_session(self, session_id: str) -> DeletedSession:
        return await self._call(api.delete_session(session_id))

    async def list_items(
        self, session_id: str, *, limit: int | None = None, after: str | None = None, order: str | None = None
    ) -> ItemPage:
        return await self._call(api.list_items(session_id, limit=limit, after=after, order=order))

    async def iter_items(
        self, session_id: str, *, order: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Item]:
        """Every item of the session, fetching pages as needed."""
        after: str | None = None
        while True:
            page = await self.list_items(session_id, limit=page_size, after=after, order=order)
            for item in page.data:
                yield item
            if not page.has_more or not page.last_id:
                return
            after = page.last_id

    async def get_session_agent(self, session_id: str) -> Agent:
        return await self._call(api.get_session_agent(session_id))

    # --------------------------------------------------------------------- events
    async def post_event(
        self,
        session_id: str,
        event_type: str,
        data: dict[str, Any] | None = None,
        *,
        tools: ToolsSpec = None,
        model_override: str | None = None,
    ) -> EventAccepted:
        schemas = ToolBox.from_spec(tools).schemas() or None
        return await self._call(
            api.post_event(session_id, event_type, data, tools=schemas, model_override=model_override)
        )

    async def send_message(
        self,
        session_id: str,
        text: str,
        *,
        tools: ToolsSpec = None,
        model_override: str | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Post a user message (only declaring ``tools``; use :meth:`session` to run them); returns its item id."""
        schemas = ToolBox.from_spec(tools).schemas() or None
        accepted = await self._call(
            api.message_event(
                session_id,
                text,
                tools=schemas,
                model_override=model_override,
                idempotency_key=idempotency_key,
            )
        )
        return accepted.item_id or ""

    async def submit_tool_output(self, session_id: str, call_id: str, output: str) -> EventAccepted:
        """Answer a parked call; sending the same output again is a harmless no-op."""
        return await self._call(api.tool_output_event(session_id, call_id, output))

    async def interrupt(self, session_id: str) -> EventAccepted:
        """Stop the running turn (harmless when idle)."""
        return await self._call(api.interrupt_event(session_id))

    def stream(self, session_id: str, *, after: int | None = None) -> AsyncEventStream:
        """Typed events of the session; reconnects transparently and never repeats an event.

        ``after=None`` starts at the session's current cursor (a live tail);
        ``after=N`` replays every retained event after ``N`` first.
        """
        return AsyncEventStream(self, session_id, after=after, policy=self.reconnect)

    def session(
        self,
        session_id: str,
        *,
        tools: ToolsSpec = None,
        confirm: Any = None,
        on_tool_start: Any = None,
        on_tool_end: Any = None,
    ) -> AsyncSession:
        """A handle whose ``send``/``run`` drive whole turns; hooks may be sync or async."""
        return AsyncSession(
            self,
            session_id,
            tools=tools,
            confirm=confirm,
            on_tool_start=on_tool_start,
            on_tool_end=on_tool_end,
        )
