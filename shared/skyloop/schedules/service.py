"""Scheduled tasks behind the REST routes: create, read, edit, pause, delete, run now, and their views.

Every change is decided and checked before anything is written (a bad rule,
zone, agent or cap is a 400 naming the field), then the row is written (guarded
by its revision), then its schedule is put (:mod:`skyloop.schedules.engine`).
A principal sees only its own tasks: another's id answers 404 as an unknown one.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from skyloop import principals
from skyloop.errors import ConflictError, InvalidInputError, NotFoundError
from skyloop.ids import is_hex32, new_id
from skyloop.models.schedule import ScheduledTask
from skyloop.schedules import plans, rules, runs

if TYPE_CHECKING:
    from skyloop.models.schedule import ScheduledRun
    from skyloop.schedules.engine import EventBridgeSchedules
    from skyloop.schedules.requests import CreateScheduledTaskRequest, UpdateScheduledTaskRequest
    from skyloop.settings import Settings
    from skyloop.store import Store
    from skyloop.turns.engine import TurnEngine

ATTEMPTS = 5
# what changes when the rule changes: the anchor, the next occurrence, the schedule
_RULE_FIELDS = frozenset({"rrule", "timezone", "starts_at"})


def _iso(epoch: int | None, zone: str) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, rules.zone(zone)).isoformat()


def get_task(store: Store, task_id: str) -> ScheduledTask:
    """The caller's task; another principal's is "not found" too."""
    missing = NotFoundError("Scheduled task not found")
    if not is_hex32(task_id):
        raise missing
    task = store.get_scheduled_task(task_id)
    if task is None or not principals.current().owns(task.owner):
        raise missing
    return task


# ----------------------------------------------------------------------------- checks
def check_rule(text: str, zone: str, starts_at: datetime | None, now: int) -> tuple[str, int]:
    """The anchor and first occurrence of a rule set now; 400 naming the field at fault."""
    try:
        tz = rules.zone(zone)
    except rules.RuleError as exc:
        raise InvalidInputError(f"timezone: {exc}", param="timezone") from None
    start = (
        max(datetime.fromtimestamp(now, UTC), starts_at) if starts_at else datetime.fromtimestamp(now, UTC)
    )
    anchor = rules.anchor_for(starts_at or start, tz)
    try:
        rule = rules.validate(text, anchor)
        first = rules.next_after(rule, datetime.fromtimestamp(now, UTC), tz, anchor, not_before=starts_at)
    except rules.RuleError as exc:
        raise InvalidInputError(f"rrule: {exc}", param="rrule") from None
    if first is None:
        raise InvalidInputError(
            "rrule: the rule never fires after now (its UNTIL or COUNT has passed)", param="rrule"
        )
    return anchor.isoformat(), int(first.timestamp())


def _check_agent(store: Store, agent_id: str) -> None:
    from skyloop import sessions

    try:
        sessions.get_agent(store, agent_id)
    except NotFoundError:
        raise InvalidInputError(f"agent_id: agent not found: '{agent_id}'", param="agent_id") from None


def _check_cap(store: Store, agent_id: str, model_override: str | None, cap: float | None) -> None:
    """A cap needs a price for the model the runs will call (skyloop.pricing), else it could not hold."""
    if cap is None:
        return
    from skyloop.pricing import price_of

    agent = store.get_agent(agent_id)
    model = model_override or agent.spec.executor.model
    if price_of(agent.spec.executor, model) is None:
        raise InvalidInputError(
            f"max_cost_usd: model {model!r} has no price, so a cost cap cannot be enforced; "
            "set its price in SKYLOOP_MODEL_PRICES or leave max_cost_usd out",
            param="max_cost_usd",
        )


# ----------------------------------------------------------------------------- create
def create(
    store: Store, schedules: EventBridgeSchedules | None, body: CreateScheduledTaskRequest, settings: Settings
) -> ScheduledTask:
    from skyloop import quotas

    now = int(time.time())
    owner = principals.current().name
    anchor, first = check_rule(body.rrule, body.timezone, body.starts_at, now)
    _check_agent(store, body.agent_id)
    _check_cap(store, body.agent_id, body.model_override or None, body.max_cost_usd)
    quotas.before_scheduled_task(store, settings, owner)
    task = ScheduledTask(
        id=new_id(),
        owner=owner,
        name=body.name,
        prompt=body.prompt,
        rrule=body.rrule,
        agent_id=body.agent_id,
        timezone=body.timezone,
        model_override=body.model_override or None,
        reasoning_effort=body.reasoning_effort or None,
        max_cost_usd=body.max_cost_usd,
        workspace=body.workspace,
        starts_at=int(body.starts_at.timestamp()) if body.starts_at else None,
        overlap=body.overlap,
        anchor=anchor,
        created_at=now,
        armed_at=now,
        next_run_at=first,
    )
    task = task.model_copy(update={"schedule_expression": plans.describe(task)})
    put_schedule(schedules, task)  # first: a schedule whose row never lands finds no task and removes itself
    store.create_scheduled_task(task)
    return task


def put_schedule(schedules: EventBridgeSchedules | None, task: ScheduledTask) -> None:
    if schedules is None:
        return
    plan = plans.plan_for(task)
    if plan is None:
        schedules.delete(task.id)
    else:
        schedules.put(task, plan)


# ----------------------------------------------------------------------------- update
def update(
    store: Store,
    schedules: EventBridgeSchedules | None,
    task: ScheduledTask,
    body: UpdateScheduledTaskRequest,
) -> ScheduledTask:
    """A PATCH: only the fields sent change; a rule, zone or start change (or a resume) re-arms the task."""
    sent = body.model_fields_set
    for _ in range(ATTEMPTS):
        updated = _apply(store, task, body, sent, int(time.time()))
        if store.replace_scheduled_task(updated, revision=task.revision):
            updated = updated.model_copy(update={"revision": task.revision + 1})
            put_schedule(schedules, updated)
            return updated
        fresh = store.get_scheduled_task(task.id)
        if fresh is None:
            raise NotFoundError("Scheduled task not found")
        task = fresh
    raise ConflictError("the scheduled task changed too often while editing; try again")


def _apply(
    store: Store, task: ScheduledTask, body: UpdateScheduledTaskRequest, sent: set[str], now: int
) -> ScheduledTask:
    """The task as the PATCH leaves it, checked whole (nothing is written if any of it is refused)."""
    if task.origin != "scheduled_task" and sent - {"state"}:  # its OpenAI fields would no longer say it
        field = sorted(sent - {"state"})[0]
        raise InvalidInputError(
            f"{field}: this task is an OpenAI automation; edit it through /openai/v1/agents/automations "
            "(only state changes here)",
            param=field,
        )
    ignored = (
        "permission_mode",
        "host_id",
        "execution_target",
    )  # only ever null here (the request refuses more)
    changes: dict[str, Any] = {k: getattr(body, k) for k in sent if k not in ignored}
    if "starts_at" in changes:
        changes["starts_at"] = int(body.starts_at.timestamp()) if body.starts_at else None
    if changes.get("agent_id", task.agent_id) != task.agent_id:
        _check_agent(store, changes["agent_id"])
        # as omnigent: another agent's model and effort are not this one's; cleared unless sent again
        changes.setdefault("model_override", None)
        changes.setdefault("reasoning_effort", None)
    for key in ("model_override", "reasoning_effort"):
        if key in changes:
            changes[key] = changes[key] or None  # "" (a clear alias) and null remove it
    merged = task.model_copy(update=changes)
    _check_cap(store, merged.agent_id, merged.model_override, merged.max_cost_usd)
    if _RULE_FIELDS & sent:
        starts = datetime.fromtimestamp(merged.starts_at, UTC) if merged.starts_at is not None else None
        anchor, first = check_rule(merged.rrule, merged.timezone, starts, now)
        merged = merged.model_copy(update={"anchor": anchor, "next_run_at": first, "armed_at": now})
    elif task.state == "paused" and merged.state == "active":  # resumed: from the next occurrence after now
        merged = merged.model_copy(
            update={"next_run_at": plans.next_occurrence(merged, after=now), "armed_at": now}
        )
    if merged.state == "paused":
        merged = merged.model_copy(update={"next_run_at": None})
    merged = merged.model_copy(update={"updated_at": now})
    return merged.model_copy(update={"schedule_expression": plans.describe(merged)})


# ----------------------------------------------------------------------------- delete
def delete(store: Store, schedules: EventBridgeSchedules | None, task: ScheduledTask) -> dict[str, Any]:
    """The row first (a fire finds no task and does nothing), then the schedule; its sessions stay."""
    store.delete_scheduled_task(task.id)
    if schedules is not None:
        schedules.delete(task.id)
    return {"deleted": True, "id": task.id}


# ----------------------------------------------------------------------------- run now
def run_now(store: Store, turns: TurnEngine, task: ScheduledTask, settings: Settings) -> ScheduledRun:
    """A manual run (a paused task too), through the same start as a scheduled one; 409 while one runs."""
    if task.overlap == "skip":
        blocker = runs.overlapping(store, task)
        if blocker is not None:
            raise ConflictError(f"a run of this scheduled task is already in flight ({blocker.id})")
    now = int(time.time())
    run = runs.start_run(
        store,
        turns,
        task,
        scheduled_at=now,
        trigger="manual",
        run=runs.run_id(now),
        settings=settings,
        now=now,
    )
    if run.error_code == "quota_exceeded":
        from skyloop.errors import QuotaExceededError

        raise QuotaExceededError(run.error or "over quota", retry_after_s=60)
    return run


# ----------------------------------------------------------------------------- views
def task_view(store: Store, task: ScheduledTask) -> dict[str, Any]:
    """omnigent's scheduled-task response, plus skyloop's fields; the newest run's status read fresh."""
    newest, _ = store.list_scheduled_runs(task.id, limit=1)
    last_status = runs.refresh(store, newest[0]).status if newest else None
    armed = task.state == "active"
    return {
        "id": task.id,
        "object": "scheduled_task",
        "name": task.name,
        "prompt": task.prompt,
        "rrule": task.rrule,
        "owner_user_id": task.owner,
        "agent_id": task.agent_id,
        "timezone": task.timezone,
        "created_at": task.created_at,
        "model_override": task.model_override,
        "reasoning_effort": task.reasoning_effort,
        "permission_mode": None,
        "max_cost_usd": task.max_cost_usd,
        "workspace": task.workspace,
        "host_id": None,
        "execution_target": "connected_host",
        "state": task.state,
        "last_run_at": task.last_run_at,
        "last_run_status": last_status,
        "last_run_conversation_id": task.last_run_conversation_id,
        "next_run_at": _iso(task.next_run_at, task.timezone) if armed else None,
        "updated_at": task.updated_at,
        # skyloop's
        "starts_at": _iso(task.starts_at, task.timezone),
        "overlap": task.overlap,
        "last_run_id": task.last_run_id,
        "schedule_expression": task.schedule_expression,
        "origin": task.origin,  # scheduled_task, or openai_automation (/openai/v1/agents/automations)
    }


