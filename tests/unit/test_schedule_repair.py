"""The scheduled tasks' repair pass (skyloop.schedules.repair) on the in-memory store and moto's EventBridge
Scheduler: a schedule missing, disabled or drifted is put again from the task's row, healthy and paused
ones are left alone, missed occurrences follow the local scheduler's policy, orphans are deleted, and a
Scheduler call that fails for one task does not stop the pass."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from skyloop.models.schedule import ScheduledTask
from skyloop.schedules import plans, repair, runs
from skyloop.schedules.engine import EventBridgeSchedules
from skyloop.store import MemoryStore

GROUP = "skyloop-test"
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:schedule_run"
ROLE = "arn:aws:iam::123456789012:role/invoke"
EVERY_7_MIN = "FREQ=MINUTELY;INTERVAL=7"  # cron cannot say it: a one-time schedule re-armed per run
HOURLY = "FREQ=HOURLY;BYMINUTE=0"  # cron(0 * * * ? *)
NOW = int(time.time()) // 60 * 60 + 30  # between two whole minutes: never an occurrence itself


class Scheduler:
    """moto's scheduler client, with calls that fail for chosen tasks and a hook before a write."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.failing: set[str] = set()
        self.before_write: dict[str | tuple[str, str], Any] = {}  # by name, or by (operation, name)
        self.writes: list[tuple[str, str]] = []

    def _check(self, op: str, kwargs: dict[str, Any]) -> None:
        name = kwargs.get("Name", "")
        if name in self.failing:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, op)
        if op != "GetSchedule":
            self.writes.append((op, name))
            hook = self.before_write.get((op, name)) or self.before_write.get(name)
            if hook is not None:
                self.before_write = {k: v for k, v in self.before_write.items() if v is not hook}
                hook()

    def get_schedule(self, **kwargs: Any) -> Any:
        self._check("GetSchedule", kwargs)
        return self.client.get_schedule(**kwargs)

    def update_schedule(self, **kwargs: Any) -> Any:
        self._check("UpdateSchedule", kwargs)
        return self.client.update_schedule(**kwargs)

    def create_schedule(self, **kwargs: Any) -> Any:
        self._check("CreateSchedule", kwargs)
        return self.client.create_schedule(**kwargs)

    def delete_schedule(self, **kwargs: Any) -> Any:
        self._check("DeleteSchedule", kwargs)
        return self.client.delete_schedule(**kwargs)

    def list_schedules(self, **kwargs: Any) -> Any:
        return self.client.list_schedules(**kwargs)


class World:
    def __init__(self, client: Any) -> None:
        self.raw = client
        self.scheduler = Scheduler(client)
        self.schedules = EventBridgeSchedules(self.scheduler, group=GROUP, role_arn=ROLE, target_arn=TARGET)
        self.store = MemoryStore()
        self.dispatched: list[tuple[str, int]] = []
        self.held_at_dispatch: list[str | None] = []  # the schedule as the dispatched fire would find it

    def task(self, rrule: str, *, due: int | None, state: str = "active", **fields: Any) -> ScheduledTask:
        """A task set three days ago, armed for ``due``, with the schedule its row says (healthy)."""
        anchor = datetime.fromtimestamp(NOW - 3 * 86400, UTC).replace(hour=0, minute=0, second=0, tzinfo=None)
        task = ScheduledTask.model_validate(
            {
                "id": uuid.uuid4().hex,
                "owner": "alice",
                "name": "report",
                "prompt": "summarize",
                "rrule": rrule,
                "agent_id": uuid.uuid4().hex,
                "anchor": anchor.isoformat(),
                "created_at": NOW - 3 * 86400,
                "armed_at": NOW - 3 * 86400,
                "next_run_at": due,
                "state": state,
                **fields,
            }
        )
        self.store.create_scheduled_task(task)
        plan = plans.plan_for(task)
        assert plan is not None
        self.schedules.put(task, plan)
        return task

    def overdue(self, rrule: str, *, by: int = 3600, **fields: Any) -> ScheduledTask:
        """A task armed for the rule's newest occurrence at least ``by`` seconds ago (none fired since)."""
        return self.task(rrule, due=_occurrences(rrule, NOW - by - 86400, NOW - by)[-1], **fields)

    def held(self, task_id: str) -> dict[str, Any] | None:
        try:
            return dict(self.raw.get_schedule(Name=task_id, GroupName=GROUP))
        except ClientError:
            return None

    def dispatch(self, task: ScheduledTask, at: int) -> bool:
        self.dispatched.append((task.id, at))
        held = self.held(task.id)
        self.held_at_dispatch.append(held["ScheduleExpression"] if held else None)
        return True

    def repair(self, *, grace_s: int = 900) -> repair.RepairReport:
        return repair.repair(self.store, self.schedules, grace_s=grace_s, dispatch=self.dispatch, now=NOW)

    def row(self, task_id: str) -> ScheduledTask:
        found = self.store.get_scheduled_task(task_id)
        assert found is not None
        return found


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name=GROUP)
        yield World(client)


