"""The live channel's frames: what the server accepts and what it sends."""

from __future__ import annotations

import json

import pytest

from skyloop.live import protocol
from skyloop.live.protocol import ProtocolError
from skyloop.store import StoredEvent

SID = "a" * 32


def test_an_event_carries_exactly_the_sse_payload() -> None:
    event = StoredEvent(seq=7, type="response.output_text.delta", data={"delta": "hé", "response_id": "r"})
    frame = json.loads(protocol.event_message(SID, event))
    assert frame == {
        "type": "event",
        "session_id": SID,
        "id": 7,
        "event": {
            "type": "response.output_text.delta",
            "delta": "hé",
            "response_id": "r",
            "sequence_number": 7,
        },
    }


def test_an_event_too_large_for_one_message_is_announced_instead() -> None:
    big = StoredEvent(seq=9, type="response.output_item.done", data={"item": {"output": "x" * 200_000}})
    data = protocol.event_message(SID, big)
    assert len(data) < 200
    frame = json.loads(data)
    assert frame["type"] == "event_too_large"
    assert frame["id"] == 9
    assert frame["bytes"] > protocol.MAX_MESSAGE_BYTES
    # And one just under the limit still goes whole
    fits = StoredEvent(seq=10, type="t", data={"text": "y" * (protocol.MAX_MESSAGE_BYTES - 200)})
    assert json.loads(protocol.event_message(SID, fits))["type"] == "event"


@pytest.mark.parametrize(
    ("raw", "frame"),
    [
        ('{"action": "ping"}', protocol.Ping(action="ping")),
        ('{"action": "auth", "token": "sky_x"}', protocol.Auth(action="auth", token="sky_x")),
        (
            '{"action": "subscribe", "session_id": "s"}',
            protocol.Subscribe(action="subscribe", session_id="s"),
        ),
        (
            '{"action": "subscribe", "session_id": "s", "after": 0}',
            protocol.Subscribe(action="subscribe", session_id="s", after=0),
        ),
        (
            '{"action": "unsubscribe", "session_id": "s"}',
            protocol.Unsubscribe(action="unsubscribe", session_id="s"),
        ),
    ],
)
def test_good_frames_parse(raw: str, frame: object) -> None:
    assert protocol.parse(raw) == frame


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "[]",
        '{"action": "auth", "token": ""}',
        '{"action": "subscribe", "session_id": "s", "after": true}',
        '{"action": "subscribe", "session_id": "s", "after": 1.5}',
        '{"action": "subscribe", "session_id": "s", "after": 1000000000000}',
        '{"action": "ping", "x": 1}',
        '{"action": "auth", "token": "' + "t" * 40_000 + '"}',
    ],
)
def test_bad_frames_are_invalid_input(raw: str | None) -> None:
    with pytest.raises(ProtocolError) as refused:
        protocol.parse(raw)
    assert refused.value.code == "invalid_input"
    assert refused.value.frame()["type"] == "error"


def test_a_refusal_names_the_session_of_the_frame_it_answers() -> None:
    frame = protocol.Subscribe(action="subscribe", session_id=SID)
    error = ProtocolError("unauthorized", "authenticate first").frame(frame)
    assert error == {
        "type": "error",
        "code": "unauthorized",
        "message": "authenticate first",
        "session_id": SID,
    }
    assert "session_id" not in ProtocolError("invalid_input", "bad").frame(None)
