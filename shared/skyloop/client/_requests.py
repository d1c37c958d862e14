"""Every endpoint as a plain description (method, path, body, parser), shared by both clients.

This is the I/O-free half of the transport: building requests and reading
answers happen here, so ``Client`` and ``AsyncClient`` are one line per
method and cannot disagree. Each endpoint builder is named and called exactly
like the client method it serves (``api.get_session(sid)`` describes what
``client.get_session(sid)`` sends), which is also what lets
``client.with_raw_response`` offer every endpoint without a third copy.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import ValidationError

from skyloop.client._errors import ResponseValidationError, error_from_response
from skyloop.client._models import (
    Agent,
    AgentPage,
    CreatedSession,
    DeletedScheduledTask,
    DeletedSession,
    DeletedWebhookEndpoint,
    EventAccepted,
    Health,
    ItemPage,
    Page,
    Runner,
    RunnerStatus,
    RunTriggered,
    ScheduledRunPage,
    ScheduledTask,
    SessionPage,
    SessionSnapshot,
    WebhookDeliveryPage,
    WebhookEndpoint,
    WebhookEndpointPage,
    WebhookRedelivery,
    WebhookTestResult,
)
from skyloop.client._tools import ToolBox

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from skyloop.client._tools import ToolsSpec

T = TypeVar("T")

AgentSource = dict[str, Any] | str | os.PathLike[str]
"""An agent spec dict, or a path to a ``<name>.yaml`` file or a directory bundle with ``config.yaml``."""

SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".venv", "node_modules"})
IDEMPOTENCY_HEADER = "Idempotency-Key"


@dataclass(frozen=True)
class ApiCall(Generic[T]):
    """One request to make and how to read its answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, Any] | None = None
    json: Any = None
    data: dict[str, str] | None = None
    files: dict[str, tuple[str, bytes, str]] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def idempotency_key(self) -> str | None:
        """The key that makes re-sending this request safe, if it carries one."""
        return self.headers.get(IDEMPOTENCY_HEADER)

    def request_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"headers": self.headers}
        if self.params:
            kwargs["params"] = {k: v for k, v in self.params.items() if v is not None}
        if self.json is not None:
            kwargs["json"] = self.json
        if self.files is not None:
            kwargs["files"] = self.files
            kwargs["data"] = self.data or {}
        return kwargs


def decode_json(call: ApiCall[Any], response: httpx.Response) -> Any:
    """The JSON body of a read answer; the typed error for an error status."""
    if response.status_code >= 400:
        raise error_from_response(response.status_code, response.content)
    try:
        return response.json()
    except ValueError as exc:
        raise ResponseValidationError(
            f"{call.method} {call.path}: answer is not JSON ({response.status_code})"
        ) from exc


def parse_body(call: ApiCall[T], body: Any) -> T:
    """The model for a decoded body; a body the contract does not allow is a ``ResponseValidationError``."""
    try:
        return call.parse(body)
    except (ValidationError, ValueError, TypeError) as exc:
        raise ResponseValidationError(f"{call.method} {call.path}: unexpected answer: {exc}") from exc


def read_response(call: ApiCall[T], response: httpx.Response) -> T:
    """Raise the typed error for an error status; otherwise parse the JSON body."""
    return parse_body(call, decode_json(call, response))


class Pager(Generic[T]):
    """Walks a cursor-paginated list without doing I/O: send :meth:`next_call`, :meth:`feed` back the page.

    Both clients' ``iter_*`` methods are this loop around their own send, so
    the paging rule (follow ``last_id`` while ``has_more``) lives once.
    """

    def __init__(self, build: Callable[[str | None], ApiCall[Page[T]]]) -> None:
        self._build = build
        self._after: str | None = None
        self._done = False

    def next_call(self) -> ApiCall[Page[T]] | None:
        """The request for the next page, or ``None`` after the last one."""
        return None if self._done else self._build(self._after)

    def feed(self, page: Page[T]) -> list[T]:
        """The page's entries; remembers where the next page starts."""
        if not page.has_more or not page.last_id:
            self._done = True
        self._after = page.last_id
        return page.data


