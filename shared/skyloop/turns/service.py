"""API-side turn operations: post a message (start or join a turn), deliver a tool output.

Both race with the running turn's own writes, so every decision is a
conditional write, retried from a fresh read when it loses.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from skyloop import events as ev
from skyloop.errors import ConflictError, NotFoundError, RunnerUnavailableError
from skyloop.ids import derived_id, new_id, new_response_id, new_turn_group_id
from skyloop.models.session import ClientTool, PendingCall, Turn
from skyloop.store import Append, ConditionFailedError, NewItem
from skyloop.turns.state import TurnState

if TYPE_CHECKING:
    from skyloop.models.agent import Agent
    from skyloop.store import DynamoStore

START_ATTEMPTS = 5
STALE_TOKEN_ERRORS = ("InvalidToken", "TaskTimedOut", "TaskDoesNotExist")


class TurnEngine:
    """Starts turn executions; the one place that knows the state machine's ARN."""

    def __init__(self, sfn: Any, state_machine_arn: str | None) -> None:
        self.sfn = sfn
        self.state_machine_arn = state_machine_arn

    def start(self, state: TurnState) -> None:
        if not self.state_machine_arn:
            raise RunnerUnavailableError("no turn state machine is configured for this deployment")
        self.sfn.start_execution(
            stateMachineArn=self.state_machine_arn,
            name=state.response_id,  # always named: idempotent start, and moto needs it
            input=state.model_dump_json(),
        )


