"""Every transition of a turn: start (or join), park, resume, continue, finish, fail, cancel.

A turn is the session's *active turn* from the append that starts it until the
append that ends it; every write in between is guarded on that, so a step of
a turn that was interrupted or deleted can no longer write anything. Each
transition is one conditional append (see :mod:`skyloop.store`), retried from
a fresh read when it races another writer, and carries a dedupe key derived
from (turn, iteration, step) so that doing it twice writes nothing twice.

The API (posting a message, an output, an interrupt) and the Step Functions
steps (:mod:`skyloop.turns.steps`) both change turns only through here; Step
Functions itself is reached only through :mod:`skyloop.turns.engine`.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NoReturn

from skyloop import events as ev
from skyloop.errors import (
    ConflictError,
    ImageNotSupportedError,
    InvalidInputError,
    NotFoundError,
    RunnerUnavailableError,
)
from skyloop.ids import derived_id, new_id, new_response_id, new_turn_group_id
from skyloop.models.session import CANCELLED_OUTPUT, Turn
from skyloop.store import (
    Append,
    ApprovalResolution,
    ConditionFailedError,
    Guard,
    NewItem,
    SessionChange,
    TurnEnd,
    notifier,
)
from skyloop.turns.engine import StaleTokenError
from skyloop.turns.state import TurnState

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.agent import Agent
    from skyloop.models.session import ClientTool, PendingCall, Session
    from skyloop.store import AppendResult, Store
    from skyloop.turns.engine import TurnEngine

ATTEMPTS = 5  # fresh reads before a racing API transition gives up with 409
DENIED_OUTPUT = "[Denied — the user did not approve running this tool.]"
APPROVAL_PREFIX = "approve_"  # an approval's elicitation id is this plus the call's id
INTERRUPT_MARKER = (
    "[System: interrupted]\nThe user interrupted and abandoned their previous request. "
    "Do not continue it unless they ask again."
)


class TurnInactiveError(Exception):
    """The turn is no longer the session's active one (interrupted or deleted): stop quietly."""


def is_active(session: Session, response_id: str) -> bool:
    return session.active_response_id == response_id and session.status == "running"


def turn_append(state: TurnState, dedupe_key: str, *, after_seq: int | None = None) -> Append:
    """An append that only lands while this turn is still the session's active turn."""
    return Append(
        state.session_id,
        dedupe_key=dedupe_key,
        after_seq=after_seq,
        guard=Guard(active_turn=state.response_id),
    )


def append_active(store: Store, batch: Append) -> AppendResult:
    """Flush a turn's append; a turn that is no longer active raises :class:`TurnInactiveError`."""
    try:
        return store.append(batch)
    except (ConditionFailedError, NotFoundError) as exc:
        raise TurnInactiveError(str(exc)) from exc


class SeqChain:
    """The session's ``last_seq`` as one step last read or wrote it, handed to the step's next append.

    It saves the read of ``last_seq`` an append makes without one. Safe
    because the value is only the append's *expected* ``last_seq``: if another
    writer appended in between, the append's condition fails and the store
    re-reads and retries (no lost or duplicate seq). A duplicate append (it
    had landed before) says nothing about the log, so the next one reads.
    Lives for one step invocation (never shared between processes).
    """

    def __init__(self, seq: int | None) -> None:
        self.seq = seq

    def append(self, store: Store, batch: Append) -> AppendResult:
        """:func:`append_active` from the chain's seq; returns the result, the chain moves on."""
        batch.after_seq = self.seq
        result = append_active(store, batch)
        self.seq = None if result.duplicate else result.last_seq
        return result


