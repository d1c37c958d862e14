"""Scheduled tasks on moto: the EventBridge Scheduler schedules a task creates, updates and deletes, the
one-time schedule re-armed after each run, and runs through the real ``schedule_run`` and turn functions."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from skyloop import deps
from skyloop.local.resources import SCHEDULE_GROUP
from skyloop.pricing import PRICES_ENV
from skyloop.schedules import engine as schedule_engine
from tests.integration.conftest import wait_until

if TYPE_CHECKING:
    from tests.integration.conftest import Api, Stack

BERLIN_DAILY = {"rrule": "FREQ=DAILY;BYHOUR=9;BYMINUTE=0", "timezone": "Europe/Berlin"}
EVERY_7_MIN = "FREQ=MINUTELY;INTERVAL=7"  # cron cannot say it: a one-time schedule re-armed per run


def _scheduler() -> Any:
    return deps.client("scheduler")


def _schedule(task_id: str) -> dict[str, Any] | None:
    """The task's schedule as EventBridge Scheduler (moto) holds it, None when there is none."""
    try:
        return dict(_scheduler().get_schedule(Name=task_id, GroupName=SCHEDULE_GROUP))
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
        return None


def _schedule_names() -> set[str]:
    return {s["Name"] for s in _scheduler().list_schedules(GroupName=SCHEDULE_GROUP)["Schedules"]}


def _create(api: Api, agent_id: str, **fields: Any) -> dict[str, Any]:
    body = {
        "name": "morning report",
        "prompt": "Summarize the night.",
        "agent_id": agent_id,
        **BERLIN_DAILY,
        **fields,
    }
    r = api.post_json("/v1/scheduled-tasks", body)
    assert r.status == 200, r.body
    return dict(r.body)


def _fire(aws: Stack, task_id: str, scheduled_at: int | str) -> dict[str, Any]:
    """Invoke the run function as EventBridge Scheduler does (its input, the scheduled time filled in)."""
    when = scheduled_at if isinstance(scheduled_at, str) else _iso_z(scheduled_at)
    out = deps.client("lambda").invoke(
        FunctionName=aws.resources.function_arns["schedule_run"],
        Payload=json.dumps({"task_id": task_id, "scheduled_at": when}),
    )
    payload = json.loads(out["Payload"].read())
    assert "FunctionError" not in out, payload
    return dict(payload)


def _iso_z(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp())


def _runs(api: Api, task_id: str) -> list[dict[str, Any]]:
    r = api.get(f"/v1/scheduled-tasks/{task_id}/runs")
    assert r.status == 200, r.body
    return list(r.body["runs"])


def _wait_run(api: Api, task_id: str, run_id: str, status: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def ended() -> bool:
        found.update(next(r for r in _runs(api, task_id) if r["id"] == run_id))
        return bool(found["status"] == status)

    wait_until(ended, what=f"run {run_id} {status}")
    return found


def test_a_daily_task_is_one_cron_schedule_in_its_time_zone_targeting_the_run_function(
    aws: Stack, api: Api
) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "done"}))
    task = _create(api, agent.id)
    schedule = _schedule(task["id"])
    assert schedule is not None
    assert schedule["ScheduleExpression"] == "cron(0 9 * * ? *)"
    assert schedule["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert schedule["State"] == "ENABLED"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = schedule["Target"]
    assert target["Arn"] == aws.resources.function_arns["schedule_run"]
    assert target["RoleArn"] == aws.resources.schedule_role_arn
    assert target["DeadLetterConfig"] == {"Arn": aws.resources.schedule_dlq_arn}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 900}
    assert json.loads(target["Input"]) == {
        "task_id": task["id"],
        "scheduled_at": "<aws.scheduler.scheduled-time>",
    }
    # next_run_at: 09:00 on the wall clock of Berlin, computed by the server, with the day's offset
    nxt = datetime.fromisoformat(task["next_run_at"])
    assert (nxt.hour, nxt.minute, nxt.utcoffset()) == (9, 0, nxt.astimezone(nxt.tzinfo).utcoffset())
    assert nxt.utcoffset() is not None
    assert nxt.utcoffset().total_seconds() in (3600, 7200)  # type: ignore[union-attr]
    assert task["schedule_expression"] == "cron(0 9 * * ? *)"


