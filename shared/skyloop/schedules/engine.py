"""The port to EventBridge Scheduler: one schedule per task, in the stack's schedule group.

The table is the truth about a task (its rule, its state, its next
occurrence); a schedule is its projection onto AWS's clock, so that nothing of
ours runs between fires. Each schedule targets the ``schedule_run`` function
with ``{"task_id", "scheduled_at": <aws.scheduler.scheduled-time>}``, retries
as configured and sends what it gave up on to the dead-letter queue.

* A rule that cron can say (:func:`skyloop.schedules.rules.cron_expression`)
  is one recurring ``cron()`` schedule in the task's time zone (``starts_at``
  its start date, ``UNTIL``/``COUNT`` its end date).
* Any other rule is a one-time ``at()`` schedule (in UTC: a wall time that
  happens twice is ambiguous) for the next occurrence, re-armed by the run
  function for the one after, each time it fires.
* Pausing disables the schedule; deleting the task deletes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from skyloop import deps

if TYPE_CHECKING:
    from skyloop.models.schedule import ScheduledTask

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"  # filled in by EventBridge Scheduler for each invocation


@dataclass(frozen=True)
class Plan:
    """What a task's schedule says: its expression, the zone it is read in, its bounds, whether it fires."""

    expression: str  # cron(...) or at(...)
    timezone: str
    start: datetime | None = None
    end: datetime | None = None
    enabled: bool = True

    @property
    def one_time(self) -> bool:
        return self.expression.startswith("at(")


def at(instant: datetime) -> Plan:
    """A one-time schedule for ``instant`` (minute precision, as EventBridge Scheduler fires)."""
    utc = instant.astimezone(UTC).replace(tzinfo=None)
    return Plan(expression=f"at({utc.isoformat(timespec='seconds')})", timezone="UTC")


def schedule_name(task_id: str) -> str:
    """A task's schedule: named by its id (32 hex characters; names are unique per group)."""
    return task_id


class EventBridgeSchedules:
    """Puts and deletes the schedules of tasks (``scheduler`` client; moto's in tests and the local stack)."""

    def __init__(
        self,
        client: Any,
        *,
        group: str,
        role_arn: str,
        target_arn: str | None,
        dead_letter_arn: str | None = None,
        retries: int = 3,
        max_event_age_s: int = 900,
    ) -> None:
        self.client = client
        self.group = group
        self.role_arn = role_arn
        self.target_arn = target_arn
        self.dead_letter_arn = dead_letter_arn
        self.retries = retries
        self.max_event_age_s = max_event_age_s

    def put(self, task: ScheduledTask, plan: Plan) -> None:
        """Create the task's schedule, or replace what it says (a re-arm is an update).

        A create is conditional by nature (it fails when the schedule exists): one
        that lost to a concurrent create updates what that one made.
        """
        kwargs = self._schedule(task, plan)
        try:
            self.client.update_schedule(**kwargs)
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise
            try:
                self.client.create_schedule(**kwargs)
            except ClientError as again:
                if _code(again) != "ConflictException":
                    raise
                self.client.update_schedule(**kwargs)

    def delete(self, task_id: str) -> None:
        """Remove the task's schedule (one already gone is no error)."""
        try:
            self.client.delete_schedule(Name=schedule_name(task_id), GroupName=self.group)
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise

    def get(self, task_id: str) -> dict[str, Any] | None:
        """The schedule as EventBridge Scheduler holds it, or None."""
        try:
            return dict(self.client.get_schedule(Name=schedule_name(task_id), GroupName=self.group))
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise
            return None

    def drift(self, task: ScheduledTask, plan: Plan) -> tuple[str, ...]:
        """How the task's schedule differs from what ``plan`` says it should be; empty when it matches.

        ``missing`` when there is none; else the parts that differ: ``disabled``
        (or ``state``), ``expression``, ``timezone``, ``target`` (another
        function) and ``input`` (another payload). This is what the repair pass
        compares (skyloop.schedules.repair): a schedule deleted or disabled in
        the console, or left behind by a re-arm that never happened.
        """
        held = self.get(task.id)
        if held is None:
            return ("missing",)
        want = self._schedule(task, plan)
        found: list[str] = []
        if held.get("State") != want["State"]:
            found.append("disabled" if held.get("State") == "DISABLED" else "state")
        if held.get("ScheduleExpression") != want["ScheduleExpression"]:
            found.append("expression")
        if (held.get("ScheduleExpressionTimezone") or "UTC") != want["ScheduleExpressionTimezone"]:
            found.append("timezone")
        target = held.get("Target") or {}
        if target.get("Arn") != want["Target"]["Arn"]:
            found.append("target")
        if _json(target.get("Input")) != _json(want["Target"]["Input"]):
            found.append("input")
        return tuple(found)

    def list_names(self) -> list[tuple[str, datetime | None]]:
        """Every schedule of the group: its name and when it was last changed (None if not said)."""
        out: list[tuple[str, datetime | None]] = []
        kwargs: dict[str, Any] = {"GroupName": self.group}
        while True:
            page = self.client.list_schedules(**kwargs)
            for summary in page.get("Schedules", []):
                changed = summary.get("LastModificationDate") or summary.get("CreationDate")
                out.append((str(summary["Name"]), changed if isinstance(changed, datetime) else None))
            if not page.get("NextToken"):
                return out
            kwargs["NextToken"] = page["NextToken"]

    def _schedule(self, task: ScheduledTask, plan: Plan) -> dict[str, Any]:
        if not self.target_arn:
            raise RuntimeError(
                "no schedule target: set SKYLOOP_SCHEDULE_TARGET_ARN (the schedule_run function)"
            )
        target: dict[str, Any] = {
            "Arn": self.target_arn,
            "RoleArn": self.role_arn,
            "Input": json.dumps({"task_id": task.id, "scheduled_at": SCHEDULED_TIME}),
            "RetryPolicy": {
                "MaximumRetryAttempts": self.retries,
                "MaximumEventAgeInSeconds": self.max_event_age_s,
            },
        }
        if self.dead_letter_arn:
            target["DeadLetterConfig"] = {"Arn": self.dead_letter_arn}
        kwargs: dict[str, Any] = {
            "Name": schedule_name(task.id),
            "GroupName": self.group,
            "Description": f"skyloop scheduled task {task.name}"[:512],
            "ScheduleExpression": plan.expression,
            "ScheduleExpressionTimezone": plan.timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED" if plan.enabled else "DISABLED",
            "Target": target,
            "ActionAfterCompletion": "NONE",  # a one-time schedule is re-armed in place, not recreated
        }
        if plan.start is not None:
            kwargs["StartDate"] = plan.start
        if plan.end is not None:
            kwargs["EndDate"] = plan.end
        return kwargs


def _json(text: Any) -> Any:
    """A target's input as data (key order and spacing are not drift); text that is not JSON as is."""
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


@deps.per_container
def deployed(target_arn: str | None = None) -> EventBridgeSchedules | None:
    """The port to EventBridge Scheduler (one schedule per task), or None where no group is configured.

    ``target_arn`` is the run function's: the API has it in its environment,
    the run function itself passes its own (its environment cannot name it).
    """
    settings = deps.get_settings()
    if not settings.schedule_group or not settings.schedule_role_arn:
        return None
    return EventBridgeSchedules(
        deps.client("scheduler"),
        group=settings.schedule_group,
        role_arn=settings.schedule_role_arn,
        target_arn=target_arn or settings.schedule_target_arn,
        dead_letter_arn=settings.schedule_dlq_arn,
        retries=settings.schedule_retries,
        max_event_age_s=settings.schedule_max_event_age_s,
    )