def run_view(run: ScheduledRun) -> dict[str, Any]:
    """omnigent's run response (``error_code``, not the free text), plus skyloop's fields."""
    return {
        "id": run.id,
        "object": "scheduled_task.run",
        "scheduled_task_id": run.task_id,
        "status": run.status,
        "scheduled_at": run.scheduled_at,
        "conversation_id": run.conversation_id,
        "fired_at": run.fired_at,
        "finished_at": run.finished_at,
        "error_code": run.error_code,
        # skyloop's
        "trigger": run.trigger,
        "response_id": run.response_id,
        "error": run.error,
        "usage": {
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "total_tokens": run.input_tokens + run.output_tokens,
        },
        "cost_usd": run.cost_usd,
    }


def list_runs(store: Store, task: ScheduledTask, *, limit: int, after: str | None) -> dict[str, Any]:
    page, more = store.list_scheduled_runs(task.id, limit=limit, after=after)
    fresh = [runs.refresh(store, r) for r in page]
    return {"runs": [run_view(r) for r in fresh], "next_cursor": page[-1].id if more and page else None}


def occurrences(task: ScheduledTask, *, after: datetime | None, limit: int) -> dict[str, Any]:
    """The rule's next occurrences after ``after`` (default now), whatever the task's state: a preview."""
    rule = rules.parse(task.rrule)
    tz = rules.zone(task.timezone)
    starts = datetime.fromtimestamp(task.starts_at, UTC) if task.starts_at is not None else None
    found = rules.upcoming(
        rule,
        after or datetime.now(UTC),
        tz,
        datetime.fromisoformat(task.anchor),
        limit=limit,
        not_before=starts,
    )
    return {
        "scheduled_task_id": task.id,
        "timezone": task.timezone,
        "occurrences": [d.isoformat() for d in found],
    }
