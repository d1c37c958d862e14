"""The reconciler: what no request and no step will otherwise fix, found and fixed on a schedule.

Two ways a turn can be stranded, both after a failure outside the turn's own
control:

* *answered but parked*: every client call has its output, but the wake-up
  (SendTaskSuccess) failed and nobody re-posted; the execution would sleep
  until its deadline. The reconciler claims and sends the wake-up.
* *running without an execution*: the session says ``running`` but its turn's
  execution has ended (FailTurn itself failed, the execution was stopped or
  timed out, the state machine was redeployed mid-turn). The reconciler ends
  the turn as failed (``runner_error``), so the session takes messages again.

It reads only the sparse index of running sessions, skips sessions that
changed within ``grace_s`` (a turn in flight), and every fix is the same
conditional transition a request would make, so running it twice, or while a
step runs, changes nothing twice. The cloud runs it every few minutes
(``functions/reconcile_turns``); the local stack runs it in-process.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skyloop.errors import NotFoundError
from skyloop.turns import lifecycle

if TYPE_CHECKING:
    from skyloop.store import Store
    from skyloop.turns.engine import TurnEngine

log = logging.getLogger("skyloop.turns")
GRACE_S = 60


@dataclass
class Report:
    checked: int = 0
    resumed: list[str] = field(default_factory=list)
    reset: list[str] = field(default_factory=list)


def reconcile(
    store: Store, engine: TurnEngine, *, now: float | None = None, grace_s: float = GRACE_S
) -> Report:
    """One pass over the running sessions (see the module docstring)."""
    now = time.time() if now is None else now
    report = Report()
    for session in store.list_running_sessions():
        if session.updated_at > now - grace_s:
            continue
        report.checked += 1
        response_id = session.active_response_id
        if not response_id:
            continue
        try:
            if _reconcile_turn(store, engine, session.id, response_id, session.agent_name, report):
                log.warning("reconciled turn %s of session %s", response_id, session.id)
        except Exception:  # one broken session must not stop the pass
            log.exception("could not reconcile turn %s of session %s", response_id, session.id)
    return report


def _reconcile_turn(
    store: Store, engine: TurnEngine, session_id: str, response_id: str, agent_name: str, report: Report
) -> bool:
    status = engine.status(response_id)
    if status != "RUNNING":
        error = {
            "code": "runner_error",
            "message": f"the turn's execution ended ({status or 'not found'}) without finishing the turn",
        }
        lifecycle.fail(store, session_id, response_id, error, model=agent_name, created_at=None)
        report.reset.append(session_id)
        return True
    try:
        turn = store.get_turn(session_id, response_id)
    except NotFoundError:
        return False
    parked_and_answered = turn.task_token and turn.await_iteration is not None and turn.unanswered == 0
    if parked_and_answered and lifecycle.resume(
        store, engine, session_id, response_id, turn.await_iteration or 0
    ):
        report.resumed.append(session_id)
        return True
    return False
