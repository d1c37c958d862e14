"""omnigent's own SDK and CLI (0.19.1, from PyPI) against ``skyloop dev``, unchanged.

Each flow drives the real package in its Python 3.12 venv and checks what
skyloop stored or what the client printed, so a flow that breaks fails here.
"""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING

import pytest

from tests.compat.test_agent_client_tools import AGENT_TOOLS
from tests.e2e.conftest import (
    get_mock_requests,
    input_texts,
    message_event,
    new_mock_agent_session,
    release_gate,
    wait_for_gate,
    wait_status,
)

if TYPE_CHECKING:
    import httpx

    from tests.compat.conftest import Omnigent

pytestmark = pytest.mark.e2e


def test_sdk_create_from_agent_id_runs_client_tools_and_sees_the_interrupt(
    omnigent: Omnigent, http_client: httpx.Client, live_server: str, mock_llm_server_url: str
) -> None:
    # Given an agent declaring Read and Note as client tools, scripted to call Read, then to hang
    responses = [
        {"tool_calls": [{"call_id": "r1", "name": "Read", "arguments": '{"file_path": "a.py"}'}]},
        {"text": "a.py says hello"},
        {"text": "never sent", "block": True},
    ]
    agent_id, _, _ = new_mock_agent_session(
        http_client, mock_llm_server_url, "sdk", responses, extra=AGENT_TOOLS
    )
    # When omnigent's SDK creates a session by agent id and sends two messages, cancelling the second
    out = omnigent.script("sdk_flow.py", live_server, agent_id)
    wait_for_gate(mock_llm_server_url)  # the cancelled turn's model call is still held: let it go
    release_gate(mock_llm_server_url)

    # Then the SDK ran the client tool itself and the first turn completed
    assert out["ran"] == [{"tool": "Read", "file_path": "a.py"}]
    assert out["first"][-1] == "CompletedEvent:response.completed", out["first"]
    assert "OutputItemDoneEvent:response.output_item.done" in out["first"]
    # And the interrupt reached it as omnigent's typed events
    assert "session.interrupted" in out["second"] or "response.cancelled" in out["second"], out["second"]
    assert out["second"][-1] == "response.cancelled", out["second"]
    assert out["reasoning_effort"] == "low"
    stored = http_client.get(f"/v1/sessions/{out['session_id']}").json()
    outputs = [i for i in stored["items"] if i["type"] == "function_call_output"]
    assert outputs[0]["data"]["output"] == "1\tcontents of a.py"


def test_cli_one_shot_run_against_the_server(
    omnigent: Omnigent, http_client: httpx.Client, live_server: str, mock_llm_server_url: str
) -> None:
    # Given an agent whose session is the newest (omnigent's CLI picks agents from sessions)
    agent_id, _, _ = new_mock_agent_session(
        http_client, mock_llm_server_url, "cli-run", [{"text": "pong from skyloop"}]
    )
    # When `omnigent run --server URL -p ...` runs headless
    done = omnigent.cli("run", "--server", live_server, "-p", "ping", stdin="1\n", timeout=90)
    # Then it prints the model's answer and exits 0
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "pong from skyloop" in done.stdout
    listed = http_client.get("/v1/sessions", params={"agent_id": agent_id, "limit": 5}).json()["data"]
    assert any(s["workspace"] == str(omnigent.home) for s in listed), listed


def test_cli_agent_add_list_remove(omnigent: Omnigent, http_client: httpx.Client, live_server: str) -> None:
    name = f"cli-agent-{omnigent.home.parent.name[-6:]}".replace("_", "-").lower()
    source = omnigent.home / f"{name}.yaml"
    source.write_text(
        textwrap.dedent(
            f"""\
            name: {name}
            prompt: You help.
            executor: {{harness: openai-agents, model: gpt-4.1-mini}}
            tools:
              Read: {{type: function, runtime: client, description: Read a file}}
            """
        )
    )
    # When the agent is added twice, listed, and removed
    first = omnigent.cli("agent", "add", str(source), "--server", live_server)
    second = omnigent.cli("agent", "add", str(source), "--server", live_server)
    listed = omnigent.cli("agent", "list", "--server", live_server)
    removed = omnigent.cli("agent", "remove", name, "--server", live_server, "--yes")
    after = omnigent.cli("agent", "list", "--server", live_server)

    # Then each step did what omnigent says it does, on skyloop's agents API
    assert first.returncode == 0, first.stderr
    assert f"Installed {name} (version 1" in first.stdout
    assert "(version 2" in second.stdout
    assert listed.returncode == 0, listed.stderr
    assert name in listed.stdout
    assert removed.returncode == 0, removed.stderr + removed.stdout
    assert f"Removed {name}" in removed.stdout
    assert name not in after.stdout
    found = http_client.get("/v1/agents", params={"name": name}).json()["data"]
    assert found == []


def test_server_info_validates_against_omnigents_model(omnigent: Omnigent, live_server: str) -> None:
    out = omnigent.script("server_info.py", live_server)
    assert out == {"agent_install": True, "version": out["version"], "valid": True}
    assert json.dumps(out)


def test_cli_one_shot_resume_continues_the_session(
    omnigent: Omnigent, http_client: httpx.Client, live_server: str, mock_llm_server_url: str
) -> None:
    # Given a session with one finished turn
    _, model, sid = new_mock_agent_session(
        http_client, mock_llm_server_url, "cli-resume", [{"text": "first answer"}, {"text": "resumed answer"}]
    )
    assert http_client.post(f"/v1/sessions/{sid}/events", json=message_event("first")).status_code == 202
    wait_status(http_client, sid, "idle")
    name = http_client.get(f"/v1/sessions/{sid}").json()["agent_name"]
    # When `omnigent run --server URL --resume ID -p ...` runs (the agent picked by name)
    done = omnigent.cli(
        "run", "--server", live_server, "--resume", sid, "-p", "again", stdin=f"{name}\n", timeout=90
    )
    # Then the turn ran on that session, its history sent to the model
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "resumed answer" in done.stdout
    sent = get_mock_requests(mock_llm_server_url, key=model)[-1]
    assert input_texts(sent) == ["first", "first answer", "again"]
