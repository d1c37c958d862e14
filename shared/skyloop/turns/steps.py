"""The turn's Step Functions tasks: prepare, call the model, await client tools, finish, fail.

Every step is idempotent: the events and items it writes go through
dedupe-keyed appends whose keys derive from (turn, iteration, step), and item
ids derive from the same, so a step retried by Step Functions or invoked twice
writes nothing new.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from typing import TYPE_CHECKING, Any

from skyloop import events as ev
from skyloop.errors import ModelCallError, NotFoundError
from skyloop.ids import derived_id
from skyloop.models.session import PendingCall
from skyloop.store import Append, ConditionFailedError, NewItem
from skyloop.turns.state import TurnError, TurnState, error_from_catch

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.agent import Agent
    from skyloop.models.session import Session, Turn
    from skyloop.store import DynamoStore

DELTA_FLUSH_S = 0.1  # at most ~10 delta appends a second per turn: live enough, and bounds write cost
DELTA_FLUSH_CHARS = 2048
MAX_ATTEMPTS = 10


def _is_active(session: Session, state: TurnState) -> bool:
    return session.active_response_id == state.response_id and session.status == "running"


def _agent(store: DynamoStore, turn: Turn) -> Agent:
    return _AGENTS.get(store, turn.agent_id)


class _AgentCache:
    """Agent versions are immutable, so a warm container keeps them."""

    def __init__(self) -> None:
        self._cache: dict[str, Agent] = {}

    def get(self, store: DynamoStore, agent_id: str) -> Agent:
        if agent_id not in self._cache:
            self._cache[agent_id] = store.get_agent(agent_id)
        return self._cache[agent_id]


_AGENTS = _AgentCache()


class TurnInactiveError(Exception):
    """The turn is no longer the session's active one (interrupted or deleted): stop quietly."""


def _turn_batch(state: TurnState, dedupe_key: str) -> Append:
    """An append that only lands while this turn is still the session's active turn."""
    return Append(
        state.session_id,
        dedupe_key=dedupe_key,
        session_condition="active_response_id = :active",
        condition_values={":active": state.response_id},
    )


def _append_active(store: DynamoStore, batch: Append) -> None:
    try:
        store.append(batch)
    except (ConditionFailedError, NotFoundError) as exc:
        raise TurnInactiveError(str(exc)) from exc


def _stops_when_inactive(step: Callable[..., TurnState]) -> Callable[..., TurnState]:
    @functools.wraps(step)
    def run(store: DynamoStore, state: TurnState, *args: Any, **kwargs: Any) -> TurnState:
        try:
            return step(store, state, *args, **kwargs)
        except TurnInactiveError:
            return state.model_copy(update={"next": "stop"})

    return run


# --------------------------------------------------------------------------- prepare
@_stops_when_inactive
def prepare_turn(store: DynamoStore, state: TurnState) -> TurnState:
    session = store.get_session(state.session_id)
    if not _is_active(session, state):
        return state.model_copy(update={"next": "stop"})
    turn = store.get_turn(state.session_id, state.response_id)
    agent = _agent(store, turn)
    batch = _turn_batch(state, f"{state.response_id}:prepare")
    batch.event(
        ev.RESPONSE_IN_PROGRESS,
        ev.response_event(
            ev.response_object(
                state.response_id, status="in_progress", model=agent.name, created_at=turn.created_at
            )
        ),
    )
    _append_active(store, batch)
    return state.model_copy(update={"next": "call_model", "iteration": 0})


