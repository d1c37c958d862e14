"""The ``RunTools`` branch of a turn: one server call, prepared, run and recorded exactly once.

Per call, the state machine runs ``PrepareTool`` -> (``InvokeTool``) -> ``RecordTool``:

* :func:`prepare_tool` skips a call that has its output already (a retried
  branch, a denial, an interrupt), announces the call as ``in_progress``, and
  either hands the state machine a Lambda invocation (Step Functions invokes
  the tool itself: the wait is free and the state machine's role is what may
  invoke it) or runs an MCP call here and records its output.
* :func:`record_tool` turns the invocation's outcome (the tool's return value,
  or the Catch's ``{Error, Cause}``) into the output the model reads.

A tool that fails, times out or answers something unusable never fails the
turn: the model gets an ``Error: ...`` output and decides what to do. Outputs
are written with a conditional write, so a repeated branch writes nothing
twice; they are published with the call at the next model step, like client
outputs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from skyloop import events as ev
from skyloop.turns import lifecycle
from skyloop.turns.state import TurnError

if TYPE_CHECKING:
    from skyloop.models.session import PendingCall
    from skyloop.secrets import SecretStore
    from skyloop.store import Store
    from skyloop.tools.catalog import Catalog, ServerTool
    from skyloop.turns.state import TurnState


def prepare_tool(store: Store, state: TurnState, call_id: str, secrets: SecretStore | None) -> dict[str, Any]:
    """``{"invoke": {function, payload, timeout_s}}`` for a Lambda tool to run, else ``{"invoke": None}``."""
    skip: dict[str, Any] = {"invoke": None}
    session = store.get_session(state.session_id)
    call = store.get_call(state.session_id, state.response_id, call_id)
    if not lifecycle.is_active(session, state.response_id) or call is None or call.kind != "server":
        return skip
    if call.output is not None or call.approval == "pending":
        return skip
    try:
        tool = _tool(store, state, call, secrets)
    except TurnError as exc:  # e.g. a header's secret is gone: the model hears of it, the turn goes on
        _record(store, call, f"Error: tool '{call.name}' cannot run: {exc.message}")
        return skip
    if tool is None:
        _record(store, call, f"Error: tool '{call.name}' is no longer offered by this agent")
        return skip
    _announce(store, state, call, session.agent_name, after_seq=session.last_seq)
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        _record(
            store,
            call,
            f"Error: the arguments for '{call.name}' are not a JSON object: {call.arguments[:200]}",
        )
        return skip
    if tool.kind == "mcp":
        _record(store, call, tool.bounded(_call_mcp(store, state, call, tool, arguments, secrets)))
        return skip
    payload = {
        "name": call.name,
        "arguments": arguments,
        "session_id": state.session_id,
        "call_id": call.call_id,
    }
    return {"invoke": {"function": tool.function, "payload": payload, "timeout_s": tool.timeout_s}}


def record_tool(
    store: Store, state: TurnState, call_id: str, outcome: dict[str, Any], secrets: SecretStore | None
) -> None:
    """Record what the invocation came back with: ``{"payload": ...}`` or the Catch's ``{Error, Cause}``."""
    call = store.get_call(state.session_id, state.response_id, call_id)
    if call is None or call.output is not None:
        return
    try:
        tool = _tool(store, state, call, secrets)
    except TurnError:
        tool = None  # recorded without the tool's own limit: the store's cap still holds
    if "payload" in outcome:
        from skyloop.tools.catalog import output_text

        output = output_text(outcome["payload"])
    else:
        output = failure_text(call.name, outcome, tool.timeout_s if tool else None)
    _record(store, call, tool.bounded(output) if tool else output)


def failure_text(name: str, error: dict[str, Any], timeout_s: int | None) -> str:
    """What the model reads when its tool's invocation failed (the tool's own error where there is one)."""
    kind = str(error.get("Error") or "Error")
    cause = error.get("Cause") or ""
    if kind == "States.Timeout":
        return f"Error: tool '{name}' did not answer within {timeout_s or '?'}s"
    try:
        detail = json.loads(cause)
    except (TypeError, ValueError):
        detail = None
    message = detail.get("errorMessage") if isinstance(detail, dict) else None
    return f"Error: tool '{name}' failed: {kind}: {message or str(cause)[:500] or 'no detail'}"


def _tool(
    store: Store, state: TurnState, call: PendingCall, secrets: SecretStore | None
) -> ServerTool | None:
    from skyloop.turns.steps import agent_for, server_tools

    catalog: Catalog | None = server_tools(store, agent_for(store, state), secrets)
    return catalog.get(call.name) if catalog else None


def _announce(
    store: Store, state: TurnState, call: PendingCall, agent_name: str, *, after_seq: int | None = None
) -> None:
    """The call, now running on the server (once per call, however often its branch runs)."""
    batch = lifecycle.turn_append(
        state, f"{state.response_id}:{call.iteration}:{call.call_id}:started", after_seq=after_seq
    )
    batch.event(ev.RESPONSE_ITEM_DONE, lifecycle.call_event(call, "in_progress", agent_name))
    try:
        lifecycle.append_active(store, batch)
    except lifecycle.TurnInactiveError:
        return


def _call_mcp(
    store: Store,
    state: TurnState,
    call: PendingCall,
    tool: ServerTool,
    arguments: dict[str, Any],
    secrets: SecretStore | None,
) -> str:
    from skyloop.tools import mcp_client
    from skyloop.tools.catalog import ToolSetupError, catalog_for, headers_for
    from skyloop.turns.steps import agent_for

    agent = agent_for(store, state)
    server = catalog_for(agent, store, secrets).declared.mcp[tool.server or ""]
    try:
        return mcp_client.call_tool(server, headers_for(server, secrets), call.name, arguments)
    except (mcp_client.McpError, ToolSetupError) as exc:
        return f"Error: tool '{call.name}' could not be called: {exc}"


def _record(store: Store, call: PendingCall, output: str) -> None:
    store.answer_call(call, output, count_down=False)  # False: answered before (a retried branch)
