"""The seed scenario on skyloop: an agent calls client-side tools that the client runs locally.

Real processes (``skyloop dev`` and ``skyloop mock-llm``), real HTTP and SSE.
The client subscribes to the live stream, posts the message with the coding
tools, runs each ``action_required`` call with ``skyloop.client_tools`` and
posts its output, exactly as the seed test drives omnigent.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import httpx

from skyloop.client_tools import get_tool_set
from tests.e2e.conftest import (
    configure_mock_llm,
    create_runner_bound_session,
    get_mock_requests,
    get_session_snapshot,
    register_inline_agent,
    reset_mock_llm,
    send_user_message_to_session,
)
from tests.e2e.sse import TurnResult, run_turn

if TYPE_CHECKING:
    from pathlib import Path

_tool_mod = get_tool_set("coding")
TOOLS: list[dict[str, Any]] = _tool_mod.TOOLS
execute_tool = _tool_mod.execute_tool
CLIENT_TOOL_NAMES = {schema["function"]["name"] for schema in TOOLS}


def _run_with_tunneling(
    http_client: httpx.Client,
    *,
    base_url: str,
    agent_name: str,
    runner_id: str,
    user_input: str,
    tools: list[dict[str, Any]] | None = TOOLS,
) -> tuple[str, TurnResult]:
    session_id = create_runner_bound_session(http_client, agent_name=agent_name, runner_id=runner_id)

    def post() -> None:
        with httpx.Client(base_url=base_url, timeout=30) as poster:
            send_user_message_to_session(poster, session_id=session_id, content=user_input, tools=tools)

    result = run_turn(
        http_client,
        base_url=base_url,
        session_id=session_id,
        post=post,
        execute_tool=execute_tool,
        client_tool_names=CLIENT_TOOL_NAMES,
    )
    return session_id, result


def _client_outputs(result: TurnResult, names: set[str]) -> list[str]:
    ids = {c for c, fc in result.function_calls.items() if fc["name"] in names}
    assert ids, f"no client-side tool calls; called: {[fc['name'] for fc in result.function_calls.values()]}"
    return [out for call_id, out in result.tool_outputs.items() if call_id in ids]


def _agent(http_client: httpx.Client, mock_url: str, kind: str, prompt: str) -> tuple[str, str]:
    uid = uuid.uuid4().hex[:6]
    model = f"mock-coder-{kind}-{uid}"
    reset_mock_llm(mock_url)
    name = register_inline_agent(
        http_client,
        name=f"coder-{kind}-{uid}",
        harness="openai-agents",
        model=model,
        profile="",
        prompt=prompt,
        mock_llm_base_url=f"{mock_url}/v1",
    )
    return name, model


def test_coder_lists_and_reads_files_with_client_tools(
    live_server: str,
    http_client: httpx.Client,
    live_runner_id: str,
    mock_llm_server_url: str,
    sample_code_dir: Path,
) -> None:
    # Given an agent whose scripted model calls Glob, then Read, then answers
    agent_name, model = _agent(
        http_client,
        mock_llm_server_url,
        "glob",
        "You are a coding assistant. Use client tools to list and read files.",
    )
    configure_mock_llm(
        mock_llm_server_url,
        [
            {
                "tool_calls": [
                    {
                        "call_id": "call_glob",
                        "name": "Glob",
                        "arguments": json.dumps({"pattern": "**/*.py", "path": str(sample_code_dir)}),
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "call_id": "call_read",
                        "name": "Read",
                        "arguments": json.dumps({"file_path": str(sample_code_dir / "calculator.py")}),
                    }
                ]
            },
            {
                "text": "I found the Python files and read calculator.py. It contains divide and average functions."
            },
        ],
        key=model,
    )
    # When the client runs the turn, executing each parked call locally
    _session_id, result = _run_with_tunneling(
        http_client,
        base_url=live_server,
        agent_name=agent_name,
        runner_id=live_runner_id,
        user_input=f"List all Python files in {sample_code_dir} with Glob, then Read calculator.py.",
    )
    # Then the turn completes and the tool outputs came from the client's own files
    assert result.status == "completed", [f.data.get("type") for f in result.frames]
    outputs = _client_outputs(result, {"Glob", "Read", "Bash", "Grep"})
    assert any("calculator" in out for out in outputs), outputs
    assert any("def divide" in out for out in outputs), outputs
    assert "divide and average" in result.text
    # And the model saw each output in the request that followed it
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 3
    glob_outputs = [i for i in requests[1]["input"] if i.get("type") == "function_call_output"]
    assert glob_outputs
    assert "calculator.py" in glob_outputs[0]["output"]
    assert {t["name"] for t in requests[0]["tools"]} >= {"Glob", "Read", "Write", "Edit", "Grep", "Bash"}


def test_coder_writes_and_reads_file_on_the_client(
    live_server: str,
    http_client: httpx.Client,
    live_runner_id: str,
    mock_llm_server_url: str,
    tmp_path: Path,
) -> None:
    # Given an agent whose scripted model writes a file, reads it back, and quotes it
    target = tmp_path / "agent_test_output.txt"
    sentinel = "SKYLOOP_E2E_CANARY_2026"
    agent_name, model = _agent(
        http_client,
        mock_llm_server_url,
        "write",
        "You are a coding assistant. Use Write and Read tools as instructed.",
    )
    configure_mock_llm(
        mock_llm_server_url,
        [
            {
                "tool_calls": [
                    {
                        "call_id": "call_write",
                        "name": "Write",
                        "arguments": json.dumps({"file_path": str(target), "content": sentinel}),
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "call_id": "call_read",
                        "name": "Read",
                        "arguments": json.dumps({"file_path": str(target)}),
                    }
                ]
            },
            {"text": f"I wrote the file and read it back. The contents are: {sentinel}", "stream": True},
        ],
        key=model,
    )
    # When the client runs the turn
    _session_id, result = _run_with_tunneling(
        http_client,
        base_url=live_server,
        agent_name=agent_name,
        runner_id=live_runner_id,
        user_input=f"1. Write '{sentinel}' to '{target}'. 2. Read it back.",
    )
    # Then the file exists on the client side and the sentinel streamed back in the text
    assert result.status == "completed"
    called = [fc["name"] for fc in result.function_calls.values()]
    assert "Write" in called, called
    assert "Read" in called, called
    assert target.read_text() == sentinel
    assert sentinel in result.text
    deltas = [f for f in result.frames if f.data.get("type") == "response.output_text.delta"]
    assert len(deltas) >= 2, "a streamed answer arrives in several deltas"


def test_text_only_turn_streams_events_in_contract_order(
    live_server: str,
    http_client: httpx.Client,
    live_runner_id: str,
    mock_llm_server_url: str,
) -> None:
    # Given an agent that answers with plain streamed text
    agent_name, model = _agent(http_client, mock_llm_server_url, "text", "Answer briefly.")
    configure_mock_llm(
        mock_llm_server_url, [{"text": "Hello there, streaming world", "stream": True}], key=model
    )
    # When a message is sent without tools
    session_id, result = _run_with_tunneling(
        http_client,
        base_url=live_server,
        agent_name=agent_name,
        runner_id=live_runner_id,
        user_input="hi",
        tools=None,
    )
    # Then the events arrive in the contract's order, each stored one with an increasing id
    assert result.status == "completed"
    assert result.text == "Hello there, streaming world"
    assert result.frames[0].data["type"] == "session.heartbeat"
    assert result.frames[0].id is None
    types = [f.data["type"] for f in result.frames[1:]]
    assert types[:3] == ["session.status", "session.input.consumed", "response.in_progress"]
    assert result.frames[1].data["status"] == "running"
    first_done = types.index("response.output_item.done")
    assert "response.output_text.delta" in types[:first_done]
    assert types[-1] == "response.completed"
    ids = [f.id for f in result.frames[1:]]
    assert all(i is not None for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    message = result.frames[1 + first_done].data["item"]
    assert message["role"] == "assistant"
    assert message["content"][0]["text"] == result.text
    # And the session goes idle with the assistant message persisted
    snap = _wait_idle(http_client, session_id)
    assert [i["data"]["role"] for i in snap["items"]] == ["user", "assistant"]
    assert snap["items"][1]["id"] == message["id"]


def test_snapshot_keeps_completed_calls_and_never_action_required(
    live_server: str,
    http_client: httpx.Client,
    live_runner_id: str,
    mock_llm_server_url: str,
    sample_code_dir: Path,
) -> None:
    # Given a finished client-tool turn
    agent_name, model = _agent(http_client, mock_llm_server_url, "snap", "Use tools.")
    configure_mock_llm(
        mock_llm_server_url,
        [
            {
                "tool_calls": [
                    {
                        "call_id": "call_g",
                        "name": "Glob",
                        "arguments": json.dumps({"pattern": "*.py", "path": str(sample_code_dir)}),
                    }
                ]
            },
            {"text": "done"},
        ],
        key=model,
    )
    session_id, result = _run_with_tunneling(
        http_client, base_url=live_server, agent_name=agent_name, runner_id=live_runner_id, user_input="list"
    )
    assert result.status == "completed"
    statuses = [
        f.data["item"]["status"]
        for f in result.frames
        if f.data.get("type") == "response.output_item.done" and f.data["item"]["type"] == "function_call"
    ]
    assert statuses == ["action_required", "completed"]
    # When the snapshot is read
    snap = _wait_idle(http_client, session_id)
    # Then completed calls and outputs are items, action_required never is
    items = snap["items"]
    assert [i["type"] for i in items] == ["message", "function_call", "function_call_output", "message"]
    assert all(i["status"] == "completed" for i in items)
    call, output = items[1], items[2]
    assert call["data"]["call_id"] == output["data"]["call_id"] == "call_g"
    assert json.loads(call["data"]["arguments"])["pattern"] == "*.py"
    assert "calculator.py" in output["data"]["output"]
    assert snap["last_event_id"] >= max(f.id for f in result.frames if f.id is not None)


def _wait_idle(http_client: httpx.Client, session_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snap = get_session_snapshot(http_client, session_id)
        if snap["status"] != "running":
            return snap
        time.sleep(0.1)
    raise AssertionError(f"session {session_id} still running after {timeout_s}s")