def end_turn(
    batch: Append,
    session_id: str,
    response_id: str,
    *,
    status: str,
    model: str,
    created_at: int | None,
    error: dict[str, Any] | None = None,
    usage: dict[str, int] | None = None,
) -> None:
    """The end of a turn, whichever way it ends: its terminal event, the new status, no active turn."""
    terminal = {
        "completed": ev.RESPONSE_COMPLETED,
        "failed": ev.RESPONSE_FAILED,
        "cancelled": ev.RESPONSE_CANCELLED,
    }
    batch.event(
        terminal[status],
        ev.response_event(
            ev.response_object(
                response_id, status=status, model=model, created_at=created_at, error=error, usage=usage
            )
        ),
    )
    session_status = {"completed": "idle", "cancelled": "idle", "failed": "failed"}[status]
    batch.event(
        ev.SESSION_STATUS, ev.session_status(session_id, session_status, response_id=response_id, error=error)
    )
    batch.change = SessionChange(
        status=session_status,  # type: ignore[arg-type]
        last_response_id=response_id,
        end_active_turn=True,
        last_task_error=error,
    )
    batch.turn_end = TurnEnd(response_id, status, int(time.time()), error)


# --------------------------------------------------------------------------------- start
def response_id_for(session_id: str, idempotency_key: str) -> str:
    """The id of the turn a message posted with ``idempotency_key`` starts (the same for every re-post)."""
    return _response_id_for(session_id, idempotency_key)


def _response_id_for(session_id: str, idempotency_key: str | None) -> str:
    if idempotency_key:
        return f"resp_{derived_id('response', session_id, idempotency_key)[:24]}"
    return new_response_id()


def start_or_join(
    store: Store,
    engine: TurnEngine,
    agent: Agent,
    session_id: str,
    message: dict[str, Any],
    tools: list[ClientTool] | None,
    *,
    idempotency_key: str | None = None,
    model_override: str | None = None,
    session: Session | None = None,
    max_cost_usd: float | None = None,
) -> dict[str, Any]:
    """Persist a user message, then start a turn, or hand the message to the running one.

    ``session`` is the caller's read of the session, if it has one: the first
    attempt decides from it (its append's guard and expected seq re-check
    that decision), later attempts from a fresh read.

    ``model_override`` (omnigent's per-event override) applies to the turn this message starts;
    like ``tools`` it is ignored when the message joins a running turn. So does ``max_cost_usd``
    (a scheduled task's cap): the turn it starts stops once its model calls cost that much.

    With an ``idempotency_key`` the item and turn ids derive from the key and
    the append is deduplicated on it, so a client that re-posts after a lost
    answer gets the first answer back and starts nothing twice. The agent's own
    ``runtime: client`` tools are offered on every turn it starts, the message's winning a clash.
    """
    from skyloop.models.tools import declared_client_tools, merge_client_tools

    tools = merge_client_tools(declared_client_tools(agent.spec.tools), tools)
    check_tool_names(store, agent, tools)
    check_images(agent, message)
    if idempotency_key:
        item_id = derived_id("message", session_id, idempotency_key)
        group = f"turn_{derived_id('group', session_id, idempotency_key)}"
    else:
        item_id, group = new_id(), new_turn_group_id()
    counted = False  # the quota is taken once, however many times the append is retried
    for attempt in range(ATTEMPTS):
        if attempt or session is None:
            session = store.get_session(session_id)
        batch = Append(
            session_id,
            after_seq=session.last_seq,
            dedupe_key=f"message:{idempotency_key}" if idempotency_key else None,
        )
        if session.status != "running" and not counted:
            replay = idempotency_key is not None and store.dedupe_exists(session_id, batch.dedupe_key or "")
            if not replay:
                from skyloop import quotas
                from skyloop.settings import get_settings

                quotas.before_turn(store, get_settings(), session.owner)
            counted = True
        if session.status == "running":
            idx = batch.event(ev.SESSION_INPUT_CONSUMED, ev.input_consumed(item_id, message))
            batch.guard = Guard(running=True)
            batch.change = SessionChange(mark_input=True)
        else:
            response_id = _response_id_for(session_id, idempotency_key)
            created_at = int(time.time())
            batch.event(ev.SESSION_STATUS, ev.session_status(session_id, "running", response_id=response_id))
            idx = batch.event(ev.SESSION_INPUT_CONSUMED, ev.input_consumed(item_id, message))
            # The turn is announced in the append that starts it: no step of its own (one Lambda
            # invocation and two state transitions fewer before the model is called).
            batch.event(
                ev.RESPONSE_IN_PROGRESS,
                ev.response_event(
                    ev.response_object(
                        response_id, status="in_progress", model=agent.name, created_at=created_at
                    )
                ),
            )
            batch.guard = Guard(running=False)
            batch.change = SessionChange(
                status="running", active_turn=response_id, clear_task_error=True, mark_input=True
            )
            batch.new_turn = Turn(
                session_id=session_id,
                response_id=response_id,
                agent_id=agent.id,
                created_at=created_at,
                tools=tools or [],
                model_override=model_override,
                max_cost_usd=max_cost_usd,
            )
        batch.items.append(
            NewItem(
                id=item_id,
                type="message",
                data={"role": message["role"], "content": message["content"], "model": None},
                response_id=group,
                event_index=idx,
            )
        )
        try:
            if batch.new_turn is not None and idempotency_key is None:
                _append_starting(store, engine, agent, batch)
                return {"queued": True, "item_id": item_id}
            result = store.append(batch)
        except ConditionFailedError:
            continue  # the turn started or ended under us: decide again
        _run_started(store, engine, agent, batch, result, idempotency_key)
        return {"queued": True, "item_id": item_id}
    raise ConflictError("the session changed too often while posting; try again")


