"""Continue the turns a stopped stack left running, from what the table says about them.

A turn's execution can vanish while the table still says the turn runs: the
local stack keeps the table on disk but not Step Functions' executions. The
table knows where each such turn stood, because every step records it:

* the turn row's last **decision** (the iteration of the last model call whose
  result landed, where it sent the turn, when) and the **calls** of that
  iteration with their outputs, approvals and whether the wait was resumed;
* whether a task token was stored says nothing extra: a turn parked on
  ``.waitForTaskToken``, one hot-waiting for outputs before parking, and one
  whose decision landed just before the stop all have the same decision and
  calls, and all continue the same way.

So :func:`plan` reads only records, never an execution, and says how to go
on: run the model again (no result landed for the call in flight: the step
is idempotent and announces a retry), wait again for the client (with what is
left of the client-tool deadline, counted from when the calls were
published), run the server tools and approvals still open, finish, or fail
with a clear error when the deadline has passed. :func:`recover` applies the
plan to every running session. The cloud needs none of this: Step Functions
keeps executions; the scheduled reconciler (:mod:`skyloop.turns.reconcile`)
ends a turn whose execution is really gone.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from skyloop.errors import NotFoundError
from skyloop.turns import lifecycle
from skyloop.turns.state import TurnState

if TYPE_CHECKING:
    from skyloop.models.session import PendingCall, Session, Turn
    from skyloop.store import Store, TurnDecision

log = logging.getLogger("skyloop.turns")

How = Literal["model", "route", "fail"]


class RestartEngine(Protocol):
    def start(self, state: TurnState) -> None:
        """Start a turn's execution at its model call (``CallModel``)."""
        ...

    def start_routed(self, state: TurnState) -> None:
        """Start a turn's execution at the state its ``next`` routes to (``Route``)."""
        ...


@dataclass
class Plan:
    """How one running turn goes on: its new execution's state and where it starts, or its failure."""

    session_id: str
    response_id: str
    how: How
    why: str
    state: TurnState | None = None
    error: dict[str, str] | None = None


@dataclass
class Report:
    plans: list[Plan] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # sessions whose turn could not be continued

    def lines(self) -> list[str]:
        out = [f"turn {p.response_id} of session {p.session_id}: {p.why}" for p in self.plans]
        out += [f"session {s}: could not continue its turn (see the log)" for s in self.failed]
        return out


def plan(store: Store, session: Session, *, now: float | None = None) -> Plan | None:
    """How the running ``session``'s turn goes on (None: nothing is running)."""
    now = time.time() if now is None else now
    response_id = session.active_response_id
    if session.status != "running" or not response_id:
        return None
    try:
        turn = store.get_turn(session.id, response_id)
    except NotFoundError:
        return _fail(session, response_id, "runner_error", "the turn's record is missing")
    agent = store.get_agent(turn.agent_id)
    limits = agent.spec.limits
    base = TurnState(
        session_id=session.id,
        response_id=response_id,
        client_tool_timeout_s=limits.client_tool_timeout_s,
        client_heartbeat_s=limits.client_heartbeat_s,
        max_iterations=limits.max_iterations,
        agent_id=turn.agent_id,
        created_at=turn.created_at,
    )
    decision = store.get_decision(session.id, response_id) if turn.decided_iteration is not None else None
    if decision is None:
        why = "its first model call had not finished: calling the model again"
        return Plan(session.id, response_id, "model", why, base)
    base = base.model_copy(update={"consumed_seq": decision.consumed_seq})
    d = decision.iteration
    if decision.next == "finish_turn":
        state = base.model_copy(update={"iteration": d, "next": "finish_turn"})
        return Plan(session.id, response_id, "route", "its answer had landed: finishing it", state)
    calls = store.list_calls(session.id, response_id, iteration=d)
    return _after_calls(session, turn, decision, calls, base, now)


def _after_calls(
    session: Session,
    turn: Turn,
    decision: TurnDecision,
    calls: list[PendingCall],
    base: TurnState,
    now: float,
) -> Plan:
    """A turn whose last model call made calls: run what is open, wait for what the client owes, or go on."""
    d = decision.iteration
    woken = turn.resumed_iteration is not None and turn.resumed_iteration >= d
    client_open = [c for c in calls if c.output is None and c.kind == "client"]
    approvals_open = [c for c in calls if c.output is None and c.approval == "pending"]
    waiting = bool(client_open or approvals_open) and not woken
    to_run = [c.call_id for c in calls if c.kind == "server" and c.output is None and c.approval != "pending"]
    if not waiting and not to_run:
        if client_open or approvals_open:  # woken with calls still open: cannot be, say so
            missing = ", ".join(c.call_id for c in client_open + approvals_open)
            return _fail(session, turn.response_id, "runner_error", f"resumed with open calls: {missing}")
        why = f"every call of model call {d} has its output: calling the model again"
        return Plan(session.id, turn.response_id, "model", why, base.model_copy(update={"iteration": d + 1}))
    if waiting and client_open:
        started = decision.decided_at or int(now)
        remaining = int(base.client_tool_timeout_s - (now - started))
        if remaining <= 0:
            message = "no output arrived for a client-side tool call before its deadline"
            return _fail(session, turn.response_id, "client_tool_timeout", message)
        base = base.model_copy(update={"client_tool_timeout_s": remaining})
    update = {
        "iteration": d + 1,
        "next": "act" if to_run or approvals_open or decision.next == "act" else "await_client",
        "run_calls": to_run,
        # calls waiting for approval run once it arrives (after the wait); approved ones still to run
        # are in run_calls: they need no second wait
        "approval_calls": [c.call_id for c in approvals_open] if waiting else [],
        "await_calls": waiting,
    }
    open_calls = [c.call_id for c in client_open + approvals_open] if waiting else []
    parts = []
    if open_calls:
        parts.append(f"waiting again for {', '.join(open_calls)}")
        if client_open:
            parts.append(f"deadline in {base.client_tool_timeout_s} s")
    if to_run:
        parts.append(f"running server tools {', '.join(to_run)}")
    return Plan(session.id, turn.response_id, "route", "; ".join(parts), base.model_copy(update=update))


def _fail(session: Session, response_id: str, code: str, message: str) -> Plan:
    error = {"code": code, "message": message}
    return Plan(session.id, response_id, "fail", f"failed ({code}): {message}", error=error)


def recover(store: Store, engine: RestartEngine, *, now: float | None = None) -> Report:
    """Continue (or end) the turn of every running session; one broken session never stops the rest."""
    report = Report()
    for session in store.list_running_sessions():
        try:
            found = plan(store, session, now=now)
            if found is None:
                continue
            apply(store, engine, session, found)
            report.plans.append(found)
        except Exception:
            log.exception("could not continue the turn of session %s", session.id)
            report.failed.append(session.id)
    return report


def apply(store: Store, engine: RestartEngine, session: Session, found: Plan) -> None:
    if found.how == "fail":
        assert found.error is not None
        lifecycle.fail(
            store, session.id, found.response_id, found.error, model=session.agent_name, created_at=None
        )
        return
    assert found.state is not None
    if found.how == "model":
        engine.start(found.state.model_copy(update={"next": "call_model"}))
    else:
        engine.start_routed(found.state)
