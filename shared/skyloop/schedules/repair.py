"""The repair pass: a task whose schedule stopped firing is found and re-armed; orphan schedules go.

In the cloud nothing of ours runs between two fires, so a broken chain is
silent: a one-time schedule whose re-arm never happened (the run function
crashed first, or EventBridge Scheduler refused the put), a schedule deleted or
disabled in the console, one that says something else than its task's row.
The row still says when the task should have fired, so such a task shows up as
**overdue**: its ``next_run_at`` passed more than :data:`OVERDUE_AFTER_S` ago,
longer than EventBridge Scheduler keeps retrying an invocation. For each:

1. the missed-run policy, the local scheduler's after a restart
   (:func:`skyloop.schedules.runs.catch_up_task`): what passed is recorded as
   ``missed``, the newest occurrence runs if it passed within the grace period,
   and the task moves on to its next occurrence;
2. its schedule is compared with what the row says
   (:meth:`~skyloop.schedules.engine.EventBridgeSchedules.drift`) and put
   again when it is missing, disabled or drifted;
3. then the occurrence to run, if any, is sent to the run function (as
   EventBridge Scheduler would), so that its fire's own re-arm cannot hide
   what was wrong.

Paused tasks are left alone (they are not armed, so never overdue). The
reconciler runs the pass every few minutes; :func:`delete_orphans`, hourly,
deletes the schedules of the group whose task no longer exists. One task's
failure is logged and reported, and the pass goes on with the others.

The local stack does not need it: its scheduler reads the table every tick, so
there is no separate projection to lose.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skyloop.ids import is_hex32
from skyloop.schedules import plans, runs

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.schedule import ScheduledTask
    from skyloop.schedules.engine import EventBridgeSchedules
    from skyloop.store import Store

log = logging.getLogger("skyloop.schedules")

# A task is overdue when its next occurrence passed longer ago than twice EventBridge Scheduler's retry
# window (SKYLOOP_SCHEDULE_MAX_EVENT_AGE_S, 15 minutes): 30 minutes. Before that, a fire may still be on
# its way (retried), and a repair would race it.
OVERDUE_AFTER_S = 1800
# A schedule changed this recently is left alone by the orphan job: the API puts a new task's schedule
# before its row (a fire that finds no row deletes the schedule), so a young schedule may be a task's
# whose row is being written.
ORPHAN_MIN_AGE_S = 600
ATTEMPTS = 5  # puts of one task's schedule while its row keeps changing under them
# Overdue tasks one pass repairs at most, soonest first (a few calls each, well within the function's
# timeout); what a Scheduler outage left behind is worked off over the next passes.
MAX_PER_PASS = 100


@dataclass
class RepairReport:
    """What one repair pass found and did (task ids), for the logs and the metrics."""

    checked: int = 0
    repaired: dict[str, tuple[str, ...]] = field(default_factory=dict)  # task id -> what had drifted
    dispatched: list[str] = field(default_factory=list)  # an occurrence within the grace period runs now
    missed: int = 0  # occurrences recorded as missed
    failed: dict[str, str] = field(default_factory=dict)  # task id -> the error


@dataclass
class OrphanReport:
    """What one orphan job found and deleted (schedule names, which are task ids)."""

    checked: int = 0
    deleted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def repair(
    store: Store,
    schedules: EventBridgeSchedules,
    *,
    grace_s: int,
    dispatch: Callable[[ScheduledTask, int], bool],
    now: int | None = None,
) -> RepairReport:
    """One pass over the overdue tasks (see the module docstring); never raises for one task."""
    now = int(time.time()) if now is None else now
    report = RepairReport()
    for listed in store.list_due_scheduled_tasks(before=now - OVERDUE_AFTER_S)[:MAX_PER_PASS]:
        report.checked += 1
        try:
            _repair_task(store, schedules, listed.id, now, grace_s, dispatch, report)
        except Exception as exc:  # one task's trouble must not keep the others broken
            log.exception("repair of scheduled task %s failed", listed.id)
            report.failed[listed.id] = f"{type(exc).__name__}: {exc}"[:500]
    return report


def _repair_task(
    store: Store,
    schedules: EventBridgeSchedules,
    task_id: str,
    now: int,
    grace_s: int,
    dispatch: Callable[[ScheduledTask, int], bool],
    report: RepairReport,
) -> None:
    task = store.get_scheduled_task(task_id)  # the index is eventually consistent: the row decides
    if task is None or task.state != "active" or task.next_run_at is None:
        return  # deleted or paused meanwhile: the API put (or deleted) its schedule
    if task.next_run_at > now - OVERDUE_AFTER_S:
        return  # moved on meanwhile (a late fire)
    # the schedule is put below, after comparing, not by the policy's re-arm: what was wrong is reported;
    # an occurrence to run is sent after that, so that its fire's own re-arm cannot hide the drift
    due: list[tuple[ScheduledTask, int]] = []

    def later(occurrence_task: ScheduledTask, occurrence: int) -> bool:
        due.append((occurrence_task, occurrence))
        return True

    done = runs.catch_up_task(store, None, task, now=now, grace_s=grace_s, dispatch=later)
    report.missed += done.missed
    fresh = store.get_scheduled_task(task_id)
    if done.dispatched is not None and fresh is not None:
        # move the row on as the fire will (it then finds it armed), so that the schedule compared
        # below is the one for the occurrence after the one that runs
        fresh = runs.advance(store, None, fresh, done.dispatched, now)
    if fresh is not None:
        drift = _converge(store, schedules, fresh)
        if drift:
            report.repaired[task_id] = drift
            log.warning("scheduled task %s: schedule %s; put again", task_id, ", ".join(drift))
    for occurrence_task, occurrence in due:
        if dispatch(occurrence_task, occurrence):
            report.dispatched.append(task_id)


def _converge(store: Store, schedules: EventBridgeSchedules, task: ScheduledTask) -> tuple[str, ...]:
    """Make the schedule say what the row says; returns what had drifted (empty: nothing written).

    EventBridge Scheduler has no conditional put, so the row's revision is the
    condition: after a write the row is read again, and if it changed meanwhile
    (an edit, a pause, a delete: the API writes the row, then the schedule) the
    schedule is put again from the new row, so whichever put lands last says
    what the newest row says.
    """
    drift: tuple[str, ...] = ()
    for _ in range(ATTEMPTS):
        plan = plans.plan_for(task)
        if plan is None:  # the rule has ended: no schedule
            if schedules.get(task.id) is not None:
                schedules.delete(task.id)
                drift = drift or ("ended",)
        else:
            found = schedules.drift(task, plan)
            if found:
                schedules.put(task, plan)
                drift = drift or found
        if not drift:
            return drift  # nothing written: nothing to race
        fresh = store.get_scheduled_task(task.id)
        if fresh is None:
            schedules.delete(task.id)  # deleted while we put: our put may have landed after its delete
            return drift
        if fresh.revision == task.revision:
            return drift
        task = fresh
    return drift


def delete_orphans(store: Store, schedules: EventBridgeSchedules, *, now: int | None = None) -> OrphanReport:
    """Delete the group's schedules whose task no longer exists (a delete that failed half way).

    Only names that are task ids are considered, and only schedules unchanged
    for :data:`ORPHAN_MIN_AGE_S` (a new task's schedule is put before its row);
    the row is read (strongly consistent) right before each delete.
    """
    now = int(time.time()) if now is None else now
    report = OrphanReport()
    for name, changed in schedules.list_names():
        if not is_hex32(name):
            continue  # not a task's schedule: not ours to judge
        report.checked += 1
        if changed is not None and now - changed.timestamp() < ORPHAN_MIN_AGE_S:
            continue
        try:
            if store.get_scheduled_task(name) is not None:
                continue
            schedules.delete(name)
            report.deleted.append(name)
        except Exception as exc:  # the others still go
            log.exception("deleting orphan schedule %s failed", name)
            report.failed[name] = f"{type(exc).__name__}: {exc}"[:500]
    return report
