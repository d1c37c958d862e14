"""The synchronous client: one method per endpoint, typed answers, typed errors.

Each method describes its request with the endpoint builder of the same name
in ``_requests`` and sends it through :class:`~skyloop.client._transport.SyncTransport`;
:class:`~skyloop.client.AsyncClient` is the same, awaited. A unit test keeps
the two signatures identical.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from skyloop.client import _requests as api
from skyloop.client._errors import APIError, SkyloopClientError
from skyloop.client._live import LiveEventStream
from skyloop.client._raw import RawResponses
from skyloop.client._retry import ReconnectPolicy
from skyloop.client._session import Session
from skyloop.client._stream import EventStream
from skyloop.client._transport import SyncTransport

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import TracebackType

    from skyloop.client._hooks import ConfirmTool, ToolEndHook, ToolStartHook
    from skyloop.client._models import (
        Agent,
        AgentPage,
        CreatedSession,
        DeletedScheduledTask,
        DeletedSession,
        DeletedWebhookEndpoint,
        EventAccepted,
        Health,
        Item,
        ItemPage,
        Runner,
        RunnerStatus,
        RunTriggered,
        ScheduledRunPage,
        ScheduledTask,
        SessionPage,
        SessionSnapshot,
        SessionSummary,
        WebhookDeliveryPage,
        WebhookEndpoint,
        WebhookEndpointPage,
        WebhookRedelivery,
        WebhookTestResult,
    )
    from skyloop.client._requests import AgentSource
    from skyloop.client._tools import ToolsSpec

__all__ = ["Client"]


class Client:
    """A skyloop sessions client over ``httpx``.

    Args:
        base_url: the service URL; default ``$SKYLOOP_URL``, then the config
            file's ``url``, then ``http://127.0.0.1:8080``.
        token: bearer token; default ``$SKYLOOP_TOKEN``, then the config file's ``token``.
        timeout: seconds for connect/read/write of ordinary requests.
        transport: an ``httpx`` transport, e.g. ``httpx.MockTransport`` in tests.
        reconnect: the retry policy (:class:`ReconnectPolicy`): how streams resume
            after drops and how turns re-post messages and tool outputs.

    ``with_raw_response`` offers the same endpoints answering a
    :class:`RawResponse` (status, headers, the JSON body as sent).

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
        >>> raw = client.with_raw_response.get_session(session_id)
        >>> raw.status_code, raw.json()["status"]
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        reconnect: ReconnectPolicy | None = None,
        live: bool | None = None,
    ) -> None:
        self._transport = SyncTransport(base_url, token=token, timeout=timeout, transport=transport)
        self.base_url = self._transport.base_url
        self.timeout = timeout
        self.reconnect = reconnect or ReconnectPolicy()
        # The live channel watches sessions over a WebSocket, outside httpx: with an injected transport
        # (tests, a proxy) the client keeps to that transport unless live=True says otherwise.
        self.live = live if live is not None else transport is None
        self._live_url: str | bool | None = False  # False: not asked yet
        self.with_raw_response = RawResponses(self._transport)

    def __repr__(self) -> str:
        return f"Client(base_url={self.base_url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` ran; tool workers still running then stop reporting errors."""
        return self._transport.is_closed

    def close(self) -> None:
        """Close the connection pool; streams and turns of this client stop working."""
        self._transport.close()

    # -------------------------------------------------------------------- service
    def health(self) -> Health:
        """The service's liveness answer (``GET /health``); needs no token."""
        return self._transport.send(api.health())

    def list_runners(self) -> list[Runner]:
        """The runners that can start turns, and whether each is online."""
        return self._transport.send(api.list_runners())

    def runner_status(self, runner_id: str) -> RunnerStatus:
        """One runner's status: a session bound to an offline runner cannot start turns."""
        return self._transport.send(api.runner_status(runner_id))

    # --------------------------------------------------------------------- agents
    def register_agent(
        self, spec: AgentSource, *, title: str | None = None, labels: dict[str, str] | None = None
    ) -> CreatedSession:
        """Upload an agent bundle (spec dict, ``<name>.yaml`` or a directory with ``config.yaml``).

        Creates a new agent version and its first idle session.
        """
        return self._transport.send(api.register_agent(spec, title=title, labels=labels))

    def create_agent(self, spec: AgentSource) -> Agent:
        """Register an agent version without a session (``POST /v1/agents``)."""
        return self._transport.send(api.create_agent(spec))

    def list_agents(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        order: str | None = None,
        name: str | None = None,
    ) -> AgentPage:
        """Agents newest first; with ``name``, only the newest version of that name."""
        return self._transport.send(api.list_agents(limit=limit, after=after, order=order, name=name))

    def iter_agents(self, *, order: str | None = None, page_size: int = 100) -> Iterator[Agent]:
        """Every agent, fetching pages as needed."""
        pager = api.Pager(lambda after: api.list_agents(limit=page_size, after=after, order=order))
        while (call := pager.next_call()) is not None:
            yield from pager.feed(self._transport.send(call))

    def get_agent(self, agent_id: str) -> Agent:
        """One agent version by id (registering again makes a new version, with a new id)."""
        return self._transport.send(api.get_agent(agent_id))

    # ------------------------------------------------------------------- sessions
    def create_session(
        self, agent_id: str, *, title: str | None = None, labels: dict[str, str] | None = None
    ) -> SessionSnapshot:
        """A new idle session of an agent version; nothing runs until a message is posted."""
        return self._transport.send(api.create_session(agent_id, title=title, labels=labels))

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
        """One page of sessions, filtered by the keywords given (``None`` = no filter)."""
        return self._transport.send(
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
        """Every session matching ``filters`` (:meth:`list_sessions`' keywords), fetching pages as needed."""
        pager = api.Pager(lambda after: api.list_sessions(limit=page_size, after=after, **filters))
        while (call := pager.next_call()) is not None:
            yield from pager.feed(self._transport.send(call))

    def get_session(self, session_id: str) -> SessionSnapshot:
        """The session's snapshot; its ``last_event_id`` is the cursor a live tail starts from."""
        return self._transport.send(api.get_session(session_id))

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
        return self._transport.send(
            api.update_session(session_id, runner_id=runner_id, title=title, labels=labels, archived=archived)
        )

    def delete_session(self, session_id: str) -> DeletedSession:
        """Delete the session with its items and events (a running turn is stopped)."""
        return self._transport.send(api.delete_session(session_id))

    def list_items(
        self, session_id: str, *, limit: int | None = None, after: str | None = None, order: str | None = None
    ) -> ItemPage:
        """One page of the session's items (messages, calls, outputs)."""
        return self._transport.send(api.list_items(session_id, limit=limit, after=after, order=order))

    def iter_items(
        self, session_id: str, *, order: str | None = None, page_size: int = 100
    ) -> Iterator[Item]:
        """Every item of the session, fetching pages as needed."""
        pager = api.Pager(lambda after: api.list_items(session_id, limit=page_size, after=after, order=order))
        while (call := pager.next_call()) is not None:
            yield from pager.feed(self._transport.send(call))

    def get_session_agent(self, session_id: str) -> Agent:
        """The agent version the session runs."""
        return self._transport.send(api.get_session_agent(session_id))

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
        """Any session event; ``tools`` are only declared to the model (their schemas), not run."""
        return self._transport.send(
            api.post_event(session_id, event_type, data, tools=tools, model_override=model_override)
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
        """Post a user message (only declaring ``tools``; use :meth:`session` to run them); returns its item id.

        One attempt: with ``idempotency_key`` the caller may safely post again
        after a lost answer (``Session.send`` does, under :attr:`reconnect`).
        """
        accepted = self._transport.send(
            api.send_message(
                session_id,
                text,
                tools=tools,
                model_override=model_override,
                idempotency_key=idempotency_key,
            )
        )
        return accepted.item_id or ""

    def submit_tool_output(self, session_id: str, call_id: str, output: str) -> EventAccepted:
        """Answer a parked call; sending the same output again is a harmless no-op."""
        return self._transport.send(api.submit_tool_output(session_id, call_id, output))

    def interrupt(self, session_id: str) -> EventAccepted:
        """Stop the running turn (harmless when idle)."""
        return self._transport.send(api.interrupt(session_id))

    def heartbeat(self, session_id: str) -> EventAccepted:
        """Tell a turn that waits for this client that it is still there (harmless otherwise)."""
        return self._transport.send(api.heartbeat(session_id))

    # ------------------------------------------------------------------- webhooks
    def create_webhook(
        self,
        url: str,
        *,
        events: list[str] | None = None,
        description: str | None = None,
        all_sessions: bool | None = None,
        format: str | None = None,
    ) -> WebhookEndpoint:
        """Register an endpoint for the lifecycle events of your sessions; keep ``secret``: it is shown once.
        ``format="anthropic"`` posts Claude Managed Agents' payloads (``beta.webhooks.unwrap`` verifies them)."""
        return self._transport.send(
            api.create_webhook(
                url, events=events, description=description, all_sessions=all_sessions, format=format
            )
        )

    def list_webhooks(self, *, owner: str | None = None) -> WebhookEndpointPage:
        """Your endpoints (an admin may name another ``owner``)."""
        return self._transport.send(api.list_webhooks(owner=owner))

    def get_webhook(self, webhook_id: str) -> WebhookEndpoint:
        return self._transport.send(api.get_webhook(webhook_id))

    def update_webhook(
        self,
        webhook_id: str,
        *,
        url: str | None = None,
        events: list[str] | None = None,
        description: str | None = None,
        all_sessions: bool | None = None,
        enabled: bool | None = None,
    ) -> WebhookEndpoint:
        """Change what is given; ``enabled=True`` re-enables an endpoint that was disabled for failing."""
        return self._transport.send(
            api.update_webhook(
                webhook_id,
                url=url,
                events=events,
                description=description,
                all_sessions=all_sessions,
                enabled=enabled,
            )
        )

    def delete_webhook(self, webhook_id: str) -> DeletedWebhookEndpoint:
        return self._transport.send(api.delete_webhook(webhook_id))

    def rotate_webhook_secret(self, webhook_id: str, *, grace_period_s: int | None = None) -> WebhookEndpoint:
        """A new secret (in the answer); the old one also signs for ``grace_period_s``."""
        return self._transport.send(api.rotate_webhook_secret(webhook_id, grace_period_s=grace_period_s))

    def list_webhook_deliveries(
        self,
        webhook_id: str,
        *,
        limit: int | None = None,
        after: str | None = None,
        status: str | None = None,
    ) -> WebhookDeliveryPage:
        """Deliveries, newest first, each with every attempt."""
        return self._transport.send(
            api.list_webhook_deliveries(webhook_id, limit=limit, after=after, status=status)
        )

    def redeliver_webhook(self, webhook_id: str, delivery_id: str) -> WebhookRedelivery:
        """Attempt a delivery again (same ``webhook-id``), e.g. one that was dead-lettered."""
        return self._transport.send(api.redeliver_webhook(webhook_id, delivery_id))

    def test_webhook(self, webhook_id: str) -> WebhookTestResult:
        """Post a signed ``skyloop.webhook.test`` event now and report the endpoint's answer."""
        return self._transport.send(api.test_webhook(webhook_id))

    # ------------------------------------------------------------ scheduled tasks
    def create_scheduled_task(
        self, *, name: str, prompt: str, rrule: str, agent_id: str, timezone: str = "UTC", **fields: Any
    ) -> ScheduledTask:
        """A task that runs ``prompt`` on the agent at the RRULE's occurrences in ``timezone``.

        ``fields``: ``model_override``, ``reasoning_effort``, ``max_cost_usd``, ``starts_at`` (ISO 8601),
        ``overlap`` (``skip`` | ``allow``), ``workspace``.
        """
        return self._transport.send(
            api.create_scheduled_task(
                name=name, prompt=prompt, rrule=rrule, agent_id=agent_id, timezone=timezone, **fields
            )
        )

    def list_scheduled_tasks(self) -> list[ScheduledTask]:
        """The caller's scheduled tasks, newest first."""
        return self._transport.send(api.list_scheduled_tasks())

    def get_scheduled_task(self, task_id: str) -> ScheduledTask:
        """One task, with its next occurrence and its newest run's status."""
        return self._transport.send(api.get_scheduled_task(task_id))

    def update_scheduled_task(self, task_id: str, **changes: Any) -> ScheduledTask:
        """Change the fields given (``state="paused"`` pauses, ``"active"`` resumes; ``None`` clears one)."""
        return self._transport.send(api.update_scheduled_task(task_id, **changes))

    def delete_scheduled_task(self, task_id: str) -> DeletedScheduledTask:
        """Delete the task and its schedule (the sessions its runs opened stay)."""
        return self._transport.send(api.delete_scheduled_task(task_id))

    def run_scheduled_task(self, task_id: str) -> RunTriggered:
        """Run the task now (a paused one too); a ``ConflictError`` while one of its runs is running."""
        return self._transport.send(api.run_scheduled_task(task_id))

    def list_scheduled_runs(
        self, task_id: str, *, limit: int | None = None, after: str | None = None
    ) -> ScheduledRunPage:
        """One page of the task's runs, newest first (``after``: the previous page's ``next_cursor``)."""
        return self._transport.send(api.list_scheduled_runs(task_id, limit=limit, after=after))

    def stream(self, session_id: str, *, after: int | None = None) -> EventStream:
        """Typed events of the session; reconnects transparently and never repeats an event.

        ``after=None`` starts at the session's current cursor (a live tail);
        ``after=N`` replays every retained event after ``N`` first.
        """
        return EventStream(self._transport, session_id, after=after, policy=self.reconnect)

    def watch(self, session_id: str, *, after: int | None = None) -> LiveEventStream | EventStream:
        """Typed events of the session over the live channel (a WebSocket) when the server has one.

        Like :meth:`stream` (``after`` alike; never repeats an event, resumes by
        itself), but an idle watch costs the server almost nothing: an open SSE
        stream holds a function for its whole life. Falls back to :meth:`stream`
        when ``/v1/info`` advertises no live channel, or ``live=False``.
        """
        url = self.live_url()
        if url is None:
            return self.stream(session_id, after=after)
        return LiveEventStream(self, url, session_id, after=after, token=self._transport.token)

    def live_url(self) -> str | None:
        """The live channel's WebSocket URL (``/v1/info``, asked once), or None when it is not used."""
        if not self.live:
            return None
        if self._live_url is False:
            try:
                self._live_url = self._transport.send(api.server_info(self.base_url))
            except (APIError, httpx.HTTPError, SkyloopClientError):
                self._live_url = None  # an older server or a proxy without /v1/info: SSE
        return self._live_url if isinstance(self._live_url, str) else None

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