# ------------------------------------------------------------------------ call model
@_stops_when_inactive
def call_model_step(store: DynamoStore, state: TurnState, model_caller: Any = None) -> TurnState:
    """Record answered calls, call the model once, and decide what the turn does next.

    Idempotent: once an iteration's result has landed, running the step again
    returns the recorded decision without calling the model. A retry after a
    partial attempt announces itself with ``response.retry`` and streams anew
    under its own keys, so viewers never see two attempts' text spliced.
    """
    session = store.get_session(state.session_id)
    if not _is_active(session, state):
        return state.model_copy(update={"next": "stop"})
    i = state.iteration
    result_key = f"{state.response_id}:{i}:result"
    if store.dedupe_exists(state.session_id, result_key):
        return _recorded_decision(store, state)
    if i >= state.max_iterations:
        raise TurnError("max_iterations", f"the turn reached its limit of {state.max_iterations} model calls")
    turn = store.get_turn(state.session_id, state.response_id)
    agent = _agent(store, turn)
    if i > 0:
        _record_outputs(store, state, agent, i - 1)
        session = store.get_session(state.session_id)
    cutoff = session.last_seq
    items = store.list_items(state.session_id, through_seq=cutoff)
    consumed = max(state.consumed_seq, session.input_seq)
    attempt = _claim_attempt(store, state)

    if model_caller is None:
        from skyloop.harnesses.openai_responses import call_model as model_caller
    from skyloop.settings import get_settings

    deltas = _DeltaWriter(store, state, attempt)
    try:
        result = model_caller(
            agent.spec, items, turn.tools, deltas.add, timeout_s=get_settings().model_timeout_s
        )
    except ModelCallError as exc:
        deltas.flush()
        raise TurnError(exc.error_code, exc.message) from exc
    deltas.flush()

    batch = _turn_batch(state, result_key)
    if result.text:
        if not deltas.sent_any:
            batch.event(ev.RESPONSE_TEXT_DELTA, ev.text_delta(result.text, response_id=state.response_id))
        msg_id = derived_id(state.response_id, i, "message")
        idx = batch.event(
            ev.RESPONSE_ITEM_DONE,
            ev.item_done(
                ev.assistant_message_item(
                    item_id=msg_id, text=result.text, model=agent.name, response_id=state.response_id
                )
            ),
        )
        batch.items.append(
            NewItem(
                id=msg_id,
                type="message",
                data={
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": result.text}],
                    "model": agent.name,
                },
                response_id=state.response_id,
                event_index=idx,
                anchor_seq=cutoff,
            )
        )
    client_names = {t.name for t in turn.tools}
    calls = [
        PendingCall(
            session_id=state.session_id,
            response_id=state.response_id,
            call_id=call.call_id,
            iteration=i,
            index=n,
            name=call.name,
            arguments=call.arguments,
            item_id=derived_id(state.response_id, i, "call", n),
            anchor_seq=cutoff,
            output=None
            if call.name in client_names
            else f"Error: tool '{call.name}' is not available in this session",
            answered_at=None if call.name in client_names else int(time.time()),
        )
        for n, call in enumerate(result.calls)
    ]
    unanswered = sum(1 for c in calls if c.output is None)
    if not calls:
        nxt, iteration = "finish", i
    else:
        if i + 1 >= state.max_iterations:
            raise TurnError(
                "max_iterations", f"the turn reached its limit of {state.max_iterations} model calls"
            )
        nxt, iteration = ("await_client" if unanswered else "call_model"), i + 1
    batch.extra.extend(store.call_put_ops(calls))
    decision = {"iteration": i, "next": nxt, "consumed_seq": consumed}
    batch.extra.append(
        _turn_update_op(
            store,
            state,
            {"unanswered": unanswered, "await_iteration": i, "last_decision": json.dumps(decision)},
        )
    )
    _append_active(store, batch)
    return state.model_copy(update={"next": nxt, "iteration": iteration, "consumed_seq": consumed})


def _recorded_decision(store: DynamoStore, state: TurnState) -> TurnState:
    """What the landed result of this iteration decided (a repeated invocation returns it again)."""
    raw = store.get_turn_attribute(state.session_id, state.response_id, "last_decision")
    decision = json.loads(raw) if raw else {}
    if decision.get("iteration") != state.iteration:
        raise TurnError("internal_error", f"no recorded result for iteration {state.iteration}")
    nxt = decision["next"]
    iteration = state.iteration if nxt == "finish" else state.iteration + 1
    return state.model_copy(
        update={"next": nxt, "iteration": iteration, "consumed_seq": decision["consumed_seq"]}
    )


def _claim_attempt(store: DynamoStore, state: TurnState) -> int:
    """Number this model call's attempt; any attempt after the first is announced to viewers."""
    for attempt in range(MAX_ATTEMPTS):
        if store.claim_marker(state.session_id, f"{state.response_id}:{state.iteration}:attempt:{attempt}"):
            if attempt:
                batch = _turn_batch(state, f"{state.response_id}:{state.iteration}:retry:{attempt}")
                batch.event(
                    ev.RESPONSE_RETRY,
                    {"response_id": state.response_id, "attempt": attempt, "reason": "model step retried"},
                )
                _append_active(store, batch)
            return attempt
    raise TurnError("internal_error", "the model step was retried too many times")