def test_a_schedule_follows_its_task_through_edits_pause_resume_and_delete(aws: Stack, api: Api) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "done"}))
    task = _create(api, agent.id, rrule="FREQ=MINUTELY", timezone="UTC")
    path = f"/v1/scheduled-tasks/{task['id']}"
    assert _schedule(task["id"])["ScheduleExpression"] == "cron(* * * * ? *)"  # type: ignore[index]
    # a rule cron cannot say: a one-time schedule at the next occurrence, in UTC
    edited = api.patch_json(path, {"rrule": EVERY_7_MIN, "name": "every seven"})
    assert edited.status == 200, edited.body
    at = _schedule(task["id"])
    assert at is not None
    assert at["ScheduleExpressionTimezone"] == "UTC"
    assert at["ScheduleExpression"] == f"at({_iso_z(_epoch(edited.body['next_run_at']))[:-1]})"
    assert at["Description"].endswith("every seven")
    paused = api.patch_json(path, {"state": "paused"})
    assert paused.status == 200
    assert (paused.body["state"], paused.body["next_run_at"]) == ("paused", None)
    assert _schedule(task["id"])["State"] == "DISABLED"  # type: ignore[index]
    resumed = api.patch_json(path, {"state": "active"})
    assert resumed.body["next_run_at"] is not None
    assert _schedule(task["id"])["State"] == "ENABLED"  # type: ignore[index]
    assert api.call("DELETE", path).body == {"deleted": True, "id": task["id"]}
    assert _schedule(task["id"]) is None
    assert api.get(path).status == 404


def test_a_one_time_schedule_is_re_armed_for_the_next_occurrence_after_each_run(aws: Stack, api: Api) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "Night summarized."}))
    task = _create(api, agent.id, rrule=EVERY_7_MIN, timezone="UTC")
    first = _epoch(task["next_run_at"])
    fired = _fire(aws, task["id"], first)
    assert fired["status"] == "running"
    after = api.get(f"/v1/scheduled-tasks/{task['id']}").body
    second = _epoch(after["next_run_at"])
    assert second > first
    assert (second - first) % 420 == 0 or datetime.fromtimestamp(second, UTC).time().minute % 7 == 0
    assert _schedule(task["id"])["ScheduleExpression"] == f"at({_iso_z(second)[:-1]})"  # type: ignore[index]
    # EventBridge Scheduler retries an invocation: the same occurrence again starts nothing more
    assert _fire(aws, task["id"], first)["run"] == fired["run"]
    run = _wait_run(api, task["id"], fired["run"], "succeeded")
    assert len(_runs(api, task["id"])) == 1
    assert (run["trigger"], run["scheduled_at"], run["error_code"]) == ("schedule", first, None)
    assert run["usage"]["total_tokens"] > 0
    items = api.get(f"/v1/sessions/{run['conversation_id']}/items").body["data"]
    texts = [(i["role"], i["content"][0]["text"]) for i in items if i["type"] == "message"]
    assert texts == [("user", "Summarize the night."), ("assistant", "Night summarized.")]
    listed = api.get(f"/v1/scheduled-tasks/{task['id']}").body
    assert (listed["last_run_status"], listed["last_run_conversation_id"]) == (
        "succeeded",
        run["conversation_id"],
    )


