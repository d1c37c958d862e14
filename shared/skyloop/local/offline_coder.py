"""The local stack's offline model: a small scripted coder, so client-side tools work with no API key.

It is not a language model: it reads the last input item and follows a few
plain commands (read, list, grep, write, replace, run). That is enough for a
new user to watch a whole client-tool turn: the call parks, ``skyloop chat``
runs it on their machine, and the model reports the result. With
``OPENAI_API_KEY`` set, ``skyloop dev`` uses OpenAI instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from skyloop.mockllm import QueuedResponse, ToolCall

HELP = (
    "Hello from skyloop's built-in offline model. It is not a real model, but it can drive your client-side "
    "tools. Try:\n"
    "  read calculator.py\n"
    "  list *.py\n"
    "  grep divide\n"
    "  write notes.txt: some text\n"
    "  replace 'a / b' with 'a // b' in calculator.py\n"
    "  run ls -la\n"
    "Set OPENAI_API_KEY and restart `make run` to talk to a real model."
)
PREVIEW_LINES = 12
_Q = r"""(['"])(.*?)\1"""

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(?:read|show|cat|open)\s+(?P<file_path>\S+)", re.I), "Read"),
    (re.compile(r"^(?:list|find|glob)(?:\s+files)?(?:\s+(?P<pattern>\S+))?\s*$", re.I), "Glob"),
    (re.compile(r"^grep\s+(?P<pattern>\S+)(?:\s+(?P<path>\S+))?\s*$", re.I), "Grep"),
    (re.compile(r"^write\s+(?P<file_path>[^\s:]+)\s*:\s?(?P<content>.*)$", re.I | re.S), "Write"),
    (
        re.compile(
            r"^replace\s+" + _Q + r"\s+with\s+" + _Q.replace("1", "3") + r"\s+in\s+(?P<file_path>\S+)", re.I
        ),
        "Edit",
    ),
    (re.compile(r"^(?:run|bash|\$)\s+(?P<command>.+)$", re.I | re.S), "Bash"),
]


def respond(body: dict[str, Any]) -> QueuedResponse:
    """One reply to a Responses API request body."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if items and items[-1].get("type") == "function_call_output":
        return _report(items, hosted=any("sandboxed workspace" in str(t.get("description")) for t in tools))
    offered = {t.get("name") for t in tools}
    text = _last_user_text(items).strip()
    for pattern, tool in _RULES:
        match = pattern.match(text)
        if not match:
            continue
        if tool not in offered:
            return _say(f"I would use the {tool} tool for that, but this session did not offer it.")
        return QueuedResponse(
            tool_calls=[
                ToolCall(call_id=_call_id(items), name=tool, arguments=json.dumps(_arguments(tool, match)))
            ]
        )
    return _say(HELP)


def _arguments(tool: str, match: re.Match[str]) -> dict[str, Any]:
    if tool == "Edit":
        return {
            "file_path": match.group("file_path"),
            "old_string": match.group(2),
            "new_string": match.group(4),
        }
    if tool == "Glob":
        return {"pattern": match.group("pattern") or "*"}
    return {k: v for k, v in match.groupdict().items() if v is not None}


def _report(items: list[dict[str, Any]], hosted: bool = False) -> QueuedResponse:
    output = str(items[-1].get("output", ""))
    call_id = items[-1].get("call_id")
    name = next(
        (
            i.get("name")
            for i in reversed(items)
            if i.get("type") == "function_call" and i.get("call_id") == call_id
        ),
        "the tool",
    )
    lines = output.splitlines() or ["(empty)"]
    shown = "\n".join(lines[:PREVIEW_LINES])
    more = f"\n… ({len(lines) - PREVIEW_LINES} more lines)" if len(lines) > PREVIEW_LINES else ""
    where = "in the session's sandboxed workspace" if hosted else "on your machine"
    return _say(f"{name} ran {where} and returned:\n\n{shown}{more}")


def _last_user_text(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        if item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return content
        return " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
    return ""


def _call_id(items: list[dict[str, Any]]) -> str:
    return f"call_offline_{sum(1 for i in items if i.get('type') == 'function_call')}"


def _say(text: str) -> QueuedResponse:
    return QueuedResponse(text=text, stream=True)
