"""The client: one method per endpoint, typed answers, typed errors.

Each method describes its request with the endpoint builder of the same name
in ``_requests`` and sends it through its transport. Both clients are this
one implementation: ``_async/_client.py``, from which ``make unasync``
generates ``_sync/_client.py``, so the two cannot drift.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from skyloop.client import _requests as api
from skyloop.client._async._closing import AsyncClosing
from skyloop.client._async._live import AsyncLiveEventStream
from skyloop.client._async._raw import AsyncRawResponses
from skyloop.client._async._session import AsyncSession
from skyloop.client._async._stream import AsyncEventStream
from skyloop.client._async._transport import AsyncTransport
from skyloop.client._errors import APIError, SkyloopClientError
from skyloop.client._retry import ReconnectPolicy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from skyloop.client._hooks import (
        AsyncConfirmTool,
        AsyncToolEndHook,
        AsyncToolStartHook,
        ConfirmTool,
        ToolEndHook,
        ToolStartHook,
    )
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

__all__ = ["AsyncClient"]


class AsyncClient(AsyncClosing):
    """A skyloop sessions client over ``httpx``.

    Args:
        base_url: the service URL; default ``$SKYLOOP_URL``, then the config
            file's ``url``, then ``http://127.0.0.1:8080``.
        token: bearer token; default ``$SKYLOOP_TOKEN``, then the config file's ``token``.
        timeout: seconds for connect/read/write of ordinary requests.
        transport: an ``httpx`` transport, e.g. ``httpx.MockTransport`` in tests.
        reconnect: the retry policy (:class:`ReconnectPolicy`): how streams resume
            after drops and how turns re-post messages and tool outputs.
        live: watch sessions over the live channel (a WebSocket) when the server
            has one; default: yes, unless ``transport`` is given.

    ``with_raw_response`` offers the same endpoints answering a
    :class:`RawResponse` (status, headers, the JSON body as sent).

    Examples:
        >>> from skyloop.client import AsyncClient, OutputTextDelta
        >>> async with AsyncClient() as client:  # $SKYLOOP_URL, the config file, or http://127.0.0.1:8080
        ...     page = await client.list_sessions(agent_name="coder", limit=1)
        ...     created = await client.create_session(page.data[0].agent_id)
        ...     session = client.session(created.id, tools="coding")
        ...     async for event in session.send("Which Python files are here?"):
        ...         if isinstance(event, OutputTextDelta):
        ...             print(event.delta, end="", flush=True)
        >>> async with AsyncClient("https://skyloop.example.com", token="sky_...") as client:
        ...     created = await client.register_agent("my-agent.yaml")  # a dict or a directory work too
        ...     result = await client.session(created.session_id).run("Hello!")
        ...     print(result.status, result.text)
        >>> async with client.stream(session_id, after=0) as events:  # replay everything, then live
        ...     async for event in events:
        ...         print(event.event_id, event.type)
        >>> raw = await client.with_raw_response.get_session(session_id)
        >>> raw.status_code, raw.json()["status"]
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        reconnect: ReconnectPolicy | None = None,
        live: bool | None = None,
    ) -> None:
        self._transport = AsyncTransport(base_url, token=token, timeout=timeout, transport=transport)
        self.base_url = self._transport.base_url
        self.timeout = timeout
        self.reconnect = reconnect or ReconnectPolicy()
        # The live channel watches sessions over a WebSocket, outside httpx: with an injected transport
        # (tests, a proxy) the client keeps to that transport unless live=True says otherwise.
        self.live = live if live is not None else transport is None
        self._live_url: str | bool | None = False  # False: not asked yet
        self.with_raw_response = AsyncRawResponses(self._transport)

    def __repr__(self) -> str:
        return f"AsyncClient(base_url={self.base_url!r})"

    @property
    def is_closed(self) -> bool:
        """True once :meth:`aclose` ran; tool workers still running then stop reporting errors."""
        return self._transport.is_closed

    async def aclose(self) -> None:
        """Close the connection pool; streams and turns of this client stop working."""
        await self._transport.aclose()

    # -------------------------------------------------------------------- service
    async def health(self) -> Health:
        """The service's liveness answer (``GET /health``); needs no token."""
        return await self._transport.send(api.health())

    async def list_runners(self) -> list[Runner]:
        """The runners that can start turns, and whether each is online."""
        return await self._transport.send(api.list_runners())

    async def runner_status(self, runner_id: str) -> RunnerStatus:
        """One runner's status: a session bound to an offline runner cannot start turns."""
        return await self._transport.send(api.runner_status(runner_id))

    # --------------------------------------------------------------------- agents
    async def register_agent(
        self, spec: AgentSource, *, title: str | None = None, labels: dict[str, str] | None = None
    ) -> CreatedSession:
        """Upload an agent bundle (spec dict, ``<name>.yaml`` or a directory with ``config.yaml``).

        Creates a new agent version and its first idle session.
        """
        return await self._transport.send(api.register_agent(spec, title=title, labels=labels))

    async def create_agent(self, spec: AgentSource) -> Agent:
        """Register an agent version without a session (``POST /v1/agents``)."""
        return await self._transport.send(api.create_agent(spec))

    async def list_agents(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        order: str | None = None,
        name: str | None = None,
    ) -> AgentPage:
        """Agents newest first; with ``name``, only the newest version of that name."""
        return await self._transport.send(api.list_agents(limit=limit, after=after, order=order, name=name))

    async def iter_agents(self, *, order: str | None = None, page_size: int = 100) -> AsyncIterator[Agent]:
        """Every agent, fetching pages as needed."""
        pager = api.Pager(lambda after: api.list_agents(limit=page_size, after=after, order=order))
        while (call := pager.next_call()) is not None:
            for entry in pager.feed(await self._transport.send(call)):
                yield entry

    async def get_agent(self, agent_id: str) -> Agent:
        """One agent version by id (registering again makes a new version, with a new id)."""
        return await self._transport.send(api.get_agent(agent_id))

    # ------------------------------------------------------------------- sessions
    async def create_session(
        self, agent_id: str, *, title: str | None = None, labels: dict[str, str] | None = None
    ) -> SessionSnapshot:
        """A new idle session of an agent version; nothing runs until a message is posted."""
        return await self._transport.send(api.create_session(agent_id, title=title, labels=labels))

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
        """One page of sessions, filtered by the keywords given (``None`` = no filter)."""
        return await self._transport.send(
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
        """Every session matching ``filters`` (:meth:`list_sessions`' keywords), fetching pages as needed."""
        pager = api.Pager(lambda after: api.list_sessions(limit=page_size, after=after, **filters))
        while (call := pager.next_call()) is not None:
            for entry in pager.feed(await self._transport.send(call)):
                yield entry

    async def get_session(self, session_id: str) -> SessionSnapshot:
        """The session's snapshot; its ``last_event_id`` is the cursor a live tail starts from."""
        return await self._transport.send(api.get_session(session_id))

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
        return await self._transport.send(
            api.update_session(session_id, runner_id=runner_id, title=title, labels=labels, archived=archived)
        )

    async def delete_session(self, session_id: str) -> DeletedSession:
        """Delete the session with its items and events (a running turn is stopped)."""
        return await self._transport.send(api.delete_session(session_id))

    async def list_items(
        self, session_id: str, *, limit: int | None = None, after: str | None = None, order: str | None = None
    ) -> ItemPage:
        """One page of the session's items (messages, calls, outputs)."""
        return await self._transport.send(api.list_items(session_id, limit=limit, after=after, order=order))

    async def iter_items(
        self, session_id: str, *, order: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Item]:
        """Every item of the session, fetching pages as needed."""
        pager = api.Pager(lambda after: api.list_items(session_id, limit=page_size, after=after, order=order))
        while (call := pager.next_call()) is not None:
            for entry in pager.feed(await self._transport.send(call)):
                yield entry

    async def get_session_agent(self, session_id: str) -> Agent:
        """The agent version the session runs."""
        return await self._transport.send(api.get_session_agent(session_id))

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
        """Any session event; ``tools`` are only declared to the model (their schemas), not run."""
        return await self._transport.send(
            api.post_event(session_id, event_type, data, tools=tools, model_override=model_override)
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
        """Post a user message (only declaring ``tools``; use :meth:`session` to run them); returns its item id.

        One attempt: with ``idempotency_key`` the caller may safely post again
        after a lost answer (``Session.send`` does, under :attr:`reconnect`).
        """
        accepted = await self._transport.send(
            api.send_message(
                session_id,
                text,
                tools=tools,
                model_override=model_override,
                idempotency_key=idempotency_key,
            )
        )
        return accepted.item_id or ""

    async def submit_tool_output(self, session_id: str, call_id: str, output: str) -> EventAccepted:
        """Answer a parked call; sending the same output again is a harmless no-op."""
        return await self._transport.send(api.submit_tool_output(session_id, call_id, output))

    async def interrupt(self, session_id: str) -> EventAccepted:
        """Stop the running turn (harmless when idle)."""
        return await self._transport.send(api.interrupt(session_id))

    async def heartbeat(self, session_id: str) -> EventAccepted:
        """Tell a turn that waits for this client that it is still there (harmless otherwise)."""
        return await self._transport.send(api.heartbeat(session_id))

    # ------------------------------------------------------------------- webhooks
    async def create_webhook(
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
        return await self._transport.send(
            api.create_webhook(
                url, events=events, description=description, all_sessions=all_sessions, format=format
            )
        )

    async def list_webhooks(self, *, owner: str | None = None) -> WebhookEndpointPage:
        """Your endpoints (an admin may name another ``owner``)."""
        return await self._transport.send(api.list_webhooks(owner=owner))

    async def get_webhook(self, webhook_id: str) -> WebhookEndpoint:
        return await self._transport.send(api.get_webhook(webhook_id))

    async def update_webhook(
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
        return await self._transport.send(
            api.update_webhook(
                webhook_id,
                url=url,
                events=events,
                description=description,
                all_sessions=all_sessions,
                enabled=enabled,
            )
        )

    async def delete_webhook(self, webhook_id: str) -> DeletedWebhookEndpoint:
        return await self._transport.send(api.delete_webhook(webhook_id))

    async def rotate_webhook_secret(
        self, webhook_id: str, *, grace_period_s: int | None = None
    ) -> WebhookEndpoint:
        """A new secret (in the answer); the old one also signs for ``grace_period_s``."""
        return await self._transport.send(
            api.rotate_webhook_secret(webhook_id, grace_period_s=grace_period_s)
        )

    async def list_webhook_deliveries(
        self,
        webhook_id: str,
        *,
        limit: int | None = None,
        after: str | None = None,
        status: str | None = None,
    ) -> WebhookDeliveryPage:
        """Deliveries, newest first, each with every attempt."""
        return await self._transport.send(
            api.list_webhook_deliveries(webhook_id, limit=limit, after=after, status=status)
        )

    async def redeliver_webhook(self, webhook_id: str, delivery_id: str) -> WebhookRedelivery:
        """Attempt a delivery again (same ``webhook-id``), e.g. one that was dead-lettered."""
        return await self._transport.send(api.redeliver_webhook(webhook_id, delivery_id))

    async def test_webhook(self, webhook_id: str) -> WebhookTestResult:
        """Post a signed ``skyloop.webhook.test`` event now and report the endpoint's answer."""
        return await self._transport.send(api.test_webhook(webhook_id))

    # ------------------------------------------------------------ scheduled tasks
    async def create_scheduled_task(
        self, *, name: str, prompt: str, rrule: str, agent_id: str, timezone: str = "UTC", **fields: Any
    ) -> ScheduledTask:
        """A task that runs ``prompt`` on the agent at the RRULE's occurrences in ``timezone``.

        ``fields``: ``model_override``, ``reasoning_effort``, ``max_cost_usd``, ``starts_at`` (ISO 8601),
        ``overlap`` (``skip`` | ``allow``), ``workspace``.
        """
        return await self._transport.send(
            api.create_scheduled_task(
                name=name, prompt=prompt, rrule=rrule, agent_id=agent_id, timezone=timezone, **fields
            )
        )

    async def list_scheduled_tasks(self) -> list[ScheduledTask]:
        """The caller's scheduled tasks, newest first."""
        return await self._transport.send(api.list_scheduled_tasks())

    async def get_scheduled_task(self, task_id: str) -> ScheduledTask:
        """One task, with its next occurrence and its newest run's status."""
        return await self._transport.send(api.get_scheduled_task(task_id))

    async def update_scheduled_task(self, task_id: str, **changes: Any) -> ScheduledTask:
        """Change the fields given (``state="paused"`` pauses, ``"active"`` resumes; ``None`` clears one)."""
        return await self._transport.send(api.update_scheduled_task(task_id, **changes))

    async def delete_scheduled_task(self, task_id: str) -> DeletedScheduledTask:
        """Delete the task and its schedule (the sessions its runs opened stay)."""
        return await self._transport.send(api.delete_scheduled_task(task_id))

    async def run_scheduled_task(self, task_id: str) -> RunTriggered:
        """Run the task now (a paused one too); a ``ConflictError`` while one of its runs is running."""
        return await self._transport.send(api.run_scheduled_task(task_id))

    async def list_scheduled_runs(
        self, task_id: str, *, limit: int | None = None, after: str | None = None
    ) -> ScheduledRunPage:
        """One page of the task's runs, newest first (``after``: the previous page's ``next_cursor``)."""
        return await self._transport.send(api.list_scheduled_runs(task_id, limit=limit, after=after))

    def stream(self, session_id: str, *, after: int | None = None) -> AsyncEventStream:
        """Typed events of the session; reconnects transparently and never repeats an event.

        ``after=None`` starts at the session's current cursor (a live tail);
        ``after=N`` replays every retained event after ``N`` first.
        """
        return AsyncEventStream(self._transport, session_id, after=after, policy=self.reconnect)

    async def watch(
        self, session_id: str, *, after: int | None = None
    ) -> AsyncLiveEventStream | AsyncEventStream:
        """Typed events of the session over the live channel (a WebSocket) when the server has one.

        Like :meth:`stream` (``after`` alike; never repeats an event, resumes by
        itself), but an idle watch costs the server almost nothing: an open SSE
        stream holds a function for its whole life. Falls back to :meth:`stream`
        when ``/v1/info`` advertises no live channel, or ``live=False``.
        """
        url = await self.live_url()
        if url is None:
            return self.stream(session_id, after=after)
        return AsyncLiveEventStream(self, url, session_id, after=after, token=self._transport.token)

    async def live_url(self) -> str | None:
        """The live channel's WebSocket URL (``/v1/info``, asked once), or None when it is not used."""
        if not self.live:
            return None
        if self._live_url is False:
            try:
                self._live_url = await self._transport.send(api.server_info(self.base_url))
            except (APIError, httpx.HTTPError, SkyloopClientError):
                self._live_url = None  # an older server or a proxy without /v1/info: SSE
        return self._live_url if isinstance(self._live_url, str) else None

    def session(
        self,
        session_id: str,
        *,
        tools: ToolsSpec = None,
        confirm: ConfirmTool | AsyncConfirmTool | None = None,
        on_tool_start: ToolStartHook | AsyncToolStartHook | None = None,
        on_tool_end: ToolEndHook | AsyncToolEndHook | None = None,
    ) -> AsyncSession:
        """A handle whose ``send``/``run`` drive whole turns, client tools included."""
        return AsyncSession(
            self,
            session_id,
            tools=tools,
            confirm=confirm,
            on_tool_start=on_tool_start,
            on_tool_end=on_tool_end,
        )
