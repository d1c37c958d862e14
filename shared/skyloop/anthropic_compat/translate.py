"""Stored skyloop events as Claude session events: ``events.list``, ``events.stream``, the send echoes.

:func:`translate` is a function of one stored event, its session's agent and the rows of the calls
of its turn (durable, read once per turn): the same stored event always gives the same Claude
events with the same ids, so history and stream agree and a client that reconnects de-duplicates
by id, as the SDK's tool runner does.

=======================================  ===============================================================
stored (skyloop)                         Claude
=======================================  ===============================================================
``session.input.consumed``               ``user.message``
``response.in_progress``                 ``session.status_running``
``response.output_text.delta``           ``event_start`` / ``event_delta`` (stream with ``event_deltas``)
assistant message                        ``agent.message``
client call ``action_required``          ``agent.custom_tool_use`` (a self-hosted built-in:
                                         ``agent.tool_use``); after the turn's last blocking call,
                                         ``session.status_idle`` ``requires_action`` with every id
server call ``in_progress``              ``agent.tool_use`` (an MCP tool: ``agent.mcp_tool_use``)
``response.elicitation_request``         ``agent.tool_use`` / ``agent.mcp_tool_use`` with
                                         ``evaluated_permission: ask``, then the idle as above
``response.elicitation_resolved``        ``user.tool_confirmation``
a call's output                          ``user.custom_tool_result`` / ``user.tool_result`` (the
                                         client's, then ``session.status_running``), or
                                         ``agent.tool_result`` / ``agent.mcp_tool_result``
``session.usage`` (one per model call)   ``span.model_request_start``, ``span.model_request_end``,
                                         ``session.usage``
``response.retry``                       ``session.error`` (``retry_status: retrying``)
``response.failed``                      ``session.error`` (``terminal``)
``session.interrupted``                  ``user.interrupt``
``session.status`` idle / failed         ``session.status_idle``: ``end_turn``, ``budget_reached``
                                         (spend at its limit), ``retries_exhausted`` (a failed turn)
=======================================  ===============================================================

Ids: an event that answers or is answered carries an id derived from what it is about, so the API
knows it when it echoes a send (``sevt_um_<item>``, ``sevt_tu_<call>``, ``sevt_tr_<call>``,
``sevt_tc_<call>``, ``sevt_am_<message>``); the others are ``sevt_<seq>_<k>``, the k-th Claude
event of stored event ``seq``. Heartbeats and hosted output deltas have no Claude counterpart.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from skyloop import events as ev
from skyloop.anthropic_compat import toolset
from skyloop.anthropic_compat.agents import meta_of, rfc3339
from skyloop.ids import derived_id

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.agent import Agent
    from skyloop.models.session import PendingCall, Session
    from skyloop.store import Store, StoredEvent

BUDGET_CODE = "session_budget_exceeded"
APPROVAL_PREFIX = "approve_"
SESSION_USAGE = "session.usage"
ERROR_TYPES = {
    "model_rate_limited": "model_rate_limited_error",
    "model_overloaded": "model_overloaded_error",
    "model_timeout": "model_request_failed_error",
    "model_unreachable": "model_request_failed_error",
    "model_http_error": "model_request_failed_error",
    "model_error": "model_request_failed_error",
    "model_auth_error": "model_request_failed_error",
    "max_iterations": "tool_use_limit_reached_error",
}


def tool_use_id(response_id: str, call_id: str) -> str:
    return f"sevt_tu_{derived_id('tool_use', response_id, call_id)[:24]}"


def result_id(response_id: str, call_id: str) -> str:
    return f"sevt_tr_{derived_id('tool_result', response_id, call_id)[:24]}"


def confirmation_id(response_id: str, call_id: str) -> str:
    return f"sevt_tc_{derived_id('confirmation', response_id, call_id)[:24]}"


def user_message_id(item_id: str) -> str:
    return f"sevt_um_{item_id}"


def agent_message_id(item_id: str) -> str:
    return f"sevt_am_{item_id}"


def interrupt_id(response_id: str) -> str:
    return f"sevt_ui_{derived_id('interrupt', response_id)[:24]}"


def seq_id(seq: int, k: int) -> str:
    return f"sevt_{seq:012d}_{k}"


@dataclass
class Context:
    """What translating a session's events reads besides the events: its agent and its turns' calls."""

    session: Session
    agent: Agent
    load_calls: Callable[[str], list[PendingCall]]
    mcp_tools: dict[str, str] = field(default_factory=dict)  # an MCP tool's name -> its server's
    load_mcp: Callable[[], dict[str, str]] | None = None  # the agent's MCP listings, read again
    _calls: dict[str, dict[str, PendingCall]] = field(default_factory=dict)
    _not_mcp: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, store: Store, session: Session, agent: Agent | None = None) -> Context:
        from skyloop.models.tools import declared_tools

        found = agent or store.get_agent(session.agent_id)
        servers = list(declared_tools(found.spec.tools).mcp)

        def load_mcp() -> dict[str, str]:
            mcp: dict[str, str] = {}
            for server in servers:
                for tool in store.get_tool_listing(found.id, server) or []:
                    mcp.setdefault(str(tool.get("name", "")), server)
            return mcp

        return cls(
            session,
            found,
            lambda rid: store.list_calls(session.id, rid),
            load_mcp() if servers else {},
            load_mcp if servers else None,
        )

    def mcp_server(self, name: str) -> str | None:
        """The MCP server of the tool ``name``, if it is one. A name not in the listings read so far
        reads them again, once: a stream opened before a new agent's first turn listed its servers."""
        server = self.mcp_tools.get(name)
        if server is None and self.load_mcp is not None and name not in self._not_mcp:
            self.mcp_tools = self.load_mcp()
            server = self.mcp_tools.get(name)
            if server is None:
                self._not_mcp.add(name)
        return server

    def call(self, response_id: str, call_id: str) -> PendingCall | None:
        """A call of the turn (its rows are read again when one is not among them yet: a live turn's)."""
        known = self._calls.get(response_id)
        if known is None or call_id not in known:
            known = {c.call_id: c for c in self.load_calls(response_id)}
            self._calls[response_id] = known
        return known.get(call_id)

    def blocking(self, call: PendingCall) -> list[PendingCall]:
        """The calls of ``call``'s model step that the session waits on (client calls, approvals)."""
        # a step's calls are created together (one append): when one is in the memo, all of them are
        rows = self._calls.get(call.response_id, {}).values()
        waits = [c for c in rows if c.iteration == call.iteration and (c.kind == "client" or c.approval)]
        return sorted(waits, key=lambda c: c.index)

    @cached_property
    def builtin_clients(self) -> frozenset[str]:
        """The agent toolset's built-ins that this session's client answers (a self-hosted session)."""
        from skyloop.models.tools import declared_client_tools

        return frozenset(
            t.name for t in declared_client_tools(self.agent.spec.tools) if t.name in toolset.CLIENT_TOOLS
        )

    @cached_property
    def policies(self) -> dict[str, str]:
        """skyloop tool or MCP server name -> a policy that asks (``always_ask`` or ``auto``)."""
        from skyloop.models.tools import declared_tools

        meta = meta_of(self.agent)
        saved = (meta.get("toolset") or {}).get("enabled") or {}
        out: dict[str, str] = {}
        for claude, policy in saved.items():
            if toolset.asks(policy):
                out[toolset.HOSTED_NAME.get(claude, claude)] = policy
                out[claude] = policy
        declared = declared_tools(self.agent.spec.tools)
        for name, tool in declared.hosted.items():
            if tool.approval == "required":
                out.setdefault(name, "always_ask")
        for name, server in declared.mcp.items():
            if server.approval == "required":
                view = (meta.get("mcp") or {}).get(name) or {}
                out[name] = str((view.get("default") or {}).get("policy") or "always_ask")
                if not toolset.asks(out[name]):
                    out[name] = "always_ask"
        return out

    def policy_of(self, name: str) -> str | None:
        server = self.mcp_server(name)
        return self.policies.get(server or name)