def _append_starting(store: Store, engine: TurnEngine, agent: Agent, batch: Append) -> None:
    """Append a new turn while its execution starts, and answer once both are done.

    The execution's start, its first transition and its Lambda's invocation
    take longer than the append, so the append is off the turn's path: its
    first step reads the session and, when the append has not landed yet,
    waits for it (:func:`skyloop.turns.steps.started_meanwhile`). An append that
    does not land (the session moved: the caller decides again, under a new
    response id) stops the execution, which finds no turn and writes nothing
    anyway. Only a post without an idempotency key takes this path: a keyed
    post's response id (its execution's name) is the same on every attempt.
    """
    turn = batch.new_turn
    assert turn is not None
    assert batch.after_seq is not None
    state = _turn_state(
        agent,
        batch.session_id,
        turn.response_id,
        created_at=turn.created_at,
        last_seq=batch.after_seq + len(batch.events),
    )
    starting = _background(engine.start, state)
    try:
        store.append(batch)
    except BaseException:
        with contextlib.suppress(Exception):
            starting.result()
            engine.stop(turn.response_id)
        raise
    try:
        starting.result()
    except Exception as exc:
        _not_started(store, agent, batch.session_id, turn.response_id, exc)


_POOL: ThreadPoolExecutor | None = None


def _background(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="skyloop-start")
    return _POOL.submit(contextvars.copy_context().run, fn, *args)  # with the invocation's context


def _run_started(
    store: Store,
    engine: TurnEngine,
    agent: Agent,
    batch: Append,
    result: AppendResult,
    idempotency_key: str | None,
) -> None:
    """Start the execution of the turn a post's append started (or, re-posted, had started)."""
    session_id = batch.session_id
    if result.duplicate:
        # Posted before: make sure the turn it started runs (a named start is idempotent).
        response_id = _response_id_for(session_id, idempotency_key)
        if store.get_session(session_id).active_response_id == response_id:
            _start_execution(store, engine, agent, session_id, response_id)
    elif batch.new_turn is not None:
        _start_execution(
            store,
            engine,
            agent,
            session_id,
            batch.new_turn.response_id,
            created_at=batch.new_turn.created_at,
            last_seq=result.last_seq,
        )


def _start_execution(
    store: Store,
    engine: TurnEngine,
    agent: Agent,
    session_id: str,
    response_id: str,
    *,
    created_at: int | None = None,
    last_seq: int | None = None,
) -> None:
    """Start the turn's execution; a turn started by this post carries its facts (no step re-reads them)."""
    state = _turn_state(agent, session_id, response_id, created_at=created_at, last_seq=last_seq)
    try:
        engine.start(state)
    except Exception as exc:
        _not_started(store, agent, session_id, response_id, exc)


def _turn_state(
    agent: Agent, session_id: str, response_id: str, *, created_at: int | None, last_seq: int | None
) -> TurnState:
    return TurnState(
        session_id=session_id,
        response_id=response_id,
        client_tool_timeout_s=agent.spec.limits.client_tool_timeout_s,
        client_heartbeat_s=agent.spec.limits.client_heartbeat_s,
        max_iterations=agent.spec.limits.max_iterations,
        agent_id=agent.id if created_at is not None else None,
        created_at=created_at,
        last_seq=last_seq,
    )


