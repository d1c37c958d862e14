"""Forks, child sessions and session import through the API function, with real turns on moto.

Each case checks the new session's history three ways: the snapshot, ``/items``,
and what the scripted model is sent on the next turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps
from skyloop.api.responses import ChildSessionSummary

if TYPE_CHECKING:
    from tests.integration.conftest import Api, MockLLM, Stack


def _turn(aws: Stack, api: Api, session_id: str, text: str) -> str:
    """Post a message, wait for the turn to end; the turn's response id."""
    before = aws.store.get_session(session_id).last_seq
    assert api.post_message(session_id, text).status == 202
    session = aws.wait_for_status(session_id, "idle", after_seq=before + 1)
    assert session.last_response_id
    return session.last_response_id


def _texts(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each message the model was sent."""
    out = []
    for entry in request["input"]:
        content = entry.get("content")
        text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content or [])
        out.append((entry.get("role") or entry.get("type"), text))
    return out


def _session_rows(aws: Stack) -> int:
    r = aws.ddb.scan(
        TableName=aws.table_name,
        FilterExpression="kind = :k",
        ExpressionAttributeValues={":k": {"S": "session"}},
        Select="COUNT",
    )
    return int(r["Count"])


# ----------------------------------------------------------------------------- fork
def test_a_fork_copies_the_history_and_the_next_turn_sends_it(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    # Given a session with one finished turn
    key = mock_llm.script({"text": "first answer"}, {"text": "fork answer"})
    source = aws.new_session(key)
    _turn(aws, api, source.id, "remember 42")
    source_items = api.get(f"/v1/sessions/{source.id}/items").body["data"]
    # When it is forked
    r = api.post_json(f"/v1/sessions/{source.id}/fork", {})
    # Then the fork is a new idle session of the same agent, naming its parent, with the same items
    assert r.status == 201, r.body
    fork = r.body
    assert fork["id"] != source.id
    assert (fork["agent_id"], fork["status"], fork["parent_session_id"]) == (
        source.agent_id,
        "idle",
        source.id,
    )
    assert fork["title"] == f"Fork of {source.id[:16]}…"
    fork_items = api.get(f"/v1/sessions/{fork['id']}/items").body["data"]

    def same(item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if k != "id"}

    assert [same(i) for i in fork_items] == [same(i) for i in source_items]
    assert {i["id"] for i in fork_items}.isdisjoint({i["id"] for i in source_items})
    assert [i["id"] for i in fork["items"]] == [i["id"] for i in fork_items]
    # And the parent lists it as its child, the fork has none, and the source is untouched
    children = api.get(f"/v1/sessions/{source.id}/child_sessions").body
    assert [c["id"] for c in children["data"]] == [fork["id"]]
    ChildSessionSummary.model_validate(children["data"][0])
    assert children["data"][0]["parent_session_id"] == source.id
    assert api.get(f"/v1/sessions/{fork['id']}/child_sessions").body["data"] == []
    assert api.get(f"/v1/sessions/{source.id}/items").body["data"] == source_items
    # When the fork takes a turn, the model is sent the copied history first
    _turn(aws, api, fork["id"], "what was it?")
    sent = _texts(mock_llm.requests(key)[-1])
    assert sent == [("user", "remember 42"), ("assistant", "first answer"), ("user", "what was it?")]


def test_fork_up_to_a_response_keeps_only_what_came_before(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    key = mock_llm.script({"text": "one"}, {"text": "two"}, {"text": "three"})
    source = aws.new_session(key)
    first = _turn(aws, api, source.id, "q1")
    _turn(aws, api, source.id, "q2")
    # When forked up to the first response
    r = api.post_json(f"/v1/sessions/{source.id}/fork", {"up_to_response_id": first, "title": "branch"})
    assert r.status == 201, r.body
    # Then it holds that response's items and what came before, nothing after
    items = api.get(f"/v1/sessions/{r.body['id']}/items").body["data"]
    assert [(i["type"], i["role"]) for i in items] == [("message", "user"), ("message", "assistant")]
    assert items[-1]["response_id"] == first
    assert r.body["title"] == "branch"
    # And the next turn builds on that point
    _turn(aws, api, r.body["id"], "q2 again")
    assert _texts(mock_llm.requests(key)[-1]) == [("user", "q1"), ("assistant", "one"), ("user", "q2 again")]


def test_fork_of_an_unknown_response_is_400_and_writes_nothing(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    source = aws.new_session(mock_llm.script())
    before = _session_rows(aws)
    r = api.post_json(f"/v1/sessions/{source.id}/fork", {"up_to_response_id": "resp_nope"})
    assert r.status == 400
    assert r.error()["param"] == "up_to_response_id"
    bad = api.post_json(f"/v1/sessions/{source.id}/fork", {"agent": "x"})
    assert bad.status == 400
    assert _session_rows(aws) == before


def test_a_running_turn_is_forked_up_to_its_last_finished_response(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    # Given a session with one finished turn and a second one held inside its model call
    key = mock_llm.script({"text": "done"}, {"text": "later", "block": True})
    source = aws.new_session(key)
    finished = _turn(aws, api, source.id, "first")
    assert api.post_message(source.id, "second").status == 202
    mock_llm.wait_for_gate()
    running = aws.store.get_session(source.id)
    assert running.status == "running"
    try:
        # When it is forked: only the finished turn is copied
        r = api.post_json(f"/v1/sessions/{source.id}/fork", {})
        assert r.status == 201, r.body
        items = api.get(f"/v1/sessions/{r.body['id']}/items").body["data"]
        assert [i.get("response_id") for i in items][-1] == finished
        assert len(items) == 2
        # And naming the running response is a conflict
        conflict = api.post_json(
            f"/v1/sessions/{source.id}/fork", {"up_to_response_id": running.active_response_id}
        )
        assert conflict.status == 409
        assert conflict.error()["code"] == "conflict"
    finally:
        mock_llm.release_gate()
        aws.wait_for_status(source.id, "idle", after_seq=running.last_seq)


def test_fork_respects_the_session_quota(aws: Stack, api: Api, mock_llm: MockLLM, fresh_table: str) -> None:
    source = aws.new_session(mock_llm.script())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SKYLOOP_QUOTA_SESSIONS", "1")
        deps.get_settings.cache_clear()
        try:
            r = api.post_json(f"/v1/sessions/{source.id}/fork", {})
        finally:
            mp.undo()
            deps.get_settings.cache_clear()
    assert r.status == 429
    assert r.error()["code"] == "quota_exceeded"
    assert api.get(f"/v1/sessions/{source.id}/child_sessions").body["data"] == []


# ---------------------------------------------------------------------------- import
IMPORTED = [
    {"type": "message", "data": {"role": "user", "content": [{"type": "input_text", "text": "list files"}]}},
    {
        "type": "function_call",
        "data": {"name": "Glob", "arguments": '{"pattern": "*"}', "call_id": "call_a", "agent": "old"},
    },
    {"type": "function_call_output", "data": {"call_id": "call_a", "output": "a.py\nb.py"}},
    {
        "type": "message",
        "data": {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "two files"}],
            "model": "old",
        },
    },
]


def test_an_imported_history_is_readable_and_sent_to_the_model(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    key = mock_llm.script({"text": "still two"})
    agent = aws.register_agent(key)
    # When a session is created with initial_items (omnigent's import)
    r = api.post_json(
        "/v1/sessions", {"agent_id": agent.id, "initial_items": IMPORTED, "host_type": "external"}
    )
    # Then it is idle with exactly those items, and no turn ran
    assert r.status == 201, r.body
    sid = r.body["id"]
    assert r.body["status"] == "idle"
    assert r.body["parent_session_id"] is None
    assert [i["type"] for i in r.body["items"]] == [e["type"] for e in IMPORTED]
    items = api.get(f"/v1/sessions/{sid}/items").body["data"]
    assert [i["type"] for i in items] == [e["type"] for e in IMPORTED]
    assert items[1]["name"] == "Glob"
    assert items[1]["model"] == "old"
    assert items[2]["output"] == "a.py\nb.py"
    assert items[3]["content"] == [{"type": "output_text", "text": "two files"}]
    assert mock_llm.requests(key) == []
    # When a turn runs, the model is sent the imported history, calls and outputs included
    _turn(aws, api, sid, "how many?")
    (request,) = mock_llm.requests(key)
    kinds = [e.get("type") or e.get("role") for e in request["input"]]
    assert kinds == ["message", "function_call", "function_call_output", "assistant", "message"]
    assert request["input"][1]["call_id"] == request["input"][2]["call_id"] == "call_a"


@pytest.mark.parametrize(
    ("items", "index", "needle"),
    [
        ([{"type": "reasoning", "data": {}}], 0, "cannot be imported"),
        ([IMPORTED[0], {"type": "message", "data": {"role": "user"}}], 1, "content"),
        ([IMPORTED[0], IMPORTED[2]], 1, "no function_call before it"),
        ([IMPORTED[1], IMPORTED[1]], 1, "used twice"),
        ([{"type": "message", "data": {"role": "system", "content": []}}], 0, "role"),
    ],
)
def test_a_bad_imported_item_is_400_naming_its_index_and_writes_nothing(
    aws: Stack, api: Api, mock_llm: MockLLM, items: list[dict[str, Any]], index: int, needle: str
) -> None:
    agent = aws.register_agent(mock_llm.script())
    before = _session_rows(aws)
    r = api.post_json("/v1/sessions", {"agent_id": agent.id, "initial_items": items, "host_type": "external"})
    assert r.status == 400, r.body
    err = r.error()
    assert err["code"] == "invalid_input"
    assert err["param"] == f"initial_items[{index}]"
    assert f"initial_items[{index}]" in err["message"]
    assert needle in err["message"]
    assert _session_rows(aws) == before


def test_a_managed_host_is_refused(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    agent = aws.register_agent(mock_llm.script())
    r = api.post_json("/v1/sessions", {"agent_id": agent.id, "host_type": "managed"})
    assert r.status == 400
    assert "host_type" in r.error()["message"]
