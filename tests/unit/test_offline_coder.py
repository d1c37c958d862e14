"""The local stack's offline coder: plain commands become client-tool calls, outputs become reports."""

from __future__ import annotations

import json

import pytest

from skyloop.local.offline_coder import HELP, respond

TOOLS = [{"type": "function", "name": n} for n in ("Read", "Write", "Edit", "Glob", "Grep", "Bash")]


def _ask(
    text: str, tools: list[dict[str, str]] | None = TOOLS
) -> tuple[str | None, dict[str, str] | None, str]:
    reply = respond(
        {"input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}], "tools": tools}
    )
    if reply.tool_calls:
        call = reply.tool_calls[0]
        return call.name, json.loads(call.arguments), reply.text
    return None, None, reply.text


@pytest.mark.parametrize(
    ("text", "tool", "arguments"),
    [
        ("read calculator.py", "Read", {"file_path": "calculator.py"}),
        ("show /tmp/x.txt", "Read", {"file_path": "/tmp/x.txt"}),
        ("list *.py", "Glob", {"pattern": "*.py"}),
        ("list files", "Glob", {"pattern": "*"}),
        ("grep divide src", "Grep", {"pattern": "divide", "path": "src"}),
        ("write notes.txt: two\nlines", "Write", {"file_path": "notes.txt", "content": "two\nlines"}),
        (
            "replace 'a / b' with \"a // b\" in calc.py",
            "Edit",
            {"file_path": "calc.py", "old_string": "a / b", "new_string": "a // b"},
        ),
        ("run ls -la", "Bash", {"command": "ls -la"}),
    ],
)
def test_commands_become_tool_calls(text: str, tool: str, arguments: dict[str, str]) -> None:
    assert _ask(text)[:2] == (tool, arguments)


def test_anything_else_gets_the_help_text_streamed() -> None:
    reply = respond({"input": [{"role": "user", "content": "hello"}]})
    assert reply.text == HELP
    assert reply.stream
    assert not reply.tool_calls


def test_a_tool_the_session_did_not_offer_is_not_called() -> None:
    name, _, text = _ask("read a.py", tools=[])
    assert name is None
    assert "did not offer" in text


def test_a_tool_output_is_reported_with_its_tool_name_and_a_preview() -> None:
    output = "\n".join(f"{n}\tline {n}" for n in range(1, 31))
    reply = respond(
        {
            "input": [
                {"role": "user", "content": "read a.py"},
                {"type": "function_call", "call_id": "c0", "name": "Read", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c0", "output": output},
            ]
        }
    )
    assert reply.text.startswith("Read ran on your machine and returned:")
    assert "12\tline 12" in reply.text
    assert "13\tline 13" not in reply.text
    assert "18 more lines" in reply.text


def test_call_ids_stay_unique_within_a_conversation() -> None:
    earlier = [{"type": "function_call", "call_id": "call_offline_0", "name": "Read", "arguments": "{}"}]
    reply = respond({"input": [*earlier, {"role": "user", "content": "read b.py"}], "tools": TOOLS})
    assert reply.tool_calls
    assert reply.tool_calls[0].call_id == "call_offline_1"
