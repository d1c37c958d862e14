"""A task's runs: fire an occurrence, start a run, learn how it ended, and catch up on missed ones.

A run is an ordinary turn: a new session of the task's agent (its id is the
run's ``conversation_id``) whose first message is the task's prompt, started
by :func:`skyloop.turns.lifecycle.start_or_join` with the task's cost cap. So
it runs server tools, parks on a client call or an approval like any turn
(the run stays ``running`` while it waits), and is announced by every event
any turn publishes. How it ended is read from the turn's row when someone
looks (:func:`refresh`): nothing polls.

Everything here is idempotent for a retried invocation: a scheduled run's id
derives from the task and the occurrence, its session's from the run, and its
message carries an idempotency key, so EventBridge Scheduler's retries and a
local scheduler's doubled tick start a run once.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from skyloop.errors import NotFoundError, QuotaExceededError, RunnerUnavailableError
from skyloop.models.schedule import ScheduledRun
from skyloop.schedules import plans, targets

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.schedule import ScheduledTask, Trigger
    from skyloop.schedules.engine import EventBridgeSchedules
    from skyloop.settings import Settings
    from skyloop.store import Store
    from skyloop.turns.engine import TurnEngine

log = logging.getLogger("skyloop.schedules")
START_TIMEOUT_S = 900  # a run still "scheduled" this long after its time never got its turn started
MAX_MISSED_RECORDED = 10  # missed occurrences recorded per catch-up of one task (the rest are counted)
SCHEDULE_LABEL = targets.SCHEDULE_LABEL
RUN_LABEL = targets.RUN_LABEL


def run_id(scheduled_at: int, task_id: str | None = None) -> str:
    """32 hex characters, the first 12 the time in ms: ids sort by time. A scheduled occurrence's is derived."""
    head = f"{scheduled_at * 1000:012x}"[-12:]
    tail = (
        hashlib.sha256(f"{task_id}:{scheduled_at}".encode()).hexdigest() if task_id else secrets.token_hex(10)
    )
    return head + tail[:20]


def parse_scheduled_time(value: str | int | float) -> int:
    """EventBridge Scheduler's ``<aws.scheduler.scheduled-time>`` (``2026-12-05T08:00:00Z``) in epoch seconds."""
    if isinstance(value, int | float):
        return int(value)
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).timestamp())


