"""Builders for the stream's event payloads (omnigent's ``ServerStreamEvent`` shapes).

The stored payload never carries ``sequence_number``; the stream adds the
event's seq when it frames it, so replayed and live frames are identical.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skyloop.models.session import Session

SESSION_STATUS = "session.status"
SESSION_HEARTBEAT = "session.heartbeat"
SESSION_INPUT_CONSUMED = "session.input.consumed"
SESSION_INTERRUPTED = "session.interrupted"
RESPONSE_IN_PROGRESS = "response.in_progress"
RESPONSE_TEXT_DELTA = "response.output_text.delta"
RESPONSE_RETRY = "response.retry"  # a model call is being attempted again; text restarts
RESPONSE_OUTPUT_DELTA = "response.function_call_output.delta"
RESPONSE_ITEM_DONE = "response.output_item.done"
RESPONSE_COMPLETED = "response.completed"
RESPONSE_FAILED = "response.failed"
RESPONSE_CANCELLED = "response.cancelled"
ELICITATION_REQUEST = "response.elicitation_request"  # a server tool asks the client's approval
ELICITATION_RESOLVED = "response.elicitation_resolved"
SESSION_USAGE = "session.usage"  # one per model call: omnigent's usage update, with that call's tokens
SESSION_ENVIRONMENT = "session.environment"  # the hosted environment's lifecycle (skyloop's own event)
ENVIRONMENT_STATUSES = ("pending", "ready", "failed", "suspended")
TERMINAL_TYPES = frozenset({RESPONSE_COMPLETED, RESPONSE_FAILED, RESPONSE_CANCELLED, "response.incomplete"})


def server_time() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stream_payload(seq: int, type_: str, data: dict[str, Any]) -> dict[str, Any]:
    """A stored event as every stream sends it (SSE ``data:`` and the live channel's ``event``)."""
    return {"type": type_, **data, "sequence_number": seq}


def heartbeat() -> dict[str, Any]:
    return {"type": SESSION_HEARTBEAT, "sequence_number": None, "server_time": server_time()}


def session_status(
    session_id: str, status: str, *, response_id: str | None = None, error: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "conversation_id": session_id,
        "status": status,
        "response_id": response_id,
        "error": error,
        "background_task_count": None,
        "blocked_on": None,
    }


def interrupted(response_id: str) -> dict[str, Any]:
    """``requested_at`` is epoch seconds, an int, as omnigent's ``SessionInterruptedPayload`` wants."""
    return {"data": {"requested_at": int(time.time()), "response_id": response_id}}


def retry(response_id: str, attempt: int, max_attempts: int) -> dict[str, Any]:
    """omnigent's ``RetryEvent``; ``attempt`` stays skyloop's 0-based count of the retry (1 = first)."""
    return {
        "response_id": response_id,
        "source": "llm",
        "attempt": attempt,
        "max_attempts": max_attempts,
        "delay_seconds": 0.0,
        "error": {"code": "model_step_retried", "message": "the model call is being attempted again"},
        "reason": "model step retried",
    }


def session_usage(
    session: Session,
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    cost_micros: int | None,
    response_id: str,
    iteration: int,
    started_at: float,
) -> dict[str, Any]:
    """omnigent's ``SessionUsageEvent`` after one model call: the session's totals so far (the session
    row as the call read it, plus the call), and under ``call`` that call alone (Claude's spans)."""
    total_in = session.input_tokens + input_tokens
    total_out = session.output_tokens + output_tokens
    out: dict[str, Any] = {
        "conversation_id": session.id,
        "usage_by_model": {
            model: {
                "input_tokens": total_in,
                "output_tokens": total_out,
                "total_tokens": total_in + total_out,
            }
        },
        "call": {
            "response_id": response_id,
            "iteration": iteration,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "started_at": round(started_at, 3),
        },
    }
    if cost_micros is not None:
        out["total_cost_usd"] = (session.spend_micros + cost_micros) / 1_000_000
    return out


def input_consumed(item_id: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "data": {
            "item_id": item_id,
            "type": "message",
            "data": {"role": data.get("role"), "content": data.get("content"), "agent": None},
            "created_by": None,
            "cleared_pending_id": None,
        }
    }


def response_object(
    response_id: str,
    *,
    status: str,
    model: str,
    created_at: int | None = None,
    error: dict[str, Any] | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "status": status,
        "model": model,
        "created_at": created_at or int(time.time()),
        "completed_at": int(time.time()) if status in ("completed", "failed", "cancelled") else None,
        "output": [],
        "background": False,
        "store": True,
        "usage": usage,
        "previous_response_id": None,
        "conversation": None,
        "instructions": None,
        "reasoning": None,
        "error": error,
        "incomplete_details": None,
    }


def response_event(response: dict[str, Any]) -> dict[str, Any]:
    return {"response": response}


def text_delta(delta: str, *, response_id: str, item_id: str | None = None) -> dict[str, Any]:
    return {"delta": delta, "message_id": item_id, "index": None, "final": None, "response_id": response_id}


def item_done(item: dict[str, Any]) -> dict[str, Any]:
    return {"item": item}


def function_call_item(
    *, item_id: str, call_id: str, name: str, arguments: str, status: str, agent: str, response_id: str
) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "name": name,
        "arguments": arguments,
        "call_id": call_id,
        "agent": agent,
        "response_id": response_id,
    }


