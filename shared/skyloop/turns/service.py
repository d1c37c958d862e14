"""API-side turn operations: post a message (start or join a turn), deliver a tool output.

Both race with the running turn's own writes, so every decision is a
conditional write, retried from a fresh read when it loses.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from skyloop import events as ev
from skyloop.errors import ConflictError, NotFoundError, RunnerUnavailableError
from skyloop.ids import new_id, new_response_id, new_turn_group_id
from skyloop.models.session import ClientTool, Turn
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
) -> dict[str, Any]:
    """Persist the user item, then start a turn or hand the message to the running one."""
    item_id = new_id()
    group = new_turn_group_id()
    for _ in range(START_ATTEMPTS):
        session = store.get_session(session_id)
        batch = Append(session_id, set_input_seq=True)
        if session.status == "running":
            idx = batch.event(ev.SESSION_INPUT_CONSUMED, ev.input_consumed(item_id, data))
            batch.session_condition = "#st = :running"
            batch.condition_names = {"#st": "status"}
            batch.condition_values = {":running": "running"}
            response_id = None
        else:
            response_id = new_response_id()
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
            store.append(batch)
        except ConditionFailedError:
            continue  # the turn started or ended under us: decide again
        if response_id is not None:
            _start_or_fail(store, engine, agent, session_id, response_id)
        return {"queued": True, "item_id": item_id}
    raise ConflictError("the session changed too often while posting; try again")


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
        error = {"code": "runner_unavailable", "message": f"could not start the turn: {exc}"}
        batch = Append(session_id, dedupe_key=f"{response_id}:fail")
        batch.event(
            ev.SESSION_STATUS, ev.session_status(session_id, "failed", response_id=response_id, error=error)
        )
        batch.set_session = {"status": "failed", "last_task_error": error}
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
    if not session.active_response_id:
        raise NotFoundError(f"No pending call '{call_id}': the session has no running turn")
    call = store.get_call(session_id, session.active_response_id, call_id)
    if call is None:
        raise NotFoundError(f"No pending call '{call_id}' in the running turn")
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
    raise ConflictError(f"call '{call_id}' already has a different output")