def _not_started(store: Store, agent: Agent, session_id: str, response_id: str, exc: Exception) -> NoReturn:
    error = {"code": "runner_unavailable", "message": f"could not start the turn: {exc}"}
    fail(store, session_id, response_id, error, model=agent.name, created_at=None)
    raise RunnerUnavailableError(
        "the runner could not start the turn; the message was persisted and the session marked failed"
    ) from exc


# ---------------------------------------------------------------------------------- fail
def fail(
    store: Store,
    session_id: str,
    response_id: str,
    error: dict[str, Any],
    *,
    model: str,
    created_at: int | None,
    usage: dict[str, int] | None = None,
) -> None:
    """End the turn as failed (once: the write is keyed by the turn; a turn that ended already is left)."""
    batch = Append(session_id, dedupe_key=f"{response_id}:fail", guard=Guard(active_turn=response_id))
    end_turn(
        batch,
        session_id,
        response_id,
        status="failed",
        model=model,
        created_at=created_at,
        error=error,
        usage=usage,
    )
    with contextlib.suppress(ConditionFailedError, NotFoundError):
        store.append(batch)  # fails only if the turn already ended (interrupted or deleted)


# -------------------------------------------------------------------- finish or continue
def finish_or_continue(
    store: Store, state: TurnState, *, model: str, created_at: int, usage: dict[str, int] | None = None
) -> TurnState:
    """End the turn unless input arrived that the model has not seen; then it continues instead."""
    batch = Append(
        state.session_id,
        dedupe_key=f"{state.response_id}:finish",
        after_seq=state.last_seq,  # as the model step left it; a message since fails it, then re-read
        guard=Guard(active_turn=state.response_id, input_seen_through=state.consumed_seq),
    )
    end_turn(
        batch,
        state.session_id,
        state.response_id,
        status="completed",
        model=model,
        created_at=created_at,
        usage=usage,
    )
    try:
        store.append(batch)
    except ConditionFailedError:
        session = store.get_session(state.session_id)
        if session.active_response_id != state.response_id:
            return state.model_copy(update={"next": "stop"})
        # A message arrived after the last model call: continue the turn without going idle.
        return state.model_copy(update={"next": "call_model", "iteration": state.iteration + 1})
    except NotFoundError:
        return state.model_copy(update={"next": "stop"})
    return state.model_copy(update={"next": "stop"})


# --------------------------------------------------------------------------- client calls
def call_event(call: PendingCall, status: str, agent_name: str) -> dict[str, Any]:
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
    idx = batch.event(ev.RESPONSE_ITEM_DONE, call_event(call, "completed", agent_name))
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
                item_id=out_id,
                call_id=call.call_id,
                output=output,
                response_id=call.response_id,
                details=call.details,
            )
        ),
    )
    batch.items.append(
        NewItem(
            id=out_id,
            type="function_call_output",
            data={
                "call_id": call.call_id,
                "output": output,
                **({"details": call.details} if call.details else {}),
            },
            response_id=call.response_id,
            event_index=idx,
            anchor_seq=call.anchor_seq,
        )
    )


def await_key(response_id: str, iteration: int) -> str:
    """The dedupe key under which an iteration's waiting calls are published (once, by whoever is first)."""
    return f"{response_id}:{iteration}:await"


