"""Stored skyloop events as the SDK's ``agent.session.*`` events: the OpenAI stream, and later webhooks.

:func:`translate` is a pure function of one stored event (and the session and
agent it belongs to, for the session objects some events carry): the same
stored event always gives the same OpenAI events in the same order, so every
OpenAI event has a stable id, ``evt_<seq>_<k>`` (the k-th event of stored
event ``seq``), and a stream resumes after any of them (``Last-Event-ID``)
with no gap and no repeat. Webhooks (``agent.session.*``) will be built from
the same function over the same log.

================================  ==================================================
stored (skyloop)                  OpenAI
================================  ==================================================
``session.status`` running       ``agent.session.turn.created``, ``agent.session.in_progress``
``session.input.consumed``        ``agent.session.turn.item.added`` (the user message)
``response.in_progress``          ``agent.session.turn.in_progress``
``response.output_text.delta``    ``agent.session.turn.output_text.delta``
function call ``action_required`` ``agent.session.turn.item.added`` (the call), ``agent.session.requires_action``
function call ``completed``       ``agent.session.turn.item.done``
function call output              ``agent.session.turn.item.added``, ``agent.session.in_progress``
assistant message                 ``...item.added``, ``...output_text.done``, ``...item.done``
``response.elicitation_request``  ``agent.session.requires_action`` (an ``mcp_approval_request``)
``response.completed|failed|      ``agent.session.turn.completed|failed|cancelled``
cancelled``
``session.status`` idle|failed    ``agent.session.idle|failed``, or ``budget_reached``
``session.environment`` status    ``agent.session.environment.pending|ready|failed|suspended``
================================  ==================================================

Heartbeats, retries and ``session.interrupted`` have no OpenAI counterpart (the
stream keeps its connection alive with SSE comments).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skyloop import events as ev
from skyloop.openai_compat import views
from skyloop.openai_compat.views import command_item, command_item_id

if TYPE_CHECKING:
    from skyloop.models.agent import Agent
    from skyloop.models.session import Session
    from skyloop.store import StoredEvent


@dataclass
class Context:
    """What session-level events show of the session (read when the stream opens, refreshed at turn ends)."""

    session: Session
    agent: Agent

    @property
    def agent_id(self) -> str:
        from skyloop.agent_versions import openai_id

        return openai_id(self.agent)

    @property
    def hosted_bash(self) -> bool:
        """Whether the session's Bash calls run in its hosted environment (``command_execution`` items)."""
        from skyloop.models.tools import declared_tools, environment_of

        if environment_of(self.agent.spec, self.session.environment) is None:
            return False
        return "Bash" in declared_tools(self.agent.spec.tools).hosted


# A streamed create's events stream (the API's 303 names it; the stream function serves it): the
# session's events from its creation, to the end of its first turn ("turn") or the created event alone
CREATED_STREAM_PARAM = "created"
CREATED_STREAM_UNTIL = ("turn", "session")


def event_id(seq: int, k: int) -> str:
    return f"evt_{seq}_{k}"


def parse_event_id(raw: str) -> tuple[int, int]:
    """``evt_<seq>_<k>`` -> (seq, k); a plain ``N`` (skyloop's cursor) -> (N, a k past every event of N)."""
    text = raw.strip()
    if text.startswith("evt_"):
        seq, _, k = text[4:].partition("_")
        return int(seq), int(k)
    return int(text), 10**6


def _turn(
    ctx: Context, response_id: str, status: str, response: dict[str, Any] | None = None
) -> dict[str, Any]:
    response = response or {}
    usage = response.get("usage") or {}
    created = int(response.get("created_at") or time.time())
    return {
        "id": response_id,
        "object": "agent.session.turn",
        "agent_id": ctx.agent_id,
        "session_id": ctx.session.id,
        "created_at": created,
        "started_at": created,
        "completed_at": response.get("completed_at"),
        "status": status,
        "error": views.turn_error(response.get("error")) if status == "failed" else None,
        "subagent_id": None,
        "usage": views.usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0))
        if usage
        else None,
    }


