"""OpenAI's automations (``client.beta.agents.automations``) as skyloop scheduled tasks.

An automation is a scheduled-task row with ``origin: openai_automation``, so
the same engine fires it (EventBridge Scheduler in the cloud, the scheduler
thread locally) and each firing is a scheduled run:

* ``periodic``: the cron ``expression`` is converted to the RRULE the engine
  evaluates, read in ``timezone`` (:mod:`skyloop.schedules.cron`);
* ``once``: ``FREQ=DAILY;BYHOUR;BYMINUTE;COUNT=1`` anchored on ``run_at``'s
  day in UTC (``run_at`` rounded up to the minute, the engine's precision);
  once it has fired the automation is ``completed``;
* ``target`` is what a run starts (:mod:`skyloop.schedules.targets`);
* ``pause``/``resume`` are the task's ``state``; an invocation is a run
  (``invocations.create`` a manual one, started at once).

Everything that can refuse a request is checked before anything is written
(an inline agent is registered last).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from skyloop import agent_versions, deps, principals
from skyloop.errors import ConflictError, InvalidInputError, NotFoundError
from skyloop.ids import new_id
from skyloop.models.schedule import ScheduledTask
from skyloop.openai_compat import agents as oa_agents
from skyloop.openai_compat import unsupported
from skyloop.schedules import cron, plans, rules, runs, targets
from skyloop.schedules import engine as schedule_engine
from skyloop.schedules import service as tasks
from skyloop.turns import engine as turn_engine

if TYPE_CHECKING:
    from skyloop.models.agent import Agent, AgentSpec
    from skyloop.models.schedule import ScheduledRun
    from skyloop.openai_compat.requests import (
        AutomationCreate,
        AutomationUpdate,
        ExistingSessionTarget,
        NewSessionTarget,
    )
    from skyloop.store import Store

ORIGIN: Final = "openai_automation"
MAX_RUNS_LISTED = 10_000


# ----------------------------------------------------------------------------- schedule
def _periodic_rule(expression: str, timezone: str, now: int) -> tuple[str, str, int]:
    """The RRULE, anchor and first occurrence of a cron in a zone; 400 naming ``expression``/``timezone``."""
    try:
        rules.zone(timezone)
    except rules.RuleError as exc:
        raise InvalidInputError(f"timezone: {exc}", param="timezone") from None
    try:
        rrule = cron.to_rrule(expression)
    except cron.CronError as exc:
        raise InvalidInputError(f"expression: {exc}", param="expression") from None
    try:
        anchor, first = tasks.check_rule(rrule, timezone, None, now)
    except InvalidInputError as exc:
        raise InvalidInputError(
            "expression: " + exc.message.removeprefix("rrule: "), param="expression"
        ) from None
    return rrule, anchor, first


def _once_rule(run_at: int, now: int) -> tuple[str, str, int]:
    """One occurrence at ``run_at`` (rounded up to the minute); 400 naming ``run_at`` if it has passed."""
    if run_at <= now:
        raise InvalidInputError("run_at: must be a future Unix timestamp in seconds", param="run_at")
    if run_at >= int(datetime(2200, 1, 1, tzinfo=UTC).timestamp()):
        raise InvalidInputError("run_at: must be before 2200", param="run_at")
    at = -(-run_at // 60) * 60
    when = datetime.fromtimestamp(at, UTC)
    rrule = f"FREQ=DAILY;BYHOUR={when.hour};BYMINUTE={when.minute};COUNT=1"
    return rrule, rules.anchor_for(when, rules.zone("UTC")).isoformat(), at


# ----------------------------------------------------------------------------- targets
def _check_target(store: Store, target: NewSessionTarget | ExistingSessionTarget) -> tuple[str | None, Any]:
    """The skyloop agent a target names now (None: an inline agent, registered later) and what to register."""
    from skyloop import sessions

    if target.type == "existing_session":
        try:
            session = sessions.get_session(store, target.session_id)
        except NotFoundError:
            raise InvalidInputError(
                f"target.session_id: session not found: '{target.session_id}'", param="target.session_id"
            ) from None
        return session.agent_id, None
    if target.environment.type == "openai_hosted":
        unsupported.check_environment(target.environment)  # raises, naming the feature
    if target.vault_ids:
        raise unsupported.UnsupportedFeatureError("vaults (vault_ids)", param="target.vault_ids")
    if (target.agent is None) == (target.agent_id is None):
        raise InvalidInputError("target: give exactly one of agent and agent_id", param="target.agent")
    if target.agent_id is not None:
        try:
            return agent_versions.resolve(store, target.agent_id).id, None
        except NotFoundError:
            raise InvalidInputError(
                f"target.agent_id: agent not found: '{target.agent_id}'", param="target.agent_id"
            ) from None
    from skyloop.openai_compat.requests import AgentConfig

    assert target.agent is not None
    config = AgentConfig.model_validate(target.agent.model_dump(exclude_unset=True, by_alias=True))
    unsupported.check_agent(config, "target.agent.")
    if not config.model:
        raise InvalidInputError("target.agent.model is required", param="target.agent.model")
    return None, oa_agents.build_spec(config, base=None, first_id=None, inline=True)


def _stored_target(target: NewSessionTarget | ExistingSessionTarget) -> dict[str, Any]:
    if target.type == "existing_session":
        return target.model_dump()
    env = target.environment
    return {
        "type": "new_session",
        "agent_id": target.agent_id,
        "inline_agent": target.agent is not None,
        "environment": {"type": env.type, "workspace_directory": env.workspace_directory}
        if env.type == "self_hosted"
        else {"type": env.type},
        "input": [
            {"type": "message", "role": "user", "content": [c.model_dump() for c in m.content]}
            for m in target.input
        ],
        "metadata": dict(target.metadata or {}),
    }


def _prompt(target: NewSessionTarget | ExistingSessionTarget) -> str:
    if target.type == "existing_session":
        return target.instructions
    texts = [c.text for m in target.input for c in m.content if c.type == "input_text"]
    return "\n\n".join(texts) or "(image input)"


def _register(spec: AgentSpec | None) -> Agent | None:
    return agent_versions.register(spec) if spec is not None else None


# ----------------------------------------------------------------------------- create
def create(body: AutomationCreate) -> dict[str, Any]:
    from skyloop import quotas

    store = deps.store()
    now = int(time.time())
    if body.type == "periodic":
        for field in ("expression", "timezone"):
            if getattr(body, field) is None:
                raise InvalidInputError(f"{field} is required for a periodic automation", param=field)
        if body.run_at is not None:
            raise InvalidInputError("run_at is for a once automation", param="run_at")
        assert body.expression is not None
        assert body.timezone is not None
        rrule, anchor, first = _periodic_rule(body.expression, body.timezone, now)
        zone, starts_at = body.timezone, None
    else:
        if body.run_at is None:
            raise InvalidInputError("run_at is required for a once automation", param="run_at")
        for field in ("expression", "timezone"):
            if getattr(body, field) is not None:
                raise InvalidInputError(f"{field} is for a periodic automation", param=field)
        rrule, anchor, first = _once_rule(body.run_at, now)
        zone, starts_at = "UTC", first
    agent_id, spec = _check_target(store, body.target)
    owner = principals.current().name
    quotas.before_scheduled_task(store, deps.get_settings(), owner)
    inline = _register(spec)  # the last step that can fail before the row is written
    task = ScheduledTask(
        id=new_id(),
        owner=owner,
        name=body.name,
        prompt=_prompt(body.target),
        rrule=rrule,
        agent_id=inline.id if inline is not None else str(agent_id),
        timezone=zone,
        starts_at=starts_at,
        overlap="skip",
        anchor=anchor,
        created_at=now,
        armed_at=now,
        next_run_at=first,
        origin=ORIGIN,
        target=_stored_target(body.target),
        automation={
            "type": body.type,
            "expression": body.expression,
            "run_at": body.run_at,
            "metadata": dict(body.metadata or {}),
        },
    )
    task = task.model_copy(update={"schedule_expression": plans.describe(task)})
    tasks.put_schedule(schedule_engine.deployed(), task)
    store.create_scheduled_task(task)
    return view(store, task)


# ----------------------------------------------------------------------------- read
def get(store: Store, automation_id: str) -> ScheduledTask:
    """The caller's automation (a /v1 scheduled task, or another principal's, is not found)."""
    try:
        task = tasks.get_task(store, automation_id)
    except NotFoundError:
        task = None
    if task is None or task.origin != ORIGIN:
        raise NotFoundError(f"Automation not found: '{automation_id}'")
    return task


def retrieve(automation_id: str) -> dict[str, Any]:
    store = deps.store()
    return view(store, get(store, automation_id))


def list_automations(*, after: str | None, limit: int, order: str, session_id: str | None) -> dict[str, Any]:
    from skyloop.openai_compat.service import slice_page

    store = deps.store()
    found = [
        t
        for t in store.list_scheduled_tasks(owner=principals.list_owner(None))
        if t.origin == ORIGIN and (session_id is None or targets.existing_session_id(t) == session_id)
    ]
    found.sort(key=lambda t: (t.created_at, t.id), reverse=order == "desc")
    return slice_page([view(store, t) for t in found], after=after, limit=limit, what="automation")


# ----------------------------------------------------------------------------- update
def _schedule_changes(
    store: Store, task: ScheduledTask, body: AutomationUpdate, sent: set[str], auto: dict[str, Any], now: int
) -> dict[str, Any]:
    """A new expression, zone or run time: the rule re-armed (each refused where its type has none)."""
    if auto.get("type") == "periodic":
        if "run_at" in sent:
            raise InvalidInputError("run_at is for a once automation", param="run_at")
        if not {"expression", "timezone"} & sent:
            return {}
        expression = body.expression or str(auto.get("expression"))
        zone = body.timezone or task.timezone
        rrule, anchor, first = _periodic_rule(expression, zone, now)
        auto["expression"] = expression
        return {"rrule": rrule, "anchor": anchor, "timezone": zone, "armed_at": now, "next_run_at": first}
    for field in ("expression", "timezone"):
        if field in sent:
            raise InvalidInputError(f"{field} is for a periodic automation", param=field)
    if "run_at" not in sent or body.run_at is None:
        return {}
    if any(r.trigger != "manual" for r in _runs(store, task)):
        raise InvalidInputError(
            "run_at: the one-time invocation exists already; it cannot be moved", param="run_at"
        )
    rrule, anchor, first = _once_rule(body.run_at, now)
    auto["run_at"] = body.run_at
    return {"rrule": rrule, "anchor": anchor, "starts_at": first, "armed_at": now, "next_run_at": first}


def _target_changes(store: Store, task: ScheduledTask, body: AutomationUpdate) -> tuple[dict[str, Any], Any]:
    """A replaced target (of the same type): its agent, or the inline agent's spec to register last."""
    assert body.target is not None
    if body.target.type != targets.kind(task):
        raise InvalidInputError(
            f"target.type: an automation keeps its target's type ({targets.kind(task)})", param="target.type"
        )
    agent_id, spec = _check_target(store, body.target)
    changes: dict[str, Any] = {"target": _stored_target(body.target), "prompt": _prompt(body.target)}
    if agent_id is not None:
        changes["agent_id"] = agent_id
    return changes, spec


