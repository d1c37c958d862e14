"""Sessions, items, turns and required actions as the SDK's objects (``openai.types.beta``).

One skyloop session is one ``agent.session``; its status is derived:

==========================================  ===================
skyloop                                     OpenAI
==========================================  ===================
running, with client calls or approvals     ``requires_action``
running                                     ``in_progress``
idle or failed, spend at its limit          ``budget_reached``
failed                                      ``failed``
idle                                        ``idle``
==========================================  ===================

A turn is a skyloop turn (one response id); items carry the id of the turn
that made them (a user message: the turn it started or joined).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyloop import agent_versions, pricing
from skyloop.openai_compat import agents as oa_agents

if TYPE_CHECKING:
    from skyloop.models.agent import Agent
    from skyloop.models.session import ConversationItem, PendingCall, Session, Turn
    from skyloop.store import Store

BUDGET_CODE = "session_budget_exceeded"
APPROVAL_PREFIX = "approve_"

# skyloop's turn error codes as OpenAI's ``SessionTurnError.code`` (a closed set); the message keeps skyloop's.
TURN_ERROR_CODES = {
    BUDGET_CODE: BUDGET_CODE,
    "model_rate_limited": "rate_limit_exceeded",
    "model_timeout": "request_timeout",
    "model_unreachable": "connection_failed",
    "model_auth_error": "authentication_error",
    "model_http_error": "server_error",
    "model_error": "server_error",
    "client_tool_timeout": "request_timeout",
    "client_heartbeat_timeout": "request_timeout",
    "url_not_allowed": "invalid_request",
    "secret_not_allowed": "invalid_request",
}


def turn_error(error: dict[str, Any] | None) -> dict[str, Any] | None:
    if not error:
        return None
    code = str(error.get("code") or "internal_error")
    return {
        "code": TURN_ERROR_CODES.get(code, "internal_error"),
        "message": f"[{code}] {error.get('message', '')}",
    }


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def required_action(call: PendingCall) -> dict[str, Any]:
    if call.kind == "client":
        return {
            "type": "function_call",
            "arguments": call.arguments,
            "call_id": call.call_id,
            "name": call.name,
            "turn_id": call.response_id,
        }
    return approval_action(APPROVAL_PREFIX + call.call_id, call.name, call.arguments, call.response_id)


def approval_action(request_id: str, name: str, arguments: str, turn_id: str) -> dict[str, Any]:
    return {
        "type": "mcp_approval_request",
        "request_id": request_id,
        "turn_id": turn_id,
        "request": {
            "type": "mcp_tool_call",
            "arguments": arguments,
            "message": f"Allow the tool '{name}' to run with these arguments?",
            "name": name,
            "server_label": "skyloop",
        },
    }


def open_calls(store: Store, session: Session) -> list[PendingCall]:
    """The running turn's calls that wait for the client: unanswered client calls and approvals."""
    if session.status != "running" or not session.active_response_id:
        return []
    return [
        c
        for c in store.list_calls(session.id, session.active_response_id)
        if c.output is None and not c.cancelled and (c.kind == "client" or c.approval == "pending")
    ]


def budget_reached(session: Session) -> bool:
    return pricing.budget_reached(session.spend_limit_cents, session.spend_micros)


def stopped_by_budget(session: Session) -> bool:
    """The last turn failed only because the budget stopped it (a raised limit makes the session idle)."""
    error = session.last_task_error
    return session.status == "failed" and error is not None and error.code == BUDGET_CODE


def status_of(session: Session, actions: list[dict[str, Any]]) -> str:
    if session.status == "running":
        return "requires_action" if actions else "in_progress"
    if budget_reached(session):
        return "budget_reached"
    return "failed" if session.status == "failed" and not stopped_by_budget(session) else "idle"


def environment_id(session: Session) -> str:
    """The id the OpenAI API gives the session's environment (one per session, whatever its type)."""
    return f"env_{session.id}"


def environment(session: Session) -> dict[str, Any]:
    if session.environment is not None:  # openai_hosted: skyloop's hosted environment
        return {
            "type": "openai_hosted",
            "id": environment_id(session),
            "capability_directories": [],
            "files": [
                {
                    "type": "inline",
                    "id": f"file_{n}",
                    "path": f"/workspace/{f.path.lstrip('/').removeprefix('workspace/')}",
                    "size_bytes": len(f.content.encode()),
                }
                for n, f in enumerate(session.environment.files)
            ],
            "network": {
                "access": "enabled" if session.environment.network == "public" else "disabled",
                "allowed_domains": [],
            },
            "packages": {"npm": [], "python": [], "system": []},
            "plugins": [],
            "skills": [],
        }
    if session.workspace:
        return {
            "type": "self_hosted",
            "id": environment_id(session),
            "capability_directories": [],
            "remote_url": "",
            "workspace_directory": session.workspace,
        }
    return {"type": "none"}


def session_agent(agent: Agent, session: Session) -> dict[str, Any]:
    fields = oa_agents.common_fields(agent, model=session.model_override)
    if session.reasoning_effort:
        fields["reasoning"] = {**fields["reasoning"], "effort": session.reasoning_effort}
    return {
        "id": agent_versions.openai_id(agent),
        "tools": oa_agents.tools_of(agent, persisted=False),
        **fields,
    }