def _seg(value: str) -> str:
    """A path segment; ids are hex, but user input must never reshape the path."""
    return quote(str(value), safe="")


def _bool(value: bool | None) -> str | None:
    return None if value is None else ("true" if value else "false")


def _schemas(tools: ToolsSpec) -> list[dict[str, Any]] | None:
    """The function-tool schemas a message declares (``None``: declare nothing)."""
    return ToolBox.from_spec(tools).schemas() or None


# ------------------------------------------------------------------------ endpoints
def health() -> ApiCall[Health]:
    return ApiCall("GET", "/health", Health.model_validate)


def live_url(base_url: str, body: Any) -> str | None:
    """The live channel's WebSocket URL from ``/v1/info`` (None when the server has none)."""
    live = body.get("live") if isinstance(body, dict) else None
    url = live.get("url") if isinstance(live, dict) else None
    if not isinstance(url, str) or not url:
        return None
    if url.startswith("/"):  # on the API's own host
        scheme, _, rest = base_url.partition("://")
        url = f"{'wss' if scheme == 'https' else 'ws'}://{rest.split('/', 1)[0]}{url}"
    return url if url.startswith(("ws://", "wss://")) else None


def server_info(base_url: str) -> ApiCall[str | None]:
    """``GET /v1/info``, read for the one thing the SDK needs from it: where the live channel is."""
    return ApiCall("GET", "/v1/info", lambda body: live_url(base_url, body))


def _runners(body: Any) -> list[Runner]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError("expected {'data': [...]}")
    return [Runner.model_validate(r) for r in data]


def list_runners() -> ApiCall[list[Runner]]:
    return ApiCall("GET", "/v1/runners", _runners)


def runner_status(runner_id: str) -> ApiCall[RunnerStatus]:
    return ApiCall("GET", f"/v1/runners/{_seg(runner_id)}/status", RunnerStatus.model_validate)


def register_agent(
    spec: AgentSource, *, title: str | None = None, labels: dict[str, str] | None = None
) -> ApiCall[CreatedSession]:
    """Upload an agent bundle: a new agent version and its first idle session (``POST /v1/sessions``)."""
    metadata: dict[str, Any] = {}
    if title is not None:
        metadata["title"] = title
    if labels is not None:
        metadata["labels"] = labels
    name, bundle = build_bundle(spec)
    return ApiCall(
        "POST",
        "/v1/sessions",
        CreatedSession.model_validate,
        data={"metadata": json.dumps(metadata)},
        files={"bundle": (name, bundle, "application/gzip")},
    )


def create_agent(spec: AgentSource) -> ApiCall[Agent]:
    """Register an agent version without a session (``POST /v1/agents``)."""
    if isinstance(spec, dict):
        return ApiCall("POST", "/v1/agents", Agent.model_validate, json=spec)
    name, bundle = build_bundle(spec)
    return ApiCall(
        "POST",
        "/v1/agents",
        Agent.model_validate,
        data={},
        files={"bundle": (name, bundle, "application/gzip")},
    )


def list_agents(
    *,
    limit: int | None = None,
    after: str | None = None,
    order: str | None = None,
    name: str | None = None,
) -> ApiCall[AgentPage]:
    """Agents newest first; with ``name``, only the newest version of that name."""
    params = {"limit": limit, "after": after, "order": order, "name": name}
    return ApiCall("GET", "/v1/agents", AgentPage.model_validate, params=params)


def get_agent(agent_id: str) -> ApiCall[Agent]:
    return ApiCall("GET", f"/v1/agents/{_seg(agent_id)}", Agent.model_validate)


def create_session(
    agent_id: str, *, title: str | None = None, labels: dict[str, str] | None = None
) -> ApiCall[SessionSnapshot]:
    body: dict[str, Any] = {"agent_id": agent_id}
    if title is not None:
        body["title"] = title
    if labels is not None:
        body["labels"] = labels
    return ApiCall("POST", "/v1/sessions", SessionSnapshot.model_validate, json=body)


