"""Human-readable tables for ``skyloop sessions`` and ``skyloop agents``.

Columns are left-aligned and separated by two spaces; long free text (titles,
message text) is folded onto one line and cut, ids are never cut (they are
what the other commands take). Every function returns a string, so tests
compare text and the commands only print.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from skyloop.chat._render import one_line, truncate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from skyloop.client import Agent, Item, SessionSnapshot, SessionSummary

__all__ = [
    "agents_table",
    "format_table",
    "format_time",
    "items_table",
    "session_details",
    "sessions_table",
]

TITLE_CHARS = 40
TEXT_CHARS = 80


def format_time(ts: int | None) -> str:
    """A unix timestamp as local ``YYYY-MM-DD HH:MM:SS``; ``-`` when unknown."""
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Aligned columns under upper-case headers; ``None`` cells show as ``-``."""
    cells = [[str(h).upper() for h in headers]]
    cells += [["-" if v is None or v == "" else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    return "\n".join(lines)


def sessions_table(sessions: Sequence[SessionSummary]) -> str:
    if not sessions:
        return "no sessions"
    rows = [
        (
            s.id,
            s.agent_name,
            s.status,
            format_time(s.updated_at),
            truncate(one_line(s.title or ""), TITLE_CHARS),
        )
        for s in sessions
    ]
    return format_table(["id", "agent", "status", "updated", "title"], rows)


def agents_table(agents: Sequence[Agent]) -> str:
    if not agents:
        return "no agents"
    rows = [(a.name, a.id, a.model, a.harness, format_time(a.created_at)) for a in agents]
    return format_table(["name", "id", "model", "harness", "created"], rows)


def item_summary(item: Item) -> tuple[str, str]:
    """``(who, text)`` for one stored item: the role or tool name, and its content on one line."""
    data = item.data
    if item.type == "message":
        return str(item.role or "-"), item.text
    if item.type == "function_call":
        return str(data.get("name") or "-"), str(data.get("arguments") or "")
    if item.type == "function_call_output":
        return str(data.get("call_id") or "-"), str(data.get("output") or "")
    return "-", ""


def items_table(items: Sequence[Item]) -> str:
    if not items:
        return "no items"
    rows = []
    for item in items:
        who, text = item_summary(item)
        rows.append((item.type, who, item.status, truncate(one_line(text), TEXT_CHARS)))
    return format_table(["type", "who", "status", "content"], rows)


def session_details(snapshot: SessionSnapshot) -> str:
    """The snapshot's fields as ``key  value`` lines, then its items as a table."""
    agent = snapshot.agent_name or "-"
    if snapshot.agent_id:
        agent += f" ({snapshot.agent_id})"
    runner = snapshot.runner_id or "-"
    if snapshot.runner_id and snapshot.runner_online is not None:
        runner += " (online)" if snapshot.runner_online else " (offline)"
    fields: list[tuple[str, str]] = [
        ("session", snapshot.id),
        ("agent", agent),
        ("status", snapshot.status),
        ("title", snapshot.title or "-"),
        ("created", format_time(snapshot.created_at)),
        ("updated", format_time(snapshot.updated_at)),
        ("runner", runner),
        ("last event", str(snapshot.last_event_id)),
    ]
    if snapshot.labels:
        fields.append(("labels", ", ".join(f"{k}={v}" for k, v in sorted(snapshot.labels.items()))))
    if snapshot.archived:
        fields.append(("archived", "yes"))
    if snapshot.last_task_error is not None:
        error = snapshot.last_task_error
        fields.append(("last error", f"{error.code}: {error.message}"))
    width = max(len(k) for k, _ in fields)
    head = "\n".join(f"{k.ljust(width)}  {v}" for k, v in fields)
    return f"{head}\n\n{items_table(snapshot.items)}"
