"""Interrupt: stopping a parked or model-blocked turn, idle interrupts, concurrent interrupts.

Real processes (``skyloop dev`` and ``skyloop mock-llm``), real sockets.
"""

from __future__ import annotations

import threading
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

MARKER = "[System: interrupted]"
INTERRUPT = {"type": "interrupt"}


def open_stream(base_url: str, session_id: str, *, after: int | None = None) -> SseSocket:
    params = {"after": str(after)} if after is not None else None
    stream = SseSocket(base_url, f"/v1/sessions/{session_id}/stream", params=params)
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


def flat_items(http_client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    resp = http_client.get(f"/v1/sessions/{session_id}/items", params={"limit": 100})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["data"])


def marker_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """User-role messages (flat or snapshot shape) whose text starts with the interrupt marker."""
    found = []
    for item in items:
        data = item.get("data", item)
        if item["type"] != "message" or data.get("role") != "user":
            continue
        if any(str(b.get("text", "")).startswith(MARKER) for b in data.get("content") or []):
            found.append(item)
    return found


def diagnose(http_client: httpx.Client, base_url: str, session_id: str) -> str:
    """What the session row and its stored log say, for a failure message."""
    snap = get_session_snapshot(http_client, session_id)
    with open_stream(base_url, session_id, after=0) as replay:
        ids = [(f.id, f.data["type"]) for f in replay.read_for(1.0) if f.id is not None]
    return (
        f"the turn never ended on the stream; snapshot status={snap['status']} "
        f"last_event_id={snap['last_event_id']} active_response_id={snap['active_response_id']}; "
        f"stored log replayed from 0: {ids}"
    )


def terminal_sequence(frames: list[TimedFrame]) -> list[str]:
    """The interrupt's outcome on the stream, in order, with outputs shown by their text's start."""
    out = []
    for f in frames:
        etype = f.data["type"]
        item = f.data.get("item") or {}
        if etype == "session.interrupted":
            out.append(etype)
        elif etype == "response.output_item.done" and item.get("type") == "function_call_output":
            out.append("output:" + str(item.get("output", ""))[:10])
        elif etype in ("response.cancelled", "response.completed", "response.failed"):
            out.append(etype)
        elif etype == "session.status":
            out.append("status:" + f.data["status"])
    return out