def spend_control(session: Session, agent: Agent) -> dict[str, Any]:
    priced = pricing.price_of(agent.spec.executor, session.model_override) is not None
    return {
        "limit": session.spend_limit_cents,
        "consumed": pricing.cents_floor(session.spend_micros) if priced or session.spend_micros else None,
    }


def session_object(
    session: Session, agent: Agent, *, actions: list[dict[str, Any]], status: str | None = None
) -> dict[str, Any]:
    """An ``AgentSession``; ``status`` overrides the derived one (an event's view of that moment)."""
    status = status or status_of(session, actions)
    error = session.last_task_error
    return {
        "id": session.id,
        "object": "agent.session",
        "agent": session_agent(agent, session),
        "created_at": session.created_at,
        "environment": environment(session),
        "error": error.message if status == "failed" and error is not None else None,
        "last_active_at": session.updated_at,
        "metadata": dict(session.labels),
        "required_actions": actions if status == "requires_action" else [],
        "spend_control": spend_control(session, agent),
        "status": status,
        "usage": usage(session.input_tokens, session.output_tokens),
        "vault_ids": [],
    }


def read_session(store: Store, session: Session, agent: Agent) -> dict[str, Any]:
    return session_object(session, agent, actions=[required_action(c) for c in open_calls(store, session)])


# ------------------------------------------------------------------------------ items
def content_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    out = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("input_text", "output_text"):
            out.append({"type": kind, "text": str(block.get("text", ""))})
        elif kind == "input_image":
            out.append({"type": "input_image", "image_url": str(block.get("image_url", ""))})
    return out


def item_object(item: ConversationItem, turn_id: str) -> dict[str, Any]:
    """One ``AgentSessionItem``."""
    data = item.data
    if item.type == "message":
        role = "assistant" if data.get("role") == "assistant" else "user"
        return {
            "id": item.id,
            "type": "message",
            "role": role,
            "content": content_blocks(data.get("content")),
            "status": "completed",
            "phase": "final_answer" if role == "assistant" else None,
            "turn_id": turn_id,
        }
    if item.type == "function_call":
        return {
            "id": item.id,
            "type": "function_call",
            "name": str(data.get("name", "")),
            "arguments": str(data.get("arguments", "{}")),
            "call_id": str(data.get("call_id", "")),
            "status": "completed",
            "turn_id": turn_id,
        }
    details = data.get("details")
    if isinstance(details, dict) and details.get("kind") == "command":
        return command_item(
            str(data.get("call_id", "")),
            str(details.get("command", "")),
            turn_id,
            details=details,
            output=str(data.get("output", "")),
        )
    return {
        "id": item.id,
        "type": "function_call_output",
        "call_id": str(data.get("call_id", "")),
        "output": str(data.get("output", "")),
        "error": None,
        "status": "completed",
        "turn_id": turn_id,
    }


def turn_ids(items: list[ConversationItem], session: Session) -> list[str]:
    """Each item's turn: its response id, or for a user message the turn that read it next."""
    out: list[str] = [""] * len(items)
    following = session.active_response_id or session.last_response_id or ""
    for n in range(len(items) - 1, -1, -1):
        rid = items[n].response_id or ""
        if rid.startswith("resp_"):
            following = rid
            out[n] = rid
        else:
            out[n] = following or rid
    return out


# ------------------------------------------------------------------------------ turns
def turn_object(turn: Turn, session: Session, agent_id: str, *, waiting: bool = False) -> dict[str, Any]:
    """One ``agent.session.turn``."""
    status = turn.status
    if session.active_response_id == turn.response_id and session.status == "running":
        status = "waiting" if waiting else "in_progress"
    elif status is None:
        failed = session.last_response_id == turn.response_id and session.status == "failed"
        status = "failed" if failed else "completed"
    error = turn.error
    if status == "failed" and error is None and session.last_task_error is not None:
        error = session.last_task_error.model_dump()
    return {
        "id": turn.response_id,
        "object": "agent.session.turn",
        "agent_id": agent_id,
        "session_id": session.id,
        "created_at": turn.created_at,
        "started_at": turn.created_at,
        "completed_at": turn.completed_at,
        "status": status,
        "error": turn_error(error) if status == "failed" else None,
        "subagent_id": None,
        "usage": usage(turn.input_tokens, turn.output_tokens),
    }


def command_item_id(call_id: str) -> str:
    """A hosted command's ``command_execution`` item: one id from its start to its output."""
    return f"ce_{call_id}"


def command_item(
    call_id: str, command: str, turn_id: str, *, details: dict[str, Any] | None, output: str | None
) -> dict[str, Any]:
    done = details is not None
    return {
        "id": command_item_id(call_id),
        "type": "command_execution",
        "command": command,
        "cwd": "/workspace",
        "duration_ms": (details or {}).get("duration_ms"),
        "exit_code": (details or {}).get("exit_code"),
        "output": output,
        "status": ("completed" if (details or {}).get("exit_code") == 0 else "failed")
        if done
        else "in_progress",
        "turn_id": turn_id,
    }