def fire_event(task_id: str, scheduled_at: int) -> dict[str, str]:
    """The run function's input as EventBridge Scheduler sends it (the scheduler's part, where ours fires)."""
    return {
        "task_id": task_id,
        "scheduled_at": datetime.fromtimestamp(scheduled_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


# ----------------------------------------------------------------------------------- fire
def fire(
    store: Store,
    turns: TurnEngine,
    schedules: EventBridgeSchedules | None,
    task_id: str,
    scheduled_at: int,
    *,
    settings: Settings,
    now: int | None = None,
) -> ScheduledRun | None:
    """An occurrence came due (EventBridge Scheduler, or the local scheduler): arm the next, run this one.

    The next occurrence is armed first, so a run that fails to start never
    breaks the chain of a one-time schedule; an occurrence of a rule since
    replaced (or of a paused or deleted task) runs nothing.
    """
    now = int(time.time()) if now is None else now
    task = store.get_scheduled_task(task_id)
    if task is None:
        if schedules is not None:
            schedules.delete(task_id)  # a schedule left behind by a deletion that failed half way
        log.info("fire: task %s no longer exists", task_id)
        return None
    if task.state != "active" or scheduled_at < task.armed_at - 60:
        log.info("fire: task %s is %s; occurrence %s not run", task_id, task.state, scheduled_at)
        return None
    task = advance(store, schedules, task, scheduled_at, now)
    return start_run(
        store,
        turns,
        task,
        scheduled_at=scheduled_at,
        trigger="schedule",
        run=run_id(scheduled_at, task.id),
        settings=settings,
        now=now,
    )


def advance(
    store: Store, schedules: EventBridgeSchedules | None, task: ScheduledTask, fired: int, now: int
) -> ScheduledTask:
    """Arm the occurrence after ``fired`` (none that already passed), and re-arm a one-time schedule."""
    for _ in range(5):
        if task.next_run_at is not None and task.next_run_at > fired:
            break  # armed already (a retried fire, or a later one)
        nxt = plans.next_occurrence(task, after=max(fired, now))
        updated = task.model_copy(update={"next_run_at": nxt})
        if store.replace_scheduled_task(updated, revision=task.revision):
            task = updated.model_copy(update={"revision": task.revision + 1})
            break
        fresh = store.get_scheduled_task(task.id)
        if fresh is None:
            return task
        task = fresh
    if schedules is not None:
        plan = plans.plan_for(task)
        if plan is None:
            schedules.delete(task.id)  # the rule has ended
        elif plan.one_time:
            schedules.put(task, plan)  # the re-arm; repeated by a retried fire, harmlessly
    return task


# ------------------------------------------------------------------------------ start a run
def start_run(
    store: Store,
    turns: TurnEngine,
    task: ScheduledTask,
    *,
    scheduled_at: int,
    trigger: Trigger,
    run: str,
    settings: Settings,
    now: int | None = None,
) -> ScheduledRun:
    """Record the run, then start it (or record why not: ``skipped``, ``failed``); returns it as it stands."""
    now = int(time.time()) if now is None else now
    record = ScheduledRun(
        id=run,
        task_id=task.id,
        owner=task.owner,
        status="scheduled",
        trigger=trigger,
        scheduled_at=scheduled_at,
    )
    if not store.put_scheduled_run(record):
        existing = store.get_scheduled_run(task.id, run)
        if existing is None or existing.status != "scheduled":
            return existing or record  # started (or ended) by an earlier attempt
        record = existing  # an attempt that stopped half way: go on with it
    blocker = overlapping(store, task, run) if task.overlap == "skip" else None
    if blocker is not None:
        return _end(
            store, record, "skipped", "overlap", f"run {blocker.id} of this task is still running", now
        )
    try:
        agent = targets.agent_for(store, task)
    except targets.TargetGone as exc:
        if exc.run_code == "session_not_found":
            targets.pause_for_lost_session(store, task, now)
        return _end(store, record, "failed", exc.run_code, exc.message, now)
    try:
        started = targets.open_and_post(store, turns, task, agent, record, settings)
    except QuotaExceededError as exc:
        return _end(store, record, "skipped", "quota_exceeded", exc.message, now)
    except RunnerUnavailableError as exc:
        return _end(store, record, "failed", "runner_unavailable", exc.message, now)
    running = started.model_copy(update={"status": "running", "fired_at": now})
    if not store.replace_scheduled_run(running, status="scheduled"):
        return store.get_scheduled_run(task.id, run) or running
    _note_started(store, task, running)
    return running


def _note_started(store: Store, task: ScheduledTask, run: ScheduledRun) -> None:
    """The task's ``last_run_*``: the newest run that started (a late writer never moves them back)."""
    for _ in range(5):
        current = store.get_scheduled_task(task.id)
        if current is None or (current.last_run_id or "") >= run.id:
            return
        updated = current.model_copy(
            update={
                "last_run_id": run.id,
                "last_run_at": run.fired_at,
                "last_run_conversation_id": run.conversation_id,
            }
        )
        if store.replace_scheduled_task(updated, revision=current.revision):
            return


def _end(store: Store, run: ScheduledRun, status: str, code: str, message: str, now: int) -> ScheduledRun:
    ended = run.model_copy(
        update={"status": status, "error_code": code, "error": message[:1000], "finished_at": now}
    )
    if store.replace_scheduled_run(ended, status=run.status):
        log.info("run %s of task %s %s: %s", run.id, run.task_id, status, code)
        return ended
    return store.get_scheduled_run(run.task_id, run.id) or ended


def overlapping(store: Store, task: ScheduledTask, this_run: str | None = None) -> ScheduledRun | None:
    """The task's run still running, if any (with overlap ``skip`` only the newest started one can be)."""
    if not task.last_run_id or task.last_run_id == this_run:
        return None
    last = store.get_scheduled_run(task.id, task.last_run_id)
    if last is None:
        return None
    last = refresh(store, last)
    return last if last.status in ("scheduled", "running") else None


# ------------------------------------------------------------------------- how a run ended
def refresh(store: Store, run: ScheduledRun, *, now: int | None = None) -> ScheduledRun:
    """The run with its outcome, read from its turn's row the first time someone looks after it ended."""
    if run.status == "scheduled":
        now = int(time.time()) if now is None else now
        if now - run.scheduled_at < START_TIMEOUT_S:
            return run
        return _end(store, run, "failed", "start_incomplete", "the run's turn was never started", now)
    if run.status != "running" or run.conversation_id is None or run.response_id is None:
        return run
    try:
        turn = store.get_turn(run.conversation_id, run.response_id)
    except NotFoundError:
        return _end(
            store, run, "failed", "session_deleted", "the run's session was deleted", now or int(time.time())
        )
    if turn.status is None:
        return run  # still running (or parked on a client call or an approval)
    error = turn.error or {}
    code = "cancelled" if turn.status == "cancelled" else error.get("code")
    ended = run.model_copy(
        update={
            "status": "succeeded" if turn.status == "completed" else "failed",
            "finished_at": turn.completed_at,
            "error_code": code,
            "error": str(error.get("message") or "")[:1000] or None,
            "input_tokens": turn.input_tokens,
            "output_tokens": turn.output_tokens,
            "cost_usd": _cost(store, run, turn.spend_micros),
        }
    )
    if store.replace_scheduled_run(ended, status="running"):
        return ended
    return store.get_scheduled_run(run.task_id, run.id) or ended


def _cost(store: Store, run: ScheduledRun, spend_micros: int) -> float | None:
    """What the run's turn cost (its spend, recorded with each model call at the model's price), or None
    when the model has no price (nothing was counted) or the agent is gone (skyloop.pricing)."""
    from skyloop.pricing import price_of

    try:
        session = store.get_session(run.conversation_id or "")
        agent = store.get_agent(session.agent_id)
    except NotFoundError:
        return None
    price = price_of(agent.spec.executor, session.model_override or agent.spec.executor.model)
    return spend_micros / 1_000_000 if price else None


# ------------------------------------------------------------------------- missed runs
@dataclass(frozen=True)
class CatchUp:
    """What the missed-run policy did for one task."""

    dispatched: int | None = None  # the occurrence handed to ``dispatch`` (its fire arms the next)
    missed: int = 0  # occurrences recorded ``missed``
    advanced: bool = False  # the task moved on to its next occurrence after now


def catch_up(
    store: Store,
    schedules: EventBridgeSchedules | None,
    *,
    now: int,
    grace_s: int,
    dispatch: Callable[[ScheduledTask, int], bool],
) -> list[str]:
    """Fire what came due; apply the missed-run policy (:func:`catch_up_task`) to each armed task whose
    next occurrence has passed. Returns the ids of the tasks dispatched by this pass."""
    dispatched: list[str] = []
    for task in store.list_due_scheduled_tasks(before=now):
        done = catch_up_task(store, schedules, task, now=now, grace_s=grace_s, dispatch=dispatch)
        if done.dispatched is not None:
            dispatched.append(task.id)
    return dispatched


def catch_up_task(
    store: Store,
    schedules: EventBridgeSchedules | None,
    task: ScheduledTask,
    *,
    now: int,
    grace_s: int,
    dispatch: Callable[[ScheduledTask, int], bool],
) -> CatchUp:
    """The missed-run policy for one task whose next occurrence has passed: one rule for the local
    scheduler after a restart and for the cloud's repair pass (:mod:`skyloop.schedules.repair`).

    * passed at most ``grace_s`` ago: ``dispatch(task, occurrence)`` fires it
      (the ``schedule_run`` function, invoked as EventBridge Scheduler does;
      False: that occurrence was sent already);
    * passed longer ago (no scheduler ran): that occurrence and the later ones
      that also passed are recorded as ``missed`` runs (at most
      :data:`MAX_MISSED_RECORDED`, the newest); if the newest of them passed
      within ``grace_s`` it runs instead of being recorded; otherwise the next
      occurrence after now is armed (``schedules`` given: a one-time schedule
      is re-armed too).

    A paused task, or one not due yet, is left alone.
    """
    due = task.next_run_at
    if due is None or task.state != "active" or due > now:
        return CatchUp()
    if now - due <= grace_s:
        return CatchUp(dispatched=due if dispatch(task, due) else None)
    passed = plans.passed_occurrences(task, since=due, until=now)
    newest = passed[-1] if passed else due
    run_now = now - newest <= grace_s
    missed = passed[:-1] if run_now else passed
    for at in missed[-MAX_MISSED_RECORDED:]:
        _record_missed(store, task, at, now, len(missed))
    if run_now:
        sent = dispatch(task.model_copy(update={"next_run_at": newest}), newest)
        return CatchUp(dispatched=newest if sent else None, missed=len(missed))
    advance(store, schedules, task, now, now)
    return CatchUp(missed=len(missed), advanced=True)


def _record_missed(store: Store, task: ScheduledTask, at: int, now: int, total: int) -> None:
    run = ScheduledRun(
        id=run_id(at, task.id),
        task_id=task.id,
        owner=task.owner,
        status="missed",
        trigger="catch_up",
        scheduled_at=at,
        finished_at=now,
        error_code="missed",
        error=f"no scheduler ran at the time ({total} occurrence(s) missed in all); policy: skip to the next",
    )
    store.put_scheduled_run(run)