def _occurrences(rrule: str, since: int, until: int) -> list[int]:
    anchor = datetime.fromtimestamp(NOW - 3 * 86400, UTC).replace(hour=0, minute=0, second=0, tzinfo=None)
    probe = ScheduledTask(
        id="0" * 32,
        owner="o",
        name="n",
        prompt="p",
        rrule=rrule,
        agent_id="a",
        anchor=anchor.isoformat(),
        created_at=0,
    )
    return plans.passed_occurrences(probe, since=since, until=until)


def _at(epoch: int) -> str:
    return f"at({datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None).isoformat(timespec='seconds')})"


def test_overdue_means_twice_eventbridge_schedulers_retry_window() -> None:
    from infra import constants as C

    assert repair.OVERDUE_AFTER_S == 2 * C.SCHEDULE_MAX_EVENT_AGE_S == 1800


def test_a_missing_one_time_schedule_is_re_armed_for_the_next_occurrence_and_missed_runs_recorded(
    world: World,
) -> None:
    task = world.overdue(EVERY_7_MIN, by=3600)
    world.raw.delete_schedule(Name=task.id, GroupName=GROUP)  # the re-arm never happened
    report = world.repair(grace_s=0)  # nothing within the grace period: all that passed is missed
    assert report.repaired == {task.id: ("missing",)}
    assert (report.failed, report.dispatched) == ({}, [])
    nxt = plans.next_occurrence(task, after=NOW)
    assert nxt is not None
    assert world.row(task.id).next_run_at == nxt
    held = world.held(task.id)
    assert held is not None
    assert (held["ScheduleExpression"], held["State"]) == (_at(nxt), "ENABLED")
    assert json.loads(held["Target"]["Input"])["task_id"] == task.id
    # the local scheduler's missed-run policy: every passed occurrence counted, the newest ten recorded
    passed = plans.passed_occurrences(task, since=task.next_run_at or 0, until=NOW)
    assert report.missed == len(passed) > 8
    recorded, _ = world.store.list_scheduled_runs(task.id)
    assert [r.scheduled_at for r in recorded] == sorted(passed, reverse=True)[: runs.MAX_MISSED_RECORDED]
    assert {(r.status, r.trigger) for r in recorded} == {("missed", "catch_up")}


def test_an_occurrence_within_the_grace_period_runs_and_the_schedule_is_armed_for_the_one_after(
    world: World,
) -> None:
    task = world.overdue(EVERY_7_MIN, by=3600)
    world.raw.delete_schedule(Name=task.id, GroupName=GROUP)
    report = world.repair(grace_s=900)
    passed = plans.passed_occurrences(task, since=task.next_run_at or 0, until=NOW)
    assert world.dispatched == [(task.id, passed[-1])]  # the newest, once, as the run function's fire
    assert report.dispatched == [task.id]
    assert report.missed == len(passed) - 1
    nxt = plans.next_occurrence(task, after=NOW)
    assert nxt is not None
    assert world.row(task.id).next_run_at == nxt
    held = world.held(task.id)
    assert held is not None
    assert held["ScheduleExpression"] == _at(nxt)
    assert report.repaired == {task.id: ("missing",)}
    # sent once the schedule was right: its fire's own re-arm (the same) could not hide what was wrong
    assert world.held_at_dispatch == [_at(nxt)]


def test_a_disabled_schedule_of_an_active_task_is_enabled(world: World) -> None:
    task = world.overdue(HOURLY, by=3 * 3600)
    world.raw.update_schedule(**{**_kwargs(world, task.id), "State": "DISABLED"})  # in the console
    report = world.repair(grace_s=0)
    assert report.repaired == {task.id: ("disabled",)}
    held = world.held(task.id)
    assert held is not None
    assert (held["State"], held["ScheduleExpression"]) == ("ENABLED", "cron(0 * * * ? *)")
    assert world.row(task.id).next_run_at == plans.next_occurrence(task, after=NOW)


