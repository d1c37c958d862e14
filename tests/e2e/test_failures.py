"""Turn failures over real HTTP/SSE: client-tool deadline, model errors and retries, the loop guard.

Every failure must reach the client three ways: ``response.failed`` with ``response.error
{code, message}``, ``session.status failed`` with the same error, and ``last_task_error`` in
the snapshot until the next turn starts.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from tests.e2e.conftest import (
    ECHO_TOOL,
    StreamWatcher,
    get_mock_requests,
    get_session_snapshot,
    is_call_frame,
    is_type,
    message_event,
    new_mock_agent_session,
    output_event,
    wait_session_status,
)

if TYPE_CHECKING:
    import httpx


def _echo_call(call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"call_id": call_id, "name": "Echo", "arguments": json.dumps({"text": call_id})}]}


def _assert_failed(stream: StreamWatcher, start: int, code: str | None = None) -> dict[str, Any]:
    """The turn's failure as the stream shows it; returns the error."""
    terminal = stream.wait_terminal(start=start, timeout=30)
    assert terminal.data["type"] == "response.failed", stream.types()
    error = terminal.data["response"]["error"]
    assert terminal.data["response"]["status"] == "failed"
    assert isinstance(error["code"], str)
    assert error["code"]
    assert isinstance(error["message"], str)
    assert error["message"]
    if code is not None:
        assert error["code"] == code, error
    status = stream.wait_for(
        lambda f: f.data.get("type") == "session.status" and f.data.get("status") != "running",
        start=start,
        what="the closing session.status",
    )
    assert status.data["status"] == "failed", status.data
    assert status.data["error"] == error, status.data
    assert status.id > terminal.id
    return dict(error)


def test_unanswered_client_call_fails_at_its_deadline_and_the_next_turn_recovers(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given an agent whose client-tool deadline is 2 s and a model that calls a client tool
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "deadline",
        [_echo_call("call_ignored"), {"text": "fresh turn works"}],
        extra={"limits": {"client_tool_timeout_s": 2}},
    )
    events = f"/v1/sessions/{session_id}/events"
    with StreamWatcher(live_server, session_id) as stream:
        assert http_client.post(events, json=message_event("nobody answers", [ECHO_TOOL])).status_code == 202
        stream.wait_for(lambda f: is_call_frame(f, "action_required"), what="the parked call")
        parked_at = time.monotonic()

        # When nobody answers the call
        error = _assert_failed(stream, 0, "client_tool_timeout")

        # Then the turn fails at the deadline, not before it and not much after it
        elapsed = time.monotonic() - parked_at
        assert 1.5 <= elapsed <= 10, elapsed
        snap = get_session_snapshot(http_client, session_id)
        assert snap["status"] == "failed"
        assert snap["last_task_error"]["code"] == "client_tool_timeout"
        assert snap["last_task_error"] == error
        assert snap["active_response_id"] is None
        assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1

        # When the next message arrives
        mark = stream.count()
        assert http_client.post(events, json=message_event("try again")).status_code == 202
        # Then a new turn starts at once and the failure is cleared with it
        snap = get_session_snapshot(http_client, session_id)
        assert snap["last_task_error"] is None
        assert snap["status"] in ("running", "idle")
        running = stream.wait_for(is_type("session.status"), start=mark, what="the new turn's status")
        assert running.data["status"] == "running"
        assert running.data["error"] is None
        terminal = stream.wait_terminal(start=mark)
        assert terminal.data["type"] == "response.completed", stream.types()

    # And the session is idle again without an error
    snap = wait_session_status(http_client, session_id, {"idle"})
    assert snap["last_task_error"] is None
    assert snap["items"][-1]["data"]["content"][0]["text"] == "fresh turn works"