def update(automation_id: str, body: AutomationUpdate) -> dict[str, Any]:
    """The fields sent change, all checked before the row is written (a new rule re-arms it)."""
    store = deps.store()
    task = get(store, automation_id)
    sent = body.model_fields_set
    for field in sent:
        if getattr(body, field) is None:
            raise InvalidInputError(f"{field} cannot be null", param=field)
    auto = dict(task.automation or {})
    now = int(time.time())
    changes = _schedule_changes(store, task, body, sent, auto, now)
    spec = None
    if "target" in sent:
        more, spec = _target_changes(store, task, body)
        changes.update(more)
    if "name" in sent:
        changes["name"] = body.name
    if "metadata" in sent:
        auto["metadata"] = dict(body.metadata or {})
    inline = _register(spec)
    if inline is not None:
        changes["agent_id"] = inline.id
    if task.state == "paused":
        changes.pop("next_run_at", None)
    updated = task.model_copy(update={**changes, "automation": auto, "updated_at": now})
    updated = updated.model_copy(update={"schedule_expression": plans.describe(updated)})
    if not store.replace_scheduled_task(updated, revision=task.revision):
        raise ConflictError("the automation changed meanwhile; read it and try again")
    updated = updated.model_copy(update={"revision": task.revision + 1})
    tasks.put_schedule(schedule_engine.deployed(), updated)
    return view(store, updated)


