"""Steering: a message posted while a turn runs joins it at the next model call.

Real processes (``skyloop dev`` and ``skyloop mock-llm``), real sockets.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import (
    function_tool,
    get_mock_requests,
    get_session_snapshot,
    input_texts,
    message_event,
    release_gate,
    scripted_session,
    wait_for_gate,
    wait_status,
)
from tests.e2e.sse import SseSocket, TimedFrame, is_status, of_type

pytestmark = pytest.mark.e2e


def open_stream(base_url: str, session_id: str) -> SseSocket:
    stream = SseSocket(base_url, f"/v1/sessions/{session_id}/stream")
    assert stream.status == 200, stream.status
    first = stream.next_frame(10)
    assert first is not None, first
    assert first.data["type"] == "session.heartbeat", first
    return stream


def post_event(http_client: httpx.Client, session_id: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = http_client.post(f"/v1/sessions/{session_id}/events", json=body)
    assert resp.status_code == 202, f"{resp.status_code} {resp.text[:300]}"
    return dict(resp.json())


def is_action_required(frame: TimedFrame) -> bool:
    item = frame.data.get("item") or {}
    return frame.data.get("type") == "response.output_item.done" and item.get("status") == "action_required"


def assistant_texts(frames: list[TimedFrame]) -> list[str]:
    return [
        f.data["item"]["content"][0]["text"]
        for f in frames
        if f.data["type"] == "response.output_item.done" and f.data["item"]["type"] == "message"
    ]


def post_joining_message(http_client: httpx.Client, session_id: str, body: dict[str, Any]) -> str:
    """Post a message into the running turn; check it is persisted at once, with its grouping id."""
    answer = post_event(http_client, session_id, body)
    assert answer["queued"] is True, answer
    assert answer["item_id"], answer
    snap = get_session_snapshot(http_client, session_id)
    assert snap["status"] == "running"
    mine = [i for i in snap["items"] if i["id"] == answer["item_id"]]
    assert len(mine) == 1, snap["items"]
    assert str(mine[0]["response_id"]).startswith("turn_"), mine[0]
    assert mine[0]["data"]["role"] == "user"
    assert snap["last_event_id"] >= 1
    return str(answer["item_id"])


def test_message_posted_during_a_turn_is_persisted_and_reaches_the_next_model_call(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if a message posted into a running turn were rejected or only kept in memory
    # (not in the snapshot at once), started a second concurrent turn, or never reached the
    # model (the request after the tool output would not contain it).
    # Given a turn parked on a client tool call
    session_id, model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="steer-next",
        responses=[
            {"tool_calls": [{"call_id": "call_steer", "name": "Glob", "arguments": {"pattern": "*"}}]},
            {"text": "I saw the tool output and your extra note"},
        ],
    )
    with open_stream(live_server, session_id) as stream:
        post_event(http_client, session_id, message_event("list files", tools=[function_tool("Glob")]))
        stream.read_until(is_action_required)
        # When the user sends a second message before the call is answered
        extra_id = post_joining_message(
            http_client, session_id, message_event("STEER-NOTE: only the python files")
        )
        consumed = stream.read_until(of_type("session.input.consumed"))
        assert consumed.data["data"]["item_id"] == extra_id
        # Then no new turn starts and the model is not called while the turn is parked
        quiet = [f for f in stream.read_for(0.3) if f.id is not None]
        assert not quiet, [f.data["type"] for f in quiet]
        assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1
        # When the client answers the call
        post_event(
            http_client,
            session_id,
            {"type": "function_call_output", "data": {"call_id": "call_steer", "output": "a.py\nb.txt"}},
        )
        stream.read_until(is_status("idle"))
    # Then the next model request carries the second message (and the tool output)
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2, len(requests)
    assert "STEER-NOTE: only the python files" not in input_texts(requests[0])
    assert "STEER-NOTE: only the python files" in input_texts(requests[1])
    outputs = [i for i in requests[1]["input"] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_steer"]
    # And it was one turn: one running status, one completion, then idle
    types = [f.data["type"] for f in stream.stored()]
    statuses = [f.data["status"] for f in stream.stored() if f.data["type"] == "session.status"]
    assert statuses == ["running", "idle"], statuses
    assert types.count("response.completed") == 1
    assert assistant_texts(stream.frames) == ["I saw the tool output and your extra note"]


def test_message_posted_during_the_last_model_call_continues_without_going_idle(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if a message arriving during the turn's last model call were dropped (the turn
    # would finish idle with the message unanswered), or answered only after the session
    # went idle (a visible idle gap), or if either answer were lost.
    # Given a turn whose (only) model call is held at the mock's gate
    session_id, model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="steer-cont",
        responses=[
            {"text": "answer to the first question", "block": True, "stream": True},
            {"text": "answer to the follow-up", "stream": True},
        ],
    )
    with open_stream(live_server, session_id) as stream:
        post_event(http_client, session_id, message_event("first question"))
        wait_for_gate(mock_llm_server_url)
        # When the user sends a follow-up while that call is still running
        follow_id = post_joining_message(http_client, session_id, message_event("FOLLOW-UP: and then?"))
        release_gate(mock_llm_server_url)
        # Then the turn answers both before the session goes idle
        stream.read_until(is_status("idle"), timeout_s=30)
        late = [f for f in stream.read_for(0.5) if f.id is not None]
    frames = stream.stored()
    assert not late, [f.data["type"] for f in late]
    assert assistant_texts(frames) == ["answer to the first question", "answer to the follow-up"]
    first_done = next(n for n, f in enumerate(frames) if assistant_texts([f]))
    second_done = max(n for n, f in enumerate(frames) if assistant_texts([f]))
    between = frames[first_done:second_done]
    assert not [f for f in between if f.data["type"] == "session.status"], [f.data["type"] for f in between]
    statuses = [f.data["status"] for f in frames if f.data["type"] == "session.status"]
    assert statuses == ["running", "idle"], statuses
    assert [f.data["type"] for f in frames][-2:] == ["response.completed", "session.status"]
    # And the model got a request containing the follow-up (after seeing its first answer)
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2, len(requests)
    texts = input_texts(requests[1])
    assert "FOLLOW-UP: and then?" in texts, texts
    assert "answer to the first question" in texts, texts
    # And the session ends idle with both messages and both answers persisted
    snap = wait_status(http_client, session_id, "idle")
    kinds = [(i["data"]["role"], i["data"]["content"][0]["text"]) for i in snap["items"]]
    assert ("user", "FOLLOW-UP: and then?") in kinds
    assert ("assistant", "answer to the first question") in kinds
    assert ("assistant", "answer to the follow-up") in kinds
    assert len(kinds) == 4, kinds
    assert follow_id in [i["id"] for i in snap["items"]]


def test_tools_on_a_message_joining_a_running_turn_are_ignored(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if the joining message's tools replaced or were merged into the running turn's
    # tools (the model request after it would list Zap).
    # Given a turn started with the Glob tool whose model call is held at the mock's gate
    session_id, model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="steer-tools",
        responses=[{"text": "first", "block": True}, {"text": "second"}],
    )
    post_event(http_client, session_id, message_event("first", tools=[function_tool("Glob")]))
    wait_for_gate(mock_llm_server_url)
    # When a message with a different tool joins the turn
    post_joining_message(http_client, session_id, message_event("second", tools=[function_tool("Zap")]))
    release_gate(mock_llm_server_url)
    wait_status(http_client, session_id, "idle")
    # Then the model request after it still lists only the first message's tools
    deadline = time.monotonic() + 5
    while len(requests := get_mock_requests(mock_llm_server_url, key=model)) < 2:
        assert time.monotonic() < deadline, "the joining message never reached the model"
        time.sleep(0.05)
    assert "second" in input_texts(requests[1])
    assert [t["name"] for t in requests[0]["tools"]] == ["Glob"]
    assert [t["name"] for t in requests[1].get("tools") or []] == ["Glob"]
