"""OpenAI's automations on the schedule engine (moto): a periodic automation is one cron schedule in its
time zone, a once automation a one-time schedule; a fire runs the target through the real ``schedule_run``
and turn functions and is listed as an ``automation`` invocation."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from skyloop import deps
from tests.integration.conftest import wait_until
from tests.integration.test_schedules import _fire, _schedule

if TYPE_CHECKING:
    from tests.integration.conftest import Api, Stack

A = "/openai/v1/agents/automations"


def _target(agent_id: str, text: str = "Summarize the night.") -> dict[str, Any]:
    return {
        "type": "new_session",
        "agent_id": agent_id,
        "environment": {"type": "none"},
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}],
        "metadata": {"kind": "nightly"},
    }


def _create(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    r = api.post_json(A, body)
    assert r.status == 200, r.body
    return dict(r.body)


def test_a_periodic_automation_is_a_cron_schedule_in_its_zone_and_pause_disables_it(
    aws: Stack, api: Api
) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "done"}))
    body = {
        "type": "periodic",
        "name": "weekday mornings",
        "expression": "30 8 * * MON-FRI",
        "timezone": "Europe/Berlin",
        "target": _target(agent.id),
    }
    automation = _create(api, body)
    schedule = _schedule(automation["id"])
    assert schedule is not None
    assert schedule["ScheduleExpression"] == "cron(30 8 ? * MON,TUE,WED,THU,FRI *)"
    assert schedule["ScheduleExpressionTimezone"] == "Europe/Berlin"
    task = deps.store().get_scheduled_task(automation["id"])
    assert task is not None
    assert (task.origin, task.rrule) == (
        "openai_automation",
        "FREQ=DAILY;BYHOUR=8;BYMINUTE=30;BYDAY=MO,TU,WE,TH,FR",
    )
    # a /v1 scheduled task is no automation to the OpenAI routes
    v1 = api.post_json(
        "/v1/scheduled-tasks",
        {"name": "v1", "prompt": "p", "agent_id": agent.id, "rrule": "FREQ=DAILY;BYHOUR=9;BYMINUTE=0"},
    )
    assert v1.status == 200, v1.body
    assert api.get(f"{A}/{v1.body['id']}").status == 404
    assert v1.body["id"] not in [a["id"] for a in api.get(A).body["data"]]
    # the automation is a /v1 scheduled task too: listed there, its state editable, its rule not
    as_task = api.get(f"/v1/scheduled-tasks/{automation['id']}").body
    assert (as_task["origin"], as_task["rrule"]) == ("openai_automation", task.rrule)
    edit = api.patch_json(f"/v1/scheduled-tasks/{automation['id']}", {"rrule": "FREQ=HOURLY"})
    assert (edit.status, edit.body["error"]["param"]) == (400, "rrule")
    assert api.get(f"{A}/{automation['id']}").body["expression"] == "30 8 * * MON-FRI"
    assert api.post_json(f"{A}/{automation['id']}/pause", {}).body["status"] == "paused"
    assert _schedule(automation["id"])["State"] == "DISABLED"  # type: ignore[index]
    assert api.post_json(f"{A}/{automation['id']}/resume", {}).body["status"] == "active"
    assert _schedule(automation["id"])["State"] == "ENABLED"  # type: ignore[index]
    moved = api.post_json(f"{A}/{automation['id']}", {"expression": "0 */6 * * *", "timezone": "UTC"})
    assert moved.status == 200, moved.body
    assert _schedule(automation["id"])["ScheduleExpression"] == "cron(0 0/6 * * ? *)"  # type: ignore[index]
    assert api.call("DELETE", f"{A}/{automation['id']}").body["deleted"] is True
    assert _schedule(automation["id"]) is None


def test_a_once_automation_fires_once_runs_its_target_and_completes(aws: Stack, api: Api) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "Night summarized."}))
    run_at = int(time.time()) + 600
    automation = _create(api, {"type": "once", "name": "once", "run_at": run_at, "target": _target(agent.id)})
    assert (automation["type"], automation["run_at"], automation["status"]) == ("once", run_at, "active")
    due = -(-run_at // 60) * 60
    schedule = _schedule(automation["id"])
    assert schedule is not None
    assert schedule["ScheduleExpression"].startswith("at(")
    fired = _fire(aws, automation["id"], due)
    assert fired["status"] == "running"
    assert _schedule(automation["id"]) is None  # nothing left to fire
    after = api.get(f"{A}/{automation['id']}").body
    assert after["status"] == "completed"
    # run_at cannot move once its invocation exists
    moved = api.post_json(f"{A}/{automation['id']}", {"run_at": run_at + 3600})
    assert (moved.status, moved.body["error"]["param"]) == (400, "run_at")

    def listed() -> list[dict[str, Any]]:
        r = api.get(f"{A}/{automation['id']}/invocations")
        assert r.status == 200, r.body
        return list(r.body["data"])

    wait_until(lambda: len(listed()) == 1, what="the invocation")
    invocation = listed()[0]
    assert invocation["source"]["type"] == "automation"
    assert invocation["source"]["automation"]["id"] == automation["id"]
    assert (invocation["scheduled_at"], invocation["status"]) == (due, "completed")
    session_id = invocation["session_id"]

    def idle() -> bool:
        return bool(api.get(f"/openai/v1/agents/sessions/{session_id}").body["status"] == "idle")

    wait_until(idle, what="the invocation's turn")
    items = api.get(f"/openai/v1/agents/sessions/{session_id}/items", order="asc").body["data"]
    assert [i["content"][0]["text"] for i in items] == ["Summarize the night.", "Night summarized."]
    session = api.get(f"/openai/v1/agents/sessions/{session_id}").body
    assert session["metadata"]["kind"] == "nightly"


def test_an_automation_whose_session_is_gone_pauses_saying_why(aws: Stack, api: Api) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "done"}))
    session = api.post_json(
        "/openai/v1/agents/sessions",
        {"environment": {"type": "self_hosted", "workspace_directory": "/w"}, "agent_id": agent.id},
    )
    assert session.status == 200, session.body
    target = {"type": "existing_session", "session_id": session.body["id"], "instructions": "news?"}
    automation = _create(
        api,
        {
            "type": "periodic",
            "name": "nudge",
            "expression": "*/5 * * * *",
            "timezone": "UTC",
            "target": target,
        },
    )
    assert automation["pause_reason"] is None
    assert api.call("DELETE", f"/openai/v1/agents/sessions/{session.body['id']}").status == 200
    fired = _fire(aws, automation["id"], -(-int(time.time()) // 300) * 300)
    assert fired["status"] == "failed"
    paused = api.get(f"{A}/{automation['id']}").body
    assert (paused["status"], paused["pause_reason"]) == ("paused", "target_session_failed")
    invocation = api.get(f"{A}/{automation['id']}/invocations").body["data"][0]
    assert (invocation["status"], invocation["error"]["code"]) == ("failed", "session_not_found")
    resumed = api.post_json(f"{A}/{automation['id']}/resume", {}).body
    assert (resumed["status"], resumed["pause_reason"]) == ("active", None)
    # paused by hand later: no reason of the service's
    again = api.post_json(f"{A}/{automation['id']}/pause", {}).body
    assert (again["status"], again["pause_reason"]) == ("paused", None)