def processed_at(event: StoredEvent) -> str:
    return str(rfc3339(event.at if event.at is not None else time.time()))


def _text(output: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": output}]


def _input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def claude_blocks(content: Any) -> list[dict[str, Any]]:
    """A stored user message's content as Claude's blocks (text; images as base64 or URL sources)."""
    if isinstance(content, str):
        return _text(content)
    out: list[dict[str, Any]] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("input_text", "text", "output_text"):
            out.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "input_image":
            url = str(block.get("image_url") or "")
            if url.startswith("data:") and ";base64," in url:
                media, _, data = url[5:].partition(";base64,")
                out.append({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
            else:
                out.append({"type": "image", "source": {"type": "url", "url": url}})
    return out or _text("")


def is_error_output(output: str) -> bool:
    return output.startswith("Error")


# ------------------------------------------------------------------------------- translate
def translate(event: StoredEvent, ctx: Context) -> list[dict[str, Any]]:
    """The Claude events of one stored event (history and stream; deltas are :func:`deltas`')."""
    handler = _HANDLERS.get(event.type)
    if handler is None:
        return []
    at = processed_at(event)
    return [{**payload, "processed_at": payload.get("processed_at") or at} for payload in handler(event, ctx)]


def _status(event: StoredEvent, ctx: Context) -> list[dict[str, Any]]:
    from skyloop import pricing

    data = event.data
    status = data.get("status")
    if status not in ("idle", "failed"):
        return []
    error = data.get("error") or {}
    rid = str(data.get("response_id") or "")
    session = ctx.session
    budget = error.get("code") == BUDGET_CODE or (
        status == "idle"
        and pricing.budget_reached(session.spend_limit_cents, session.spend_micros)
        and session.last_response_id == rid
    )
    reason = "budget_reached" if budget else ("retries_exhausted" if status == "failed" else "end_turn")
    return [{"id": seq_id(event.seq, 0), "type": "session.status_idle", "stop_reason": {"type": reason}}]


def _user_message(event: StoredEvent, _ctx: Context) -> list[dict[str, Any]]:
    inner = event.data.get("data") or {}
    message = inner.get("data") or {}
    return [
        {
            "id": user_message_id(str(inner.get("item_id", ""))),
            "type": "user.message",
            "content": claude_blocks(message.get("content")),
        }
    ]


def _running(event: StoredEvent, _ctx: Context) -> list[dict[str, Any]]:
    return [{"id": seq_id(event.seq, 0), "type": "session.status_running"}]


def _interrupted(event: StoredEvent, _ctx: Context) -> list[dict[str, Any]]:
    rid = str((event.data.get("data") or {}).get("response_id") or "")
    return [{"id": interrupt_id(rid), "type": "user.interrupt", "session_thread_id": None}]


def _error(seq: int, code: str, message: str, retry: str) -> dict[str, Any]:
    return {
        "id": seq_id(seq, 0),
        "type": "session.error",
        "error": {
            "type": ERROR_TYPES.get(code, "unknown_error"),
            "message": f"[{code}] {message}",
            "retry_status": {"type": retry},
        },
    }


def _retry(event: StoredEvent, _ctx: Context) -> list[dict[str, Any]]:
    error = event.data.get("error") or {}
    return [
        _error(
            event.seq,
            str(error.get("code") or "model_step_retried"),
            str(error.get("message", "")),
            "retrying",
        )
    ]


def _failed(event: StoredEvent, _ctx: Context) -> list[dict[str, Any]]:
    error = (event.data.get("response") or {}).get("error") or {}
    code = str(error.get("code") or "internal_error")
    if code == BUDGET_CODE:
        return []  # the idle that follows says budget_reached
    return [_error(event.seq, code, str(error.get("message", "")), "terminal")]


def _usage(event: StoredEvent, ctx: Context) -> list[dict[str, Any]]:
    data = event.data
    call = data.get("call") or {}
    start = seq_id(event.seq, 0)
    totals = {"input_tokens": 0, "output_tokens": 0}
    for model in (data.get("usage_by_model") or {}).values():
        totals["input_tokens"] += int(model.get("input_tokens") or 0)
        totals["output_tokens"] += int(model.get("output_tokens") or 0)
    usage: dict[str, Any] = {**totals, "cache_read_input_tokens": 0}
    if data.get("total_cost_usd") is not None:
        usage["list_cost"] = {"amount": f"{float(data['total_cost_usd']):.6f}", "currency": "USD"}
    from skyloop.anthropic_compat.views import budget

    return [
        {
            "id": start,
            "type": "span.model_request_start",
            "processed_at": rfc3339(call.get("started_at")) if call.get("started_at") else None,
        },
        {
            "id": seq_id(event.seq, 1),
            "type": "span.model_request_end",
            "model_request_start_id": start,
            "is_error": False,
            "model_usage": {
                "input_tokens": int(call.get("input_tokens") or 0),
                "output_tokens": int(call.get("output_tokens") or 0),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "speed": "standard",
            },
        },
        {"id": seq_id(event.seq, 2), "type": "session.usage", "usage": usage, "budget": budget(ctx.session)},
    ]


def _use_event(call: PendingCall, ctx: Context, *, waits: bool) -> dict[str, Any]:
    """The event of a model's call: custom, built-in or MCP; ``waits``: for a confirmation."""
    uid = tool_use_id(call.response_id, call.call_id)
    args = _input(call.arguments)
    if call.kind == "client" and call.name not in ctx.builtin_clients:
        return {"id": uid, "type": "agent.custom_tool_use", "name": call.name, "input": args}
    policy = ctx.policy_of(call.name) or "always_ask"
    permission: dict[str, Any] = (
        {"evaluated_permission": "ask", "evaluation": toolset.evaluation(policy)}
        if waits
        else {"evaluated_permission": "allow", "evaluation": {"type": "always_allow"}}
    )
    server = ctx.mcp_server(call.name) if call.kind == "server" else None
    if server is not None:
        return {
            "id": uid,
            "type": "agent.mcp_tool_use",
            "name": call.name,
            "mcp_server_name": server,
            "input": args,
            **permission,
        }
    name = toolset.CLAUDE_NAME.get(call.name, call.name)
    return {"id": uid, "type": "agent.tool_use", "name": name, "input": args, **permission}


def _announce(event: StoredEvent, call: PendingCall, ctx: Context, *, waits: bool) -> list[dict[str, Any]]:
    """A call the session waits on, then (after the step's last such call) the idle listing them all."""
    out = [_use_event(call, ctx, waits=waits)]
    blocking = ctx.blocking(call)
    if blocking and blocking[-1].call_id == call.call_id:
        out.append(
            {
                "id": seq_id(event.seq, 1),
                "type": "session.status_idle",
                "stop_reason": {
                    "type": "requires_action",
                    "event_ids": [tool_use_id(c.response_id, c.call_id) for c in blocking],
                },
            }
        )
    return out


def _item(event: StoredEvent, ctx: Context) -> list[dict[str, Any]]:
    item = event.data.get("item") or {}
    kind = item.get("type")
    rid = str(item.get("response_id") or "")
    if kind == "message":
        text = "".join(str(b.get("text", "")) for b in item.get("content") or [] if isinstance(b, dict))
        return [
            {"id": agent_message_id(str(item.get("id", ""))), "type": "agent.message", "content": _text(text)}
        ]
    call = ctx.call(rid, str(item.get("call_id", "")))
    if call is None:
        return []
    if kind == "function_call":
        status = item.get("status")
        if status == "action_required":
            waits = call.name in ctx.builtin_clients and toolset.asks(ctx.policy_of(call.name))
            return _announce(event, call, ctx, waits=waits)
        if status == "in_progress" and call.kind == "server" and not call.approval:
            return [_use_event(call, ctx, waits=False)]
        return []
    if kind == "function_call_output":
        return _output(event, call, str(item.get("output", "")), ctx)
    return []


def _output(event: StoredEvent, call: PendingCall, output: str, ctx: Context) -> list[dict[str, Any]]:
    uid = tool_use_id(call.response_id, call.call_id)
    error = is_error_output(output)
    if call.kind == "client":
        rid = result_id(call.response_id, call.call_id)
        if call.name in ctx.builtin_clients:
            result = {"id": rid, "type": "user.tool_result", "tool_use_id": uid}
        else:
            result = {"id": rid, "type": "user.custom_tool_result", "custom_tool_use_id": uid}
        out = [{**result, "content": _text(output), "is_error": error, "session_thread_id": None}]
        clients = [c for c in ctx.blocking(call) if c.kind == "client"]
        if clients and clients[-1].call_id == call.call_id:
            out.append({"id": seq_id(event.seq, 1), "type": "session.status_running"})
        return out
    if ctx.mcp_server(call.name) is not None:
        return [
            {
                "id": seq_id(event.seq, 0),
                "type": "agent.mcp_tool_result",
                "mcp_tool_use_id": uid,
                "content": _text(output),
                "is_error": error,
            }
        ]
    return [
        {
            "id": seq_id(event.seq, 0),
            "type": "agent.tool_result",
            "tool_use_id": uid,
            "content": _text(output),
            "is_error": error,
        }
    ]


def _approval(event: StoredEvent, ctx: Context) -> list[dict[str, Any]]:
    params = event.data.get("params") or {}
    call = ctx.call(str(event.data.get("response_id") or ""), str(params.get("call_id", "")))
    return [] if call is None else _announce(event, call, ctx, waits=True)


def _confirmed(event: StoredEvent, ctx: Context) -> list[dict[str, Any]]:
    data = event.data
    rid = str(data.get("response_id") or "")
    call_id = str(data.get("elicitation_id", "")).removeprefix(APPROVAL_PREFIX)
    call = ctx.call(rid, call_id)
    if call is None:
        return []
    allowed = data.get("action") == "accept"
    out: list[dict[str, Any]] = [
        {
            "id": confirmation_id(rid, call_id),
            "type": "user.tool_confirmation",
            "tool_use_id": tool_use_id(rid, call_id),
            "result": "allow" if allowed else "deny",
            "deny_message": None if allowed else data.get("deny_message"),
            "session_thread_id": None,
        }
    ]
    if call.kind == "server":
        out.append({"id": seq_id(event.seq, 1), "type": "session.status_running"})
    return out


_HANDLERS: dict[str, Callable[[StoredEvent, Context], list[dict[str, Any]]]] = {
    ev.SESSION_STATUS: _status,
    ev.SESSION_INPUT_CONSUMED: _user_message,
    ev.SESSION_INTERRUPTED: _interrupted,
    ev.RESPONSE_IN_PROGRESS: _running,
    ev.RESPONSE_RETRY: _retry,
    ev.RESPONSE_FAILED: _failed,
    ev.RESPONSE_ITEM_DONE: _item,
    ev.ELICITATION_REQUEST: _approval,
    ev.ELICITATION_RESOLVED: _confirmed,
    SESSION_USAGE: _usage,
}


def position_of(store: Store, ctx: Context, event_id: str) -> tuple[int, int] | None:
    """Where the event ``event_id`` is in the retained log: (its stored event's seq, its index)."""
    if event_id.startswith("sevt_") and event_id[5:6].isdigit():
        seq, _, k = event_id[5:].partition("_")
        if seq.isdigit() and k.isdigit():
            return int(seq), int(k)
    after = 0
    while True:
        page, covered, more = store.read_event_page(ctx.session.id, after)
        for stored in page:
            for index, payload in enumerate(translate(stored, ctx)):
                if payload["id"] == event_id:
                    return stored.seq, index
        if not more or covered == after:
            return None
        after = covered


# ---------------------------------------------------------------------------------- deltas
def deltas(event: StoredEvent, started: set[str]) -> list[dict[str, Any]]:
    """A streamed text delta as ``event_start`` (a message's first) and ``event_delta`` (stream only)."""
    if event.type != ev.RESPONSE_TEXT_DELTA:
        return []
    message = str(event.data.get("message_id") or "")
    if not message:
        return []
    eid = agent_message_id(message)
    out: list[dict[str, Any]] = []
    if eid not in started:
        started.add(eid)
        out.append({"type": "event_start", "event": {"type": "agent.message", "id": eid}})
    out.append(
        {
            "type": "event_delta",
            "event_id": eid,
            "delta": {
                "type": "content_delta",
                "content": {"type": "text", "text": str(event.data.get("delta", ""))},
                "index": 0,
            },
        }
    )
    return out
