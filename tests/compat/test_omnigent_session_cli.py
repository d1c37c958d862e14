"""``omnigent session export`` and ``omnigent session import`` (0.19.1) against ``skyloop dev``.

The export is omnigent's portable JSONL (a ``session_meta`` line, then one line
per item); the import recreates it as a new, history-only session. The round
trip must keep a client-tool turn intact, and the next turn must send it to the model.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from tests.compat.test_agent_client_tools import AGENT_TOOLS
from tests.e2e.conftest import (
    get_mock_requests,
    message_event,
    new_mock_agent_session,
    output_event,
    wait_status,
)
from tests.e2e.sse import SseSocket

if TYPE_CHECKING:
    import httpx

    from tests.compat.conftest import Omnigent

pytestmark = pytest.mark.e2e

ENVELOPE = {"record_type", "id", "response_id", "status", "created_at", "created_by"}


def content(item: dict[str, Any]) -> dict[str, Any]:
    """An item without what the store assigns (ids, turn, status, time): what an import must keep."""
    return {k: v for k, v in item.items() if k not in ENVELOPE}


def test_export_then_import_keeps_a_client_tool_turn_and_the_next_turn_sees_it(
    omnigent: Omnigent, http_client: httpx.Client, live_server: str, mock_llm_server_url: str
) -> None:
    # Given a session whose turn called the client tool Read and got its output
    responses = [
        {"tool_calls": [{"call_id": "r1", "name": "Read", "arguments": '{"file_path": "a.py"}'}]},
        {"text": "a.py says hello"},
        {"text": "answered after the import"},
    ]
    _, model, sid = new_mock_agent_session(
        http_client, mock_llm_server_url, "export", responses, extra=AGENT_TOOLS
    )
    events = f"/v1/sessions/{sid}/events"
    assert http_client.post(events, json=message_event("read a.py")).status_code == 202
    with SseSocket(live_server, f"/v1/sessions/{sid}/stream", params={"after": "0"}) as stream:
        stream.read_until(
            lambda f: (f.data.get("item") or {}).get("status") == "action_required", timeout_s=30
        )
    assert http_client.post(events, json=output_event("r1", "1\tprint('hello')")).status_code == 202
    wait_status(http_client, sid, "idle")

    # When omnigent exports it
    path = omnigent.home / "export.jsonl"
    exported = omnigent.cli("session", "export", "--id", sid, "-o", str(path), "--server", live_server)
    assert exported.returncode == 0, exported.stderr + exported.stdout
    assert "Exported 4 item(s)" in exported.stdout
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["record_type"] == "session_meta"
    assert lines[0]["id"] == sid
    assert lines[0]["items"] == []  # the export asked for the snapshot without items
    history = [content(r) for r in lines[1:]]
    assert [h["type"] for h in history] == ["message", "function_call", "function_call_output", "message"]

    # And imports the file into a new session
    imported = omnigent.cli("session", "import", "-i", str(path), "--server", live_server)
    assert imported.returncode == 0, imported.stderr + imported.stdout
    found = re.search(r"Imported 4 item\(s\) into (\S+)", imported.stdout)
    assert found, imported.stdout
    new_sid = found.group(1)
    assert new_sid != sid

    # Then the new session's items are the exported history, and no turn ran
    items = http_client.get(f"/v1/sessions/{new_sid}/items").json()["data"]
    assert [content(i) for i in items] == history
    assert http_client.get(f"/v1/sessions/{new_sid}").json()["status"] == "idle"
    assert len(get_mock_requests(mock_llm_server_url, key=model)) == 2

    # And the next turn's model request carries it: the call and its output included
    assert (
        http_client.post(f"/v1/sessions/{new_sid}/events", json=message_event("and now?")).status_code == 202
    )
    wait_status(http_client, new_sid, "idle")
    sent = get_mock_requests(mock_llm_server_url, key=model)[-1]["input"]
    calls = [i for i in sent if i.get("type") == "function_call"]
    outputs = [i for i in sent if i.get("type") == "function_call_output"]
    assert [(c["call_id"], c["name"], c["arguments"]) for c in calls] == [
        ("r1", "Read", '{"file_path": "a.py"}')
    ]
    assert [(o["call_id"], o["output"]) for o in outputs] == [("r1", "1\tprint('hello')")]
    assert sent[0]["content"][0]["text"] == "read a.py"
    assert sent[-1]["content"][0]["text"] == "and now?"
    final = http_client.get(f"/v1/sessions/{new_sid}/items").json()["data"][-1]
    assert final["content"][0]["text"] == "answered after the import"