def list_sessions(
    *,
    agent_name: str | None = None,
    agent_id: str | None = None,
    limit: int | None = None,
    after: str | None = None,
    order: str | None = None,
    include_archived: bool | None = None,
) -> ApiCall[SessionPage]:
    params = {
        "agent_name": agent_name,
        "agent_id": agent_id,
        "limit": limit,
        "after": after,
        "order": order,
        "include_archived": _bool(include_archived),
    }
    return ApiCall("GET", "/v1/sessions", SessionPage.model_validate, params=params)


def get_session(session_id: str) -> ApiCall[SessionSnapshot]:
    return ApiCall("GET", f"/v1/sessions/{_seg(session_id)}", SessionSnapshot.model_validate)


def update_session(
    session_id: str,
    *,
    runner_id: str | None = None,
    title: str | None = None,
    labels: dict[str, str] | None = None,
    archived: bool | None = None,
) -> ApiCall[SessionSnapshot]:
    """Change only the fields given; ``runner_id=""`` unbinds the runner."""
    candidates = {"runner_id": runner_id, "title": title, "labels": labels, "archived": archived}
    changes = {k: v for k, v in candidates.items() if v is not None}
    return ApiCall("PATCH", f"/v1/sessions/{_seg(session_id)}", SessionSnapshot.model_validate, json=changes)


def delete_session(session_id: str) -> ApiCall[DeletedSession]:
    return ApiCall("DELETE", f"/v1/sessions/{_seg(session_id)}", DeletedSession.model_validate)


def list_items(
    session_id: str, *, limit: int | None = None, after: str | None = None, order: str | None = None
) -> ApiCall[ItemPage]:
    params = {"limit": limit, "after": after, "order": order}
    return ApiCall("GET", f"/v1/sessions/{_seg(session_id)}/items", ItemPage.model_validate, params=params)


def get_session_agent(session_id: str) -> ApiCall[Agent]:
    return ApiCall("GET", f"/v1/sessions/{_seg(session_id)}/agent", Agent.model_validate)


def post_event(
    session_id: str,
    event_type: str,
    data: dict[str, Any] | None = None,
    *,
    tools: ToolsSpec = None,
    model_override: str | None = None,
) -> ApiCall[EventAccepted]:
    """Any session event; ``tools`` are declared to the model (their schemas), not run."""
    body: dict[str, Any] = {"type": event_type, "data": data or {}}
    schemas = _schemas(tools)
    if schemas:
        body["tools"] = schemas
    if model_override is not None:
        body["model_override"] = model_override
    return ApiCall("POST", f"/v1/sessions/{_seg(session_id)}/events", EventAccepted.model_validate, json=body)


def send_message(
    session_id: str,
    text: str,
    *,
    tools: ToolsSpec = None,
    model_override: str | None = None,
    idempotency_key: str | None = None,
) -> ApiCall[EventAccepted]:
    """A user message; with ``idempotency_key`` re-posting it is safe (the server answers the first post)."""
    data = {"role": "user", "content": [{"type": "input_text", "text": text}]}
    call = post_event(session_id, "message", data, tools=tools, model_override=model_override)
    if idempotency_key:
        call.headers[IDEMPOTENCY_HEADER] = idempotency_key
    return call


def submit_tool_output(session_id: str, call_id: str, output: str) -> ApiCall[EventAccepted]:
    """Answer a parked call; the server ignores the same output sent again, so re-posting is safe."""
    return post_event(session_id, "function_call_output", {"call_id": call_id, "output": output})


def interrupt(session_id: str) -> ApiCall[EventAccepted]:
    """Stop the running turn (harmless when idle)."""
    return post_event(session_id, "interrupt")


def heartbeat(session_id: str) -> ApiCall[EventAccepted]:
    """The client is still there (an agent with ``limits.client_heartbeat_s`` needs one that often while it waits)."""
    return post_event(session_id, "heartbeat")


