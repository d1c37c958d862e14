"""Client tools an agent declares (``runtime: client``) are offered on every turn and park like any."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.conftest import (
    function_tool,
    get_mock_requests,
    message_event,
    new_mock_agent_session,
    output_event,
    wait_status,
)
from tests.e2e.sse import SseSocket

if TYPE_CHECKING:
    import httpx

pytestmark = pytest.mark.e2e

READ = {
    "type": "function",
    "runtime": "client",
    "description": "Read a file on the user's machine",
    "parameters": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}},
        "required": ["file_path"],
    },
}
AGENT_TOOLS = {"tools": {"Read": READ, "Note": {"type": "function", "runtime": "client"}}}


def _offered(mock_url: str, model: str) -> list[dict[str, Any]]:
    return list(get_mock_requests(mock_url, key=model)[-1].get("tools") or [])


def test_declared_client_tools_are_offered_park_and_resume(
    http_client: httpx.Client, mock_llm_server_url: str, live_server: str
) -> None:
    # Given an agent declaring Read and Note as client tools
    responses = [
        {"tool_calls": [{"call_id": "r1", "name": "Read", "arguments": '{"file_path": "a.py"}'}]},
        {"text": "read it"},
        {"text": "second turn"},
    ]
    agent_id, model, sid = new_mock_agent_session(
        http_client, mock_llm_server_url, "decl-tools", responses, extra=AGENT_TOOLS
    )
    # Then the agent object lists them as omnigent's SDK reads them
    agent = http_client.get(f"/v1/sessions/{sid}/agent").json()
    assert {t["name"]: t["runtime"] for t in agent["tools"]} == {"Read": "client", "Note": "client"}
    assert agent["tools"][0]["parameters"] == READ["parameters"]

    # When a message without tools asks, the model is offered both and its Read call parks the turn
    events = f"/v1/sessions/{sid}/events"
    assert http_client.post(events, json=message_event("read a.py")).status_code == 202
    with SseSocket(live_server, f"/v1/sessions/{sid}/stream", params={"after": "0"}) as stream:
        parked = stream.read_until(
            lambda f: (f.data.get("item") or {}).get("status") == "action_required", timeout_s=30
        )
    assert parked.data["item"]["name"] == "Read"
    offered = {t["name"]: t for t in _offered(mock_llm_server_url, model)}
    assert set(offered) == {"Read", "Note"}
    assert offered["Read"]["description"] == READ["description"]
    assert http_client.post(events, json=output_event("r1", "1\tprint('hi')")).status_code == 202
    wait_status(http_client, sid, "idle")

    # And a message's own tool of the same name wins, the others stay offered
    mine = function_tool("Read", "the message's Read")
    assert http_client.post(events, json=message_event("again", [mine])).status_code == 202
    wait_status(http_client, sid, "idle")
    offered = {t["name"]: t for t in _offered(mock_llm_server_url, model)}
    assert set(offered) == {"Read", "Note"}
    assert offered["Read"]["description"] == "the message's Read"
    assert agent_id


def test_a_bad_declared_client_tool_is_refused_at_registration(http_client: httpx.Client) -> None:
    spec = {
        "name": "bad-client-tool",
        "executor": {"model": "m"},
        "tools": {"Read": {"type": "function", "runtime": "client", "parameters": {"type": "string"}}},
    }
    resp = http_client.post("/v1/agents", json=spec)
    assert resp.status_code == 400, resp.text
    assert "tools.Read.parameters" in resp.json()["error"]["message"]