def test_interrupt_while_parked_on_a_client_tool(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if interrupt could not stop a parked turn (it would stay running until the client
    # tool deadline), left the call unanswered in history (the next model request would carry a
    # function_call without an output), missed or duplicated the marker, still accepted the
    # late output, or left the session unable to start the next turn.
    # Given a turn parked on a client tool call that the client never answers
    session_id, model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="intr-parked",
        responses=[
            {"tool_calls": [{"call_id": "call_parked", "name": "Glob", "arguments": {"pattern": "*"}}]},
            {"text": "starting fresh after the interruption"},
        ],
    )
    with open_stream(live_server, session_id) as stream:
        post_event(http_client, session_id, message_event("list files", tools=[function_tool("Glob")]))
        parked = stream.read_until(is_action_required)
        assert parked.data["item"]["call_id"] == "call_parked"
        response_id = parked.data["item"]["response_id"]
        start = len(stream.frames)
        # When the client interrupts
        answer = post_event(http_client, session_id, INTERRUPT)
        # Then the answer is 202 {"queued": false}
        assert answer == {"queued": False}
        # And the stream shows the interruption, the cancelled output, the cancelled response, idle
        stream.read_until(is_status("idle"))
        outcome = stream.frames[start:]
    assert terminal_sequence(outcome) == [
        "session.interrupted",
        "output:[Cancelled",
        "response.cancelled",
        "status:idle",
    ], [f.data["type"] for f in outcome]
    cancelled = next(f for f in outcome if f.data["type"] == "response.cancelled")
    assert cancelled.data["response"]["id"] == response_id
    assert cancelled.data["response"]["status"] == "cancelled"
    # And the flat items hold exactly one interrupt marker and the cancelled output
    items = flat_items(http_client, session_id)
    markers = marker_items(items)
    assert len(markers) == 1, items
    outputs = [i for i in items if i["type"] == "function_call_output"]
    assert len(outputs) == 1, outputs
    assert outputs[0]["call_id"] == "call_parked", outputs
    assert outputs[0]["output"].startswith("[Cancelled"), outputs[0]
    calls = [i for i in items if i["type"] == "function_call"]
    assert [c["call_id"] for c in calls] == ["call_parked"]
    snap = get_session_snapshot(http_client, session_id)
    assert snap["status"] == "idle"
    assert snap["active_response_id"] is None

    # When the client's output for the cancelled call arrives late
    late = http_client.post(
        f"/v1/sessions/{session_id}/events",
        json={"type": "function_call_output", "data": {"call_id": "call_parked", "output": "a.py"}},
    )
    # Then it is refused with 409 conflict and changes nothing
    assert late.status_code == 409, late.text
    assert late.json()["error"]["code"] == "conflict"
    assert get_session_snapshot(http_client, session_id)["last_event_id"] == snap["last_event_id"]

    # When the next message is sent
    with open_stream(live_server, session_id) as stream:
        post_event(http_client, session_id, message_event("something else please"))
        stream.read_until(is_status("idle"))
    # Then a normal turn runs and completes
    types = [f.data["type"] for f in stream.stored()]
    assert types[0] == "session.status", types
    assert "response.completed" in types, types
    assert "response.cancelled" not in types
    # And the model's request for it carries the marker before the new message
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2, len(requests)
    texts = input_texts(requests[1])
    marker_at = [n for n, t in enumerate(texts) if t.startswith(MARKER)]
    assert len(marker_at) == 1, texts
    assert texts.index("something else please") > marker_at[0], texts
    # And the cancelled call travels with its output, so the request is well formed
    sent_outputs = [i for i in requests[1]["input"] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in sent_outputs] == ["call_parked"]
    assert sent_outputs[0]["output"].startswith("[Cancelled")


def test_interrupt_while_blocked_in_the_model_call(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if interrupt waited for the model call to finish, or if the model's late answer
    # still got written after the interrupt (deltas/answer/completed after response.cancelled,
    # or the session flipping back to running or to a second terminal event).
    # Given a turn whose model call is held at the mock's gate
    session_id, _model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="intr-blocked",
        responses=[{"text": "this answer arrives too late to count", "block": True, "stream": True}],
    )
    with open_stream(live_server, session_id) as stream:
        post_event(http_client, session_id, message_event("question"))
        stream.read_until(of_type("response.in_progress"))
        wait_for_gate(mock_llm_server_url)
        start = len(stream.frames)
        # When the client interrupts while the model is still thinking
        assert post_event(http_client, session_id, INTERRUPT) == {"queued": False}
        # Then the turn ends at once: interrupted, cancelled, idle (no calls, so no outputs)
        stream.read_until(is_status("idle"))
        assert terminal_sequence(stream.frames[start:]) == [
            "session.interrupted",
            "response.cancelled",
            "status:idle",
        ]
        idle_at = stream.stored()[-1].id
        # When the model's answer is released afterwards
        release_gate(mock_llm_server_url)
        # Then nothing more of that turn appears on the stream
        late = [f for f in stream.read_for(1.5) if f.id is not None]
    assert not late, [(f.id, f.data["type"]) for f in late]
    # And the session stays idle, its log ending at the idle event, without the late answer
    snap = wait_status(http_client, session_id, "idle")
    assert snap["last_event_id"] == idle_at
    assert snap["active_response_id"] is None
    roles = [(i["type"], i["data"].get("role")) for i in snap["items"]]
    assert roles == [("message", "user"), ("message", "user")], roles
    assert len(marker_items(snap["items"])) == 1


def test_interrupting_an_idle_session_is_harmless(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if an idle interrupt wrote anything (a marker or a cancelled event for the last,
    # already completed response), failed, or changed the session's status.
    # Given a new session that never ran, and one whose turn completed
    fresh, _ = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="intr-idle-new",
        responses=[],
    )
    done, _ = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="intr-idle-done",
        responses=[{"text": "finished"}],
    )
    post_event(http_client, done, message_event("hello"))
    wait_status(http_client, done, "idle")
    for session_id in (fresh, done):
        before = get_session_snapshot(http_client, session_id)
        with open_stream(live_server, session_id, after=before["last_event_id"]) as stream:
            # When the client interrupts the idle session
            answer = post_event(http_client, session_id, INTERRUPT)
            # Then it is 202 {"queued": false} and nothing is appended
            assert answer == {"queued": False}
            assert not [f for f in stream.read_for(0.3) if f.id is not None]
        after = get_session_snapshot(http_client, session_id)
        assert after["last_event_id"] == before["last_event_id"]
        assert after["status"] == "idle"
        assert after["items"] == before["items"]
        assert not marker_items(after["items"])


@pytest.mark.parametrize("where", ["parked", "in_model_call"])
def test_concurrent_interrupts_produce_exactly_one_marker(
    live_server: str,
    http_client: httpx.Client,
    live_runner_id: str,
    mock_llm_server_url: str,
    where: str,
) -> None:
    # Breaks if two interrupts racing each other both landed: two markers, two cancelled
    # outputs for one call, or two response.cancelled events. (While parked, the call's own
    # conditional cancel also guards the race; in the model call only the turn-still-active
    # condition does, so both states are raced.)
    parked = where == "parked"
    # Given a turn parked on a client tool call, or held in its model call
    entry: dict[str, Any] = (
        {"tool_calls": [{"call_id": "call_race", "name": "Glob", "arguments": {}}]}
        if parked
        else {"text": "never shown", "block": True}
    )
    session_id, _model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind=f"intr-race-{where}",
        responses=[entry],
    )
    with open_stream(live_server, session_id) as stream:
        post_event(http_client, session_id, message_event("list", tools=[function_tool("Glob")]))
        if parked:
            stream.read_until(is_action_required)
        else:
            stream.read_until(of_type("response.in_progress"))
            wait_for_gate(mock_llm_server_url)
        start = len(stream.frames)
        # When two interrupts are posted at the same moment
        barrier = threading.Barrier(2)
        answers: list[Any] = []

        def interrupt() -> None:
            with httpx.Client(base_url=live_server, timeout=30) as client:
                barrier.wait()
                resp = client.post(f"/v1/sessions/{session_id}/events", json=INTERRUPT)
                answers.append((resp.status_code, resp.json()))

        threads = [threading.Thread(target=interrupt) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        # Then both are accepted
        assert answers == [(202, {"queued": False})] * 2, answers
        try:
            stream.read_until(is_status("idle"))
        except AssertionError as exc:
            raise AssertionError(diagnose(http_client, live_server, session_id)) from exc
        if not parked:
            release_gate(mock_llm_server_url)
        outcome = stream.frames[start:] + stream.read_for(1.0)
    # And the stream shows the outcome once
    expected = ["session.interrupted", "output:[Cancelled", "response.cancelled", "status:idle"]
    if not parked:
        expected.remove("output:[Cancelled")
    assert terminal_sequence(outcome) == expected, [f.data["type"] for f in outcome]
    # And history holds exactly one marker (and, when parked, one cancelled output)
    items = flat_items(http_client, session_id)
    assert len(marker_items(items)) == 1, items
    outputs = [i for i in items if i["type"] == "function_call_output"]
    assert len(outputs) == (1 if parked else 0), items