# ------------------------------------------------------------------------- webhooks
def create_webhook(
    url: str,
    *,
    events: list[str] | None = None,
    description: str | None = None,
    all_sessions: bool | None = None,
    format: str | None = None,
) -> ApiCall[WebhookEndpoint]:
    """Register an endpoint; the answer carries its signing secret, shown this once. ``format``:
    ``skyloop`` (the default) or ``anthropic`` (Claude Managed Agents' payloads, docs/webhooks.md)."""
    body = {
        "url": url,
        "format": format,
        "events": events,
        "description": description,
        "all_sessions": all_sessions,
    }
    return ApiCall(
        "POST",
        "/v1/webhooks",
        WebhookEndpoint.model_validate,
        json={k: v for k, v in body.items() if v is not None},
    )


def list_webhooks(*, owner: str | None = None) -> ApiCall[WebhookEndpointPage]:
    return ApiCall("GET", "/v1/webhooks", WebhookEndpointPage.model_validate, params={"owner": owner})


def get_webhook(webhook_id: str) -> ApiCall[WebhookEndpoint]:
    return ApiCall("GET", f"/v1/webhooks/{_seg(webhook_id)}", WebhookEndpoint.model_validate)


def update_webhook(
    webhook_id: str,
    *,
    url: str | None = None,
    events: list[str] | None = None,
    description: str | None = None,
    all_sessions: bool | None = None,
    enabled: bool | None = None,
) -> ApiCall[WebhookEndpoint]:
    """Change what is given; ``enabled=True`` re-enables an endpoint that was disabled for failing."""
    candidates = {
        "url": url,
        "events": events,
        "description": description,
        "all_sessions": all_sessions,
        "enabled": enabled,
    }
    changes = {k: v for k, v in candidates.items() if v is not None}
    return ApiCall("PATCH", f"/v1/webhooks/{_seg(webhook_id)}", WebhookEndpoint.model_validate, json=changes)


def delete_webhook(webhook_id: str) -> ApiCall[DeletedWebhookEndpoint]:
    return ApiCall("DELETE", f"/v1/webhooks/{_seg(webhook_id)}", DeletedWebhookEndpoint.model_validate)


def rotate_webhook_secret(webhook_id: str, *, grace_period_s: int | None = None) -> ApiCall[WebhookEndpoint]:
    """A new secret; the old one keeps signing beside it for ``grace_period_s`` (server default 24 h)."""
    body = {} if grace_period_s is None else {"grace_period_s": grace_period_s}
    return ApiCall(
        "POST", f"/v1/webhooks/{_seg(webhook_id)}/rotate_secret", WebhookEndpoint.model_validate, json=body
    )


def list_webhook_deliveries(
    webhook_id: str, *, limit: int | None = None, after: str | None = None, status: str | None = None
) -> ApiCall[WebhookDeliveryPage]:
    """Newest first, each with its attempts (status, response code, latency, next retry)."""
    params = {"limit": limit, "after": after, "status": status}
    return ApiCall(
        "GET",
        f"/v1/webhooks/{_seg(webhook_id)}/deliveries",
        WebhookDeliveryPage.model_validate,
        params=params,
    )


def redeliver_webhook(webhook_id: str, delivery_id: str) -> ApiCall[WebhookRedelivery]:
    path = f"/v1/webhooks/{_seg(webhook_id)}/deliveries/{_seg(delivery_id)}/redeliver"
    return ApiCall("POST", path, WebhookRedelivery.model_validate, json={})


def test_webhook(webhook_id: str) -> ApiCall[WebhookTestResult]:
    """Post a signed ``skyloop.webhook.test`` event to the endpoint now."""
    return ApiCall("POST", f"/v1/webhooks/{_seg(webhook_id)}/test", WebhookTestResult.model_validate, json={})


def stream_path(session_id: str) -> str:
    return f"/v1/sessions/{_seg(session_id)}/stream"


