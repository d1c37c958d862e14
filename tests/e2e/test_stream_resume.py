"""Stream resume: ``Last-Event-ID`` / ``?after=N`` replay, live tail, planned close, bad cursors.

Real processes (``skyloop dev`` and ``skyloop mock-llm``), real sockets. Streams
are read with :class:`tests.e2e.sse.SseSocket`, a raw-socket reader that can
wait with a deadline and drop the connection at an exact point, like a client
whose network goes away.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.e2e.conftest import (
    ORIGIN,
    DevProcess,
    function_tool,
    get_session_snapshot,
    message_event,
    release_gate,
    scripted_session,
    wait_for_gate,
    wait_status,
)
from tests.e2e.sse import SseSocket, TimedFrame, is_status, of_type

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.e2e


def open_stream(
    base_url: str,
    session_id: str,
    *,
    last_event_id: str | int | None = None,
    after: str | int | None = None,
) -> SseSocket:
    """Open a stream and consume its first frame, which must be the immediate heartbeat."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else None
    params = {"after": str(after)} if after is not None else None
    stream = SseSocket(base_url, f"/v1/sessions/{session_id}/stream", headers=headers, params=params)
    assert stream.status == 200, stream.status
    assert stream.headers["content-type"].startswith("text/event-stream")
    assert stream.headers.get("cache-control") == "no-cache", stream.headers
    first = stream.next_frame(10)
    assert first is not None, first
    assert first.data["type"] == "session.heartbeat", first
    assert first.id is None, first
    return stream


