"""Client-side tool calls over real HTTP/SSE: several calls in one step, output idempotency, unknown tools.

Real ``skyloop dev`` and ``skyloop mock-llm`` processes; the scripted model is keyed by a
unique model name per test, so its captured requests show exactly what each turn sent.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

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


def _call(call_id: str, name: str = "Echo", text: str = "") -> dict[str, str]:
    return {"call_id": call_id, "name": name, "arguments": json.dumps({"text": text or call_id})}


def _outputs_in(request: dict) -> dict[str, str]:
    return {i["call_id"]: i["output"] for i in request["input"] if i.get("type") == "function_call_output"}


def test_three_calls_park_together_and_resume_once_with_all_outputs(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a model that answers the first request with three client calls, then with text
    calls = ["call_one", "call_two", "call_three"]
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "three-calls",
        [{"tool_calls": [_call(c) for c in calls]}, {"text": "all three echoed"}],
    )
    with StreamWatcher(live_server, session_id) as stream:
        # When a message offering the Echo tool starts the turn
        resp = http_client.post(
            f"/v1/sessions/{session_id}/events", json=message_event("echo thrice", [ECHO_TOOL])
        )
        assert resp.status_code == 202, resp.text

        # Then all three calls are published as action_required before any output is posted
        stream.wait_for(lambda f: is_call_frame(f, "action_required"), count=3, what="3 action_required")
        parked = stream.matching(lambda f: is_call_frame(f, "action_required"))
        assert [f.data["item"]["call_id"] for f in parked] == calls
        assert all(f.data["item"]["name"] == "Echo" for f in parked)
        assert json.loads(parked[1].data["item"]["arguments"]) == {"text": "call_two"}
        # and the snapshot shows a running turn without any action_required call among its items
        snap = get_session_snapshot(http_client, session_id)
        assert snap["status"] == "running"
        assert [i["type"] for i in snap["items"]] == ["message"]

        # When the outputs are posted in reverse order, with pauses
        answers: dict[str, dict] = {}
        for n, call_id in enumerate(reversed(calls)):
            r = http_client.post(
                f"/v1/sessions/{session_id}/events", json=output_event(call_id, f"out:{call_id}")
            )
            assert r.status_code == 202, r.text
            answers[call_id] = r.json()
            if n < len(calls) - 1:
                time.sleep(0.3)
                # Then the turn stays parked while any call is unanswered
                assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1
                assert not stream.matching(lambda f: is_call_frame(f, "completed"))
        assert answers == {c: {"queued": True, "item_id": c} for c in calls}

        # Then the turn resumes once and completes
        terminal = stream.wait_terminal()
        assert terminal.data["type"] == "response.completed", stream.types()

    # And the model got exactly one follow-up request, carrying all three outputs
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2
    assert _outputs_in(requests[1]) == {c: f"out:{c}" for c in calls}
    assert _outputs_in(requests[0]) == {}
    # And each call completed exactly once on the stream, in call order, each followed by its output
    completed = [f.data["item"]["call_id"] for f in stream.matching(lambda f: is_call_frame(f, "completed"))]
    assert completed == calls
    done_items = [
        f.data["item"]
        for f in stream.matching(is_type("response.output_item.done"))
        if f.data["item"]["status"] == "completed"
    ]
    assert [(i["type"], i.get("call_id")) for i in done_items[:6]] == [
        (t, c) for c in calls for t in ("function_call", "function_call_output")
    ]
    # And the items are persisted in call order, not in the order the outputs arrived
    snap = wait_session_status(http_client, session_id, {"idle"})
    items = snap["items"]
    assert [i["type"] for i in items] == ["message"] + ["function_call", "function_call_output"] * 3 + [
        "message"
    ]
    assert [i["data"]["call_id"] for i in items[1:7]] == [c for c in calls for _ in range(2)]
    assert [i["data"]["output"] for i in items[2:7:2]] == [f"out:{c}" for c in calls]
    assert items[-1]["data"]["content"][0]["text"] == "all three echoed"


def test_output_is_idempotent_and_bad_outputs_are_refused(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a turn parked on two client calls
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "idem",
        [{"tool_calls": [_call("call_a"), _call("call_b")]}, {"text": "both answered"}],
    )
    events = f"/v1/sessions/{session_id}/events"
    with StreamWatcher(live_server, session_id) as stream:
        assert http_client.post(events, json=message_event("two calls", [ECHO_TOOL])).status_code == 202
        stream.wait_for(lambda f: is_call_frame(f, "action_required"), count=2, what="2 parked calls")

        # When call_a is answered, then the same output is posted again
        first = http_client.post(events, json=output_event("call_a", "A"))
        again = http_client.post(events, json=output_event("call_a", "A"))
        # Then both answers are 202 with the same body
        assert first.status_code == 202, (first.text, again.text)
        assert again.status_code == 202, (first.text, again.text)
        assert again.json() == first.json() == {"queued": True, "item_id": "call_a"}
        cursor = get_session_snapshot(http_client, session_id)["last_event_id"]

        # When a different output is posted for the answered call
        conflict = http_client.post(events, json=output_event("call_a", "A-changed"))
        # Then it is a 409 error body
        assert conflict.status_code == 409, conflict.text
        assert conflict.json()["error"]["code"] == "conflict"
        assert conflict.json()["error"]["message"]

        # When an output names a call the session never had
        unknown = http_client.post(events, json=output_event("call_nobody_made", "x"))
        # Then it is a 404 error body
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["error"]["code"] == "not_found"

        # When the output event is malformed (no call_id, non-string output, no output)
        for data in ({"output": "x"}, {"call_id": "call_b", "output": 123}, {"call_id": "call_b"}):
            bad = http_client.post(events, json={"type": "function_call_output", "data": data})
            # Then it is a 400 that writes nothing
            assert bad.status_code == 400, (data, bad.text)
            assert bad.json()["error"]["code"] == "invalid_input"
        snap = get_session_snapshot(http_client, session_id)
        assert snap["last_event_id"] == cursor
        assert snap["status"] == "running"
        assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1, "call_b is still unanswered"

        # When call_b is answered with a real output
        assert http_client.post(events, json=output_event("call_b", "B")).status_code == 202
        terminal = stream.wait_terminal()
        assert terminal.data["type"] == "response.completed", stream.types()

    # Then the model saw the first outputs only, and the items hold them
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2
    assert _outputs_in(requests[1]) == {"call_a": "A", "call_b": "B"}
    snap = wait_session_status(http_client, session_id, {"idle"})
    outputs = {
        i["data"]["call_id"]: i["data"]["output"]
        for i in snap["items"]
        if i["type"] == "function_call_output"
    }
    assert outputs == {"call_a": "A", "call_b": "B"}
    # And after the turn ended, the same output is still a no-op and a different one still a conflict
    late_same = http_client.post(events, json=output_event("call_b", "B"))
    assert late_same.status_code == 202
    assert late_same.json() == {"queued": True, "item_id": "call_b"}
    late_diff = http_client.post(events, json=output_event("call_b", "B2"))
    assert late_diff.status_code == 409
    assert late_diff.json()["error"]["code"] == "conflict"
    assert get_session_snapshot(http_client, session_id)["items"] == snap["items"]


def test_call_to_a_tool_the_client_did_not_offer_gets_an_error_output(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a model that calls "Nope" although the client only offers "Echo"
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "nope",
        [{"tool_calls": [_call("call_nope", name="Nope")]}, {"text": "carried on without Nope"}],
    )
    with StreamWatcher(live_server, session_id) as stream:
        # When the turn runs
        resp = http_client.post(
            f"/v1/sessions/{session_id}/events", json=message_event("call nope", [ECHO_TOOL])
        )
        assert resp.status_code == 202, resp.text
        # Then it completes without ever parking on the unknown call
        terminal = stream.wait_terminal(timeout=20)
        assert terminal.data["type"] == "response.completed", stream.types()
        assert not stream.matching(lambda f: is_call_frame(f, "action_required"))

    # And the next model call carried an error output for it
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2
    error_output = _outputs_in(requests[1])["call_nope"]
    assert "Nope" in error_output, error_output
    assert "rror" in error_output, error_output
    # And the call and its error output are persisted like any other
    snap = wait_session_status(http_client, session_id, {"idle"})
    assert [i["type"] for i in snap["items"]] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert snap["items"][2]["data"] == {"call_id": "call_nope", "output": error_output}
    assert snap["items"][3]["data"]["content"][0]["text"] == "carried on without Nope"


def test_unknown_tool_next_to_a_client_tool_parks_only_the_client_call(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a model that calls the unknown "Nope" and the offered "Echo" in one response
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "mixed",
        [{"tool_calls": [_call("call_nope", name="Nope"), _call("call_echo")]}, {"text": "mixed done"}],
    )
    with StreamWatcher(live_server, session_id) as stream:
        assert (
            http_client.post(
                f"/v1/sessions/{session_id}/events", json=message_event("mixed calls", [ECHO_TOOL])
            ).status_code
            == 202
        )
        # When the turn parks
        parked = stream.wait_for(lambda f: is_call_frame(f, "action_required"), what="a parked call")
        # Then only the client's own tool waits for an output
        assert parked.data["item"]["call_id"] == "call_echo"
        time.sleep(0.3)
        assert len(stream.matching(lambda f: is_call_frame(f, "action_required"))) == 1
        # When the client answers it, the turn completes
        r = http_client.post(f"/v1/sessions/{session_id}/events", json=output_event("call_echo", "echoed"))
        assert r.status_code == 202, r.text
        assert stream.wait_terminal().data["type"] == "response.completed", stream.types()
    # And the follow-up request carried both outputs, in call order
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2
    outputs = _outputs_in(requests[1])
    assert list(outputs) == ["call_nope", "call_echo"]
    assert outputs["call_echo"] == "echoed"
    assert "Nope" in outputs["call_nope"]


def test_the_largest_non_ascii_output_the_api_accepts_completes_the_turn(
    live_server: str, http_client: httpx.Client, mock_llm_server_url: str
) -> None:
    # Given a turn parked on one call, and an output of the API's maximum length in 3- and 4-byte characters
    output = ("你好🚀" * 66_667)[:200_000]
    _agent_id, model, session_id = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "big-output",
        [{"tool_calls": [_call("call_big")]}, {"text": "got it"}],
    )
    with StreamWatcher(live_server, session_id) as stream:
        http_client.post(f"/v1/sessions/{session_id}/events", json=message_event("go", [ECHO_TOOL]))
        stream.wait_for(lambda f: is_call_frame(f, "action_required"), what="action_required")
        # When the output is posted (800 KB of UTF-8 as JSON)
        resp = http_client.post(f"/v1/sessions/{session_id}/events", json=output_event("call_big", output))
        assert resp.status_code == 202, resp.text
        # Then the turn completes, the stream carried the output whole, and the model saw it
        stream.wait_for(is_type("response.completed"), timeout=60, what="response.completed")
        outputs = [
            f for f in stream.stored() if (f.data.get("item") or {}).get("type") == "function_call_output"
        ]
        assert [f.data["item"]["output"] for f in outputs] == [output]
    assert _outputs_in(get_mock_requests(mock_llm_server_url, key=model)[1]) == {"call_big": output}
    # And it is served back by the items page and the snapshot
    items = http_client.get(f"/v1/sessions/{session_id}/items").json()["data"]
    assert [i.get("output") for i in items if i["type"] == "function_call_output"] == [output]
    snap = get_session_snapshot(http_client, session_id)
    assert snap["status"] == "idle"
    # And one character more is refused with 413 naming the limit
    too_long = http_client.post(
        f"/v1/sessions/{session_id}/events", json=output_event("call_big", output + "x")
    )
    assert too_long.status_code == 413
    assert "200000" in too_long.json()["error"]["message"]
