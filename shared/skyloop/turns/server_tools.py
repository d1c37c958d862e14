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
import uuid
from typing import TYPE_CHECKING, Any

from skyloop import events as ev
from skyloop.turns import lifecycle
from skyloop.turns.state import TurnError

if TYPE_CHECKING:
    from skyloop.environments.tools import HostedRun
    from skyloop.models.session import PendingCall, Session
    from skyloop.secrets import SecretStore
    from skyloop.store import Store
    from skyloop.tools.catalog import Catalog, ServerTool
    from skyloop.turns.state import TurnState


def prepare_tool(store: Store, state: TurnState, call_id: str, secrets: SecretStore | None) -> dict[str, Any]:
    """``{"invoke": {function, payload, timeout_s}}`` for a Lambda tool to run, else ``{"invoke": None}``."""
    skip: dict[str, Any] = {"invoke": None, "poll": None}
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
    hosted = tool.kind == "hosted"
    arguments = _arguments(call)
    if not hosted or arguments is None:  # a hosted call that runs is announced in _call_hosted
        _announce(store, state, call, session.agent_name, after_seq=session.last_seq)
    if arguments is None:
        _record(
            store,
            call,
            f"Error: the arguments for '{call.name}' are not a JSON object: {call.arguments[:200]}",
        )
        return skip
    if tool.kind == "mcp":
        _record(store, call, tool.bounded(_call_mcp(store, state, call, tool, arguments, secrets)))
        return skip
    if hosted:
        ran = _call_hosted(store, state, session, call, tool, arguments, secrets)
        if ran is None:  # a command still running: the state machine waits, then polls it
            return {"invoke": None, "poll": {"wait_s": _poll_wait_s()}}
        _record(store, call, *ran)
        return skip
    payload = {
        "name": call.name,
        "arguments": arguments,
        "session_id": state.session_id,
        "call_id": call.call_id,
    }
    return {
        "invoke": {"function": tool.function, "payload": payload, "timeout_s": tool.timeout_s},
        "poll": None,
    }


def _arguments(call: PendingCall) -> dict[str, Any] | None:
    """The call's arguments, or None when they are not a JSON object."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    return arguments if isinstance(arguments, dict) else None


def _poll_wait_s() -> int:
    """How long the state machine waits between two looks at a long hosted command."""
    from skyloop import deps

    return deps.get_settings().hosted_poll_s


def poll_tool(store: Store, state: TurnState, call_id: str, secrets: SecretStore | None) -> dict[str, Any]:
    """A hosted command that outlived its ``PrepareTool`` invocation: its output once it ended (then
    ``{"poll": None}``), else ``{"poll": {"wait_s"}}`` for another look. A turn no longer running
    (interrupted, deleted) stops it."""
    done: dict[str, Any] = {"invoke": None, "poll": None}
    session = store.get_session(state.session_id)
    call = store.get_call(state.session_id, state.response_id, call_id)
    if call is None or call.output is not None:
        return done
    from skyloop.environments import service
    from skyloop.turns.steps import agent_for

    agent = agent_for(store, state)
    if not lifecycle.is_active(session, state.response_id):
        service.stop_call(session, agent, call_id)
        return done
    tool = _tool(store, state, call, secrets)
    if tool is None:
        return done
    stream = OutputStream(store, state, call)
    run = service.poll_call(session, agent, call_id, timeout_s=tool.timeout_s, on_output=stream.write)
    stream.close()
    if run is None:
        return {"invoke": None, "poll": {"wait_s": _poll_wait_s()}}
    _record(store, call, *_bounded(store, session, call, tool, run))
    return done


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


def _environment(
    store: Store, state: TurnState, call: PendingCall, status: str, *, restored: bool, error: str | None
) -> None:
    """A step of the workspace's making, in the log once per call that made it (a repeated branch of
    the call writes nothing twice)."""
    batch = lifecycle.turn_append(
        state, f"{state.response_id}:{call.iteration}:{call.call_id}:environment:{status}"
    )
    batch.event(
        ev.SESSION_ENVIRONMENT,
        ev.environment_status(status, response_id=state.response_id, restored=restored, error=error),
    )
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


def _call_hosted(
    store: Store,
    state: TurnState,
    session: Session,
    call: PendingCall,
    tool: ServerTool,
    arguments: dict[str, Any],
    secrets: SecretStore | None,
) -> tuple[str, dict[str, Any]] | None:
    """Run a hosted built-in in the session's environment, its output streamed while it runs; an
    output over the tool's limit is kept whole as a session file, and the call's output says so.
    The workspace's making (its first use) is recorded first (``session.environment``), then the
    call is announced, as OpenAI's hosted environments order them.
    None: a command still running past this invocation's time (:func:`poll_tool` takes it on)."""
    from skyloop.environments import service
    from skyloop.turns.steps import agent_for

    announced: list[bool] = []

    def announce() -> None:
        if not announced:
            announced.append(True)
            _announce(store, state, call, session.agent_name)

    def report(status: str, restored: bool, error: str | None) -> None:
        _environment(store, state, call, status, restored=restored, error=error)

    stream = OutputStream(store, state, call)
    run = service.run_call(
        session,
        agent_for(store, state),
        call.name,
        arguments,
        timeout_s=tool.timeout_s,
        secrets=secrets,
        on_output=stream.write,
        task=call.call_id,
        report=report,
        on_start=announce,
    )
    announce()  # a call that could not run (no environment, a failed setup) is announced with its output
    stream.close()
    if run.pending:
        return None
    return _bounded(store, session, call, tool, run)