def post_event(http_client: httpx.Client, session_id: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = http_client.post(f"/v1/sessions/{session_id}/events", json=body)
    assert resp.status_code == 202, f"{resp.status_code} {resp.text[:300]}"
    return dict(resp.json())


def replay(base_url: str, session_id: str, last_id: int, **cursor: Any) -> list[TimedFrame]:
    """Stored frames a cursor-carrying stream yields up to ``last_id``, checking nothing more follows."""
    with open_stream(base_url, session_id, **cursor) as stream:
        if last_id > 0:
            stream.read_until(lambda f: f.id == last_id, timeout_s=15)
        extra = [f for f in stream.read_for(0.2) if f.id is not None]
        assert not extra, f"unexpected frames after the log's end: {[(f.id, f.event) for f in extra]}"
        return stream.stored()


def wire(frames: list[TimedFrame]) -> list[tuple[int | None, str | None, dict[str, Any]]]:
    """What a client can compare across connections: id, event name and payload."""
    return [(f.id, f.event, f.data) for f in frames]


def assert_consecutive(ids: list[int | None], first: int) -> None:
    """No gap, no duplicate, in order."""
    assert ids == list(range(first, first + len(ids))), ids


def test_last_event_id_replays_the_tail_then_continues_live(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if the stream ignored Last-Event-ID / ?after (a live tail would yield nothing to
    # compare), replayed from the wrong seq, altered payloads on replay, or stopped after replaying.
    # Given a session whose whole first turn was recorded by a live reader
    session_id, _model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="resume-tail",
        responses=[
            {"text": "the first answer arrives in several words", "stream": True},
            {"text": "the second answer", "stream": True},
        ],
    )
    with open_stream(live_server, session_id) as live:
        post_event(http_client, session_id, message_event("first question"))
        live.read_until(is_status("idle"))
    recorded = live.stored()
    ids = [f.id for f in recorded]
    assert_consecutive(ids, 1)
    assert len(recorded) >= 6, [f.event for f in recorded]
    mid = ids[len(ids) // 2]

    # When a new stream opens with Last-Event-ID set to an id in the middle
    with open_stream(live_server, session_id, last_event_id=mid) as resumed:
        resumed.read_until(lambda f: f.id == ids[-1], timeout_s=15)
        # Then it first replays exactly the recorded tail: same ids, same events, same payloads
        assert wire(resumed.stored()) == wire([f for f in recorded if f.id > mid])
        # And then it continues live: the next turn arrives on the same connection
        assert not [f for f in resumed.read_for(0.3) if f.id is not None]
        post_event(http_client, session_id, message_event("second question"))
        resumed.read_until(is_status("idle"))
    second_turn = [f for f in resumed.stored() if f.id > ids[-1]]
    assert_consecutive([f.id for f in second_turn], ids[-1] + 1)
    assert [f.data["type"] for f in second_turn][:2] == ["session.status", "session.input.consumed"]
    assert "response.completed" in [f.data["type"] for f in second_turn]
    full_log = recorded + second_turn
    last = full_log[-1].id
    assert last is not None

    # When a stream opens with Last-Event-ID: 0
    # Then it replays the whole log, identical to what the live readers saw
    assert wire(replay(live_server, session_id, last, last_event_id=0)) == wire(full_log)
    # And ?after=N does exactly what the header does
    assert wire(replay(live_server, session_id, last, after=mid)) == wire([f for f in full_log if f.id > mid])
    assert wire(replay(live_server, session_id, last, after=0)) == wire(full_log)


def test_reader_dropping_mid_turn_resumes_with_every_event_exactly_once(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if a reconnect with Last-Event-ID missed the events written while the reader was
    # away (the parked call would never be seen, so the turn could not be answered), repeated
    # ones it already had, or stopped after the replay (the live end of the turn would be lost).
    # Given a turn whose model calls are held at the mock's gate: a client-tool call, then text
    session_id, _model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="resume-drop",
        responses=[
            {
                "tool_calls": [{"call_id": "call_drop", "name": "Glob", "arguments": {"pattern": "*.py"}}],
                "block": True,
            },
            {"text": "all done after the reconnect", "stream": True, "block": True},
        ],
    )
    # And a reader that sees the turn start, then drops its connection
    with open_stream(live_server, session_id) as first:
        post_event(http_client, session_id, message_event("list files", tools=[function_tool("Glob")]))
        first.read_until(of_type("response.in_progress"))
    seen_first = first.stored()
    last_seen = seen_first[-1].id
    assert last_seen is not None

    # When the model answers while nobody is connected (the call is published and the turn parks)
    wait_for_gate(mock_llm_server_url)
    release_gate(mock_llm_server_url)
    deadline = time.monotonic() + 20
    while get_session_snapshot(http_client, session_id)["last_event_id"] <= last_seen:
        assert time.monotonic() < deadline, "the turn wrote nothing after the model answered"
        time.sleep(0.05)
    # And the reader reconnects with its last id, answers the parked call, and reads on live
    with open_stream(live_server, session_id, last_event_id=last_seen) as second:
        parked = second.read_until(
            lambda f: (
                f.data.get("type") == "response.output_item.done"
                and f.data["item"].get("status") == "action_required"
            )
        )
        assert parked.data["item"]["call_id"] == "call_drop"
        post_event(
            http_client,
            session_id,
            {"type": "function_call_output", "data": {"call_id": "call_drop", "output": "a.py"}},
        )
        wait_for_gate(mock_llm_server_url)
        release_gate(mock_llm_server_url)
        second.read_until(is_status("idle"))
    seen_second = second.stored()

    # Then the two connections together saw every event exactly once, in order
    union = seen_first + seen_second
    assert seen_second[0].id == last_seen + 1
    assert_consecutive([f.id for f in union], 1)
    types = [f.data["type"] for f in seen_second]
    assert "response.completed" in types
    assert types[-1] == "session.status"
    # And that is exactly the log a third reader replays from 0
    assert wire(replay(live_server, session_id, union[-1].id or 0, last_event_id=0)) == wire(union)


def test_snapshot_then_stream_after_its_last_event_id_yields_exactly_the_rest(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if last_event_id were not the cursor matching the snapshot (a stream from it would
    # repeat events already in the snapshot, or skip the ones after it), or if the snapshot
    # showed items that the stream then publishes again.
    # Given a turn held mid-way (the model call is blocked at the mock's gate)
    session_id, _model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="resume-snap",
        responses=[{"text": "the answer that comes after the snapshot", "block": True, "stream": True}],
    )
    user_item = post_event(http_client, session_id, message_event("question"))["item_id"]
    wait_for_gate(mock_llm_server_url)
    # When a client takes a snapshot and streams from its last_event_id
    snap = get_session_snapshot(http_client, session_id)
    cursor = snap["last_event_id"]
    assert snap["status"] == "running"
    assert [i["id"] for i in snap["items"]] == [user_item]
    with open_stream(live_server, session_id, last_event_id=cursor) as stream:
        # Then nothing the snapshot already reflects is repeated while the model is held
        assert not [f for f in stream.read_for(0.3) if f.id is not None]
        release_gate(mock_llm_server_url)
        stream.read_until(is_status("idle"))
    after = stream.stored()
    # And the stream yields exactly the events after the snapshot, starting right after it
    assert_consecutive([f.id for f in after], cursor + 1)
    types = [f.data["type"] for f in after]
    assert "session.input.consumed" not in types, types
    assert "response.in_progress" not in types, types
    assert types[-2:] == ["response.completed", "session.status"]
    full_log = replay(live_server, session_id, after[-1].id or 0, after=0)
    assert wire(after) == wire([f for f in full_log if (f.id or 0) > cursor])
    # And the items it publishes are exactly the ones the snapshot did not have yet
    final = wait_status(http_client, session_id, "idle")
    new_items = [i["id"] for i in final["items"] if i["id"] not in {j["id"] for j in snap["items"]}]
    published = [f.data["item"]["id"] for f in after if f.data["type"] == "response.output_item.done"]
    assert new_items == published
    assert len(new_items) == 1


def test_stream_without_cursor_is_a_live_tail(
    live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Breaks if a cursor-less stream replayed history (a reconnecting UI would render old
    # events twice) instead of starting from the session's current seq.
    # Given a session with a finished turn and nobody watching
    session_id, _model = scripted_session(
        http_client,
        mock_url=mock_llm_server_url,
        runner_id=live_runner_id,
        kind="resume-tail-live",
        responses=[{"text": "one"}, {"text": "two"}],
    )
    post_event(http_client, session_id, message_event("first"))
    before = wait_status(http_client, session_id, "idle")["last_event_id"]
    assert before > 0
    # When a stream opens without Last-Event-ID or ?after
    with open_stream(live_server, session_id) as stream:
        # Then none of the earlier events is replayed
        assert not [f for f in stream.read_for(0.5) if f.id is not None]
        # And the next turn's events arrive live, starting right after the earlier log
        post_event(http_client, session_id, message_event("second"))
        stream.read_until(is_status("idle"))
    got = stream.stored()
    assert got[0].id == before + 1
    assert got[0].data["type"] == "session.status"
    assert got[0].data["status"] == "running"
    assert_consecutive([f.id for f in got], before + 1)


@pytest.mark.parametrize(
    ("headers", "params"),
    [
        ({"Last-Event-ID": "abc"}, None),
        ({"Last-Event-ID": "-1"}, None),
        ({"Last-Event-ID": "1.5"}, None),
        (None, {"after": "abc"}),
        (None, {"after": "-1"}),
        (None, {"after": str(10**12)}),
    ],
    ids=[
        "header-abc",
        "header-negative",
        "header-fraction",
        "after-abc",
        "after-negative",
        "after-too-large",
    ],
)
def test_bad_cursor_is_400_with_the_error_body(
    live_server: str,
    http_client: httpx.Client,
    live_runner_id: str,
    mock_llm_server_url: str,
    headers: dict[str, str] | None,
    params: dict[str, str] | None,
) -> None:
    # Breaks if a malformed cursor were ignored (the stream would open as a live tail with 200,
    # silently losing the events the client asked for) or answered without the error body.
    # Given an existing session
    session_id = _idle_session(http_client, mock_llm_server_url, live_runner_id)
    # When the stream is requested with a malformed cursor
    with http_client.stream(
        "GET", f"/v1/sessions/{session_id}/stream", headers=headers, params=params, timeout=10
    ) as resp:
        # Then it is 400 invalid_input with the error body, and no stream
        assert resp.status_code == 400, resp.status_code
        body = json.loads(resp.read())
    assert body["error"]["code"] == "invalid_input"
    assert body["error"]["message"]


def test_unknown_session_stream_is_404_with_the_error_body(http_client: httpx.Client) -> None:
    # Breaks if the stream opened (200, heartbeats forever) for a session that does not exist.
    for session_id in (uuid.uuid4().hex, "not-a-session-id"):
        # When the stream of an unknown session is requested
        with http_client.stream("GET", f"/v1/sessions/{session_id}/stream", timeout=10) as resp:
            # Then it is 404 not_found with the error body
            assert resp.status_code == 404, (session_id, resp.status_code)
            body = json.loads(resp.read())
        assert body["error"]["code"] == "not_found", body
        assert body["error"]["message"], body


_IDLE_SESSIONS: dict[str, str] = {}


def _idle_session(http_client: httpx.Client, mock_url: str, runner_id: str) -> str:
    """One idle session shared by the parametrized bad-cursor cases (they never write)."""
    key = str(http_client.base_url)
    if key not in _IDLE_SESSIONS:
        _IDLE_SESSIONS[key], _ = scripted_session(
            http_client, mock_url=mock_url, runner_id=runner_id, kind="resume-bad", responses=[]
        )
    return _IDLE_SESSIONS[key]


# ------------------------------------------------------------------------ planned close
STREAM_MAX_S = 2.0
HEARTBEAT_S = 0.5


@pytest.fixture(scope="module", autouse=True)
def _short_stream_launch(skyloop_dev_factory: Callable[..., DevProcess]) -> DevProcess:
    """Launched when the module starts so its startup overlaps the tests above; waited for below."""
    return skyloop_dev_factory(
        {"SKYLOOP_STREAM_MAX_S": str(STREAM_MAX_S), "SKYLOOP_HEARTBEAT_S": str(HEARTBEAT_S)}
    )


@pytest.fixture(scope="module")
def short_stream_server(_short_stream_launch: DevProcess) -> str:
    return _short_stream_launch.ready()


@pytest.fixture
def short_client(short_stream_server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=short_stream_server, timeout=30, headers={"Origin": ORIGIN}) as client:
        yield client


def test_planned_close_sends_retry_and_reconnecting_with_last_id_loses_nothing(
    short_stream_server: str, short_client: httpx.Client, mock_llm_server_url: str
) -> None:
    # Breaks if the stream never closed by itself (Lambda would cut it at 15 min without a
    # retry hint), closed without `retry:`, sent no idle heartbeats (proxies drop silent
    # connections), gave heartbeats an id (a client would resume from it), or if a reconnect
    # after the planned close lost the events written in between.
    runner_id = short_client.get("/v1/runners").json()["data"][0]["runner_id"]
    # Given a server whose streams live 2 s with 0.5 s heartbeats, and an idle session
    session_id, _model = scripted_session(
        short_client,
        mock_url=mock_llm_server_url,
        runner_id=runner_id,
        kind="resume-close",
        responses=[{"text": "the answer written after the planned close", "block": True, "stream": True}],
    )
    # When a reader watches the idle session
    idle = open_stream(short_stream_server, session_id)
    try:
        idle.read_to_end(STREAM_MAX_S + 4)
    finally:
        idle.close()
    # Then the stream ends by itself after about STREAM_MAX_S, with a retry: field last
    assert idle.ended_at is not None
    lifetime = idle.ended_at - idle.opened_at
    assert STREAM_MAX_S - 0.2 <= lifetime <= STREAM_MAX_S + 2.5, lifetime
    assert idle.trailing_retry, idle.retries
    assert idle.retries, idle.retries
    assert idle.retries[-1][1] > 0, idle.retries
    # And only heartbeats arrived, without ids, about every HEARTBEAT_S
    assert all(f.data["type"] == "session.heartbeat" and f.id is None for f in idle.frames)
    times = [f.at for f in idle.frames]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(idle.frames) >= 4, gaps
    assert all(0.2 <= g <= 1.5 for g in gaps), gaps
    assert abs(statistics.median(gaps) - HEARTBEAT_S) <= 0.2, gaps

    # Given a turn whose model call is held while a reader's stream reaches its planned close
    # (the reader starts from cursor 0 so that it has a cursor even if the close comes first)
    with open_stream(short_stream_server, session_id, last_event_id=0) as first:
        post_event(short_client, session_id, message_event("question"))
        first.read_to_end(STREAM_MAX_S + 4)
    assert first.trailing_retry
    seen_first = first.stored()
    last_seen = seen_first[-1].id if seen_first else 0
    assert last_seen is not None
    # And the turn finishes while the reader is away
    wait_for_gate(mock_llm_server_url)
    release_gate(mock_llm_server_url)
    wait_status(short_client, session_id, "idle")
    # When the reader reconnects with its last id
    with open_stream(short_stream_server, session_id, last_event_id=last_seen) as second:
        second.read_until(is_status("idle"))
    # Then it continues exactly where it stopped: no gap, no duplicate, the answer included
    union = seen_first + second.stored()
    assert_consecutive([f.id for f in union], 1)
    assert second.stored()[0].id == last_seen + 1
    texts = [
        f.data["item"]["content"][0]["text"]
        for f in union
        if f.data["type"] == "response.output_item.done" and f.data["item"]["type"] == "message"
    ]
    assert texts == ["the answer written after the planned close"]
    assert wire(replay(short_stream_server, session_id, union[-1].id or 0, last_event_id=0)) == wire(union)