def park(store: Store, engine: TurnEngine, state: TurnState, task_token: str, *, agent_name: str) -> None:
    """Keep the task token, then publish each unanswered call as ``action_required``.

    The token is stored before any call is published, so every call a client
    can see can resume the turn. If every call is already answered (a retried
    invocation), this resumes the turn itself; an ended turn's execution is
    woken so it runs on to its end.
    """
    iteration = state.iteration - 1
    try:  # no read of the session first: the publishing append below is guarded on the turn being active
        store.park_turn(state.session_id, state.response_id, task_token=task_token, iteration=iteration)
    except NotFoundError:  # the session was deleted (with its turn)
        engine.wake(task_token)
        return
    calls = store.list_calls(state.session_id, state.response_id, iteration=iteration)
    # Under the key the model step claims when it published the calls itself (a hot wait): then this
    # append is a duplicate and writes nothing.
    batch = turn_append(state, await_key(state.response_id, iteration), after_seq=state.last_seq)
    waiting = False
    for call in calls:
        if call.output is not None:  # answered already (e.g. an unknown tool's error output) are not shown
            continue
        if call.kind == "client":
            waiting = True
            batch.event(ev.RESPONSE_ITEM_DONE, call_event(call, "action_required", agent_name))
        elif call.approval == "pending":
            waiting = True
            batch.event(
                ev.ELICITATION_REQUEST,
                ev.approval_request(
                    elicitation_id=APPROVAL_PREFIX + call.call_id,
                    call_id=call.call_id,
                    name=call.name,
                    arguments=call.arguments,
                    response_id=call.response_id,
                    session_id=call.session_id,
                ),
            )
    try:
        append_active(store, batch)
    except TurnInactiveError:
        engine.wake(task_token)
        return
    # A call still open when listed (after the token was stored) is answered later, and that answer
    # resumes the turn; only when none was (a retried invocation) does parking resume it.
    if not waiting:
        resume(store, engine, state.session_id, state.response_id, iteration)


def resume(store: Store, engine: TurnEngine, session_id: str, response_id: str, iteration: int) -> bool:
    """Wake a parked iteration exactly once, after its last output; returns whether this caller did.

    The wake-up is claimed with a conditional write first, so concurrent
    answers send it once; if sending fails (Step Functions unreachable), the
    claim is given back, so the next answer or re-post wakes the turn.
    """
    turn = store.get_turn(session_id, response_id)
    if turn.unanswered != 0 or not turn.task_token or turn.await_iteration != iteration:
        return False
    if not store.claim_resume(session_id, response_id, iteration):
        return False
    try:
        engine.resume(turn.task_token, {"resumed_iteration": iteration})
    except StaleTokenError:
        raise
    except Exception:
        store.release_resume(session_id, response_id, iteration)
        raise
    return True


def answer(
    store: Store,
    engine: TurnEngine,
    session_id: str,
    call_id: str,
    output: str,
    *,
    session: Session | None = None,
) -> dict[str, Any]:
    """Record a client tool's output once; the answer that completes the set resumes the turn.

    The same output again is a no-op with the same answer (and wakes the turn
    if an earlier wake-up failed); a different output for an answered call is
    409; an unknown call is 404. ``session`` is the caller's read of the
    session, if it has one (it only says where to look for the call: the
    answer's write checks the call's turn is still the running one).
    """
    if session is None:
        session = store.get_session(session_id)
    accepted = {"queued": True, "item_id": call_id}
    call = None
    for response_id in (session.active_response_id, session.last_response_id):
        if response_id and call is None:
            call = store.get_call(session_id, response_id, call_id)
    if call is None:
        raise NotFoundError(f"No pending call '{call_id}' in this session")
    if call.kind == "server":
        raise ConflictError(f"call '{call_id}' runs on the server; its output is not the client's to give")
    if call.output is None and store.answer_call(call, output):
        notifier.notify(session_id, notifier.ANSWERED)  # a step waiting hot reads the turn now
        resume(store, engine, session_id, call.response_id, call.iteration)
        return accepted
    stored = store.get_call(session_id, call.response_id, call_id)
    if stored is not None and stored.output == output and not stored.cancelled:
        if session.active_response_id == call.response_id:
            with contextlib.suppress(StaleTokenError):
                resume(store, engine, session_id, call.response_id, call.iteration)
        return accepted
    if stored is not None and stored.cancelled:
        raise ConflictError(
            f"call '{call_id}' was cancelled by an interrupt; its output is no longer accepted"
        )
    raise ConflictError(f"call '{call_id}' already has a different output")