def _bounded(
    store: Store, session: Session, call: PendingCall, tool: ServerTool, run: HostedRun
) -> tuple[str, dict[str, Any]]:
    """The call's output within the tool's limit (the whole kept as a session file when cut)."""
    details = dict(run.details)
    output = run.output
    if len(output) > tool.max_output_chars:
        kept = _keep_whole(store, session, call, output)
        if kept is not None:
            details["output_file_id"] = kept
            details["output_chars"] = len(output)
        note = (
            f" (the whole output is session file {kept}, {call.name.lower()}-{call.call_id}.txt)"
            if kept
            else ""
        )
        output = output[: tool.max_output_chars] + (
            f"\n…[truncated: {len(output) - tool.max_output_chars:,} more characters{note}]"
        )
    return output, details


def _keep_whole(store: Store, session: Session, call: PendingCall, output: str) -> str | None:
    """The whole output as a session file (its id), or None when the session's files are full."""
    from skyloop import deps, session_files
    from skyloop.errors import SkyloopError

    try:
        kept = session_files.upload(
            store,
            session,
            deps.get_settings(),
            filename=f"{call.name.lower()}-{call.call_id}.txt",
            data=output.encode("utf-8"),
            declared="text/plain; charset=utf-8",
        )
    except SkyloopError:
        return None
    return kept.id


class OutputStream:
    """A running call's output on the session stream (``response.function_call_output.delta``), in
    batches (at most ten a second), up to ``MAX_STREAMED`` characters: the item keeps the rest."""

    MAX_STREAMED = 64_000
    EVERY_S = 0.1

    def __init__(self, store: Store, state: TurnState, call: PendingCall) -> None:
        import threading

        self.store = store
        self.state = state
        self.call = call
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._sent = 0
        self._batches = 0
        self._last = 0.0
        self._token = uuid.uuid4().hex[:8]  # each invocation's batches apart (a command polled again)

    def write(self, text: str) -> None:
        import time

        with self._lock:
            if self._sent >= self.MAX_STREAMED:
                return
            text = text[: self.MAX_STREAMED - self._sent]
            self._pending.append(text)
            self._sent += len(text)
            if time.monotonic() - self._last >= self.EVERY_S or self._sent >= self.MAX_STREAMED:
                self._flush()

    def close(self) -> None:
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        import time

        if not self._pending:
            return
        delta, self._pending = "".join(self._pending), []
        self._last = time.monotonic()
        self._batches += 1
        state, call = self.state, self.call
        batch = lifecycle.turn_append(
            state, f"{state.response_id}:{call.iteration}:{call.call_id}:out:{self._token}:{self._batches}"
        )
        batch.event(ev.RESPONSE_OUTPUT_DELTA, ev.function_call_output_delta(call.call_id, delta))
        try:
            lifecycle.append_active(self.store, batch)
        except lifecycle.TurnInactiveError:
            self._sent = self.MAX_STREAMED  # the turn ended (interrupted): stream nothing more


def _record(store: Store, call: PendingCall, output: str, details: dict[str, Any] | None = None) -> None:
    store.answer_call(call, output, count_down=False, details=details)  # False: answered before
