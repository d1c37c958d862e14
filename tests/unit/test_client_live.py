"""The SDK's live cursor (no I/O): exactly once and in order from an at-least-once, unordered channel."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skyloop.client import LiveCursor, NotFoundError, ReconnectPolicy, SessionHeartbeat, UnauthorizedError
from skyloop.client._live import GAP_WAIT_S, PING_INTERVAL_S, PONG_TIMEOUT_S, _Dead
from skyloop.client._requests import live_url

SID = "a" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cursor(after: int = 0, *, token: str | None = None) -> tuple[LiveCursor, Clock]:
    clock = Clock()
    return LiveCursor(SID, after, token=token, policy=ReconnectPolicy(), clock=clock), clock


def event(seq: int) -> str:
    payload = {"type": "response.output_text.delta", "delta": str(seq), "sequence_number": seq}
    return json.dumps({"type": "event", "session_id": SID, "id": seq, "event": payload})


def subscribed(after: int, last: int, complete: bool = True) -> str:
    return json.dumps(
        {"type": "subscribed", "session_id": SID, "after": after, "last_event_id": last, "complete": complete}
    )


def drain(c: LiveCursor) -> list[Any]:
    out = []
    while c.ready():
        out.append(c.queue.popleft())
    return out


def ids(events: list[Any]) -> list[int | None]:
    return [e.event_id for e in events]


def test_auth_comes_first_and_subscribe_follows_the_answer() -> None:
    c, _ = cursor(5, token="sky_x")
    assert [json.loads(f) for f in c.opened()] == [{"action": "auth", "token": "sky_x"}]
    (subscribe,) = c.received(json.dumps({"type": "authenticated", "principal": "me"}))
    assert json.loads(subscribe) == {"action": "subscribe", "session_id": SID, "after": 5}
    # Without a token (an open local stack) it subscribes at once
    c, _ = cursor(0)
    assert json.loads(c.opened()[0])["action"] == "subscribe"


def test_nothing_is_delivered_before_the_subscription_is_confirmed_then_a_heartbeat_leads() -> None:
    c, _ = cursor(0)
    c.opened()
    c.received(event(1))
    assert drain(c) == []
    c.received(subscribed(0, 1))
    first, *rest = drain(c)
    assert isinstance(first, SessionHeartbeat)
    assert ids(rest) == [1]


def test_duplicates_are_dropped_and_late_ids_wait_for_the_gap_to_fill() -> None:
    c, _ = cursor(0)
    c.opened()
    c.received(subscribed(0, 0))
    drain(c)
    for seq in (1, 3, 1, 4, 2, 3, 2, 5):
        c.received(event(seq))
    assert ids(drain(c)) == [1, 2, 3, 4, 5]
    assert c.last_event_id == 5
    # And a late copy of a delivered event is forgotten at once: nothing held, no gap to heal
    c.received(event(3))
    assert drain(c) == []
    assert c.pending == {}
    assert c.gap_since is None


def test_a_lasting_gap_resubscribes_from_the_last_delivered_id() -> None:
    c, clock = cursor(0)
    c.opened()
    c.sent()
    c.received(subscribed(0, 0))
    c.received(event(1))
    c.received(event(3))
    assert c.due() == []  # a gap is given time to fill first
    clock.now += GAP_WAIT_S
    (frame,) = c.due()
    assert json.loads(frame) == {"action": "subscribe", "session_id": SID, "after": 1}
    clock.now += 0.5
    assert c.due() == []  # not again at once
    c.received(event(2))
    assert ids(drain(c))[1:] == [1, 2, 3]
    assert c.gap_since is None


def test_an_incomplete_replay_asks_for_the_rest() -> None:
    c, _ = cursor(0)
    c.opened()
    c.received(event(1))
    (frame,) = c.received(subscribed(0, 1, complete=False))
    assert json.loads(frame)["after"] == 1


def test_keepalive_pings_and_a_missing_pong_means_a_dead_connection() -> None:
    c, clock = cursor(0)
    c.opened()
    c.sent()
    assert c.wait_s() == pytest.approx(PING_INTERVAL_S)
    clock.now += PING_INTERVAL_S
    assert [json.loads(f) for f in c.due()] == [{"action": "ping"}]
    c.sent()
    c.received(json.dumps({"type": "pong"}))
    clock.now += PING_INTERVAL_S
    c.due()
    c.sent()
    clock.now += PONG_TIMEOUT_S + 1
    with pytest.raises(_Dead):
        c.due()


def test_error_frames_are_the_sdks_typed_errors() -> None:
    c, _ = cursor(0)
    with pytest.raises(NotFoundError, match="Session not found"):
        c.received(
            json.dumps(
                {"type": "error", "code": "not_found", "message": "Session not found", "session_id": SID}
            )
        )
    with pytest.raises(UnauthorizedError):
        c.received(json.dumps({"type": "error", "code": "unauthorized", "message": "no"}))
    # Another session's error or event is not this watch's business
    assert (
        c.received(json.dumps({"type": "error", "code": "not_found", "message": "x", "session_id": "b" * 32}))
        == []
    )


def test_a_too_large_event_is_queued_for_fetching() -> None:
    c, _ = cursor(0)
    c.received(json.dumps({"type": "event_too_large", "session_id": SID, "id": 1, "bytes": 200000}))
    assert c.too_large == [1]


def test_planned_closes_reconnect_at_once_and_failures_back_off_until_the_budget_is_spent() -> None:
    c, _ = cursor(0)
    c.opened()
    c.received(subscribed(0, 0))
    assert c.closed(None, 1001) == 0.0  # API Gateway's two-hour limit
    c = LiveCursor(SID, 0, token=None, policy=ReconnectPolicy(max_failures=2))
    assert c.closed(OSError("down")) > 0
    assert c.closed(OSError("down")) > 0
    with pytest.raises(Exception, match="reconnect attempts failed"):
        c.closed(OSError("down"))


@pytest.mark.parametrize(
    ("base", "advertised", "expected"),
    [
        ("http://127.0.0.1:8080", "/v1/live", "ws://127.0.0.1:8080/v1/live"),
        (
            "https://x.cloudfront.net",
            "wss://a.execute-api.us-east-1.amazonaws.com/live",
            "wss://a.execute-api.us-east-1.amazonaws.com/live",
        ),
        ("https://host/api", "/v1/live", "wss://host/v1/live"),
        ("http://h", None, None),
        ("http://h", "http://not-a-websocket", None),
    ],
)
def test_live_url_from_server_info(base: str, advertised: str | None, expected: str | None) -> None:
    body = {"live": {"url": advertised}} if advertised else {"live": None}
    assert live_url(base, body) == expected
