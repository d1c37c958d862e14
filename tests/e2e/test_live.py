"""The live channel on a real ``skyloop dev``: ``ws://<host>:<port>/v1/live`` against the SSE stream.

Raw WebSocket clients (the ``websockets`` library, not the SDK) check the
contract: the same ids and payloads as the SSE stream, exactly once across a
dropped connection resumed with ``after``, and idle subscribers that cost a
turn nothing. The SDK's ``watch`` is checked on the same stack.
"""

from __future__ import annotations

import json
import socket
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from websockets.sync.client import connect

from skyloop.client import Client, LiveEventStream, SessionHeartbeat
from tests.e2e.conftest import (
    LOOPBACK,
    StreamWatcher,
    function_tool,
    is_call_frame,
    message_event,
    output_event,
    release_gate,
    scripted_session,
    wait_for_gate,
    wait_status,
)

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.e2e

TERMINAL = {"response.completed", "response.failed", "response.cancelled"}
GLOB_CALL = {"tool_calls": [{"call_id": "call_glob", "name": "Glob", "arguments": '{"pattern": "*.py"}'}]}


@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SKYLOOP_URL", raising=False)
    monkeypatch.delenv("SKYLOOP_TOKEN", raising=False)
    monkeypatch.setenv("SKYLOOP_CONFIG", str(tmp_path / "no-config.toml"))


class LiveSocket:
    """One raw WebSocket on the live channel, found through ``/v1/info`` as a client would."""

    def __init__(self, base_url: str) -> None:
        info = LOOPBACK.get(f"{base_url}/v1/info", timeout=10).json()
        assert info["live"]["protocol"] == "skyloop.live.v1"
        self.url = info["live"]["url"]
        self.ws = connect(self.url, open_timeout=10, ping_interval=None).__enter__()
        self.frames: list[dict[str, Any]] = []

    def __enter__(self) -> LiveSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.ws.close()

    def drop(self) -> None:
        """Like a network going away: the socket dies without a closing handshake."""
        self.ws.socket.shutdown(socket.SHUT_RDWR)
        self.ws.close()

    def send(self, frame: dict[str, Any]) -> None:
        self.ws.send(json.dumps(frame))

    def next_frame(self, timeout: float) -> dict[str, Any] | None:
        try:
            frame = json.loads(self.ws.recv(timeout=timeout))
        except TimeoutError:
            return None
        self.frames.append(frame)
        return dict(frame)

    def read_until(self, predicate: Any, *, timeout: float = 30.0, what: str = "a frame") -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            frame = self.next_frame(remaining)
            if frame is not None and predicate(frame):
                return frame
        raise AssertionError(f"timed out waiting for {what}; got {[f.get('type') for f in self.frames]}")

    def subscribe(self, session_id: str, after: int | None) -> dict[str, Any]:
        self.send({"action": "subscribe", "session_id": session_id, "after": after})
        return self.read_until(
            lambda f: f["type"] in ("subscribed", "error") and f.get("session_id") == session_id,
            what="the subscription's answer",
        )

    def events(self, session_id: str | None = None) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == "event" and session_id in (None, f["session_id"])]


def _sse_replay(base_url: str, session_id: str) -> list[tuple[int, dict[str, Any]]]:
    """Every stored event of the session as the SSE stream replays it (``Last-Event-ID: 0``)."""
    snapshot = LOOPBACK.get(f"{base_url}/v1/sessions/{session_id}", timeout=10).json()
    with StreamWatcher(base_url, session_id, params={"after": "0"}) as sse:
        if snapshot["last_event_id"]:
            sse.wait_for(lambda f: f.id == snapshot["last_event_id"], what="the end of the replay")
        return [(f.id, f.data) for f in sse.stored()]


def test_live_watch_sees_a_client_tool_turn_as_the_sse_stream_does(
    http_client: httpx.Client, live_server: str, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a session whose model calls a client tool, then answers in streamed text
    session_id, _ = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="live",
        responses=[GLOB_CALL, {"text": "Two Python files here.", "stream": True}],
    )
    # And an SSE viewer and a live viewer, both tailing from now
    with StreamWatcher(live_server, session_id) as sse, LiveSocket(live_server) as live:
        subscribed = live.subscribe(session_id, None)
        assert subscribed["type"] == "subscribed"
        start = subscribed["after"]
        # When a client-tool turn runs: the message, the parked call answered, the text
        http_client.post(
            f"/v1/sessions/{session_id}/events", json=message_event("list", [function_tool("Glob")])
        )
        call = sse.wait_for(lambda f: is_call_frame(f, "action_required"), what="the parked call")
        http_client.post(f"/v1/sessions/{session_id}/events", json=output_event("call_glob", "a.py\nb.py"))
        idle = sse.wait_for(
            lambda f: f.data.get("type") == "session.status" and f.data.get("status") == "idle", what="idle"
        )
        live.read_until(lambda f: f.get("id") == idle.id, what="the live copy of the idle status")
        sse_events = [(f.id, f.data) for f in sse.stored()]
    # Then the live channel delivered the very same events: same ids, same payloads, same order
    live_events = [(f["id"], f["event"]) for f in live.events(session_id)]
    assert live_events == sse_events
    assert [i for i, _ in live_events] == list(range(start + 1, idle.id + 1))
    assert call.id in {i for i, _ in live_events}
    assert {f["session_id"] for f in live.events()} == {session_id}