def set_state(automation_id: str, state: str) -> dict[str, Any]:
    """``pause`` and ``resume``: the task's state (a resumed one fires from its next occurrence after now)."""
    from skyloop.schedules.requests import UpdateScheduledTaskRequest

    store = deps.store()
    task = get(store, automation_id)
    if task.state != state:
        body = UpdateScheduledTaskRequest.model_validate({"state": state})
        task = tasks.update(store, schedule_engine.deployed(), task, body)
    if state == "active" and (task.automation or {}).get("pause_reason"):
        cleared = task.model_copy(update={"automation": {**(task.automation or {}), "pause_reason": None}})
        if store.replace_scheduled_task(cleared, revision=task.revision):
            task = cleared.model_copy(update={"revision": task.revision + 1})
    return view(store, task)


def delete(automation_id: str) -> dict[str, Any]:
    store = deps.store()
    task = get(store, automation_id)
    tasks.delete(store, schedule_engine.deployed(), task)
    return {"id": task.id, "object": "agent.automation.deleted", "deleted": True}


# ----------------------------------------------------------------------------- invocations
def _runs(store: Store, task: ScheduledTask) -> list[ScheduledRun]:
    """The task's runs, newest first."""
    out: list[ScheduledRun] = []
    after: str | None = None
    while len(out) < MAX_RUNS_LISTED:
        page, more = store.list_scheduled_runs(task.id, limit=1000, after=after)
        out += page
        if not more or not page:
            break
        after = page[-1].id
    return out