def heartbeat(
    store: Store, engine: TurnEngine, session_id: str, *, session: Session | None = None
) -> dict[str, Any]:
    """The client is still there: reset the parked wait's heartbeat clock (``limits.client_heartbeat_s``).

    Harmless whenever there is nothing to tell (an idle session, a turn that
    is not parked, a wait that just ended): 202 with ``parked: false``.
    Writes nothing: the heartbeat goes to Step Functions only.
    """
    session = session or store.get_session(session_id)
    if session.status != "running" or not session.active_response_id:
        return {"queued": False, "parked": False}
    try:
        turn = store.get_turn(session_id, session.active_response_id)
    except NotFoundError:
        return {"queued": False, "parked": False}
    if turn.unanswered <= 0:
        return {"queued": False, "parked": False}
    # Calls are open. The model step may still be waiting for them itself (a hot wait: nothing to
    # tell Step Functions yet); once parked, this iteration's task takes the heartbeat.
    iteration = turn.decided_iteration
    parked = turn.task_token and turn.await_iteration == iteration
    resumed = (
        turn.resumed_iteration is not None and iteration is not None and turn.resumed_iteration >= iteration
    )
    if not parked or resumed:
        return {"queued": False, "parked": not resumed}
    assert turn.task_token is not None
    try:
        engine.heartbeat(turn.task_token)
    except StaleTokenError:
        return {"queued": False, "parked": False}
    return {"queued": False, "parked": True}


# ------------------------------------------------------------------------------ approvals
def approve(
    store: Store,
    engine: TurnEngine,
    session_id: str,
    elicitation_id: str,
    action: str,
    *,
    deny_message: str | None = None,
) -> dict[str, Any]:
    """The client's answer to a server tool awaiting approval: ``accept`` runs it, anything else denies it.

    Once per call (a conditional write with the ``elicitation_resolved``
    event); the same answer again is a no-op, a different one is 409. The
    answer that completes the set wakes the parked turn. A denial's ``deny_message`` (Claude's
    ``user.tool_confirmation``) is what the model reads beside the denial.
    """
    approved = action == "accept"
    call_id = elicitation_id.removeprefix(APPROVAL_PREFIX)
    session = store.get_session(session_id)
    call = None
    if elicitation_id.startswith(APPROVAL_PREFIX) and session.active_response_id:
        call = store.get_call(session_id, session.active_response_id, call_id)
    if call is None or call.approval is None:
        raise NotFoundError(f"No pending approval '{elicitation_id}' in this session")
    accepted = {"queued": True, "item_id": elicitation_id}
    if call.approval == "pending":
        batch = Append(
            session_id,
            guard=Guard(active_turn=call.response_id),
            approvals=[
                ApprovalResolution(
                    call, approved=approved, output=None if approved else denied_output(deny_message)
                )
            ],
        )
        batch.event(
            ev.ELICITATION_RESOLVED,
            ev.approval_resolved(elicitation_id, action, call.response_id, deny_message=deny_message),
        )
        try:
            store.append(batch)
        except ConditionFailedError:
            call = store.get_call(session_id, call.response_id, call_id) or call
        else:
            resume(store, engine, session_id, call.response_id, call.iteration)
            return accepted
    if call.approval == ("approved" if approved else "denied") and not call.cancelled:
        with contextlib.suppress(StaleTokenError):
            resume(store, engine, session_id, call.response_id, call.iteration)
        return accepted
    if call.cancelled:
        raise ConflictError(f"approval '{elicitation_id}' was cancelled by an interrupt")
    raise ConflictError(f"approval '{elicitation_id}' was already answered differently")


def denied_output(deny_message: str | None) -> str:
    return f"{DENIED_OUTPUT} The user said: {deny_message}" if deny_message else DENIED_OUTPUT


def check_images(agent: Agent, message: dict[str, Any]) -> None:
    """A message's images must be ones the agent's model takes (400 ``image_not_supported`` before anything is written)."""
    from skyloop.harnesses import image_refusal

    reason = image_refusal(agent.spec.executor, message.get("content") or [])
    if reason is not None:
        raise ImageNotSupportedError(reason)


