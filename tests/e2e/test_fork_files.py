"""Forks, imports and session files over real HTTP against ``skyloop dev`` and the scripted model."""

from __future__ import annotations

from typing import Any

import httpx

from tests.e2e.conftest import get_mock_requests, message_event, new_mock_agent_session, wait_session_status
from tests.e2e.sse import run_turn

MiB = 1024 * 1024
DEFAULT_FILE_LIMIT = 4 * MiB  # SKYLOOP_FILE_MAX_BYTES's default


def _turn(http_client: httpx.Client, base_url: str, session_id: str, text: str) -> None:
    result = run_turn(
        http_client,
        base_url=base_url,
        session_id=session_id,
        post=lambda: http_client.post(
            f"/v1/sessions/{session_id}/events", json=message_event(text)
        ).raise_for_status(),
    )
    assert result.status == "completed", result
    wait_session_status(http_client, session_id, {"idle"})


def _sent(request: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for entry in request["input"]:
        content = entry.get("content")
        text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content or [])
        out.append((entry.get("role") or entry.get("type"), text))
    return out


def test_fork_then_import_feed_the_next_turn(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    agent_id, model, source = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "fork",
        [{"text": "noted"}, {"text": "from the fork"}, {"text": "imp"}],
    )
    _turn(http_client, live_server, source, "my name is Ada")
    # When the session is forked over HTTP
    fork = http_client.post(f"/v1/sessions/{source}/fork", json={})
    assert fork.status_code == 201, fork.text
    fork_id = fork.json()["id"]
    assert fork.json()["parent_session_id"] == source
    children = http_client.get(f"/v1/sessions/{source}/child_sessions").json()
    assert [c["id"] for c in children["data"]] == [fork_id]
    assert children["data"][0]["object"] == "child_session"
    # Then its next turn sends the model the copied history
    _turn(http_client, live_server, fork_id, "who am I?")
    assert _sent(get_mock_requests(mock_llm_server_url, key=model)[-1]) == [
        ("user", "my name is Ada"),
        ("assistant", "noted"),
        ("user", "who am I?"),
    ]
    # When a history is imported as a new session
    items = http_client.get(f"/v1/sessions/{fork_id}/items").json()["data"]
    initial = [
        {"type": "message", "data": {"role": i["role"], "content": i["content"], "model": i.get("model")}}
        for i in items
    ]
    imported = http_client.post(
        "/v1/sessions", json={"agent_id": agent_id, "initial_items": initial, "host_type": "external"}
    )
    assert imported.status_code == 201, imported.text
    imported_id = imported.json()["id"]
    assert len(http_client.get(f"/v1/sessions/{imported_id}/items").json()["data"]) == 4
    # Then its next turn sends that history too
    _turn(http_client, live_server, imported_id, "and now?")
    assert [role for role, _ in _sent(get_mock_requests(mock_llm_server_url, key=model)[-1])] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    # And a bad import names the item and creates nothing
    before = http_client.get("/v1/sessions", params={"limit": "100"}).json()["data"]
    bad = http_client.post(
        "/v1/sessions", json={"agent_id": agent_id, "initial_items": [{"type": "x"}], "host_type": "external"}
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "initial_items[0]"
    assert http_client.get("/v1/sessions", params={"limit": "100"}).json()["data"] == before


def test_files_at_the_size_limit_pass_and_one_byte_more_is_413(
    http_client: httpx.Client, mock_llm_server_url: str
) -> None:
    _agent, _model, sid = new_mock_agent_session(http_client, mock_llm_server_url, "files", [])
    path = f"/v1/sessions/{sid}/resources/files"
    big = bytes(range(256)) * (DEFAULT_FILE_LIMIT // 256)
    # When a file of exactly the per-file limit is uploaded, it is stored and downloads intact
    ok = http_client.post(path, files={"file": ("big.bin", big, "application/octet-stream")})
    assert ok.status_code == 201, ok.text
    fid = ok.json()["id"]
    assert ok.json()["metadata"]["bytes"] == DEFAULT_FILE_LIMIT
    assert http_client.get(f"{path}/{fid}/content").content == big
    # When one byte more is uploaded, it is 413 naming the limit, and nothing is added
    over = http_client.post(path, files={"file": ("over.bin", big + b"x", "application/octet-stream")})
    assert over.status_code == 413, over.text
    assert over.json()["error"]["code"] == "file_too_large"
    assert [f["id"] for f in http_client.get(path).json()["data"]] == [fid]
    # And a raw upload works too, and deleting removes it
    raw = http_client.post(
        path, params={"filename": "note.txt"}, content=b"# hi", headers={"content-type": ""}
    )
    assert raw.status_code == 201, raw.text
    assert raw.json()["metadata"]["content_type"] == "text/plain"
    assert http_client.delete(f"{path}/{raw.json()['id']}").json()["deleted"] is True
    assert http_client.get(f"{path}/{raw.json()['id']}").status_code == 404