def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(aws: Stack, api: Api) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "done"}))
    before = (_schedule_names(), [t["id"] for t in api.get("/v1/scheduled-tasks").body["scheduled_tasks"]])
    base = {"name": "n", "prompt": "p", "agent_id": agent.id, **BERLIN_DAILY}
    cases = [
        ({"rrule": "FREQ=SECONDLY"}, "rrule"),  # more often than once a minute
        ({"rrule": "FREQ=MINUTELY;BYSECOND=0,30"}, "rrule"),
        ({"rrule": "FREQ=DAILY;BYHOUR=9;BYMINUTE"}, "rrule"),  # malformed
        ({"rrule": "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}, "rrule"),  # never fires
        ({"rrule": "FREQ=DAILY;UNTIL=20200101"}, "rrule"),  # never again
        ({"timezone": "Europe/Atlantis"}, "timezone"),
        ({"agent_id": "f" * 32}, "agent_id"),
        ({"max_cost_usd": 1.0}, "max_cost_usd"),  # the mock's model has no price
        ({"max_cost_usd": -1}, "max_cost_usd"),
        ({"host_id": "laptop"}, "host_id"),
        ({"surprise": True}, "surprise"),
    ]
    for change, param in cases:
        r = api.post_json("/v1/scheduled-tasks", {**base, **change})
        assert r.status == 400, (change, r.body)
        error = r.error()
        assert (error["code"], error.get("param")) == ("invalid_input", param), (change, error)
        assert param in error["message"]
    after = (_schedule_names(), [t["id"] for t in api.get("/v1/scheduled-tasks").body["scheduled_tasks"]])
    assert after == before
    task = _create(api, agent.id)
    r = api.patch_json(f"/v1/scheduled-tasks/{task['id']}", {"rrule": "FREQ=SECONDLY", "name": "renamed"})
    assert (r.status, r.error().get("param")) == (400, "rrule")
    unchanged = api.get(f"/v1/scheduled-tasks/{task['id']}").body
    assert (unchanged["name"], unchanged["rrule"]) == ("morning report", BERLIN_DAILY["rrule"])


def test_a_fire_for_a_deleted_task_runs_nothing_and_removes_its_leftover_schedule(
    aws: Stack, api: Api
) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "done"}))
    task = _create(api, agent.id)
    deps.store().delete_scheduled_task(task["id"])  # as a deletion that stopped before its schedule went
    assert _schedule(task["id"]) is not None
    assert _fire(aws, task["id"], int(datetime.now(UTC).timestamp())) == {"run": None}
    assert _schedule(task["id"]) is None


def test_a_fire_overlapping_a_running_run_is_skipped_and_run_now_answers_409(aws: Stack, api: Api) -> None:
    model = aws.mock_llm.script({"text": "slow", "block": True}, {"text": "fast"})
    agent = aws.register_agent(model)
    task = _create(api, agent.id, rrule=EVERY_7_MIN, timezone="UTC")
    now = api.post_json(f"/v1/scheduled-tasks/{task['id']}/run", {})
    assert now.status == 202, now.body
    assert (now.body["triggered"], now.body["id"], now.body["status"]) == (True, task["id"], "running")
    aws.mock_llm.wait_for_gate()
    skipped = _fire(aws, task["id"], _epoch(task["next_run_at"]))
    assert (skipped["status"], skipped["conversation_id"]) == ("skipped", None)
    again = api.post_json(f"/v1/scheduled-tasks/{task['id']}/run", {})
    assert (again.status, again.error()["code"]) == (409, "conflict")
    aws.mock_llm.release_gate()
    _wait_run(api, task["id"], now.body["run_id"], "succeeded")
    listed = {r["id"]: r for r in _runs(api, task["id"])}
    assert listed[skipped["run"]]["error_code"] == "overlap"
    assert listed[now.body["run_id"]]["trigger"] == "manual"


