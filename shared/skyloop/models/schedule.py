"""Scheduled tasks (omnigent's ``/v1/scheduled-tasks``) and their runs, as the store keeps them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

TaskState = Literal["active", "paused"]
# scheduled: recorded, not started yet; running: its turn runs (or waits, parked on a client or an
# approval); succeeded/failed: how the turn ended (an interrupted turn failed with error_code
# "cancelled"); skipped: not started (a run still running, a quota); missed: its time passed while
# no scheduler ran (the local stack was down) and the missed-run policy did not run it
RunStatus = Literal["scheduled", "running", "succeeded", "failed", "skipped", "missed"]
FINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "skipped", "missed"})
Overlap = Literal["skip", "allow"]
Trigger = Literal["schedule", "manual", "catch_up"]
# who made the task: skyloop's /v1/scheduled-tasks, or OpenAI's /openai/v1/agents/automations (same engine)
Origin = Literal["scheduled_task", "openai_automation"]


class ScheduledTask(BaseModel):
    """A saved prompt an agent runs on an RRULE, in a time zone; ``revision`` moves on every write."""

    id: str
    owner: str
    name: str
    prompt: str
    rrule: str
    agent_id: str
    timezone: str = "UTC"
    model_override: str | None = None
    reasoning_effort: str | None = None
    max_cost_usd: float | None = None
    workspace: str | None = None  # recorded for display, as omnigent does (skyloop has no hosts)
    starts_at: int | None = None  # no occurrence before this instant (epoch seconds)
    overlap: Overlap = "skip"  # what a fire does while the task's previous run still runs
    state: TaskState = "active"
    # the rule's naive local start, midnight of the day the rule (or its zone, or starts_at) was set
    anchor: str
    created_at: int
    updated_at: int | None = None
    revision: int = 0
    # when the current plan was armed (created, rule or zone changed, resumed): a fire for an occurrence
    # before it belongs to a plan since replaced and is ignored
    armed_at: int = 0
    next_run_at: int | None = None  # the occurrence armed next; None while paused or when the rule ended
    schedule_expression: str | None = None  # what EventBridge Scheduler holds: cron(...) or at(...)
    # the newest run that started (a skipped or missed one does not move these)
    last_run_at: int | None = None
    last_run_id: str | None = None
    last_run_conversation_id: str | None = None
    origin: Origin = "scheduled_task"
    # what a run starts (skyloop.schedules.targets): None is a new session of agent_id with the prompt;
    # {"type": "new_session", ...} or {"type": "existing_session", "session_id", ...} as OpenAI's target
    target: dict[str, Any] | None = None
    # an OpenAI automation's own fields: type (periodic | once), expression, run_at, metadata
    automation: dict[str, Any] | None = None

    @field_validator("target", "automation", mode="before")
    @classmethod
    def _plain_numbers(cls, value: Any) -> Any:
        """DynamoDB gives nested numbers back as Decimals: make them ints and floats again."""
        return _plain(value)


class ScheduledRun(BaseModel):
    """One firing of a task: the session it opened and how its turn went."""

    id: str  # 32 hex characters, the first 12 the scheduled time in ms: ids sort by time
    task_id: str
    owner: str
    status: RunStatus
    trigger: Trigger = "schedule"
    scheduled_at: int
    fired_at: int | None = None
    finished_at: int | None = None
    conversation_id: str | None = None  # the session the run opened
    response_id: str | None = None  # its turn
    error_code: str | None = None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = Field(default=None, ge=0)  # None: not ended, or the model has no price


def _plain(value: Any) -> Any:
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == int(value) else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
