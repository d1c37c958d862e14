"""omnigent's create, PATCH and list fields on skyloop's routes, with omnigent's meaning."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.conftest import new_mock_agent_session

if TYPE_CHECKING:
    import httpx

pytestmark = pytest.mark.e2e


def _ids(http_client: httpx.Client, **params: Any) -> list[str]:
    resp = http_client.get("/v1/sessions", params=params)
    assert resp.status_code == 200, resp.text
    return [s["id"] for s in resp.json()["data"]]


def test_create_stores_omnigents_fields_and_ignores_the_host_only_ones(
    http_client: httpx.Client, mock_llm_server_url: str
) -> None:
    agent_id, _, _ = new_mock_agent_session(http_client, mock_llm_server_url, "wire-create", [])
    body = {
        "agent_id": agent_id,
        "workspace": "/home/me/project",
        "reasoning_effort": "high",
        "model_override": "gpt-5-mini",
        "title": "t",
        "labels": {"a": "1"},
        "terminal_launch_args": ["--x"],
        "mcp_registry_services": [],
        "host_type": "external",
        "project_id": "p1",
    }
    resp = http_client.post("/v1/sessions", json=body)
    assert resp.status_code == 201, resp.text
    snap = resp.json()
    assert (snap["workspace"], snap["reasoning_effort"], snap["model_override"]) == (
        "/home/me/project",
        "high",
        "gpt-5-mini",
    )
    assert snap["llm_model"].startswith("mock-")
    assert snap["harness"] == "openai-agents"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"host_type": "managed"}, "managed"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"model_override": "bad model!"}, "model_override"),
        ({"no_such_field": 1}, "no_such_field"),
        ({"initial_items": [{"type": "interrupt"}]}, "initial_items"),
    ],
)
def test_bad_create_is_a_400_and_writes_nothing(
    http_client: httpx.Client, mock_llm_server_url: str, extra: dict[str, Any], needle: str
) -> None:
    agent_id, _, first = new_mock_agent_session(http_client, mock_llm_server_url, "wire-bad", [])
    resp = http_client.post("/v1/sessions", json={"agent_id": agent_id, **extra})
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["code"] == "invalid_input"
    assert needle in resp.json()["error"]["message"]
    assert _ids(http_client, agent_id=agent_id, include_archived="true") == [first]


def test_initial_items_start_the_first_turn(http_client: httpx.Client, mock_llm_server_url: str) -> None:
    agent_id, _, _ = new_mock_agent_session(http_client, mock_llm_server_url, "wire-init", [{"text": "hi!"}])
    message = {"type": "message", "data": {"role": "user", "content": [{"type": "input_text", "text": "yo"}]}}
    resp = http_client.post("/v1/sessions", json={"agent_id": agent_id, "initial_items": [message]})
    assert resp.status_code == 201, resp.text
    sid = resp.json()["id"]
    deadline = time.monotonic() + 30
    while (snap := http_client.get(f"/v1/sessions/{sid}").json())["status"] != "idle" or len(
        snap["items"]
    ) < 2:
        assert time.monotonic() < deadline, snap
        time.sleep(0.1)
    assert snap["items"][-1]["data"]["content"][0]["text"] == "hi!"


def test_patch_takes_omnigents_fields(http_client: httpx.Client, mock_llm_server_url: str) -> None:
    _, _, sid = new_mock_agent_session(http_client, mock_llm_server_url, "wire-patch", [])
    path = f"/v1/sessions/{sid}"
    assert http_client.patch(path, json={"labels": {"a": "1", "b": "2"}}).status_code == 200
    resp = http_client.patch(
        path,
        json={
            "labels": {"b": "", "c": "3"},
            "reasoning_effort": "low",
            "model_override": "m-1",
            "silent": True,
        },
    )
    assert resp.status_code == 200, resp.text
    snap = resp.json()
    assert snap["labels"] == {"a": "1", "c": "3"}  # merged; an empty value removes the key, as in omnigent
    assert (snap["reasoning_effort"], snap["model_override"]) == ("low", "m-1")
    snap = http_client.patch(path, json={"reasoning_effort": "default", "model_override": "reset"}).json()
    assert (snap["reasoning_effort"], snap["model_override"]) == (None, None)
    bad = http_client.patch(path, json={"reasoning_effort": "ludicrous"})
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_input"
    assert http_client.get(path).json()["labels"] == {"a": "1", "c": "3"}


def test_list_visibility_and_sort_by(http_client: httpx.Client, mock_llm_server_url: str) -> None:
    agent_id, _, live = new_mock_agent_session(http_client, mock_llm_server_url, "wire-list", [])
    archived = http_client.post("/v1/sessions", json={"agent_id": agent_id}).json()["id"]
    newest = http_client.post("/v1/sessions", json={"agent_id": agent_id}).json()["id"]
    assert http_client.patch(f"/v1/sessions/{archived}", json={"archived": True}).status_code == 200
    q = {"agent_id": agent_id}
    assert _ids(http_client, **q) == [newest, live]
    assert _ids(http_client, **q, visibility="all") == [newest, live]
    assert _ids(http_client, **q, visibility="all", include_archived="true") == [newest, archived, live]
    assert _ids(http_client, **q, visibility="archived") == [archived]
    assert _ids(http_client, **q, visibility="active", include_archived="true") == [newest, live]
    assert _ids(http_client, **q, visibility="mine") == [newest, live]
    assert _ids(http_client, **q, visibility="shared") == []
    time.sleep(1.1)  # updated_at is in seconds
    assert http_client.patch(f"/v1/sessions/{live}", json={"title": "touched"}).status_code == 200
    assert _ids(http_client, **q, sort_by="updated_at") == [live, newest]
    assert _ids(http_client, **q, sort_by="updated_at", order="asc") == [newest, live]
    assert _ids(http_client, **q, sort_by="updated_at", limit=1, after=live) == [newest]
    assert http_client.get("/v1/sessions", params={"visibility": "everyone"}).status_code == 400
