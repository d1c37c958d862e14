"""The client's pure SSE decoder: framing rules, fed whole, line by line, and split at every byte."""

from __future__ import annotations

import pytest

from skyloop.client import ServerSentEvent, SSEDecoder

SKYLOOP_STREAM = (
    b'retry: 1000\nevent: session.heartbeat\ndata: {"type":"session.heartbeat","sequence_number":null}\n\n'
    b'id: 7\nevent: session.status\ndata: {"type":"session.status","status":"running"}\n\n'
    b'id: 8\nevent: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"h\xc3\xa9"}\n\n'
    b"retry: 1000\n\n"
)


def _decode_all(chunks: list[bytes]) -> tuple[list[ServerSentEvent], SSEDecoder]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events, decoder


def test_skyloop_frames_decode_with_ids_events_and_retry() -> None:
    # Given the framing the stream app writes; When decoded in one piece
    events, decoder = _decode_all([SKYLOOP_STREAM])
    # Then three events, the heartbeat without an id of its own, and the closing retry hint noticed
    assert [e.event for e in events] == ["session.heartbeat", "session.status", "response.output_text.delta"]
    assert [e.id for e in events] == [None, "7", "8"]
    assert events[0].retry == 1000
    assert events[2].json()["delta"] == "hé"
    assert decoder.last_event_id == "8"
    assert decoder.closing_hint is True
    assert decoder.pending is False


def test_every_split_point_gives_the_same_events() -> None:
    # Given the reference decoding
    expected, _ = _decode_all([SKYLOOP_STREAM])
    # When the stream arrives in two chunks split at every byte boundary (inside UTF-8 too)
    for cut in range(len(SKYLOOP_STREAM) + 1):
        events, decoder = _decode_all([SKYLOOP_STREAM[:cut], SKYLOOP_STREAM[cut:]])
        # Then the events are identical
        assert events == expected, f"split at byte {cut}"
        assert decoder.closing_hint is True


def test_one_byte_at_a_time_with_crlf() -> None:
    # Given CRLF line endings delivered one byte per chunk (so every CR ends a chunk)
    raw = SKYLOOP_STREAM.replace(b"\n", b"\r\n")
    events, _ = _decode_all([raw[i : i + 1] for i in range(len(raw))])
    expected, _ = _decode_all([SKYLOOP_STREAM])
    assert events == expected


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_endings_are_all_accepted(eol: str) -> None:
    text = eol.join(["event: a", "data: x", "", "data: y", "", ""])
    events = SSEDecoder().feed(text)
    assert [(e.event, e.data) for e in events] == [("a", "x"), ("message", "y")]


def test_multi_line_data_is_joined_with_newlines() -> None:
    events = SSEDecoder().feed("data: first\ndata:second\ndata:  third\ndata\n\n")
    # "data:second" has no space to strip; "data:  third" loses exactly one; bare "data" adds an empty line
    assert events[0].data == "first\nsecond\n third\n"


def test_comments_and_unknown_fields_are_ignored() -> None:
    events = SSEDecoder().feed(": keep-alive\nfoo: bar\ndata: x\n: another\n\n:\n\n")
    assert len(events) == 1
    assert events[0].data == "x"


def test_id_without_data_moves_the_cursor_but_dispatches_nothing() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("id: 41\n\n") == []
    assert decoder.last_event_id == "41"
    # the next event without its own id reports the spec cursor, but no block id
    (event,) = decoder.feed("data: later\n\n")
    assert event.id is None
    assert event.last_event_id == "41"
    assert decoder.closing_hint is False


def test_id_with_nul_is_ignored() -> None:
    decoder = SSEDecoder()
    (event,) = decoder.feed("id: 1\0\ndata: x\n\n")
    assert event.id is None
    assert decoder.last_event_id == ""


def test_retry_must_be_digits() -> None:
    decoder = SSEDecoder()
    decoder.feed("retry: soon\ndata: x\n\n")
    assert decoder.retry is None
    (event,) = decoder.feed("retry: 250\ndata: y\n\n")
    assert event.retry == 250
    assert decoder.retry == 250


def test_bare_retry_block_is_a_closing_hint_until_the_next_event() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("retry: 1000\n\n") == []
    assert decoder.closing_hint is True
    decoder.feed("data: more\n\n")
    assert decoder.closing_hint is False


def test_unterminated_block_is_pending_not_dispatched() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("data: half") == []
    assert decoder.pending is True
    assert decoder.feed("\n") == []
    assert decoder.pending is True
    assert [e.data for e in decoder.feed("\n")] == ["half"]
    assert decoder.pending is False


def test_leading_bom_is_stripped_and_feed_line_works() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("\ufeffdata: x\n\n")[0].data == "x"
    assert decoder.feed_line("event: e") is None
    assert decoder.feed_line("data: {}") is None
    event = decoder.feed_line("")
    assert event is not None
    assert event.event == "e"
    assert event.json() == {}


def test_empty_lines_alone_dispatch_nothing() -> None:
    assert SSEDecoder().feed("\n\n\n\r\n") == []
