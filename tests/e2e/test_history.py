"""Session history over real HTTP: listing and paging sessions and items, PATCH, DELETE."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tests.e2e.conftest import (
    ECHO_TOOL,
    LOOPBACK,
    StreamWatcher,
    get_mock_requests,
    get_session_snapshot,
    is_call_frame,
    message_event,
    new_mock_agent_session,
    output_event,
    unique,
    wait_session_status,
)


def _json_agent(http_client: httpx.Client, name: str, model: str) -> str:
    resp = http_client.post(
        "/v1/agents",
        json={"name": name, "prompt": "p", "executor": {"harness": "openai-agents", "model": model}},
    )
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


def _new_session(http_client: httpx.Client, agent_id: str) -> str:
    resp = http_client.post("/v1/sessions", json={"agent_id": agent_id})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


def _list(http_client: httpx.Client, path: str, **params: Any) -> dict[str, Any]:
    resp = http_client.get(path, params={k: str(v) for k, v in params.items()})
    assert resp.status_code == 200, resp.text
    page = resp.json()
    assert page["object"] == "list"
    data = page["data"]
    assert page["first_id"] == (data[0]["id"] if data else None)
    assert page["last_id"] == (data[-1]["id"] if data else None)
    return dict(page)


def _all_pages(http_client: httpx.Client, path: str, **params: Any) -> tuple[list[str], list[bool]]:
    """Follow ``after=last_id`` to the end; returns the ids and each page's ``has_more``."""
    ids: list[str] = []
    more: list[bool] = []
    after = None
    while True:
        page = _list(http_client, path, **params, **({"after": after} if after else {}))
        ids += [d["id"] for d in page["data"]]
        more.append(page["has_more"])
        if not page["has_more"]:
            return ids, more
        after = page["last_id"]
        assert len(more) < 20, "paging does not end"


def _run_echo_turn(
    http_client: httpx.Client, base_url: str, session_id: str, text: str, outputs: dict[str, str]
) -> None:
    """Post a message offering Echo and answer each parked call from ``outputs``."""
    events = f"/v1/sessions/{session_id}/events"
    with StreamWatcher(base_url, session_id) as stream:
        assert http_client.post(events, json=message_event(text, [ECHO_TOOL])).status_code == 202
        stream.wait_for(lambda f: is_call_frame(f, "action_required"), count=len(outputs))
        for call_id, output in outputs.items():
            assert http_client.post(events, json=output_event(call_id, output)).status_code == 202
        assert stream.wait_terminal().data["type"] == "response.completed", stream.types()
    wait_session_status(http_client, session_id, {"idle"})


def test_sessions_list_filters_orders_and_pages(http_client: httpx.Client, live_runner_id: str) -> None:
    # Given two versions of one agent name: five sessions of the first, one of the second
    name = unique("lister")
    first = _json_agent(http_client, name, "model-one")
    second = _json_agent(http_client, name, "model-two")
    mine = [_new_session(http_client, first) for _ in range(3)]
    other = _new_session(http_client, second)
    mine += [_new_session(http_client, first) for _ in range(2)]
    newest_first = list(reversed(mine))

    # When the first agent's sessions are paged two at a time, newest first (the default)
    page = _list(http_client, "/v1/sessions", agent_id=first, limit=2)
    # Then each page holds the next two, has_more says whether more follow, after=last_id continues
    assert [d["id"] for d in page["data"]] == newest_first[:2]
    assert page["has_more"] is True
    ids, more = _all_pages(http_client, "/v1/sessions", agent_id=first, limit=2)
    assert ids == newest_first
    assert more == [True, True, False]
    # And the other agent's session never shows up under this agent_id
    assert other not in ids
    # And list entries carry the session fields
    entry = page["data"][0]
    assert entry["agent_id"] == first
    assert entry["agent_name"] == name
    assert entry["status"] == "idle"
    assert entry["runner_id"] == live_runner_id

    # When paged oldest first
    ids, more = _all_pages(http_client, "/v1/sessions", agent_id=first, limit=2, order="asc")
    # Then the same sessions come in creation order
    assert ids == mine
    assert more == [True, True, False]
    # And explicit order=desc is the default order; a page that ends exactly at the end has no more
    assert _list(http_client, "/v1/sessions", agent_id=first, order="desc", limit=5)["has_more"] is False
    assert [d["id"] for d in _list(http_client, "/v1/sessions", agent_id=first, order="desc")["data"]] == (
        newest_first
    )

    # When listed by agent_name
    by_name = [d["id"] for d in _list(http_client, "/v1/sessions", agent_name=name, limit=50)["data"]]
    # Then both versions' sessions appear, newest first
    assert by_name == [*newest_first[:2], other, *newest_first[2:]]
    only_second = _list(http_client, "/v1/sessions", agent_name=name, agent_id=second)["data"]
    assert [d["id"] for d in only_second] == [other]
    # And an agent with no sessions lists nothing
    empty = _list(http_client, "/v1/sessions", agent_id=_json_agent(http_client, unique("lonely"), "m"))
    assert empty["data"] == []
    assert empty["has_more"] is False


