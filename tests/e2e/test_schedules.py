"""Scheduled tasks on ``skyloop dev`` over HTTP: run now, a task that fires by itself, next_run_at across a
DST change, pause and delete, bad rules, and a run parked on a client call. The agents are scripted
(their answers live in their specs), so every run's session can be checked word for word."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import pytest

from tests.e2e.conftest import StreamWatcher, is_call_frame, unique

if TYPE_CHECKING:
    from collections.abc import Iterator

    import httpx

BERLIN = ZoneInfo("Europe/Berlin")
MINUTE_WAIT_S = 100.0  # a minutely task's first occurrence is at most a minute away, then its run
_CREATED: list[str] = []


@pytest.fixture(autouse=True)
def _remove_tasks(http_client: httpx.Client) -> Iterator[None]:
    """Tasks a test made are deleted after it, passed or failed: the stack is shared by the whole session."""
    yield
    while _CREATED:
        http_client.delete(f"/v1/scheduled-tasks/{_CREATED.pop()}")


def scripted_agent(http_client: httpx.Client, script: list[dict[str, Any]], **extra: Any) -> str:
    spec = {
        "name": unique("sched"),
        "prompt": "You write short reports.",
        "executor": {"harness": "scripted", "model": "report-model", "script": script},
        **extra,
    }
    resp = http_client.post("/v1/agents", json=spec)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


def create_task(http_client: httpx.Client, agent_id: str, **fields: Any) -> dict[str, Any]:
    body = {"name": unique("task"), "prompt": "Write the morning report.", "agent_id": agent_id, **fields}
    resp = http_client.post("/v1/scheduled-tasks", json=body)
    assert resp.status_code == 200, resp.text
    _CREATED.append(resp.json()["id"])
    return dict(resp.json())


def runs_of(http_client: httpx.Client, task_id: str) -> list[dict[str, Any]]:
    resp = http_client.get(f"/v1/scheduled-tasks/{task_id}/runs")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["runs"])


def wait_run(
    http_client: httpx.Client, task_id: str, done: Any, *, timeout_s: float = 30.0, what: str = "a run"
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for run in runs_of(http_client, task_id):
            if done(run):
                return run
        time.sleep(0.25)
    raise AssertionError(
        f"{what} of task {task_id} within {timeout_s}s; runs: {runs_of(http_client, task_id)}"
    )


def messages(http_client: httpx.Client, session_id: str) -> list[tuple[str, str]]:
    items = http_client.get(f"/v1/sessions/{session_id}/items").json()["data"]
    return [(i["role"], i["content"][0]["text"]) for i in items if i["type"] == "message"]


def next_dst_change(zone: ZoneInfo, after: datetime) -> datetime:
    """The first local day after ``after`` whose UTC offset differs from the day before's (at noon)."""
    day = after.astimezone(zone).replace(hour=12, minute=0, second=0, microsecond=0)
    for _ in range(400):
        nxt = day + timedelta(days=1)
        if nxt.utcoffset() != day.utcoffset():
            return nxt
        day = nxt
    raise AssertionError("no DST change within a year")


def test_run_now_yields_a_succeeded_run_whose_session_holds_the_prompt_and_the_answer(
    http_client: httpx.Client,
) -> None:
    agent_id = scripted_agent(http_client, [{"text": "All systems nominal."}])
    task = create_task(
        http_client, agent_id, rrule="FREQ=DAILY;BYHOUR=9;BYMINUTE=0", timezone="Europe/Berlin"
    )
    resp = http_client.post(f"/v1/scheduled-tasks/{task['id']}/run")
    assert resp.status_code == 202, resp.text
    accepted = resp.json()
    assert (accepted["triggered"], accepted["id"]) == (True, task["id"])
    run = wait_run(http_client, task["id"], lambda r: r["status"] == "succeeded", what="a succeeded run")
    assert run["id"] == accepted["run_id"]
    assert (run["trigger"], run["error_code"], run["conversation_id"]) == (
        "manual",
        None,
        accepted["conversation_id"],
    )
    assert run["fired_at"] is not None
    assert run["finished_at"] >= run["fired_at"]
    assert messages(http_client, run["conversation_id"]) == [
        ("user", "Write the morning report."),
        ("assistant", "All systems nominal."),
    ]
    session = http_client.get(f"/v1/sessions/{run['conversation_id']}").json()
    assert (session["agent_id"], session["status"], session["title"]) == (agent_id, "idle", task["name"])
    listed = http_client.get(f"/v1/scheduled-tasks/{task['id']}").json()
    assert (listed["last_run_status"], listed["last_run_conversation_id"]) == (
        "succeeded",
        run["conversation_id"],
    )
    http_client.delete(f"/v1/scheduled-tasks/{task['id']}")