def _turn_update_op(store: DynamoStore, state: TurnState, changes: dict[str, Any]) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeSerializer

    ser = TypeSerializer()
    return {
        "Update": {
            "TableName": store.table,
            "Key": {"pk": {"S": f"SESSION#{state.session_id}"}, "sk": {"S": f"TURN#{state.response_id}"}},
            "UpdateExpression": "SET " + ", ".join(f"#k{n} = :v{n}" for n in range(len(changes))),
            "ExpressionAttributeNames": {f"#k{n}": k for n, k in enumerate(changes)},
            "ExpressionAttributeValues": {f":v{n}": ser.serialize(v) for n, v in enumerate(changes.values())},
            "ConditionExpression": "attribute_exists(pk)",
        }
    }


def _record_outputs(store: DynamoStore, state: TurnState, agent: Agent, iteration: int) -> None:
    """Publish and persist the completed calls of ``iteration`` with their outputs, in call order."""
    calls = store.list_calls(state.session_id, state.response_id, iteration=iteration)
    if not calls:
        return
    missing = [c.call_id for c in calls if c.output is None]
    if missing:
        raise TurnError("internal_error", f"resumed with unanswered calls: {', '.join(missing)}")
    batch = _turn_batch(state, f"{state.response_id}:{iteration}:outputs")
    for call in calls:
        add_completed_call(batch, call, call.output or "", agent.name)
    _append_active(store, batch)


def _call_event(call: PendingCall, status: str, agent_name: str) -> dict[str, Any]:
    return ev.item_done(
        ev.function_call_item(
            item_id=call.item_id,
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments,
            status=status,
            agent=agent_name,
            response_id=call.response_id,
        )
    )


def add_completed_call(batch: Append, call: PendingCall, output: str, agent_name: str) -> None:
    """Publish and persist one finished call and its output, anchored where the model made the call."""
    idx = batch.event(ev.RESPONSE_ITEM_DONE, _call_event(call, "completed", agent_name))
    batch.items.append(
        NewItem(
            id=call.item_id,
            type="function_call",
            data={
                "name": call.name,
                "arguments": call.arguments,
                "call_id": call.call_id,
                "model": agent_name,
            },
            response_id=call.response_id,
            event_index=idx,
            anchor_seq=call.anchor_seq,
        )
    )
    out_id = derived_id(call.response_id, call.iteration, "output", call.index)
    idx = batch.event(
        ev.RESPONSE_ITEM_DONE,
        ev.item_done(
            ev.function_call_output_item(
                item_id=out_id, call_id=call.call_id, output=output, response_id=call.response_id
            )
        ),
    )
    batch.items.append(
        NewItem(
            id=out_id,
            type="function_call_output",
            data={"call_id": call.call_id, "output": output},
            response_id=call.response_id,
            event_index=idx,
            anchor_seq=call.anchor_seq,
        )
    )


class _DeltaWriter:
    """Batches streamed text into appends so viewers see tokens live at a bounded write rate."""

    def __init__(self, store: DynamoStore, state: TurnState, attempt: int = 0) -> None:
        self.store = store
        self.state = state
        self.attempt = attempt
        self.buffer: list[str] = []
        self.batches = 0
        self.last_flush = time.monotonic()
        self.sent_any = False
        self._lock = threading.Lock()

    def add(self, delta: str) -> None:
        if not delta:
            return
        with self._lock:
            self.buffer.append(delta)
            due = time.monotonic() - self.last_flush >= DELTA_FLUSH_S
            if due or sum(map(len, self.buffer)) >= DELTA_FLUSH_CHARS:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        text, self.buffer = "".join(self.buffer), []
        batch = _turn_batch(
            self.state, f"{self.state.response_id}:{self.state.iteration}:delta:{self.batches}"
        )
        batch.event(ev.RESPONSE_TEXT_DELTA, ev.text_delta(text, response_id=self.state.response_id))
        self.batches += 1
        _append_active(self.store, batch)
        self.sent_any = True


# ---------------------------------------------------------------------- await client
def await_client(store: DynamoStore, state: TurnState, task_token: str, sfn: Any) -> None:
    """Park: keep the task token, then publish each unanswered call as ``action_required``.

    The token is stored before any call is published, so no client can answer
    a call whose turn cannot be resumed yet. If every call is already answered
    (a retried invocation), the step resumes the turn itself.
    """
    try:
        _park(store, state, task_token, sfn)
    except TurnInactiveError:
        _wake(sfn, task_token)


def _wake(sfn: Any, task_token: str) -> None:
    """Let a parked execution of an ended turn run on to its ``stop`` branch (best effort)."""
    with contextlib.suppress(Exception):  # a stopped execution's token is already invalid
        sfn.send_task_success(taskToken=task_token, output=json.dumps({"stopped": True}))