def function_call_output_item(
    *, item_id: str, call_id: str, output: str, response_id: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id,
        "type": "function_call_output",
        "call_id": call_id,
        "output": output,
        "status": "completed",
        "response_id": response_id,
    }
    if details:  # a hosted call's: kind, exit_code, duration_ms, and the full output's file when cut
        item["details"] = details
    return item


def function_call_output_delta(call_id: str, delta: str) -> dict[str, Any]:
    """Output of a running server call (a hosted command), as it comes (omnigent's event)."""
    return {"call_id": call_id, "delta": delta}


def assistant_message_item(
    *, item_id: str, text: str, model: str, response_id: str, created_at: int | None = None
) -> dict[str, Any]:
    return {
        "id": item_id,
        "response_id": response_id,
        "type": "message",
        "status": "completed",
        "created_at": created_at or int(time.time()),
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
        "model": model,
    }


def environment_status(
    status: str,
    *,
    response_id: str | None = None,
    restored: bool = False,
    error: str | None = None,
) -> dict[str, Any]:
    """A lifecycle fact of the session's hosted environment, in its log so every stream and replay sees it.

    ``pending`` while its workspace is made (``restored``: a new interpreter session gets the snapshot
    back), ``ready`` once made, ``failed`` when making it failed (``error`` says why; the next hosted
    call tries again), ``suspended`` once stopped for idleness (the workspace kept in its snapshot).
    """
    return {
        "status": status,
        "response_id": response_id,
        "restored": restored,
        "error": {"code": "environment_setup_failed", "message": error} if error is not None else None,
    }


def approval_request(
    *, elicitation_id: str, call_id: str, name: str, arguments: str, response_id: str, session_id: str
) -> dict[str, Any]:
    """omnigent's elicitation shape (``mode: form``, an empty schema: accept or decline is the answer)."""
    return {
        "elicitation_id": elicitation_id,
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": f"Allow the tool '{name}' to run with these arguments?",
            "requestedSchema": {"type": "object", "properties": {}},
            "phase": "tool_approval",
            "policy_name": "approval",
            "content_preview": arguments[:2000],
            "target_session_id": session_id,
            "call_id": call_id,
            "tool_name": name,
            "arguments": arguments,
        },
        "response_id": response_id,
    }


def approval_resolved(
    elicitation_id: str, action: str, response_id: str, *, deny_message: str | None = None
) -> dict[str, Any]:
    out = {"elicitation_id": elicitation_id, "action": action, "response_id": response_id}
    if deny_message:
        out["deny_message"] = deny_message  # Claude's user.tool_confirmation; omnigent's clients ignore it
    return out