def post_message(
    store: DynamoStore,
    engine: TurnEngine,
    agent: Agent,
    session_id: str,
    data: dict[str, Any],
    tools: list[ClientTool] | None,
    *,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Persist the user item, then start a turn or hand the message to the running one.

    With an ``idempotency_key`` the item and turn ids derive from the key and
    the append is deduplicated on it, so a client that re-posts after a lost
    answer gets the first answer back and starts nothing twice.
    """
    if idempotency_key:
        item_id = derived_id("message", session_id, idempotency_key)
        group = f"turn_{derived_id('group', session_id, idempotency_key)}"
    else:
        item_id, group = new_id(), new_turn_group_id()
    for _ in range(START_ATTEMPTS):
        session = store.get_session(session_id)
        batch = Append(
            session_id,
            set_input_seq=True,
            dedupe_key=f"message:{idempotency_key}" if idempotency_key else None,
        )
        if session.status == "running":
            idx = batch.event(ev.SESSION_INPUT_CONSUMED, ev.input_consumed(item_id, data))
            batch.session_condition = "#st = :running"
            batch.condition_names = {"#st": "status"}
            batch.condition_values = {":running": "running"}
            response_id = None
        else:
            response_id = _response_id_for(session_id, idempotency_key)
            batch.event(ev.SESSION_STATUS, ev.session_status(session_id, "running", response_id=response_id))
            idx = batch.event(ev.SESSION_INPUT_CONSUMED, ev.input_consumed(item_id, data))
            batch.set_session = {"status": "running", "active_response_id": response_id}
            batch.remove_session = ["last_task_error"]
            batch.session_condition = "#st <> :running"
            batch.condition_names = {"#st": "status"}
            batch.condition_values = {":running": "running"}
            batch.extra.append(
                store.turn_put_op(
                    Turn(
                        session_id=session_id,
                        response_id=response_id,
                        agent_id=agent.id,
                        created_at=int(time.time()),
                        tools=tools or [],
                    )
                )
            )
        batch.items.append(
            NewItem(
                id=item_id,
                type="message",
                data={"role": data["role"], "content": data["content"], "model": None},
                response_id=group,
                event_index=idx,
            )
        )
        try:
            result = store.append(batch)
        except ConditionFailedError:
            continue  # the turn started or ended under us: decide again
        if result.duplicate:
            # Posted before: make sure the turn it started runs (a named start is idempotent).
            response_id = _response_id_for(session_id, idempotency_key)
            if store.get_session(session_id).active_response_id != response_id:
                response_id = None
        if response_id is not None:
            _start_or_fail(store, engine, agent, session_id, response_id)
        return {"queued": True, "item_id": item_id}
    raise ConflictError("the session changed too often while posting; try again")


def _response_id_for(session_id: str, idempotency_key: str | None) -> str:
    if idempotency_key:
        return f"resp_{derived_id('response', session_id, idempotency_key)[:24]}"
    return new_response_id()


def _start_or_fail(
    store: DynamoStore, engine: TurnEngine, agent: Agent, session_id: str, response_id: str
) -> None:
    state = TurnState(
        session_id=session_id,
        response_id=response_id,
        client_tool_timeout_s=agent.spec.limits.client_tool_timeout_s,
        max_iterations=agent.spec.limits.max_iterations,
    )
    try:
        engine.start(state)
    except Exception as exc:
        if getattr(exc, "response", {}).get("Error", {}).get("Code") == "ExecutionAlreadyExists":
            return  # started by an earlier attempt of the same idempotent post

        error = {"code": "runner_unavailable", "message": f"could not start the turn: {exc}"}
        batch = Append(session_id, dedupe_key=f"{response_id}:fail")
        batch.event(
            ev.RESPONSE_FAILED,
            ev.response_event(
                ev.response_object(response_id, status="failed", model=agent.name, error=error)
            ),
        )
        batch.event(
            ev.SESSION_STATUS, ev.session_status(session_id, "failed", response_id=response_id, error=error)
        )
        batch.set_session = {"status": "failed", "last_task_error": error, "last_response_id": response_id}
        batch.remove_session = ["active_response_id"]
        batch.session_condition = "active_response_id = :r"
        batch.condition_values = {":r": response_id}
        with contextlib.suppress(ConditionFailedError):
            store.append(batch)
        raise RunnerUnavailableError(
            "the runner could not start the turn; the message was persisted and the session marked failed"
        ) from exc


def post_function_call_output(
    store: DynamoStore, sfn: Any, session_id: str, call_id: str, output: str
) -> dict[str, Any]:
    """Record a client tool's output once; the answer that completes the set resumes the turn."""
    from skyloop.turns.steps import resume_turn

    session = store.get_session(session_id)
    answer = {"queued": True, "item_id": call_id}
    call = None
    for response_id in (session.active_response_id, session.last_response_id):
        if response_id and call is None:
            call = store.get_call(session_id, response_id, call_id)
    if call is None:
        raise NotFoundError(f"No pending call '{call_id}' in this session")
    if call.output is None and store.answer_call(call, output):
        try:
            resume_turn(store, session_id, call.response_id, call.iteration, sfn)
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code in STALE_TOKEN_ERRORS:
                raise ConflictError("the turn is no longer waiting for this call") from exc
            raise
        return answer
    stored = store.get_call(session_id, call.response_id, call_id)
    if stored is not None and stored.output == output:
        return answer  # the same output again: a no-op with the same answer
    if stored is not None and stored.cancelled:
        raise ConflictError(
            f"call '{call_id}' was cancelled by an interrupt; its output is no longer accepted"
        )
    raise ConflictError(f"call '{call_id}' already has a different output")


CANCELLED_OUTPUT = "[Cancelled — tool execution was interrupted.]"
INTERRUPT_MARKER = (
    "[System: interrupted]\nThe user interrupted and abandoned their previous request. "
    "Do not continue it unless they ask again."
)


def execution_arn(state_machine_arn: str, response_id: str) -> str:
    return state_machine_arn.replace(":stateMachine:", ":execution:") + ":" + response_id


def stop_execution(sfn: Any, state_machine_arn: str | None, turn: Turn | None, response_id: str) -> None:
    """Stop a turn's execution, best effort; a parked one is also woken so it can end at once."""
    if state_machine_arn:
        with contextlib.suppress(Exception):
            sfn.stop_execution(
                executionArn=execution_arn(state_machine_arn, response_id),
                error="Interrupted",
                cause="the session's turn was interrupted or the session deleted",
            )
    if turn is not None and turn.task_token:
        with contextlib.suppress(Exception):  # on AWS a stopped execution's token is already void
            sfn.send_task_success(taskToken=turn.task_token, output=json.dumps({"stopped": True}))


def interrupt(store: DynamoStore, sfn: Any, state_machine_arn: str | None, session_id: str) -> dict[str, Any]:
    """Stop the running turn: cancel unanswered calls, mark the interruption once, go idle.

    The whole outcome is one conditional transaction on the turn still being
    active, so concurrent interrupts produce exactly one marker, and a racing
    step of the turn can no longer append once it lands.
    """
    for _ in range(START_ATTEMPTS):
        session = store.get_session(session_id)
        response_id = session.active_response_id
        if session.status != "running" or not response_id:
            return {"queued": False}
        turn = store.get_turn(session_id, response_id)
        batch = Append(
            session_id,
            session_condition="active_response_id = :r",
            condition_values={":r": response_id},
            set_input_seq=True,
        )
        batch.event(
            ev.SESSION_INTERRUPTED,
            {"data": {"requested_at": ev.server_time(), "response_id": response_id}},
        )
        if turn.await_iteration is not None:
            outputs_key = f"{response_id}:{turn.await_iteration}:outputs"
            if not store.dedupe_exists(session_id, outputs_key):
                calls = store.list_calls(session_id, response_id, iteration=turn.await_iteration)
                _cancel_calls(store, batch, session.agent_name, calls)
                batch.extra.append(store.dedupe_put_op(session_id, outputs_key))
        marker_id = new_id()
        marker = {
            "role": "user",
            "content": [{"type": "input_text", "text": INTERRUPT_MARKER}],
            "model": None,
        }
        idx = batch.event(ev.SESSION_INPUT_CONSUMED, ev.input_consumed(marker_id, marker))
        batch.items.append(
            NewItem(
                id=marker_id, type="message", data=marker, response_id=new_turn_group_id(), event_index=idx
            )
        )
        batch.event(
            ev.RESPONSE_CANCELLED,
            ev.response_event(
                ev.response_object(
                    response_id, status="cancelled", model=session.agent_name, created_at=turn.created_at
                )
            ),
        )
        batch.event(ev.SESSION_STATUS, ev.session_status(session_id, "idle", response_id=response_id))
        batch.set_session = {"status": "idle", "last_response_id": response_id}
        batch.remove_session = ["active_response_id"]
        try:
            store.append(batch)
        except ConditionFailedError:
            continue  # the turn ended or a call was answered meanwhile: look again
        stop_execution(sfn, state_machine_arn, turn, response_id)
        return {"queued": False}
    raise ConflictError("the session changed too often while interrupting; try again")


def _cancel_calls(store: DynamoStore, batch: Append, agent_name: str, calls: list[PendingCall]) -> None:
    """Persist each call of the parked step, unanswered ones with a cancellation output."""
    from skyloop.turns.steps import add_completed_call

    for call in calls:
        add_completed_call(
            batch, call, call.output if call.output is not None else CANCELLED_OUTPUT, agent_name
        )
        if call.output is None:
            batch.extra.append(store.cancel_call_op(call, CANCELLED_OUTPUT))


def delete_session(
    store: DynamoStore, sfn: Any, state_machine_arn: str | None, session_id: str
) -> dict[str, Any]:
    """Stop a running turn, then remove the session row first (no step can append after it) and the rest."""
    session = store.get_session(session_id)
    turn = None
    if session.active_response_id:
        with contextlib.suppress(NotFoundError):
            turn = store.get_turn(session_id, session.active_response_id)
    store.delete_session(session_id)
    if session.active_response_id:
        stop_execution(sfn, state_machine_arn, turn, session.active_response_id)
    return {"id": session_id, "object": "conversation.deleted", "deleted": True}