def test_model_client_error_is_not_retried_and_fails_the_turn(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a model endpoint that answers 400
    _agent_id, model, session_id = new_mock_agent_session(
        http_client, mock_llm_server_url, "http400", [{"error": "bad request", "status_code": 400}]
    )
    with StreamWatcher(live_server, session_id) as stream:
        # When a turn runs
        r = http_client.post(f"/v1/sessions/{session_id}/events", json=message_event("provoke a 400"))
        assert r.status_code == 202, r.text
        # Then it fails with an error code and a message naming the status
        error = _assert_failed(stream, 0)
    assert "400" in error["message"], error
    # And the request was not retried
    assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1
    # And the snapshot keeps the failure
    snap = get_session_snapshot(http_client, session_id)
    assert snap["status"] == "failed"
    assert snap["last_task_error"] == error
    # And no assistant message was persisted
    assert [i["data"]["role"] for i in snap["items"]] == ["user"]


def test_model_server_error_is_retried_and_the_turn_recovers(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a model endpoint that is overloaded once, then answers
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "http503",
        [{"error": "overloaded", "status_code": 503}, {"text": "recovered"}],
    )
    with StreamWatcher(live_server, session_id) as stream:
        # When a turn runs
        r = http_client.post(f"/v1/sessions/{session_id}/events", json=message_event("retry me"))
        assert r.status_code == 202, r.text
        # Then it completes with the answer of the retried call
        terminal = stream.wait_terminal()
        assert terminal.data["type"] == "response.completed", stream.types()
        assert "response.failed" not in stream.types()
    assert len(get_mock_requests(mock_llm_server_url, key=model)) == 2
    snap = wait_session_status(http_client, session_id, {"idle"})
    assert snap["last_task_error"] is None
    assert snap["items"][-1]["data"]["content"][0]["text"] == "recovered"


def test_model_server_errors_exhaust_the_retries_and_fail_the_turn(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a model endpoint that keeps answering 500
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "http500",
        [{"error": f"boom {n}", "status_code": 500} for n in range(6)],
    )
    with StreamWatcher(live_server, session_id) as stream:
        # When a turn runs
        r = http_client.post(f"/v1/sessions/{session_id}/events", json=message_event("keep failing"))
        assert r.status_code == 202, r.text
        # Then, once the retries are spent, it fails with the model's HTTP error
        error = _assert_failed(stream, 0, "model_http_error")
    assert "500" in error["message"], error
    # And the model was called once plus three retries
    assert len(get_mock_requests(mock_llm_server_url, key=model)) == 4
    snap = get_session_snapshot(http_client, session_id)
    assert snap["status"] == "failed"
    assert snap["last_task_error"]["code"] == "model_http_error"


def test_loop_guard_fails_a_turn_that_keeps_calling_tools(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given an agent limited to 3 model calls per turn, whose model never stops calling a tool
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "loop",
        [_echo_call(f"call_loop_{n}") for n in range(6)],
        extra={"limits": {"max_iterations": 3}},
    )
    events = f"/v1/sessions/{session_id}/events"
    terminal_types = {"response.completed", "response.failed", "response.cancelled"}
    with StreamWatcher(live_server, session_id) as stream:
        assert http_client.post(events, json=message_event("loop forever", [ECHO_TOOL])).status_code == 202
        # When the client answers every call it is asked for
        answered: list[str] = []
        deadline = time.monotonic() + 40
        while not stream.matching(lambda f: f.data.get("type") in terminal_types):
            assert time.monotonic() < deadline, stream.types()
            for frame in stream.matching(lambda f: is_call_frame(f, "action_required")):
                call_id = frame.data["item"]["call_id"]
                if call_id not in answered:
                    answered.append(call_id)
                    assert http_client.post(events, json=output_event(call_id, "again")).status_code == 202
            time.sleep(0.05)
        # Then the turn fails with max_iterations after its 3rd model call
        error = _assert_failed(stream, 0, "max_iterations")
    assert "3" in error["message"], error
    assert len(get_mock_requests(mock_llm_server_url, key=model)) == 3
    assert answered == ["call_loop_0", "call_loop_1"]
    snap = get_session_snapshot(http_client, session_id)
    assert snap["status"] == "failed"
    assert snap["last_task_error"]["code"] == "max_iterations"


def test_output_for_a_call_whose_turn_timed_out_is_refused_consistently(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a turn that failed at its 1 s client-tool deadline
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "late-output",
        [_echo_call("call_late")],
        extra={"limits": {"client_tool_timeout_s": 1}},
    )
    events = f"/v1/sessions/{session_id}/events"
    with StreamWatcher(live_server, session_id) as stream:
        assert http_client.post(events, json=message_event("answer late", [ECHO_TOOL])).status_code == 202
        _assert_failed(stream, 0, "client_tool_timeout")
    before = get_session_snapshot(http_client, session_id)

    # When the call's output arrives after the deadline, and is posted again
    first = http_client.post(events, json=output_event("call_late", "too late"))
    again = http_client.post(events, json=output_event("call_late", "too late"))

    # Then it is refused, and the repeat gets the same answer (the refusal wrote nothing)
    assert first.status_code == 409, first.text
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    after = get_session_snapshot(http_client, session_id)
    assert after["items"] == before["items"]
    assert after["status"] == "failed"
    assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1
