"""Every event skyloop streams validates against omnigent's published ``ServerStreamEvent``.

omnigent's SDK parses the session stream with that pydantic union and silently
drops what fails it, so an event that does not validate is an event omnigent's
clients never see. The events come from real scenarios on ``skyloop dev`` (a
text turn, a client-tool round trip, steering, an interrupt while parked, a
model error, a retried model call), replayed from the stored log, and from the
builders of every type no scenario here reaches; each is validated by the real
package in the omnigent venv.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import events as ev
from tests.e2e.conftest import (
    ECHO_TOOL,
    message_event,
    new_mock_agent_session,
    output_event,
    release_gate,
    wait_for_gate,
    wait_status,
)
from tests.e2e.sse import SseSocket

if TYPE_CHECKING:
    import httpx

    from tests.compat.conftest import Omnigent

pytestmark = pytest.mark.e2e

# The types the scenarios below must produce; a new one skyloop emits belongs here.
SCENARIO_TYPES = {
    ev.SESSION_HEARTBEAT,
    ev.SESSION_STATUS,
    ev.SESSION_INPUT_CONSUMED,
    ev.SESSION_INTERRUPTED,
    ev.RESPONSE_IN_PROGRESS,
    ev.RESPONSE_TEXT_DELTA,
    ev.RESPONSE_ITEM_DONE,
    ev.RESPONSE_COMPLETED,
    ev.RESPONSE_FAILED,
    ev.RESPONSE_CANCELLED,
}


def _replay(base_url: str, session_id: str) -> list[dict[str, Any]]:
    """The heartbeat and every stored event of the session, as the stream frames them."""
    with SseSocket(base_url, f"/v1/sessions/{session_id}/stream", params={"after": "0"}) as stream:
        assert stream.status == 200
        return [f.data for f in stream.read_for(1.0)]


def _post(http_client: httpx.Client, session_id: str, body: dict[str, Any]) -> None:
    resp = http_client.post(f"/v1/sessions/{session_id}/events", json=body)
    assert resp.status_code == 202, resp.text


def _scenario_events(http_client: httpx.Client, base_url: str, mock_url: str) -> list[dict[str, Any]]:
    collected: list[dict[str, Any]] = []
    # A text turn, then a client-tool round trip, in one session.
    _, _, sid = new_mock_agent_session(
        http_client,
        mock_url,
        "compat-ev",
        [
            {"text": "hello there"},
            {"tool_calls": [{"call_id": "c1", "name": "Echo", "arguments": '{"text": "x"}'}]},
            {"text": "echoed"},
        ],
    )
    _post(http_client, sid, message_event("say hello"))
    wait_status(http_client, sid, "idle")
    _post(http_client, sid, message_event("echo x", [ECHO_TOOL]))
    wait_status_running_parked(http_client, sid)
    _post(http_client, sid, output_event("c1", "x"))
    wait_status(http_client, sid, "idle")
    collected += _replay(base_url, sid)

    # Steering: a message while the model call is held at the mock's gate; then an interrupt while parked.
    _, _, sid = new_mock_agent_session(
        http_client,
        mock_url,
        "compat-steer",
        [
            {"text": "first", "block": True},
            {"tool_calls": [{"call_id": "c2", "name": "Echo", "arguments": '{"text": "y"}'}]},
        ],
    )
    _post(http_client, sid, message_event("start", [ECHO_TOOL]))
    wait_for_gate(mock_url)
    _post(http_client, sid, message_event("and also this"))
    release_gate(mock_url)
    wait_status_running_parked(http_client, sid)
    _post(http_client, sid, {"type": "interrupt"})
    wait_status(http_client, sid, "idle")
    collected += _replay(base_url, sid)

    # A model error fails the turn; a server error is retried.
    _, _, sid = new_mock_agent_session(
        http_client, mock_url, "compat-fail", [{"error": "bad request", "status_code": 400}]
    )
    _post(http_client, sid, message_event("fail please"))
    wait_status(http_client, sid, "failed")
    collected += _replay(base_url, sid)
    _, _, sid = new_mock_agent_session(
        http_client,
        mock_url,
        "compat-retry",
        [{"error": "overloaded", "status_code": 503}, {"text": "recovered"}],
    )
    _post(http_client, sid, message_event("retry please"))
    wait_status(http_client, sid, "idle")
    collected += _replay(base_url, sid)
    return collected


def wait_status_running_parked(http_client: httpx.Client, session_id: str) -> None:
    """Wait until the session's turn is parked on a client call (an action_required call exists)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with SseSocket(
            str(http_client.base_url), f"/v1/sessions/{session_id}/stream", params={"after": "0"}
        ) as s:
            frames = s.read_for(0.3)
        if any((f.data.get("item") or {}).get("status") == "action_required" for f in frames):
            return
    raise AssertionError("the turn never parked on a client call")


def _builder_events() -> list[dict[str, Any]]:
    """Events no scenario above produces (server-tool approvals), from the builders skyloop emits them with."""
    rid = "resp_" + "0" * 24
    return [
        {
            "type": ev.ELICITATION_REQUEST,
            "sequence_number": 7,
            **ev.approval_request(
                elicitation_id="el_1",
                call_id="call_1",
                name="deploy",
                arguments="{}",
                response_id=rid,
                session_id="0" * 32,
            ),
        },
        {
            "type": ev.ELICITATION_RESOLVED,
            "sequence_number": 8,
            **ev.approval_resolved("el_1", "accept", rid),
        },
        {"type": ev.RESPONSE_RETRY, "sequence_number": 9, **ev.retry(rid, 1, 10)},
    ]


def test_every_streamed_event_validates_against_omnigents_schema(
    omnigent: Omnigent, http_client: httpx.Client, live_server: str, mock_llm_server_url: str
) -> None:
    # Given the events of every scenario, replayed from the stored log, and the builders' events
    events = _scenario_events(http_client, live_server, mock_llm_server_url) + _builder_events()
    seen = {e["type"] for e in events}
    assert seen >= SCENARIO_TYPES, f"scenarios did not produce {sorted(SCENARIO_TYPES - seen)}"

    # When omnigent's own ServerStreamEvent adapter parses each
    results = omnigent.validate_events(events)

    # Then none is rejected (one failure per type is enough to read)
    failures: dict[str, str] = {}
    for event, error in zip(events, results, strict=True):
        if error is not None:
            failures.setdefault(event["type"], f"{error}\n  event: {event}")
    assert not failures, "events omnigent's SDK would drop:\n" + "\n".join(failures.values())


def test_the_validator_rejects_what_omnigent_rejects(omnigent: Omnigent) -> None:
    """The check has teeth: the old string ``requested_at`` fails omnigent's schema."""
    bad = {"type": ev.SESSION_INTERRUPTED, "data": {"requested_at": "2026-01-01T00:00:00.000Z"}}
    good = {"type": ev.SESSION_INTERRUPTED, **ev.interrupted("resp_1")}
    assert omnigent.validate_events([good, bad])[0] is None
    assert omnigent.validate_events([bad])[0] is not None