def test_a_cost_cap_stops_the_runs_turn_and_the_run_says_so(
    aws: Stack, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = aws.mock_llm.script(
        {"tool_calls": [{"call_id": "c1", "name": "lookup", "arguments": "{}"}]}, {"text": "never"}
    )
    # the mock reports 10 input tokens a call: at 0.01 USD a token, the first call costs 0.1 USD or more
    monkeypatch.setenv(PRICES_ENV, json.dumps({model: {"input": 10_000, "output": 10_000}}))
    agent = aws.register_agent(model)
    task = _create(api, agent.id, max_cost_usd=0.05)
    assert task["max_cost_usd"] == 0.05
    run_id = api.post_json(f"/v1/scheduled-tasks/{task['id']}/run", {}).body["run_id"]
    run = _wait_run(api, task["id"], run_id, "failed")
    assert run["error_code"] == "cost_cap_reached"
    assert run["cost_usd"] >= 0.05
    session = api.get(f"/v1/sessions/{run['conversation_id']}").body
    assert (session["status"], session["last_task_error"]["code"]) == ("failed", "cost_cap_reached")
    assert len(aws.mock_llm.requests(model)) == 1  # no model call after the cap was reached


def test_the_local_scheduler_fires_what_is_due_and_applies_the_missed_run_policy(
    aws: Stack, api: Api
) -> None:
    """skyloop dev's scheduler, after the stack was down: an occurrence missed within the grace period runs once,
    older ones are recorded as missed (at most ten), and a task whose last chance passed long ago moves on."""
    import time

    from skyloop.schedules.local import LocalScheduler, lambda_invoker

    agent = aws.register_agent(aws.mock_llm.script(*[{"text": "caught up"}] * 3))
    store = deps.store()
    now = int(time.time())
    minute = now - now % 60

    def down_since(task: dict[str, Any], at: int) -> None:
        """As if the stack had stopped before ``at`` came (the task, set a week before, armed for it)."""
        stored = store.get_scheduled_task(task["id"])
        assert stored is not None
        week_ago = datetime.fromtimestamp(at - 7 * 86400, UTC).replace(
            hour=0, minute=0, second=0, tzinfo=None
        )
        moved = stored.model_copy(
            update={"next_run_at": at, "armed_at": at - 60, "anchor": week_ago.isoformat()}
        )
        assert store.replace_scheduled_task(moved, revision=stored.revision)

    on_time = _create(api, agent.id, rrule="FREQ=MINUTELY", timezone="UTC")
    down_for_hours = _create(api, agent.id, rrule="FREQ=MINUTELY", timezone="UTC")
    down_for_days = _create(api, agent.id, rrule="FREQ=DAILY;BYHOUR=0;BYMINUTE=0", timezone="UTC")
    down_since(on_time, minute)
    down_since(down_for_hours, minute - 3 * 3600)
    midnight = minute - minute % 86400
    if now - midnight <= 900:  # keep the newest missed midnight out of the grace period
        pytest.skip("too close to midnight UTC for this case")
    down_since(down_for_days, midnight - 3 * 86400)
    scheduler = LocalScheduler(
        deps.store,
        schedule_engine.deployed,
        lambda_invoker(deps.client("lambda"), aws.resources.function_arns["schedule_run"]),
        grace_s=900,
    )
    dispatched = scheduler.tick(now)
    assert sorted(dispatched) == sorted([on_time["id"], down_for_hours["id"]])
    assert scheduler.tick(now) == []  # the occurrences sent are not sent again meanwhile
    for task in (on_time, down_for_hours):
        wait_until(
            lambda t=task: any(r["status"] == "succeeded" for r in _runs(api, t["id"])), what="the run"
        )
    ran = [r for r in _runs(api, on_time["id"]) if r["status"] != "missed"]
    assert [(r["scheduled_at"], r["trigger"]) for r in ran] == [(minute, "schedule")]
    caught_up = _runs(api, down_for_hours["id"])
    assert [r["scheduled_at"] for r in caught_up if r["status"] == "succeeded"] == [minute]
    missed = [r for r in caught_up if r["status"] == "missed"]
    assert len(missed) == 10  # of 180 missed minutes, the newest ten are recorded
    assert [r["scheduled_at"] for r in missed] == [minute - 60 * k for k in range(1, 11)]
    assert {(r["error_code"], r["trigger"], r["conversation_id"]) for r in missed} == {
        ("missed", "catch_up", None)
    }
    days = _runs(api, down_for_days["id"])
    assert [r["scheduled_at"] for r in days] == [midnight - 86400 * k for k in range(0, 4)]
    assert {r["status"] for r in days} == {"missed"}
    later = api.get(f"/v1/scheduled-tasks/{down_for_days['id']}").body
    assert _epoch(later["next_run_at"]) == midnight + 86400
    for task in (on_time, down_for_hours, down_for_days):
        api.call("DELETE", f"/v1/scheduled-tasks/{task['id']}")


# ------------------------------------------------------------------------------------ repair
def _reconcile(aws: Stack, event: dict[str, Any]) -> dict[str, Any]:
    """Invoke the reconciler function as its EventBridge rules do."""
    out = deps.client("lambda").invoke(
        FunctionName=aws.resources.function_arns["reconcile_turns"], Payload=json.dumps(event)
    )
    payload = json.loads(out["Payload"].read())
    assert "FunctionError" not in out, payload
    return dict(payload)


SCHEDULED_EVENT = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}


