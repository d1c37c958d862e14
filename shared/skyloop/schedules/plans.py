"""From a stored task to its occurrences and to the schedule EventBridge Scheduler holds for it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from skyloop.schedules import rules
from skyloop.schedules.engine import Plan, at

if TYPE_CHECKING:
    from skyloop.models.schedule import ScheduledTask

MAX_PASSED = 1000  # occurrences a catch-up walks at most (a minutely task down for a day is 1,440)


def _rule(task: ScheduledTask) -> tuple[rules.Rule, datetime, datetime | None]:
    rule = rules.parse(task.rrule)
    anchor = datetime.fromisoformat(task.anchor)
    starts = datetime.fromtimestamp(task.starts_at, UTC) if task.starts_at is not None else None
    return rule, anchor, starts


def next_occurrence(task: ScheduledTask, *, after: int) -> int | None:
    """The task's first occurrence strictly after ``after`` (epoch seconds), or None when the rule ended."""
    rule, anchor, starts = _rule(task)
    tz = rules.zone(task.timezone)
    found = rules.next_after(rule, datetime.fromtimestamp(after, UTC), tz, anchor, not_before=starts)
    return int(found.timestamp()) if found is not None else None


def passed_occurrences(task: ScheduledTask, *, since: int, until: int) -> list[int]:
    """Occurrences in ``[since, until]`` (epoch seconds), oldest first, at most :data:`MAX_PASSED` (the newest)."""
    rule, anchor, starts = _rule(task)
    tz = rules.zone(task.timezone)
    out: list[int] = []
    current = since - 1
    while len(out) < MAX_PASSED:
        found = rules.next_after(rule, datetime.fromtimestamp(current, UTC), tz, anchor, not_before=starts)
        if found is None or found.timestamp() > until:
            break
        current = int(found.timestamp())
        out.append(current)
    if len(out) == MAX_PASSED:  # a long outage: keep the newest, found from the end
        newest = rules.upcoming(
            rule, datetime.fromtimestamp(until - 86400, UTC), tz, anchor, limit=MAX_PASSED
        )
        tail = [int(d.timestamp()) for d in newest if d.timestamp() <= until]
        out = sorted(set(out[:1] + tail))
    return out


def plan_for(task: ScheduledTask) -> Plan | None:
    """The schedule the task needs: cron when cron says the rule, else one-time for the next occurrence.

    None when the rule has ended (no occurrence left): the schedule is deleted.
    A paused task keeps its schedule, disabled. ``starts_at`` bounds a cron
    schedule only while it is ahead: EventBridge Scheduler refuses a start more
    than 5 minutes past, so a schedule put again later (an edit, a resume, a
    repair) would fail, and a passed start bounds nothing. A one-time schedule
    never takes one (its instant is the next occurrence, after ``starts_at``).
    """
    rule, anchor, starts = _rule(task)
    tz = rules.zone(task.timezone)
    enabled = task.state == "active"
    now = datetime.now(UTC)
    cron = rules.cron_expression(rule, anchor)
    if cron is not None:
        end = rules.until_instant(rule, tz, anchor)
        if end is not None and end < now:
            return None
        start = starts if starts is not None and starts > now else None
        return Plan(expression=cron, timezone=task.timezone, start=start, end=end, enabled=enabled)
    nxt = task.next_run_at
    if nxt is None and enabled:
        return None
    when = datetime.fromtimestamp(nxt if nxt is not None else task.armed_at, UTC)
    plan = at(when)
    return Plan(expression=plan.expression, timezone=plan.timezone, enabled=enabled)


def describe(task: ScheduledTask) -> str | None:
    """What the schedule holds, for the API (``cron(...)`` or ``at(...)``), None when nothing is armed."""
    plan = plan_for(task)
    return plan.expression if plan is not None else None