def _park(store: DynamoStore, state: TurnState, task_token: str, sfn: Any) -> None:
    session = store.get_session(state.session_id)
    if not _is_active(session, state):
        raise TurnInactiveError(state.response_id)
    iteration = state.iteration - 1
    store.update_turn(
        state.session_id, state.response_id, {"task_token": task_token, "await_iteration": iteration}
    )
    turn = store.get_turn(state.session_id, state.response_id)
    agent = _agent(store, turn)
    calls = store.list_calls(state.session_id, state.response_id, iteration=iteration)
    batch = _turn_batch(state, f"{state.response_id}:{iteration}:await")
    for call in calls:
        if call.output is not None:
            continue  # answered already (e.g. an unknown tool's error output)
        batch.event(ev.RESPONSE_ITEM_DONE, _call_event(call, "action_required", agent.name))
    _append_active(store, batch)
    if turn.unanswered == 0:
        resume_turn(store, state.session_id, state.response_id, iteration, sfn)


def resume_turn(store: DynamoStore, session_id: str, response_id: str, iteration: int, sfn: Any) -> bool:
    """Send SendTaskSuccess exactly once per parked iteration; returns whether this caller sent it."""
    turn = store.get_turn(session_id, response_id)
    if turn.unanswered != 0 or not turn.task_token or turn.await_iteration != iteration:
        return False
    claimed = store.update_turn(
        session_id,
        response_id,
        {"resumed_iteration": iteration},
        condition="attribute_not_exists(resumed_iteration) OR resumed_iteration < :i",
        values={":i": iteration},
    )
    if not claimed:
        return False
    sfn.send_task_success(taskToken=turn.task_token, output=json.dumps({"resumed_iteration": iteration}))
    return True


# --------------------------------------------------------------------------- finish
def finish_turn(store: DynamoStore, state: TurnState) -> TurnState:
    """End the turn unless input arrived that the model has not seen (then continue)."""
    try:
        turn = store.get_turn(state.session_id, state.response_id)
    except NotFoundError:
        return state.model_copy(update={"next": "stop"})
    agent = _agent(store, turn)
    batch = Append(state.session_id, dedupe_key=f"{state.response_id}:finish")
    batch.event(
        ev.RESPONSE_COMPLETED,
        ev.response_event(
            ev.response_object(
                state.response_id, status="completed", model=agent.name, created_at=turn.created_at
            )
        ),
    )
    batch.event(ev.SESSION_STATUS, ev.session_status(state.session_id, "idle", response_id=state.response_id))
    batch.set_session = {"status": "idle", "last_response_id": state.response_id}
    batch.remove_session = ["active_response_id"]
    batch.session_condition = "active_response_id = :r AND input_seq <= :c"
    batch.condition_values = {":r": state.response_id, ":c": state.consumed_seq}
    try:
        store.append(batch)
    except ConditionFailedError:
        session = store.get_session(state.session_id)
        if session.active_response_id != state.response_id:
            return state.model_copy(update={"next": "stop"})
        # A message arrived after the last model call: continue the turn without going idle.
        return state.model_copy(update={"next": "call_model", "iteration": state.iteration + 1})
    return state.model_copy(update={"next": "stop"})


# ----------------------------------------------------------------------------- fail
def fail_turn(store: DynamoStore, state: TurnState) -> TurnState:
    code, message = error_from_catch(state.error)
    error = {"code": code, "message": message}
    try:
        turn = store.get_turn(state.session_id, state.response_id)
        model = _agent(store, turn).name
        created = turn.created_at
    except NotFoundError:
        model, created = "unknown", None
    batch = Append(state.session_id, dedupe_key=f"{state.response_id}:fail")
    batch.event(
        ev.RESPONSE_FAILED,
        ev.response_event(
            ev.response_object(
                state.response_id, status="failed", model=model, created_at=created, error=error
            )
        ),
    )
    batch.event(
        ev.SESSION_STATUS,
        ev.session_status(state.session_id, "failed", response_id=state.response_id, error=error),
    )
    batch.set_session = {"status": "failed", "last_task_error": error, "last_response_id": state.response_id}
    batch.remove_session = ["active_response_id"]
    batch.session_condition = "active_response_id = :r"
    batch.condition_values = {":r": state.response_id}
    with contextlib.suppress(ConditionFailedError, NotFoundError):
        store.append(batch)  # fails only if the turn already ended (interrupted or deleted)
    return state.model_copy(update={"next": "stop", "error": error})
