"""Response bodies of the newer routes, as pydantic models: the OpenAPI document describes them.

The routes build their bodies with the domain models' ``to_api``/summary
helpers; these models are the documented shape (a unit test checks a real
body validates against each).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class FileMetadata(BaseModel):
    filename: str
    bytes: int
    created_at: int
    content_type: str
    sha256: str
    source_metadata: dict[str, Any] | None = None


class SessionFileResource(BaseModel):
    """omnigent's ``session.resource`` with ``type: "file"``."""

    id: str
    object: Literal["session.resource"] = "session.resource"
    type: Literal["file"] = "file"
    session_id: str
    name: str
    metadata: FileMetadata


class SessionFileList(BaseModel):
    object: Literal["list"] = "list"
    data: list[SessionFileResource]
    first_id: str | None
    last_id: str | None
    has_more: bool


class SessionFileDeleted(BaseModel):
    id: str
    object: Literal["session.resource.deleted"] = "session.resource.deleted"
    deleted: Literal[True] = True


class ChildSessionSummary(BaseModel):
    """omnigent's ``ChildSessionSummary``; skyloop's children are forks (``kind: "fork"``)."""

    id: str
    object: Literal["child_session"] = "child_session"
    parent_session_id: str
    title: str | None = None
    task_summary: str | None = None
    tool: str | None = None
    session_name: str | None = None
    kind: str = "fork"
    created_at: int
    updated_at: int
    agent_id: str | None = None
    agent_name: str | None = None
    current_task_id: str | None = None
    current_task_status: str | None = None
    busy: bool = False
    labels: dict[str, str]
    last_task_error: dict[str, Any] | None = None
    last_message_preview: str | None = None
    pending_elicitations_count: int = 0
    routed_model: str | None = None
    routing_decision_id: str | None = None


class ChildSessionList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ChildSessionSummary]
    first_id: str | None
    last_id: str | None
    has_more: bool
