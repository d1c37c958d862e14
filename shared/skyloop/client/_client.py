"""The synchronous client: one method per endpoint, typed answers, typed errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from skyloop import __version__
from skyloop.client import _requests as api
from skyloop.client._config import ReconnectPolicy, resolve_config
from skyloop.client._errors import map_transport_errors
from skyloop.client._stream import EventStream
from skyloop.client._tools import ToolBox
from skyloop.client._turn import Session

if TYPE_CHECKING:
    from collections.abc import Iterator
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
    from skyloop.client._turn import ConfirmTool, ToolEndHook, ToolStartHook

T = TypeVar("T")

USER_AGENT = f"skyloop-client/{__version__}"


def default_headers(token: str | None) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class Client:
    """A skyloop sessions client over ``httpx``.

    Args:
        base_url: the service URL; default ``$SKYLOOP_URL``, then the config
            file's ``url``, then ``http://127.0.0.1:8080``.
        token: bearer token; default ``$SKYLOOP_TOKEN``, then the config file's ``token``.
        timeout: seconds for connect/read/write of ordinary requests.
        transport: an ``httpx`` transport, e.g. ``httpx.MockTransport`` in tests.
        reconnect: how streams resume after drops (:class:`ReconnectPolicy`).

    Examples:
        >>> from skyloop.client import Client, OutputTextDelta
        >>> with Client() as client:  # $SKYLOOP_URL, the config file, or http://127.0.0.1:8080
        ...     agent_id = client.list_sessions(agent_name="coder", limit=1).data[0].agent_id
        ...     session = client.session(client.create_session(agent_id).id, tools="coding")
        ...     for event in session.send("Which Python files are here?"):
        ...         if isinstance(event, OutputTextDelta):
        ...             print(event.delta, end="", flush=True)
        >>> with Client("https://skyloop.example.com", token="sky_...") as client:
        ...     created = client.register_agent("my-agent.yaml")  # a dict or a directory work too
        ...     result = client.session(created.session_id).run("Hello!")
        ...     print(result.status, result.text)
        >>> with client.stream(session_id, after=0) as events:  # replay everything, then live
        ...     for event in events:
        ...         print(event.event_id, event.type)
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        reconnect: ReconnectPolicy | None = None,
    ) -> None:
        config = resolve_config(base_url, token)
        self.base_url = config.base_url
        self.timeout = timeout
        self.reconnect = reconnect or ReconnectPolicy()
        self._http = httpx.Client(
            base_url=config.base_url,
            headers=default_headers(config.token),
            timeout=timeout,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"Client(base_url={self.base_url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, call: ApiCall[T]) -> T:
        with map_transport_errors():
            response = self._http.request(call.method, call.path, **call.request_kwargs())
        return api.read_response(call, response)

    # -------------------------------------------------------------------- service
    def health(self) -> Health:
        return self._call(api.health())

    def list_runners(self) -> list[Runner]:
        return self._call(api.list_runners())

    def runner_status(self, runner_id: str) -> RunnerStatus:
        return self._call(api.runner_status(runner_id))

    # --------------------------------------------------------------------- agents
    def register_agent(
        self, spec: AgentSource, *, title: str | None = None, labels: dict[str, str] | None = None
    ) -> CreatedSession:
        """Upload an agent bundle (spec dict, ``<name>.yaml`` or a directory with ``config.yaml``).

        Creates a new agent version and its first idle session.
        """
        return self._call(api.register_agent(spec, title=title, labels=labels))

    def create_agent(self, spec: AgentSource) -> Agent:
        """Register an agent version without a session (``POST /v1/agents``)."""
        return self._call(api.create_agent(spec))

    def list_agents(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        order: str | None = None,
        name: str | None = None,
    ) -> AgentPage:
        """Agents newest first; with ``name``, only the newest version of that name."""
        return self._call(api.list_agents(limit=limit, after=after, order=order, name=name))

    def iter_agents(self, *, order: str | None = None, page_size: int = 100) -> Iterator[Agent]:
        after: str | None = None
        while True:
            page = self.list_agents(limit=page_size, after=after, order=order)
            yield from page.data
            if not page.has_more or not page.last_id:
                return
            after = page.last_id

    def get_agent(self, agent_id: str) -> Agent:
        return self._call(api.get_agent(agent_id))

    # ------------------------------------------------------------------- sessions
    def create_session(
        self, agent_id: str, *, title: str | None = None, labels: dict[str, str] | None = None
    ) -> SessionSnapshot:
        return self._call(api.create_session(agent_id, title=title, labels=labels))

    def list_sessions(
        self,
        *,
        agent_name: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        after: str | None = None,
        order: str | None = None,
        include_archived: bool | None = None,
    ) -> SessionPage:
        return self._call(
            api.list_sessions(
                agent_name=agent_name,
                agent_id=agent_id,
                limit=limit,
                after=after,
                order=order,
                include_archived=include_archived,
            )
        )

    def iter_sessions(self, *, page_size: int = 100, **filters: Any) -> Iterator[SessionSummary]:
        after: str | None = None
        while True:
            page = self.list_sessions(limit=page_size, after=after, **filters)
            yield from page.data
            if not page.has_more or not page.last_id:
                return
            after = page.last_id

    def get_session(self, session_id: str) -> SessionSnapshot:
        return self._call(api.get_session(session_id))

    def update_session(
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
        return self._call(api.update_session(session_id, changes))

    def delete_session(self, session_id: str) -> DeletedSession:
        return self._call(api.delete_session(session_id))

    def list_items(
        self, session_id: str, *, limit: int | None = None, after: str | None = None, order: str | None = None
    ) -> ItemPage:
        return self._call(api.list_items(session_id, limit=limit, after=after, order=order))

    def iter_items(
        self, session_id: str, *, order: str | None = None, page_size: int = 100
    ) -> Iterator[Item]:
        """Every item of the session, fetching pages as needed."""
        after: str | None = None
        while True:
            page = self.list_items(session_id, limit=page_size, after=after, order=order)
            yield from page.data
            if not page.has_more or not page.last_id:
                return
            after = page.last_id

    def get_session_agent(self, session_id: str) -> Agent:
        return self._call(api.get_session_agent(session_id))

    # --------------------------------------------------------------------- events
    def post_event(
        self,
        session_id: str,
        event_type: str,
        data: dict[str, Any] | None = None,
        *,
        tools: ToolsSpec = None,
        model_override: str | None = None,
    ) -> EventAccepted:
        schemas = ToolBox.from_spec(tools).schemas() or None
        return self._call(
            api.post_event(session_id, event_type, data, tools=schemas, model_override=model_override)
        )

    def send_message(
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
        accepted = self._call(
            api.message_event(
                session_id,
                text,
                tools=schemas,
                model_override=model_override,
                idempotency_key=idempotency_key,
            )
        )
        return accepted.item_id or ""

    def submit_tool_output(self, session_id: str, call_id: str, output: str) -> EventAccepted:
        """Answer a parked call; sending the same output again is a harmless no-op."""
        return self._call(api.tool_output_event(session_id, call_id, output))

    def interrupt(self, session_id: str) -> EventAccepted:
        """Stop the running turn (harmless when idle)."""
        return self._call(api.interrupt_event(session_id))

    def stream(self, session_id: str, *, after: int | None = None) -> EventStream:
        """Typed events of the session; reconnects transparently and never repeats an event.

        ``after=None`` starts at the session's current cursor (a live tail);
        ``after=N`` replays every retained event after ``N`` first.
        """
        return EventStream(self, session_id, after=after, policy=self.reconnect)

    def session(
        self,
        session_id: str,
        *,
        tools: ToolsSpec = None,
        confirm: ConfirmTool | None = None,
        on_tool_start: ToolStartHook | None = None,
        on_tool_end: ToolEndHook | None = None,
    ) -> Session:
        """A handle whose ``send``/``run`` drive whole turns, client tools included."""
        return Session(
            self,
            session_id,
            tools=tools,
            confirm=confirm,
            on_tool_start=on_tool_start,
            on_tool_end=on_tool_end,
        )