def test_a_schedule_that_drifted_from_its_row_is_put_back(world: World) -> None:
    expression = world.overdue(HOURLY, by=3 * 3600)
    zone = world.overdue(HOURLY, by=3 * 3600)
    target = world.overdue(HOURLY, by=3 * 3600)
    world.raw.update_schedule(**{**_kwargs(world, expression.id), "ScheduleExpression": "cron(0 12 * * ? *)"})
    world.raw.update_schedule(**{**_kwargs(world, zone.id), "ScheduleExpressionTimezone": "Europe/Berlin"})
    wrong = _kwargs(world, target.id)
    wrong["Target"] = {**wrong["Target"], "Input": json.dumps({"task_id": "f" * 32, "scheduled_at": "x"})}
    world.raw.update_schedule(**wrong)
    report = world.repair(grace_s=0)
    assert report.repaired == {
        expression.id: ("expression",),
        zone.id: ("timezone",),
        target.id: ("input",),
    }
    for task in (expression, zone, target):
        held = world.held(task.id)
        assert held is not None
        assert (held["ScheduleExpression"], held["ScheduleExpressionTimezone"]) == (
            "cron(0 * * * ? *)",
            "UTC",
        )
        assert json.loads(held["Target"]["Input"]) == {
            "task_id": task.id,
            "scheduled_at": "<aws.scheduler.scheduled-time>",
        }


def test_healthy_schedules_and_paused_tasks_are_left_alone(world: World) -> None:
    on_time = world.task(HOURLY, due=_occurrences(HOURLY, NOW, NOW + 3600)[0])
    late_but_healthy = world.overdue(HOURLY, by=3 * 3600)  # its fires failed; its cron schedule is fine
    recent = world.overdue(EVERY_7_MIN, by=600)  # late, not overdue: a fire may still be on its way
    world.raw.delete_schedule(Name=recent.id, GroupName=GROUP)
    paused = world.task(HOURLY, due=None, state="paused")
    world.raw.delete_schedule(Name=paused.id, GroupName=GROUP)
    # the due index is eventually consistent: it may still list a task as it was before a pause, or
    # before a fire that came late moved it on
    stale = [t.model_copy(update={"state": "active", "next_run_at": NOW - 7200}) for t in (paused, recent)]
    listed = world.store.list_due_scheduled_tasks
    world.store.list_due_scheduled_tasks = lambda *, before: [*listed(before=before), *stale]  # type: ignore[method-assign]
    world.scheduler.writes.clear()
    report = world.repair(grace_s=0)
    assert (report.repaired, report.failed, report.dispatched, report.checked) == ({}, {}, [], 3)
    assert world.scheduler.writes == []  # the late task's healthy cron schedule was compared, not put
    assert world.held(paused.id) is None
    assert world.held(recent.id) is None
    assert world.row(on_time.id) == on_time
    assert world.row(paused.id) == paused
    assert world.row(recent.id) == recent
    # the late task still gets the missed-run policy: its missed hours recorded, moved on
    assert world.row(late_but_healthy.id).next_run_at == plans.next_occurrence(late_but_healthy, after=NOW)
    assert report.missed == len(_occurrences(HOURLY, late_but_healthy.next_run_at or 0, NOW)) == 4


def test_a_scheduler_call_that_fails_is_reported_and_the_pass_goes_on(world: World) -> None:
    broken = world.overdue(EVERY_7_MIN, by=3600)
    fine = world.overdue(EVERY_7_MIN, by=3600)
    for task in (broken, fine):
        world.raw.delete_schedule(Name=task.id, GroupName=GROUP)
    world.scheduler.failing.add(broken.id)
    report = world.repair(grace_s=0)
    assert list(report.failed) == [broken.id]
    assert "ThrottlingException" in report.failed[broken.id]
    assert report.repaired == {fine.id: ("missing",)}
    assert world.held(fine.id) is not None
    # the next pass, with the Scheduler back, repairs it: the row moved on, its schedule is still missing
    world.scheduler.failing.clear()
    assert world.held(broken.id) is None
    again = repair.repair(
        world.store,
        world.schedules,
        grace_s=0,
        dispatch=world.dispatch,
        now=(world.row(broken.id).next_run_at or 0) + repair.OVERDUE_AFTER_S + 60,
    )
    assert broken.id in again.repaired
    assert world.held(broken.id) is not None


