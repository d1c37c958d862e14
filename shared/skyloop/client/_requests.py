"""Every endpoint as a plain description (method, path, body, parser), shared by both clients.

Building requests and parsing answers here, with no I/O, keeps ``Client`` and
``AsyncClient`` to a few lines per method and guarantees the twins agree.
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
    DeletedSession,
    EventAccepted,
    Health,
    ItemPage,
    Runner,
    RunnerStatus,
    SessionPage,
    SessionSnapshot,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

T = TypeVar("T")

AgentSource = dict[str, Any] | str | os.PathLike[str]
"""An agent spec dict, or a path to a ``<name>.yaml`` file or a directory bundle with ``config.yaml``."""

SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".venv", "node_modules"})


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


def read_response(call: ApiCall[T], response: httpx.Response) -> T:
    """Raise the typed error for an error status; otherwise parse the JSON body."""
    if response.status_code >= 400:
        raise error_from_response(response.status_code, response.content)
    try:
        body = response.json()
    except ValueError as exc:
        raise ResponseValidationError(
            f"{call.method} {call.path}: answer is not JSON ({response.status_code})"
        ) from exc
    try:
        return call.parse(body)
    except (ValidationError, ValueError, TypeError) as exc:
        raise ResponseValidationError(f"{call.method} {call.path}: unexpected answer: {exc}") from exc


def _seg(value: str) -> str:
    """A path segment; ids are hex, but user input must never reshape the path."""
    return quote(str(value), safe="")


def _bool(value: bool | None) -> str | None:
    return None if value is None else ("true" if value else "false")


# ------------------------------------------------------------------------ endpoints
def health() -> ApiCall[Health]:
    return ApiCall("GET", "/health", Health.model_validate)


def create_session(
    agent_id: str, *, title: str | None, labels: dict[str, str] | None
) -> ApiCall[SessionSnapshot]:
    body: dict[str, Any] = {"agent_id": agent_id}
    if title is not None:
        body["title"] = title
    if labels is not None:
        body["labels"] = labels
    return ApiCall("POST", "/v1/sessions", SessionSnapshot.model_validate, json=body)


def register_agent(
    source: AgentSource, *, title: str | None, labels: dict[str, str] | None
) -> ApiCall[CreatedSession]:
    metadata: dict[str, Any] = {}
    if title is not None:
        metadata["title"] = title
    if labels is not None:
        metadata["labels"] = labels
    name, bundle = build_bundle(source)
    return ApiCall(
        "POST",
        "/v1/sessions",
        CreatedSession.model_validate,
        data={"metadata": json.dumps(metadata)},
        files={"bundle": (name, bundle, "application/gzip")},
    )


def create_agent(source: AgentSource) -> ApiCall[Agent]:
    if isinstance(source, dict):
        return ApiCall("POST", "/v1/agents", Agent.model_validate, json=source)
    name, bundle = build_bundle(source)
    return ApiCall(
        "POST",
        "/v1/agents",
        Agent.model_validate,
        data={},
        files={"bundle": (name, bundle, "application/gzip")},
    )


def list_agents(
    *, limit: int | None, after: str | None, order: str | None, name: str | None = None
) -> ApiCall[AgentPage]:
    params = {"limit": limit, "after": after, "order": order, "name": name}
    return ApiCall("GET", "/v1/agents", AgentPage.model_validate, params=params)


def get_agent(agent_id: str) -> ApiCall[Agent]:
    return ApiCall("GET", f"/v1/agents/{_seg(agent_id)}", Agent.model_validate)


def list_sessions(
    *,
    agent_name: str | None,
    agent_id: str | None,
    limit: int | None,
    after: str | None,
    order: str | None,
    include_archived: bool | None,
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


def update_session(session_id: str, changes: dict[str, Any]) -> ApiCall[SessionSnapshot]:
    return ApiCall("PATCH", f"/v1/sessions/{_seg(session_id)}", SessionSnapshot.model_validate, json=changes)


def delete_session(session_id: str) -> ApiCall[DeletedSession]:
    return ApiCall("DELETE", f"/v1/sessions/{_seg(session_id)}", DeletedSession.model_validate)


def list_items(
    session_id: str, *, limit: int | None, after: str | None, order: str | None
) -> ApiCall[ItemPage]:
    params = {"limit": limit, "after": after, "order": order}
    return ApiCall("GET", f"/v1/sessions/{_seg(session_id)}/items", ItemPage.model_validate, params=params)


def get_session_agent(session_id: str) -> ApiCall[Agent]:
    return ApiCall("GET", f"/v1/sessions/{_seg(session_id)}/agent", Agent.model_validate)


def _runners(body: Any) -> list[Runner]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError("expected {'data': [...]}")
    return [Runner.model_validate(r) for r in data]


def list_runners() -> ApiCall[list[Runner]]:
    return ApiCall("GET", "/v1/runners", _runners)


def runner_status(runner_id: str) -> ApiCall[RunnerStatus]:
    return ApiCall("GET", f"/v1/runners/{_seg(runner_id)}/status", RunnerStatus.model_validate)


def post_event(
    session_id: str,
    event_type: str,
    data: dict[str, Any] | None = None,
    *,
    tools: list[dict[str, Any]] | None = None,
    model_override: str | None = None,
) -> ApiCall[EventAccepted]:
    body: dict[str, Any] = {"type": event_type, "data": data or {}}
    if tools:
        body["tools"] = tools
    if model_override is not None:
        body["model_override"] = model_override
    return ApiCall("POST", f"/v1/sessions/{_seg(session_id)}/events", EventAccepted.model_validate, json=body)


def message_event(
    session_id: str,
    text: str,
    *,
    tools: list[dict[str, Any]] | None,
    model_override: str | None = None,
    idempotency_key: str | None = None,
) -> ApiCall[EventAccepted]:
    """A user message; with ``idempotency_key`` re-posting it is safe (the server answers the first post)."""
    data = {"role": "user", "content": [{"type": "input_text", "text": text}]}
    call = post_event(session_id, "message", data, tools=tools, model_override=model_override)
    if idempotency_key:
        call.headers["Idempotency-Key"] = idempotency_key
    return call


def tool_output_event(session_id: str, call_id: str, output: str) -> ApiCall[EventAccepted]:
    return post_event(session_id, "function_call_output", {"call_id": call_id, "output": output})


def interrupt_event(session_id: str) -> ApiCall[EventAccepted]:
    return post_event(session_id, "interrupt")


def update_changes(
    *, runner_id: str | None, title: str | None, labels: dict[str, str] | None, archived: bool | None
) -> dict[str, Any]:
    """Only the fields given; ``runner_id=""`` unbinds the runner."""
    candidates = {"runner_id": runner_id, "title": title, "labels": labels, "archived": archived}
    return {k: v for k, v in candidates.items() if v is not None}


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