def _armed_in_the_past(task: dict[str, Any], due: int, anchor: str | None = None) -> None:
    """As if the task (set a week before ``due``, or at ``anchor``) had been armed for ``due`` and nothing
    fired since."""
    store = deps.store()
    stored = store.get_scheduled_task(task["id"])
    assert stored is not None
    week_ago = datetime.fromtimestamp(due - 7 * 86400, UTC).replace(hour=0, minute=0, second=0, tzinfo=None)
    moved = stored.model_copy(
        update={"next_run_at": due, "armed_at": due - 60, "anchor": anchor or week_ago.isoformat()}
    )
    assert store.replace_scheduled_task(moved, revision=stored.revision)


def _age_schedule(task_id: str, seconds: int) -> None:
    """Make moto's schedule look last changed ``seconds`` earlier (the orphan job spares young ones)."""
    from moto.scheduler.models import scheduler_backends

    backend = scheduler_backends["123456789012"]["us-east-1"]
    schedule = backend.schedule_groups[SCHEDULE_GROUP].schedules[task_id]
    schedule.last_modified_date -= seconds
    schedule.creation_date -= seconds


def test_the_reconciler_repairs_schedules_that_stopped_firing_and_catches_up_as_the_local_scheduler(
    aws: Stack, api: Api
) -> None:
    """A one-time schedule whose re-arm never happened and a cron schedule disabled in the console are put
    back from their rows, through the real reconcile_turns and schedule_run functions; the newest missed
    occurrence within the grace period runs, older ones are recorded as missed; a paused task stays."""
    import time

    from skyloop.schedules import plans

    agent = aws.register_agent(aws.mock_llm.script(*[{"text": "caught up"}] * 3))
    store = deps.store()
    now = int(time.time())
    # a rule cron cannot say: the run function crashed after an occurrence 90 minutes ago, before re-arming
    crashed = _create(api, agent.id, rrule=EVERY_7_MIN, timezone="UTC")
    anchor = datetime.fromtimestamp(now - 7 * 86400, UTC).replace(hour=0, minute=0, second=0, tzinfo=None)
    probe = store.get_scheduled_task(crashed["id"])
    assert probe is not None
    probe = probe.model_copy(update={"anchor": anchor.isoformat()})
    due = plans.passed_occurrences(probe, since=now - 6000, until=now - 5400)[-1]
    _armed_in_the_past(crashed, due, anchor.isoformat())
    stale = store.get_scheduled_task(crashed["id"])
    assert stale is not None
    plan = plans.plan_for(stale)
    assert plan is not None
    schedules = schedule_engine.deployed()
    assert schedules is not None
    schedules.put(stale, plan)  # the spent at() it fired from
    # a daily cron task disabled in the console: its occurrences 12 and 36 hours ago did not fire
    hour = (datetime.fromtimestamp(now, UTC).hour + 12) % 24
    disabled = _create(api, agent.id, rrule=f"FREQ=DAILY;BYHOUR={hour};BYMINUTE=0", timezone="UTC")
    first = _epoch(disabled["next_run_at"]) - 2 * 86400
    _armed_in_the_past(disabled, first)
    held = _schedule(disabled["id"])
    assert held is not None
    _scheduler().update_schedule(
        **{k: held[k] for k in ("Name", "GroupName", "ScheduleExpression", "FlexibleTimeWindow", "Target")},
        ScheduleExpressionTimezone="UTC",
        State="DISABLED",
    )
    # a paused task whose schedule someone deleted: paused tasks are left alone
    paused = _create(api, agent.id, rrule=EVERY_7_MIN, timezone="UTC")
    assert api.patch_json(f"/v1/scheduled-tasks/{paused['id']}", {"state": "paused"}).status == 200
    _scheduler().delete_schedule(Name=paused["id"], GroupName=SCHEDULE_GROUP)
    paused_row = store.get_scheduled_task(paused["id"])

    report = _reconcile(aws, SCHEDULED_EVENT)["schedules"]

    assert report["failed"] == {}
    assert report["repaired"] == {crashed["id"]: ["expression"], disabled["id"]: ["disabled"]}
    assert report["dispatched"] == [crashed["id"]]
    # the one-time task: the newest missed occurrence (within 15 minutes) runs, as a scheduled run
    passed = plans.passed_occurrences(stale, since=due, until=now)
    newest = passed[-1]
    assert now - newest < 900  # within the grace period: it runs
    wait_until(
        lambda: any(r["status"] == "succeeded" for r in _runs(api, crashed["id"])), what="the caught-up run"
    )
    runs = _runs(api, crashed["id"])
    ran = [r for r in runs if r["status"] != "missed"]
    assert [(r["scheduled_at"], r["trigger"]) for r in ran] == [(newest, "schedule")]
    missed = [r for r in runs if r["status"] == "missed"]
    assert len(passed) > 11  # the newest ten of the others are recorded
    assert [r["scheduled_at"] for r in missed] == sorted(passed[:-1], reverse=True)[:10]
    assert {(r["trigger"], r["error_code"]) for r in missed} == {("catch_up", "missed")}
    # and its chain goes on: the schedule is at the row's next occurrence, after now
    armed = store.get_scheduled_task(crashed["id"])
    assert armed is not None
    assert armed.next_run_at is not None
    assert armed.next_run_at > now
    assert _schedule(crashed["id"])["ScheduleExpression"] == f"at({_iso_z(armed.next_run_at)[:-1]})"  # type: ignore[index]
    # the cron task: enabled again, its two missed days recorded, moved on
    held = _schedule(disabled["id"])
    assert held is not None
    assert (held["State"], held["ScheduleExpression"]) == ("ENABLED", f"cron(0 {hour} * * ? *)")
    days = _runs(api, disabled["id"])
    assert [(r["scheduled_at"], r["status"]) for r in days] == [
        (first + 86400, "missed"),
        (first, "missed"),
    ]
    later = api.get(f"/v1/scheduled-tasks/{disabled['id']}").body
    assert _epoch(later["next_run_at"]) == first + 2 * 86400
    # the paused one: untouched
    assert _schedule(paused["id"]) is None
    assert store.get_scheduled_task(paused["id"]) == paused_row
    # a second pass finds nothing overdue
    again = _reconcile(aws, SCHEDULED_EVENT)["schedules"]
    assert (again["repaired"], again["dispatched"], again["failed"]) == ({}, [], {})
    for task in (crashed, disabled, paused):
        api.call("DELETE", f"/v1/scheduled-tasks/{task['id']}")


def test_the_hourly_orphan_job_deletes_schedules_whose_task_is_gone(aws: Stack, api: Api) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "done"}))
    kept = _create(api, agent.id)
    gone = _create(api, agent.id)
    young = _create(api, agent.id)
    for task in (gone, young):
        deps.store().delete_scheduled_task(task["id"])  # deletions that stopped before their schedule went
    for task in (kept, gone):
        _age_schedule(task["id"], 3600)
    report = _reconcile(aws, {"job": "orphan_schedules"})
    assert set(report) == {"orphan_schedules"}  # that job only: no reconciler pass
    assert report["orphan_schedules"]["deleted"] == [gone["id"]]
    assert report["orphan_schedules"]["failed"] == {}
    assert _schedule(gone["id"]) is None
    assert _schedule(kept["id"]) is not None  # its task exists
    assert _schedule(young["id"]) is not None  # maybe a task's whose row is being written: spared
    _age_schedule(young["id"], 3600)
    assert _reconcile(aws, {"job": "orphan_schedules"})["orphan_schedules"]["deleted"] == [young["id"]]
    api.call("DELETE", f"/v1/scheduled-tasks/{kept['id']}")