def test_a_pass_repairs_at_most_its_share_soonest_first_and_the_next_pass_goes_on(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(repair, "MAX_PER_PASS", 1)
    older = world.overdue(EVERY_7_MIN, by=7200)
    newer = world.overdue(EVERY_7_MIN, by=3600)
    for task in (older, newer):
        world.raw.delete_schedule(Name=task.id, GroupName=GROUP)
    assert list(world.repair(grace_s=0).repaired) == [older.id]
    assert list(world.repair(grace_s=0).repaired) == [newer.id]


def test_a_task_edited_while_its_schedule_is_put_again_ends_with_the_edits_schedule(world: World) -> None:
    """EventBridge Scheduler has no conditional put: the row's revision, read again after the put, is."""
    task = world.overdue(HOURLY, by=3 * 3600)
    world.raw.delete_schedule(Name=task.id, GroupName=GROUP)

    def pause_through_the_api() -> None:
        """The API pauses it meanwhile: its row, then its schedule (disabled), before our put lands."""
        current = world.row(task.id)
        paused = current.model_copy(update={"state": "paused", "next_run_at": None})
        assert world.store.replace_scheduled_task(paused, revision=current.revision)
        plan = plans.plan_for(paused)
        assert plan is not None
        world.raw.create_schedule(**world.schedules._schedule(paused, plan))

    world.scheduler.before_write[task.id] = pause_through_the_api
    world.repair(grace_s=0)
    held = world.held(task.id)
    assert held is not None
    assert held["State"] == "DISABLED"  # the newest row's schedule, not the stale put's


def test_a_put_that_loses_a_create_race_updates_what_the_other_made(world: World) -> None:
    """A create is conditional by nature: one that finds the schedule made meanwhile updates it."""
    task = world.overdue(HOURLY, by=3 * 3600)
    world.raw.delete_schedule(Name=task.id, GroupName=GROUP)

    def another_writer() -> None:
        made = plans.plan_for(task.model_copy(update={"state": "paused"}))
        assert made is not None
        world.raw.create_schedule(**world.schedules._schedule(task, made))

    world.scheduler.before_write[("CreateSchedule", task.id)] = another_writer
    report = world.repair(grace_s=0)
    assert (report.failed, report.repaired) == ({}, {task.id: ("missing",)})
    held = world.held(task.id)
    assert held is not None
    assert held["State"] == "ENABLED"
    assert [op for op, name in world.scheduler.writes if name == task.id][-3:] == [
        "UpdateSchedule",
        "CreateSchedule",
        "UpdateSchedule",
    ]


def test_orphan_schedules_are_deleted_and_only_they(world: World) -> None:
    kept = world.task(HOURLY, due=NOW + 600)
    gone = world.task(HOURLY, due=NOW + 600)
    world.store.delete_scheduled_task(gone.id)  # a delete that stopped before its schedule went
    world.raw.create_schedule(**{**_kwargs(world, kept.id), "Name": "not-a-task"})
    # changed just now: maybe a task's whose row is being written (its schedule is put first)
    assert repair.delete_orphans(world.store, world.schedules, now=int(time.time())).deleted == []
    assert world.held(gone.id) is not None
    later = int(time.time()) + repair.ORPHAN_MIN_AGE_S + 60
    report = repair.delete_orphans(world.store, world.schedules, now=later)
    assert (report.deleted, report.checked, report.failed) == ([gone.id], 2, {})
    assert world.held(gone.id) is None
    assert world.held(kept.id) is not None
    assert world.held("not-a-task") is not None  # not a task's schedule: not ours to judge


def test_an_orphan_delete_that_fails_is_reported_and_the_others_still_go(world: World) -> None:
    first = world.task(HOURLY, due=NOW + 600)
    second = world.task(HOURLY, due=NOW + 600)
    for task in (first, second):
        world.store.delete_scheduled_task(task.id)
    world.scheduler.failing.add(first.id)
    report = repair.delete_orphans(world.store, world.schedules, now=int(time.time()) + 3600)
    assert (report.deleted, list(report.failed)) == ([second.id], [first.id])


def test_a_cron_schedule_is_put_without_a_start_that_has_passed(world: World) -> None:
    """EventBridge Scheduler refuses a cron StartDate more than 5 minutes past: a schedule put again
    after ``starts_at`` passed (an edit, a resume, a repair) must not carry it; a future one it keeps."""
    started = world.overdue(HOURLY, by=3 * 3600, starts_at=NOW - 2 * 86400)
    plan = plans.plan_for(started)
    assert plan is not None
    assert plan.start is None
    world.raw.delete_schedule(Name=started.id, GroupName=GROUP)
    report = world.repair(grace_s=0)
    assert (report.failed, report.repaired) == ({}, {started.id: ("missing",)})
    later = started.model_copy(update={"starts_at": NOW + 86400})
    ahead = plans.plan_for(later)
    assert ahead is not None
    assert ahead.start == datetime.fromtimestamp(NOW + 86400, UTC)
    one_time = plans.plan_for(
        started.model_copy(update={"rrule": EVERY_7_MIN, "next_run_at": NOW + 60, "starts_at": NOW - 86400})
    )
    assert one_time is not None
    assert (one_time.expression, one_time.start) == (_at(NOW + 60), None)


def _kwargs(world: World, task_id: str) -> dict[str, Any]:
    """What update_schedule takes, from what the schedule holds now."""
    held = world.held(task_id)
    assert held is not None
    keep = (
        "Name",
        "GroupName",
        "ScheduleExpression",
        "ScheduleExpressionTimezone",
        "FlexibleTimeWindow",
        "State",
        "Target",
    )
    return {k: held[k] for k in keep}