def invoke(automation_id: str) -> dict[str, Any]:
    """A manual invocation: a run started now (a paused automation's too); the schedule is unchanged."""
    store = deps.store()
    task = get(store, automation_id)
    now = int(time.time())
    run = runs.start_run(
        store,
        turn_engine.deployed(),
        task,
        scheduled_at=now,
        trigger="manual",
        run=runs.run_id(now),
        settings=deps.get_settings(),
        now=now,
    )
    if run.error_code == "quota_exceeded":
        from skyloop.errors import QuotaExceededError

        raise QuotaExceededError(run.error or "over quota", retry_after_s=60)
    return invocation_view(store, task, run)


def list_invocations(automation_id: str, *, after: str | None, limit: int, order: str) -> dict[str, Any]:
    from skyloop.openai_compat.service import slice_page

    store = deps.store()
    task = get(store, automation_id)
    found = _runs(store, task)
    if order == "asc":
        found.reverse()
    rows = [invocation_view(store, task, runs.refresh(store, r)) for r in found]
    return slice_page(rows, after=after, limit=limit, what="invocation")


def get_invocation(automation_id: str, invocation_id: str) -> dict[str, Any]:
    store = deps.store()
    task = get(store, automation_id)
    from skyloop.ids import is_hex32

    run = store.get_scheduled_run(task.id, invocation_id) if is_hex32(invocation_id) else None
    if run is None:
        raise NotFoundError(f"Invocation not found: '{invocation_id}'")
    return invocation_view(store, task, runs.refresh(store, run))


