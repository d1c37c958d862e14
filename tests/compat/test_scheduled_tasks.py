"""omnigent 0.19.1's own scheduled-task client (its runner's ``sys_scheduled_task_*`` dispatch) against
``skyloop dev``: create, list, update (pause), a refused rule, run now and its history, delete; every
answer carries the keys omnigent's own server answers with."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.e2e.conftest import unique

if TYPE_CHECKING:
    import httpx

    from tests.compat.conftest import Omnigent

pytestmark = pytest.mark.e2e


def test_omnigents_scheduled_task_client_works_against_skyloop(
    omnigent: Omnigent, http_client: httpx.Client, live_server: str
) -> None:
    spec = {
        "name": unique("omni-sched"),
        "executor": {"harness": "scripted", "model": "m", "script": [{"text": "Report written."}]},
    }
    agent = http_client.post("/v1/agents", json=spec)
    assert agent.status_code == 201, agent.text
    agent_id = agent.json()["id"]

    out = omnigent.script("scheduled_tasks_flow.py", live_server, agent_id)

    created = out["created"]
    assert "error" not in created, created
    assert set(out["omnigent_task_keys"]) <= set(created)
    assert (created["agent_id"], created["timezone"], created["state"]) == (
        agent_id,
        "Europe/Berlin",
        "active",
    )
    assert created["reasoning_effort"] == "high"
    assert created["next_run_at"].endswith(("+01:00", "+02:00"))
    assert created["id"] in [t["id"] for t in out["listed"]["scheduled_tasks"]]
    updated = out["updated"]
    assert (updated["name"], updated["state"], updated["next_run_at"]) == ("evening report", "paused", None)
    assert out["bad_rule"]["error"] == "server returned 400"
    assert "rrule" in out["bad_rule"]["details"]
    assert out["run_now"]["status"] == 202
    assert (out["run_now"]["body"]["triggered"], out["run_now"]["body"]["id"]) == (True, created["id"])
    (run,) = out["runs"]["runs"]
    assert set(out["omnigent_run_keys"]) <= set(run)
    assert (run["status"], run["scheduled_task_id"], out["runs"]["next_cursor"]) == (
        "succeeded",
        created["id"],
        None,
    )
    assert out["deleted"] == {"deleted": True, "id": created["id"]}
    assert out["after_delete"]["error"] == "server returned 404"