def test_a_dropped_connection_resumed_with_after_sees_every_event_exactly_once(
    http_client: httpx.Client, live_server: str, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a turn that parks on a client call, then makes a second model call held at the mock's gate
    session_id, _ = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="live-drop",
        responses=[GLOB_CALL, {"text": "held then streamed to the end", "stream": True, "block": True}],
    )
    received: list[dict[str, Any]] = []
    first = LiveSocket(live_server)
    start = first.subscribe(session_id, None)["after"]
    http_client.post(f"/v1/sessions/{session_id}/events", json=message_event("list", [function_tool("Glob")]))
    first.read_until(lambda f: f["type"] == "event", what="the turn's first event")
    received += first.events(session_id)
    # When the connection drops, and the turn goes on while nobody is connected: it parks on the
    # call, the call is answered, the next model call starts (and is held)
    first.drop()
    _answer_when_published(http_client, session_id, "call_glob", "a.py")
    wait_for_gate(mock_llm_server_url)
    # And the client reconnects with the last id it saw, then the model goes on (live events)
    cursor = received[-1]["id"]
    with LiveSocket(live_server) as second:
        resumed = second.subscribe(session_id, cursor)
        assert resumed["after"] == cursor
        assert resumed["last_event_id"] > cursor  # the answer's events were replayed
        release_gate(mock_llm_server_url)
        second.read_until(
            lambda f: (
                f["type"] == "event"
                and f["event"]["type"] == "session.status"
                and f["event"].get("status") == "idle"
            ),
            what="the turn's end",
        )
        time.sleep(0.3)  # anything stray would have arrived by now
        while second.next_frame(0.05) is not None:
            pass
        received += second.events(session_id)
    # Then every event of the turn arrived exactly once, in order, as the log holds it
    ids = [f["id"] for f in received]
    assert ids == list(range(start + 1, ids[-1] + 1))
    replay = dict(_sse_replay(live_server, session_id))
    assert [(f["id"], f["event"]) for f in received] == [(i, replay[i]) for i in ids]
    assert any(
        f["event"]["type"] == "response.output_text.delta"
        for f in received
        if f["id"] > resumed["last_event_id"]
    )


def _answer_when_published(http_client: httpx.Client, session_id: str, call_id: str, output: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        resp = http_client.post(f"/v1/sessions/{session_id}/events", json=output_event(call_id, output))
        if resp.status_code == 202:
            return
        time.sleep(0.05)  # 404 until the call is published
    raise AssertionError(f"call {call_id} was never published")


def test_fifty_idle_live_subscribers_leave_a_turn_alone_and_the_sdk_watches_live(
    http_client: httpx.Client, live_server: str, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given 50 live subscribers of an idle session
    idle_id, _ = scripted_session(
        http_client, mock_url=mock_llm_server_url, runner_id=live_runner_id, kind="live-idle", responses=[]
    )
    sockets = [LiveSocket(live_server) for _ in range(50)]
    try:
        for s in sockets:
            assert s.subscribe(idle_id, None)["type"] == "subscribed"
        # When another session runs a client-tool turn through the SDK (which watches over the live channel)
        session_id, _ = scripted_session(
            http_client,
            mock_url=mock_llm_server_url,
            runner_id=live_runner_id,
            kind="live-busy",
            responses=[GLOB_CALL, {"text": "Found them.", "stream": True}],
        )
        with Client(live_server) as client:
            assert isinstance(client.watch(session_id), LiveEventStream)
            result = client.session(session_id, tools=["coding"]).run("list the python files")
            # Then the turn is complete and correct
            assert result.status == "completed"
            assert result.text == "Found them."
            # And the SDK's watch replays it with the log's ids and payload types, once each
            with client.watch(session_id, after=0) as events:
                first = next(events)
                assert isinstance(first, SessionHeartbeat)
                watched = []
                for event in events:
                    watched.append((event.event_id, event.type))
                    if event.type == "session.status" and getattr(event, "status", None) == "idle":
                        break
        replay = _sse_replay(live_server, session_id)
        assert watched == [(i, data["type"]) for i, data in replay]
        assert any(t in TERMINAL for _, t in watched)
        # And the idle subscribers got nothing at all
        for s in sockets:
            assert s.next_frame(0.01) is None
            assert s.events() == []
    finally:
        for s in sockets:
            s.close()
    wait_status(http_client, session_id, "idle")


def test_live_errors_and_bad_frames(live_server: str) -> None:
    with LiveSocket(live_server) as live:
        live.send({"action": "ping"})
        assert live.read_until(lambda f: True) == {"type": "pong"}
        live.ws.send("{not json")
        assert live.read_until(lambda f: True)["code"] == "invalid_input"
        unknown = "0" * 32
        answer = live.subscribe(unknown, 0)
        assert answer == {
            "type": "error",
            "code": "not_found",
            "message": f"Session not found: '{unknown}'",
            "session_id": unknown,
        }
