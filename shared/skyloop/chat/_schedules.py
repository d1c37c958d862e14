"""``skyloop schedules add|ls|rm|run|runs``: scheduled tasks from the terminal (through the SDK).

``add`` takes the agent by name (its newest version) or id, the prompt, the
rule and the zone; ``--json`` prints the server's JSON answer as is.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from skyloop.chat._api import find_agent
from skyloop.chat._common import _FAILURES, _client, _fail, _print_json, _tolerant
from skyloop.chat._render import one_line, truncate
from skyloop.chat._tables import format_table, format_time
from skyloop.ids import is_hex32

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import TextIO

    from skyloop.client import Client, ScheduledRun, ScheduledTask

__all__ = ["schedules_command"]


def tasks_table(tasks: Sequence[ScheduledTask]) -> str:
    if not tasks:
        return "no scheduled tasks"
    rows = [
        (
            t.id,
            truncate(one_line(t.name), 30),
            t.rrule,
            t.timezone,
            t.state,
            t.next_run_at or "-",
            t.last_run_status or "-",
        )
        for t in tasks
    ]
    return format_table(["id", "name", "rule", "zone", "state", "next run", "last run"], rows)


def runs_table(runs: Sequence[ScheduledRun]) -> str:
    if not runs:
        return "no runs"
    rows = [
        (
            r.id,
            r.status,
            r.trigger or "-",
            format_time(r.scheduled_at),
            r.conversation_id or "-",
            f"{r.cost_usd:.6f}" if r.cost_usd is not None else "-",
            r.error_code or "",
        )
        for r in runs
    ]
    return format_table(["id", "status", "trigger", "scheduled", "session", "cost usd", "error"], rows)


def _agent_id(client: Client, agent: str) -> str:
    return agent if is_hex32(agent) else find_agent(client, agent).id


def _act(client: Client, args: argparse.Namespace) -> tuple[Any, str]:
    raw = client.with_raw_response
    if args.action == "add":
        fields: dict[str, Any] = {"overlap": args.overlap}
        if args.max_cost_usd is not None:
            fields["max_cost_usd"] = args.max_cost_usd
        if args.model:
            fields["model_override"] = args.model
        if args.starts_at:
            fields["starts_at"] = args.starts_at
        created = raw.create_scheduled_task(
            name=args.name or one_line(args.prompt)[:60],
            prompt=args.prompt,
            rrule=args.rrule,
            agent_id=_agent_id(client, args.agent),
            timezone=args.timezone,
            **fields,
        )
        task = created.parse()
        return (
            created.json(),
            f"added scheduled task {task.id}, next run {task.next_run_at}\n\n{tasks_table([task])}",
        )
    if args.action == "ls":
        listed = raw.list_scheduled_tasks()
        return listed.json(), tasks_table(listed.parse())
    if args.action == "rm":
        deleted = raw.delete_scheduled_task(args.task_id)
        return deleted.json(), f"deleted scheduled task {deleted.parse().id}"
    if args.action == "run":
        started = raw.run_scheduled_task(args.task_id)
        run = started.parse()
        return started.json(), f"run {run.run_id} {run.status}, session {run.conversation_id}"
    runs = raw.list_scheduled_runs(args.task_id, limit=args.limit)
    return runs.json(), runs_table(runs.parse().runs)


def schedules_command(
    args: argparse.Namespace,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    client: Client | None = None,
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    _tolerant(stdout)
    base_url = getattr(args, "url", None)
    try:
        client = client or _client(args)
        base_url = client.base_url
        with client:
            body, text = _act(client, args)
    except _FAILURES as exc:
        return _fail(exc, base_url, err=stderr)
    if args.json:
        _print_json(body, stdout)
    else:
        stdout.write(text + "\n")
    return 0