# -------------------------------------------------------------------------- bundles
def build_bundle(source: AgentSource) -> tuple[str, bytes]:
    """A gzipped tar for ``POST /v1/sessions``: ``(file name, bytes)``.

    A dict becomes ``<name>.yaml`` (JSON text, which is YAML, so no YAML
    library is needed); a file is packed under its own name; a directory is
    packed with its regular files at the root (symlinks and tool folders such
    as ``.git`` are left out, as the server rejects links).
    """
    if isinstance(source, dict):
        name = str(source.get("name") or "agent")
        return f"{name}.tar.gz", _tar({f"{name}.yaml": json.dumps(source, indent=2).encode()})
    path = Path(source).expanduser()
    if path.is_dir():
        files: dict[str, bytes] = {}
        for child in sorted(path.rglob("*")):
            rel = child.relative_to(path)
            if any(part in SKIPPED_DIRS for part in rel.parts) or child.is_symlink() or not child.is_file():
                continue
            files[rel.as_posix()] = child.read_bytes()
        if not files:
            raise ValueError(f"{path} holds no files to bundle")
        return f"{path.name or 'agent'}.tar.gz", _tar(files)
    if path.is_file():
        return f"{path.stem}.tar.gz", _tar({path.name: path.read_bytes()})
    raise FileNotFoundError(f"no agent file or directory at {path}")


def _tar(files: dict[str, bytes]) -> bytes:
    import gzip
    import tarfile

    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, payload in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


# ------------------------------------------------------------------- scheduled tasks
def _tasks(body: Any) -> list[ScheduledTask]:
    data = body.get("scheduled_tasks") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError("expected {'scheduled_tasks': [...]}")
    return [ScheduledTask.model_validate(t) for t in data]


def create_scheduled_task(
    *, name: str, prompt: str, rrule: str, agent_id: str, timezone: str = "UTC", **fields: Any
) -> ApiCall[ScheduledTask]:
    """A task that runs ``prompt`` on ``agent_id`` at the RRULE's occurrences in ``timezone``.

    ``fields``: ``model_override``, ``reasoning_effort``, ``max_cost_usd``, ``starts_at`` (ISO 8601),
    ``overlap`` (``skip`` | ``allow``), ``workspace``.
    """
    body = {
        "name": name,
        "prompt": prompt,
        "rrule": rrule,
        "agent_id": agent_id,
        "timezone": timezone,
        **fields,
    }
    return ApiCall("POST", "/v1/scheduled-tasks", ScheduledTask.model_validate, json=body)


def list_scheduled_tasks() -> ApiCall[list[ScheduledTask]]:
    return ApiCall("GET", "/v1/scheduled-tasks", _tasks)


def get_scheduled_task(task_id: str) -> ApiCall[ScheduledTask]:
    return ApiCall("GET", f"/v1/scheduled-tasks/{_seg(task_id)}", ScheduledTask.model_validate)


def update_scheduled_task(task_id: str, **changes: Any) -> ApiCall[ScheduledTask]:
    """Change the fields given (``state="paused"`` pauses, ``"active"`` resumes; ``None`` clears an optional one)."""
    return ApiCall(
        "PATCH", f"/v1/scheduled-tasks/{_seg(task_id)}", ScheduledTask.model_validate, json=changes
    )


def delete_scheduled_task(task_id: str) -> ApiCall[DeletedScheduledTask]:
    return ApiCall("DELETE", f"/v1/scheduled-tasks/{_seg(task_id)}", DeletedScheduledTask.model_validate)


def run_scheduled_task(task_id: str) -> ApiCall[RunTriggered]:
    return ApiCall("POST", f"/v1/scheduled-tasks/{_seg(task_id)}/run", RunTriggered.model_validate)


def list_scheduled_runs(
    task_id: str, *, limit: int | None = None, after: str | None = None
) -> ApiCall[ScheduledRunPage]:
    return ApiCall(
        "GET",
        f"/v1/scheduled-tasks/{_seg(task_id)}/runs",
        ScheduledRunPage.model_validate,
        params={"limit": limit, "after": after},
    )