def test_a_minutely_task_fires_by_itself_while_a_paused_one_does_not_and_delete_stops_it(
    http_client: httpx.Client,
) -> None:
    agent_id = scripted_agent(http_client, [{"text": "tick"}])
    firing = create_task(http_client, agent_id, rrule="FREQ=MINUTELY")
    paused = create_task(http_client, agent_id, rrule="FREQ=MINUTELY")
    first = datetime.fromisoformat(firing["next_run_at"])
    assert first.second == 0
    assert first - datetime.now(UTC) <= timedelta(minutes=1)
    resp = http_client.patch(f"/v1/scheduled-tasks/{paused['id']}", json={"state": "paused"})
    assert resp.status_code == 200, resp.text
    assert (resp.json()["state"], resp.json()["next_run_at"]) == ("paused", None)
    run = wait_run(
        http_client,
        firing["id"],
        lambda r: r["status"] == "succeeded",
        timeout_s=MINUTE_WAIT_S,
        what="a run fired by the scheduler",
    )
    assert (run["trigger"], run["scheduled_at"]) == ("schedule", int(first.timestamp()))
    assert messages(http_client, run["conversation_id"]) == [
        ("user", "Write the morning report."),
        ("assistant", "tick"),
    ]
    moved_on = http_client.get(f"/v1/scheduled-tasks/{firing['id']}").json()
    assert datetime.fromisoformat(moved_on["next_run_at"]) > first
    # the paused task passed the same minute without a run
    assert runs_of(http_client, paused["id"]) == []
    for task in (firing, paused):
        deleted = http_client.delete(f"/v1/scheduled-tasks/{task['id']}")
        assert deleted.json() == {"deleted": True, "id": task["id"]}
        assert http_client.get(f"/v1/scheduled-tasks/{task['id']}").status_code == 404
        assert http_client.get(f"/v1/scheduled-tasks/{task['id']}/runs").status_code == 404
    listed = {t["id"] for t in http_client.get("/v1/scheduled-tasks").json()["scheduled_tasks"]}
    assert not listed & {firing["id"], paused["id"]}
    assert (
        http_client.get(f"/v1/sessions/{run['conversation_id']}").status_code == 200
    )  # the run's session stays