def check_tool_names(store: Store, agent: Agent, tools: list[ClientTool] | None) -> None:
    """A message's tools may not take the name of one of the agent's server tools (400 before anything is written)."""
    if not tools or not isinstance(agent.spec.tools, dict):
        return
    from skyloop.models.tools import declared_tools

    declared = declared_tools(agent.spec.tools)
    taken = set(declared.lambdas) | set(declared.hosted)
    for server_name, server in declared.mcp.items():
        listing = store.get_tool_listing(agent.id, server_name)
        taken |= {str(t.get("name")) for t in listing} if listing is not None else set(server.tools or [])
    clash = sorted(taken & {t.name for t in tools})
    if clash:
        raise InvalidInputError(
            f"tools named {', '.join(clash)} are the agent's server tools; rename the client tools"
        )


# -------------------------------------------------------------------------------- cancel
def cancel(store: Store, engine: TurnEngine, session_id: str) -> dict[str, Any]:
    """Interrupt the running turn: cancel unanswered calls, mark the interruption once, go idle.

    The whole outcome is one conditional append on the turn still being
    active, so concurrent interrupts produce exactly one marker, and a racing
    step of the turn can no longer append once it lands.
    """
    for _ in range(ATTEMPTS):
        session = store.get_session(session_id)
        response_id = session.active_response_id
        if session.status != "running" or not response_id:
            return {"queued": False}
        turn = store.get_turn(session_id, response_id)
        batch = Append(session_id, after_seq=session.last_seq, guard=Guard(active_turn=response_id))
        batch.event(ev.SESSION_INTERRUPTED, ev.interrupted(response_id))
        if turn.await_iteration is not None:
            outputs_key = f"{response_id}:{turn.await_iteration}:outputs"
            if not store.dedupe_exists(session_id, outputs_key):
                for call in store.list_calls(session_id, response_id, iteration=turn.await_iteration):
                    add_completed_call(
                        batch,
                        call,
                        call.output if call.output is not None else CANCELLED_OUTPUT,
                        session.agent_name,
                    )
                    if call.output is None:
                        batch.cancel_calls.append((call, CANCELLED_OUTPUT))
                batch.claims.append(outputs_key)
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
        end_turn(
            batch,
            session_id,
            response_id,
            status="cancelled",
            model=session.agent_name,
            created_at=turn.created_at,
            usage=turn.usage(),
        )
        batch.change = SessionChange(
            status="idle", last_response_id=response_id, end_active_turn=True, mark_input=True
        )
        try:
            store.append(batch)
        except ConditionFailedError:
            continue  # the turn ended or a call was answered meanwhile: look again
        _stop(engine, turn)
        return {"queued": False}
    raise ConflictError("the session changed too often while interrupting; try again")


def _stop(engine: TurnEngine, turn: Turn | None) -> None:
    """Stop an ended turn's execution; a parked one is also woken so it ends at once."""
    if turn is None:
        return
    engine.stop(turn.response_id)
    if turn.task_token:
        engine.wake(turn.task_token)


def delete_session(store: Store, engine: TurnEngine, session_id: str) -> dict[str, Any]:
    """Stop a running turn, then remove the session row first (no step can append after it) and the rest."""
    session = store.get_session(session_id)
    turn = None
    if session.active_response_id:
        with contextlib.suppress(NotFoundError):
            turn = store.get_turn(session_id, session.active_response_id)
    cleanup = _workspace_cleanup(store, session)
    store.delete_session(session_id)
    _stop(engine, turn)
    if cleanup is not None:
        try:
            cleanup()
        except Exception:  # the session is gone already; a workspace left behind is logged, not an error
            from skyloop.observability import logger

            logger.exception(
                "the workspace of a deleted session could not be removed", extra={"session": session_id}
            )
    return {"id": session_id, "object": "conversation.deleted", "deleted": True}


def _workspace_cleanup(store: Store, session: Session) -> Callable[[], None] | None:
    """What removes the session's hosted workspace once the session is gone (read before it goes:
    the cloud engine's record of its interpreter session lives under the session)."""
    from skyloop.environments import service
    from skyloop.models.tools import environment_of

    try:
        agent = store.get_agent(session.agent_id)
    except NotFoundError:
        agent = None
    if session.environment is None and (agent is None or environment_of(agent.spec) is None):
        return None
    try:
        return service.deleter(session.id)
    except Exception:
        from skyloop.observability import logger

        logger.exception(
            "the workspace of a session being deleted could not be found", extra={"session": session.id}
        )
        return None