def test_items_are_flat_and_page_in_both_orders(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a finished turn with two client calls: user, call, output, call, output, assistant
    calls = [
        {"call_id": "call_i1", "name": "Echo", "arguments": json.dumps({"text": "one"})},
        {"call_id": "call_i2", "name": "Echo", "arguments": json.dumps({"text": "two"})},
    ]
    _agent_id, _model, session_id = new_mock_agent_session(
        http_client, mock_llm_server_url, "items", [{"tool_calls": calls}, {"text": "items done"}]
    )
    _run_echo_turn(http_client, live_server, session_id, "make items", {"call_i1": "o1", "call_i2": "o2"})
    snap_items = get_session_snapshot(http_client, session_id)["items"]
    path = f"/v1/sessions/{session_id}/items"

    # When all items are listed
    page = _list(http_client, path)
    items = page["data"]
    # Then they are the snapshot's items in the same order (oldest first), flattened
    assert [i["id"] for i in items] == [i["id"] for i in snap_items]
    assert len(items) == 6
    assert page["has_more"] is False
    assert [i["type"] for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "message",
    ]
    user, call, output, assistant = items[0], items[1], items[2], items[5]
    assert "data" not in user
    assert user["role"] == "user"
    assert user["content"] == [{"type": "input_text", "text": "make items"}]
    assert call["call_id"] == "call_i1"
    assert call["name"] == "Echo"
    assert json.loads(call["arguments"]) == {"text": "one"}
    assert output["call_id"] == "call_i1"
    assert output["output"] == "o1"
    assert assistant["role"] == "assistant"
    assert assistant["content"][0]["text"] == "items done"
    assert all(i["status"] == "completed" and i["response_id"] for i in items)

    # When paged four at a time
    first = _list(http_client, path, limit=4)
    rest = _list(http_client, path, limit=4, after=first["last_id"])
    # Then the pages split the list, and only the first says has_more
    assert [i["id"] for i in first["data"] + rest["data"]] == [i["id"] for i in items]
    assert first["has_more"] is True
    assert rest["has_more"] is False

    # When listed newest first
    desc = _list(http_client, path, order="desc", limit=2)
    # Then the order is reversed and paging follows it
    assert [i["id"] for i in desc["data"]] == [items[5]["id"], items[4]["id"]]
    assert desc["has_more"] is True
    ids, _ = _all_pages(http_client, path, order="desc", limit=4)
    assert ids == [i["id"] for i in reversed(items)]


def test_patch_title_labels_archived_and_runner(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given an idle session
    agent_id, _model, session_id = new_mock_agent_session(
        http_client, mock_llm_server_url, "patch", [{"text": "back on the runner"}]
    )
    path = f"/v1/sessions/{session_id}"

    # When title, labels and archived are patched
    resp = http_client.patch(path, json={"title": "My title", "labels": {"team": "qa"}, "archived": True})
    # Then the answer and the snapshot reflect them
    assert resp.status_code == 200, resp.text
    for snap in (resp.json(), get_session_snapshot(http_client, session_id)):
        assert snap["id"] == session_id
        assert snap["title"] == "My title"
        assert snap["labels"] == {"team": "qa"}
        assert snap["archived"] is True
    # And the archived session is hidden from the list unless include_archived=true
    listed = _list(http_client, "/v1/sessions", agent_id=agent_id)["data"]
    assert session_id not in [d["id"] for d in listed]
    listed = _list(http_client, "/v1/sessions", agent_id=agent_id, include_archived="true")["data"]
    assert [(d["id"], d["archived"], d["title"]) for d in listed] == [(session_id, True, "My title")]
    # And unarchiving brings it back
    assert http_client.patch(path, json={"archived": False}).status_code == 200
    assert session_id in [d["id"] for d in _list(http_client, "/v1/sessions", agent_id=agent_id)["data"]]

    # When an unknown field or an unknown runner is patched
    unknown = http_client.patch(path, json={"title": "ignored", "colour": "red"})
    bogus = http_client.patch(path, json={"runner_id": "no-such-runner"})
    # Then both are 400 and nothing changes
    assert unknown.status_code == 400, unknown.text
    assert unknown.json()["error"]["code"] == "invalid_input", unknown.text
    assert "colour" in unknown.json()["error"]["message"]
    assert bogus.status_code == 400, bogus.text
    assert bogus.json()["error"]["code"] == "invalid_input", bogus.text
    assert "runner 'no-such-runner' is not registered" in bogus.json()["error"]["message"]
    snap = get_session_snapshot(http_client, session_id)
    assert snap["title"] == "My title"
    assert snap["runner_id"] == live_runner_id

    # When the runner is unbound and a message is posted
    resp = http_client.patch(path, json={"runner_id": ""})
    assert resp.status_code == 200, resp.text
    assert resp.json()["runner_id"] in (None, "")
    assert resp.json()["runner_online"] is False
    before = get_session_snapshot(http_client, session_id)
    refused = http_client.post(f"{path}/events", json=message_event("no runner"))
    # Then it is 503 runner_unavailable and nothing is persisted
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "runner_unavailable"
    after = get_session_snapshot(http_client, session_id)
    assert after["items"] == []
    assert after["last_event_id"] == before["last_event_id"]
    assert after["status"] == "idle"
    assert after["last_task_error"] is None

    # When the default runner is bound again
    resp = http_client.patch(path, json={"runner_id": live_runner_id})
    assert resp.status_code == 200, resp.text
    assert resp.json()["runner_online"] is True, resp.text
    # Then a message runs a turn again
    with StreamWatcher(live_server, session_id) as stream:
        assert http_client.post(f"{path}/events", json=message_event("runner back")).status_code == 202
        assert stream.wait_terminal().data["type"] == "response.completed", stream.types()
    snap = wait_session_status(http_client, session_id, {"idle"})
    assert [i["data"]["role"] for i in snap["items"]] == ["user", "assistant"]


def test_delete_removes_the_session_everywhere(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a session with a finished turn
    agent_id, _model, session_id = new_mock_agent_session(
        http_client, mock_llm_server_url, "delete", [{"text": "soon gone"}]
    )
    path = f"/v1/sessions/{session_id}"
    with StreamWatcher(live_server, session_id) as stream:
        assert http_client.post(f"{path}/events", json=message_event("hello")).status_code == 202
        assert stream.wait_terminal().data["type"] == "response.completed"
    wait_session_status(http_client, session_id, {"idle"})

    # When it is deleted
    resp = http_client.delete(path)
    # Then the answer is the deletion object
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"id": session_id, "object": "conversation.deleted", "deleted": True}
    # And the session, its items, its stream and its events route are gone
    for method, url in (
        ("GET", path),
        ("GET", f"{path}/items"),
        ("GET", f"{path}/stream"),
        ("GET", f"{path}/agent"),
        ("DELETE", path),
    ):
        gone = http_client.request(method, url)
        assert gone.status_code == 404, (method, url, gone.status_code, gone.text[:200])
        assert gone.json()["error"]["code"] == "not_found"
    gone = http_client.post(f"{path}/events", json=message_event("anyone?"))
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "not_found"
    assert session_id not in [
        d["id"]
        for d in _list(http_client, "/v1/sessions", agent_id=agent_id, include_archived="true")["data"]
    ]


def test_delete_unknown_session_is_404(http_client: httpx.Client) -> None:
    # Given ids that name no session / When they are deleted / Then 404 with an error body
    for session_id in ("0" * 32, "f" * 32, "not-a-session-id"):
        resp = http_client.delete(f"/v1/sessions/{session_id}")
        assert resp.status_code == 404, resp.text
        assert resp.json()["error"]["code"] == "not_found"


def test_delete_stops_a_turn_parked_on_a_client_call(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a turn parked on a client call, watched on the stream
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "delete-parked",
        [{"tool_calls": [{"call_id": "call_parked", "name": "Echo", "arguments": "{}"}]}, {"text": "never"}],
    )
    path = f"/v1/sessions/{session_id}"
    stream = StreamWatcher(live_server, session_id).start()
    try:
        assert http_client.post(f"{path}/events", json=message_event("park", [ECHO_TOOL])).status_code == 202
        stream.wait_for(lambda f: is_call_frame(f, "action_required"), what="the parked call")
        mark = stream.count()

        # When the session is deleted while the turn is parked
        resp = http_client.delete(path)
        assert resp.status_code == 200, resp.text
        assert resp.json() == {"id": session_id, "object": "conversation.deleted", "deleted": True}

        # Then posting the call's output is a 404
        late = http_client.post(f"{path}/events", json=output_event("call_parked", "too late"))
        assert late.status_code == 404, late.text
        assert late.json()["error"]["code"] == "not_found"
        # And the turn stops: no further events, no further model call, the session stays gone
        time.sleep(1.0)
        assert stream.stored(mark) == [], [f.data.get("type") for f in stream.stored(mark)]
        assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1
        assert http_client.get(path).status_code == 404
        assert http_client.get(f"{path}/items").status_code == 404
    finally:
        stream.close()


def test_delete_stops_a_turn_waiting_on_the_model(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a turn whose model call is held open by the mock's gate
    _agent_id, model, session_id = new_mock_agent_session(
        http_client, mock_llm_server_url, "delete-running", [{"text": "answer after delete", "block": True}]
    )
    path = f"/v1/sessions/{session_id}"
    stream = StreamWatcher(live_server, session_id).start()
    try:
        assert http_client.post(f"{path}/events", json=message_event("block me")).status_code == 202
        deadline = time.monotonic() + 20
        while not get_mock_requests(mock_llm_server_url, key=model):
            assert time.monotonic() < deadline, "the model call never reached the mock"
            time.sleep(0.05)
        assert LOOPBACK.get(f"{mock_llm_server_url}/gate/pending", timeout=5).json()["pending"] is True
        assert get_session_snapshot(http_client, session_id)["status"] == "running"
        mark = stream.count()

        # When the session is deleted mid-call and the model then answers
        resp = http_client.delete(path)
        assert resp.status_code == 200, resp.text
        for _ in range(10):  # the oldest gate is released first: open them all, ours among them
            if not LOOPBACK.post(f"{mock_llm_server_url}/gate/release", timeout=5).json()["released"]:
                break

        # Then the late answer is dropped: no further events, and the session stays gone
        time.sleep(1.0)
        assert stream.stored(mark) == [], [f.data.get("type") for f in stream.stored(mark)]
        assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1
        assert http_client.get(path).status_code == 404
        assert http_client.get(f"{path}/items").status_code == 404
    finally:
        stream.close()