def test_a_daily_nine_oclock_berlin_task_reports_next_run_at_across_a_dst_change(
    http_client: httpx.Client,
) -> None:
    agent_id = scripted_agent(http_client, [{"text": "ok"}])
    now = datetime.now(UTC)
    today = create_task(
        http_client, agent_id, rrule="FREQ=DAILY;BYHOUR=9;BYMINUTE=0", timezone="Europe/Berlin"
    )
    nxt = datetime.fromisoformat(today["next_run_at"])
    expected = now.astimezone(BERLIN).replace(hour=9, minute=0, second=0, microsecond=0)
    if expected <= now:
        expected = (expected + timedelta(days=1)).replace(hour=9)
    expected = expected.replace(tzinfo=None).replace(tzinfo=BERLIN)  # 09:00 wall time, that day's offset
    assert nxt == expected
    assert nxt.utcoffset() == expected.utcoffset()
    # starting the day before the next DST change, after 09:00: the next run is 09:00 on the change's day
    change = next_dst_change(BERLIN, now)
    eve = (change - timedelta(days=1)).replace(hour=10)
    eve = eve.replace(tzinfo=None).replace(tzinfo=BERLIN)
    across = create_task(
        http_client,
        agent_id,
        rrule="FREQ=DAILY;BYHOUR=9;BYMINUTE=0",
        timezone="Europe/Berlin",
        starts_at=eve.isoformat(),
    )
    first = datetime.fromisoformat(across["next_run_at"])
    assert (first.date(), first.hour, first.minute) == (change.date(), 9, 0)
    assert first.utcoffset() == change.utcoffset() != eve.utcoffset()
    # the server's own preview of the rule from the day before: 09:00 local on both sides of the change
    preview = http_client.get(
        f"/v1/scheduled-tasks/{today['id']}/occurrences",
        params={"after": (eve - timedelta(days=2)).isoformat(), "limit": 3},
    ).json()["occurrences"]
    days = [datetime.fromisoformat(o) for o in preview]
    assert [(d.hour, d.minute) for d in days] == [(9, 0)] * 3
    assert days[2] == first
    assert days[1].utcoffset() == eve.utcoffset() != days[2].utcoffset()
    assert (days[2] - days[1]).total_seconds() in (23 * 3600, 25 * 3600)
    # a task's preview honours its start
    own = http_client.get(f"/v1/scheduled-tasks/{across['id']}/occurrences", params={"limit": 1}).json()
    assert own["occurrences"] == [across["next_run_at"]]
    for task in (today, across):
        http_client.delete(f"/v1/scheduled-tasks/{task['id']}")


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"rrule": "FREQ=SECONDLY"}, "rrule"),
        ({"rrule": "FREQ=MINUTELY;BYSECOND=0,20,40"}, "rrule"),
        ({"rrule": "FREQ=DAILY;BYHOUR=nine"}, "rrule"),
        ({"rrule": "FREQ=MONTHLY;BYMONTHDAY=31;BYMONTH=2"}, "rrule"),
        ({"rrule": "FREQ=DAILY;COUNT=1"}, "rrule"),
        ({"timezone": "Moon/Tranquility"}, "timezone"),
        ({"agent_id": "0" * 32}, "agent_id"),
    ],
)
def test_bad_rules_zones_and_agents_are_400_naming_the_field_with_nothing_written(
    http_client: httpx.Client, change: dict[str, Any], param: str
) -> None:
    agent_id = scripted_agent(http_client, [{"text": "ok"}])
    before = http_client.get("/v1/scheduled-tasks").json()["scheduled_tasks"]
    body = {"name": "bad", "prompt": "p", "agent_id": agent_id, "rrule": "FREQ=DAILY", **change}
    resp = http_client.post("/v1/scheduled-tasks", json=body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert (error["code"], error["param"]) == ("invalid_input", param)
    assert param in error["message"]
    assert http_client.get("/v1/scheduled-tasks").json()["scheduled_tasks"] == before


def test_a_run_parked_on_a_client_call_stays_running_until_the_call_is_answered(
    http_client: httpx.Client, live_server: str
) -> None:
    """The run's turn is an ordinary turn: it parks on the agent's client tool, and resumes on its output."""
    lookup = {"runtime": "client", "type": "function", "description": "Look something up on the client."}
    agent_id = scripted_agent(
        http_client,
        [{"tool_calls": [{"name": "Lookup", "arguments": {"q": "weather"}}]}, {"text": "Report: {{output}}"}],
        tools={"Lookup": lookup},
    )
    task = create_task(http_client, agent_id, rrule="FREQ=DAILY;BYHOUR=6")
    run_id = http_client.post(f"/v1/scheduled-tasks/{task['id']}/run").json()["run_id"]
    run = wait_run(http_client, task["id"], lambda r: r["id"] == run_id and r["conversation_id"])
    session_id = run["conversation_id"]
    # announced on the session's stream like any parked turn: the call, action_required
    with StreamWatcher(live_server, session_id, params={"after": "0"}) as watcher:
        frame = watcher.wait_for(lambda f: is_call_frame(f, "action_required"), what="the parked call")
    call_id = frame.data["item"]["call_id"]
    assert frame.data["item"]["name"] == "Lookup"
    time.sleep(1)  # parked: the session runs on, the run with it
    assert http_client.get(f"/v1/sessions/{session_id}").json()["status"] == "running"
    assert next(r for r in runs_of(http_client, task["id"]) if r["id"] == run_id)["status"] == "running"
    resp = http_client.post(
        f"/v1/sessions/{session_id}/events",
        json={"type": "function_call_output", "data": {"call_id": call_id, "output": "sunny"}},
    )
    assert resp.status_code == 202, resp.text
    done = wait_run(http_client, task["id"], lambda r: r["id"] == run_id and r["status"] == "succeeded")
    assert messages(http_client, done["conversation_id"])[-1] == ("assistant", "Report: sunny")
    http_client.delete(f"/v1/scheduled-tasks/{task['id']}")


def test_the_cli_adds_lists_runs_and_removes_scheduled_tasks(
    http_client: httpx.Client, live_server: str
) -> None:
    import json
    import subprocess
    import sys

    agent_id = scripted_agent(http_client, [{"text": "from the CLI"}])

    def cli(*args: str) -> Any:
        out = subprocess.run(
            [sys.executable, "-m", "skyloop", "schedules", *args, "--url", live_server, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    added = cli(
        "add",
        "Write the CLI report.",
        "--agent",
        agent_id,
        "--rrule",
        "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8",
        "--timezone",
        "America/New_York",
    )
    assert (added["rrule"], added["timezone"], added["agent_id"]) == (
        "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8",
        "America/New_York",
        agent_id,
    )
    _CREATED.append(added["id"])
    assert added["id"] in [t["id"] for t in cli("ls")["scheduled_tasks"]]
    started = cli("run", added["id"])
    assert started["triggered"] is True
    run = wait_run(http_client, added["id"], lambda r: r["status"] == "succeeded")
    assert cli("runs", added["id"])["runs"][0]["id"] == run["id"] == started["run_id"]
    assert cli("rm", added["id"]) == {"deleted": True, "id": added["id"]}
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "skyloop",
            "schedules",
            "add",
            "p",
            "--agent",
            agent_id,
            "--rrule",
            "FREQ=SECONDLY",
            "--url",
            live_server,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 1
    assert "invalid_input" in bad.stderr
    assert "rrule" in bad.stderr