def _session(ctx: Context, status: str, actions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return views.session_object(ctx.session, ctx.agent, actions=actions or [], status=status)


def translate(event: StoredEvent, ctx: Context, *, turn_hint: str | None = None) -> list[dict[str, Any]]:
    """The OpenAI events of one stored event, each with its ``event_id``.

    ``turn_hint`` is the turn a user message belongs to when the caller knows
    it (the last ``session.status`` running it saw); else the session's.
    """
    sid = ctx.session.id
    data = event.data
    out: list[dict[str, Any]] = []
    kind = event.type
    if kind == ev.SESSION_STATUS:
        out += _status(data, ctx)
    elif kind == ev.SESSION_INPUT_CONSUMED:
        inner = data.get("data") or {}
        message = inner.get("data") or {}
        turn_id = turn_hint or ctx.session.active_response_id or ctx.session.last_response_id or ""
        item = {
            "id": str(inner.get("item_id", "")),
            "type": "message",
            "role": "user",
            "content": views.content_blocks(message.get("content")),
            "status": "completed",
            "phase": None,
            "turn_id": turn_id,
        }
        out.append(
            {
                "type": "agent.session.turn.item.added",
                "session_id": sid,
                "turn_id": turn_id,
                "item": item,
                "output_index": None,
            }
        )
    elif kind == ev.RESPONSE_IN_PROGRESS:
        response = data.get("response") or {}
        rid = str(response.get("id", ""))
        out.append(
            {
                "type": "agent.session.turn.in_progress",
                "session_id": sid,
                "turn_id": rid,
                "turn": _turn(ctx, rid, "in_progress", response),
            }
        )
    elif kind in (ev.RESPONSE_TEXT_DELTA, ev.RESPONSE_OUTPUT_DELTA):
        out.append(_delta(kind, data, ctx, turn_hint))
    elif kind == ev.RESPONSE_ITEM_DONE:
        out += _item_done(data.get("item") or {}, ctx)
    elif kind == ev.ELICITATION_REQUEST:
        params = data.get("params") or {}
        action = views.approval_action(
            str(data.get("elicitation_id", "")),
            str(params.get("tool_name", "")),
            str(params.get("arguments", "{}")),
            str(data.get("response_id", "")),
        )
        out.append(
            {"type": "agent.session.requires_action", "session": _session(ctx, "requires_action", [action])}
        )
    elif kind == ev.SESSION_ENVIRONMENT:
        out += _environment(data, ctx)
    elif kind in (ev.RESPONSE_COMPLETED, ev.RESPONSE_FAILED, ev.RESPONSE_CANCELLED):
        response = data.get("response") or {}
        rid = str(response.get("id", ""))
        status = {
            ev.RESPONSE_COMPLETED: "completed",
            ev.RESPONSE_FAILED: "failed",
            ev.RESPONSE_CANCELLED: "cancelled",
        }[kind]
        turn = _turn(ctx, rid, status, response)
        out.append(
            {
                "type": f"agent.session.turn.{status}",
                "session_id": sid,
                "turn_id": rid,
                "turn": turn,
                "usage": turn["usage"],
            }
        )
    return [{**payload, "event_id": event_id(event.seq, k)} for k, payload in enumerate(out)]


def _status(data: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    """A turn starting (its turn and the session in progress), or the session coming to rest."""
    status = data.get("status")
    rid = str(data.get("response_id") or "")
    if status == "running":
        return [
            {
                "type": "agent.session.turn.created",
                "session_id": ctx.session.id,
                "turn_id": rid,
                "turn": _turn(ctx, rid, "in_progress"),
            },
            {"type": "agent.session.in_progress", "session": _session(ctx, "in_progress")},
        ]
    if status in ("idle", "failed"):
        error = data.get("error") or {}
        budget = error.get("code") == views.BUDGET_CODE or (
            status == "idle" and views.budget_reached(ctx.session) and ctx.session.last_response_id == rid
        )
        name = "budget_reached" if budget else status
        return [{"type": f"agent.session.{name}", "session": _session(ctx, name)}]
    return []


def _environment(data: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    """The hosted environment's lifecycle as OpenAI's (``AgentSessionEnvironmentState``): a restored
    workspace is ``pending`` then ``ready`` again, not ``reset`` (its files survive the new sandbox)."""
    status = data.get("status")
    if status not in ev.ENVIRONMENT_STATUSES:
        return []
    error = data.get("error")
    return [
        {
            "type": f"agent.session.environment.{status}",
            "session_id": ctx.session.id,
            "turn_id": data.get("response_id"),
            "environment": {
                "id": views.environment_id(ctx.session),
                "type": "openai_hosted",
                "status": status,
                "error": {
                    "type": "environment_error",
                    "code": str(error.get("code") or "environment_failed"),
                    "message": str(error.get("message") or ""),
                }
                if isinstance(error, dict)
                else None,
            },
        }
    ]


def _delta(kind: str, data: dict[str, Any], ctx: Context, turn_hint: str | None) -> dict[str, Any]:
    """A model's text as it streams, or a hosted command's output as it runs."""
    sid = ctx.session.id
    if kind == ev.RESPONSE_TEXT_DELTA:
        rid = str(data.get("response_id") or "")
        return {
            "type": "agent.session.turn.output_text.delta",
            "session_id": sid,
            "turn_id": rid,
            "item_id": str(data.get("message_id") or ""),
            "output_index": 0,
            "content_index": 0,
            "delta": str(data.get("delta", "")),
        }
    return {
        "type": "agent.output.command_execution_output.delta",
        "session_id": sid,
        "turn_id": turn_hint or ctx.session.active_response_id or ctx.session.last_response_id or "",
        "item_id": command_item_id(str(data.get("call_id", ""))),
        "output_index": 0,
        "delta": str(data.get("delta", "")),
    }


def _command_events(item: dict[str, Any], ctx: Context) -> list[dict[str, Any]] | None:
    """A hosted Bash call's events as ``command_execution`` ones; None for any other item."""
    sid = ctx.session.id
    rid = str(item.get("response_id") or "")
    kind = item.get("type")
    details = item.get("details") if isinstance(item.get("details"), dict) else None
    if kind == "function_call_output" and details is not None and details.get("kind") == "command":
        done = command_item(
            str(item.get("call_id", "")),
            str(details.get("command", "")),
            rid,
            details=details,
            output=str(item.get("output", "")),
        )
        return [
            {
                "type": "agent.session.turn.item.done",
                "session_id": sid,
                "turn_id": rid,
                "item": done,
                "output_index": 0,
            },
            {"type": "agent.session.in_progress", "session": _session(ctx, "in_progress")},
        ]
    if kind != "function_call" or item.get("name") != "Bash" or not ctx.hosted_bash:
        return None
    if item.get("status") != "in_progress":
        return []  # published with its output: the command_execution item is done with that
    try:
        command = str(json.loads(str(item.get("arguments") or "{}")).get("command", ""))
    except (ValueError, AttributeError):
        command = ""
    started = command_item(str(item.get("call_id", "")), command, rid, details=None, output=None)
    return [
        {
            "type": "agent.session.turn.item.added",
            "session_id": sid,
            "turn_id": rid,
            "item": started,
            "output_index": 0,
        }
    ]


def _item_done(item: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    commands = _command_events(item, ctx)
    if commands is not None:
        return commands
    sid = ctx.session.id
    rid = str(item.get("response_id") or "")
    kind = item.get("type")
    if kind == "function_call":
        call = {
            "id": str(item.get("id", "")),
            "type": "function_call",
            "name": str(item.get("name", "")),
            "arguments": str(item.get("arguments", "{}")),
            "call_id": str(item.get("call_id", "")),
            "turn_id": rid,
        }
        if item.get("status") == "action_required":
            action = {
                "type": "function_call",
                "arguments": call["arguments"],
                "call_id": call["call_id"],
                "name": call["name"],
                "turn_id": rid,
            }
            return [
                {
                    "type": "agent.session.turn.item.added",
                    "session_id": sid,
                    "turn_id": rid,
                    "item": {**call, "status": "in_progress"},
                    "output_index": 0,
                },
                {
                    "type": "agent.session.requires_action",
                    "session": _session(ctx, "requires_action", [action]),
                },
            ]
        return [
            {
                "type": "agent.session.turn.item.done",
                "session_id": sid,
                "turn_id": rid,
                "item": {**call, "status": "completed"},
                "output_index": 0,
            }
        ]
    if kind == "function_call_output":
        output = {
            "id": str(item.get("id", "")),
            "type": "function_call_output",
            "call_id": str(item.get("call_id", "")),
            "output": str(item.get("output", "")),
            "error": None,
            "status": "completed",
            "turn_id": rid,
        }
        return [
            {
                "type": "agent.session.turn.item.added",
                "session_id": sid,
                "turn_id": rid,
                "item": output,
                "output_index": 0,
            },
            {"type": "agent.session.in_progress", "session": _session(ctx, "in_progress")},
        ]
    if kind == "message":
        text = "".join(str(b.get("text", "")) for b in item.get("content") or [] if isinstance(b, dict))
        message = {
            "id": str(item.get("id", "")),
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
            "phase": "final_answer",
            "turn_id": rid,
        }
        return [
            {
                "type": "agent.session.turn.item.added",
                "session_id": sid,
                "turn_id": rid,
                "item": {**message, "status": "in_progress"},
                "output_index": 0,
            },
            {
                "type": "agent.session.turn.output_text.done",
                "session_id": sid,
                "turn_id": rid,
                "item_id": message["id"],
                "output_index": 0,
                "content_index": 0,
                "text": text,
            },
            {
                "type": "agent.session.turn.item.done",
                "session_id": sid,
                "turn_id": rid,
                "item": {**message, "status": "completed"},
                "output_index": 0,
            },
        ]
    return []