# ----------------------------------------------------------------------------- views
def status_of(task: ScheduledTask) -> str:
    if task.state == "paused":
        return "paused"
    if (task.automation or {}).get("type") == "once" and task.next_run_at is None:
        return "completed"
    return "active"


def _agent_config(store: Store, task: ScheduledTask) -> dict[str, Any] | None:
    try:
        agent = store.get_agent(task.agent_id)
    except NotFoundError:
        return None
    fields = {k: v for k, v in oa_agents.common_fields(agent).items() if k != "name"}
    return {**fields, "tools": oa_agents.tools_of(agent, persisted=True)}


def target_view(store: Store, task: ScheduledTask) -> dict[str, Any]:
    target = dict(task.target or {})
    if target.get("type") == "existing_session":
        return {k: target[k] for k in ("type", "session_id", "instructions")}
    env = target.get("environment") or {"type": "none"}
    environment: dict[str, Any] = {"type": env.get("type", "none")}
    if environment["type"] == "self_hosted":
        environment.update(
            capability_directories=[],
            environment_id=None,
            workspace_directory=env.get("workspace_directory") or "",
        )
    inline = bool(target.get("inline_agent"))
    return {
        "type": "new_session",
        "agent": _agent_config(store, task) if inline else None,
        "agent_id": None if inline else target.get("agent_id"),
        "environment": environment,
        "input": target.get("input") or [],
        "metadata": target.get("metadata") or {},
        "vault_ids": [],
    }


def view(store: Store, task: ScheduledTask) -> dict[str, Any]:
    """An ``Automation`` (``PeriodicAutomation`` or ``OneTimeAutomation``)."""
    auto = task.automation or {}
    out: dict[str, Any] = {
        "id": task.id,
        "object": "agent.automation",
        "created_at": task.created_at,
        "created_by": {"type": "developer"},
        "metadata": auto.get("metadata") or {},
        "name": task.name,
        "status": status_of(task),
        "target": target_view(store, task),
        "type": auto.get("type", "periodic"),
        "pause_reason": auto.get("pause_reason") if task.state == "paused" else None,
    }
    if out["type"] == "periodic":
        out.update(
            expression=auto.get("expression") or cron.from_rrule(task.rrule) or "", timezone=task.timezone
        )
    else:
        out["run_at"] = int(auto.get("run_at") or task.starts_at or 0)
    return out


_INVOCATION_STATUS = {"scheduled": "queued", "running": "completed", "succeeded": "completed"}


def invocation_view(store: Store, task: ScheduledTask, run: ScheduledRun) -> dict[str, Any]:
    """An ``AutomationInvocation``: its status is the delivery's (a started turn is ``completed``)."""
    status = _INVOCATION_STATUS.get(run.status)
    if status is None:
        started = run.fired_at is not None
        status = "completed" if started else ("skipped" if run.status in ("skipped", "missed") else "failed")
    manual = run.trigger == "manual"
    return {
        "id": run.id,
        "object": "agent.automation.invocation",
        "automation_id": task.id,
        "created_at": run.fired_at or run.scheduled_at,
        "error": {"code": run.error_code or "failed", "message": run.error or ""}
        if status == "failed"
        else None,
        "scheduled_at": None if manual else run.scheduled_at,
        "session_id": run.conversation_id,
        "skip_reason": "pending_delivery" if status == "skipped" and run.error_code == "overlap" else None,
        "source": {"type": "manual"} if manual else {"type": "automation", "automation": view(store, task)},
        "status": status,
    }
