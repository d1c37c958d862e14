"""Run in omnigent 0.19.1's venv: its own scheduled-task client against skyloop; prints one JSON document.

omnigent's Python client for ``/v1/scheduled-tasks`` is the runner's dispatch of
the ``sys_scheduled_task_*`` tools (``omnigent.runner.tool_dispatch``): create,
list, update, delete over an ``httpx.AsyncClient`` pointed at the server. Run
now and run history have no Python client in omnigent (its web UI calls them),
so they are called here as its routes define them. The keys omnigent's own
server answers with (``_to_response``, ``_run_to_response``) are printed, to be
compared with skyloop's.

    python scheduled_tasks_flow.py <base url> <agent id>
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from omnigent.entities import ScheduledTask, ScheduledTaskRun
from omnigent.runner.tool_dispatch import _execute_scheduled_task_tool
from omnigent.server.routes.scheduled_tasks import (
    CreateScheduledTaskRequest,
    _run_to_response,
    _to_response,
)


async def main(base: str, agent_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:

        async def tool(tool_name: str, args: dict[str, Any] | None = None, **more: Any) -> Any:
            arguments = json.dumps({**(args or {}), **more})
            return json.loads(await _execute_scheduled_task_tool(tool_name, arguments, server_client=client))

        body = {
            "name": "morning report",
            "prompt": "Write the morning report.",
            "rrule": "FREQ=DAILY;BYHOUR=9;BYMINUTE=0",
            "agent_id": agent_id,
            "timezone": "Europe/Berlin",
            "reasoning_effort": "high",
        }
        CreateScheduledTaskRequest.model_validate(body)  # what omnigent's server would take
        out["created"] = await tool("sys_scheduled_task_create", body)
        task_id = out["created"]["id"]
        out["listed"] = await tool("sys_scheduled_task_list")
        out["updated"] = await tool(
            "sys_scheduled_task_update", scheduled_task_id=task_id, name="evening report", state="paused"
        )
        out["bad_rule"] = await tool("sys_scheduled_task_create", {**body, "rrule": "FREQ=SECONDLY"})
        run_now = await client.post(f"/v1/scheduled-tasks/{task_id}/run")
        out["run_now"] = {"status": run_now.status_code, "body": run_now.json()}
        for _ in range(100):  # until the run's turn ended
            runs = (await client.get(f"/v1/scheduled-tasks/{task_id}/runs", params={"limit": 10})).json()
            if runs["runs"] and runs["runs"][0]["status"] not in ("scheduled", "running"):
                break
            await asyncio.sleep(0.2)
        out["runs"] = runs
        out["deleted"] = await tool("sys_scheduled_task_delete", scheduled_task_id=task_id)
        out["after_delete"] = await tool("sys_scheduled_task_update", scheduled_task_id=task_id, name="gone")
    task = ScheduledTask(
        id="0" * 32,
        name="n",
        prompt="p",
        rrule="FREQ=DAILY",
        user_id=None,
        agent_id="a",
        timezone="UTC",
        created_at=0,
    )
    run = ScheduledTaskRun(id="1" * 32, scheduled_task_id="0" * 32, status="running", scheduled_at=0)
    out["omnigent_task_keys"] = sorted(_to_response(task))
    out["omnigent_run_keys"] = sorted(_run_to_response(run))
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
