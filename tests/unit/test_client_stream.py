"""Stream resumption against scripted SSE answers: Last-Event-ID, no duplicates, bounded backoff."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from skyloop.client import (
    AsyncClient,
    Client,
    NotFoundError,
    OutputTextDelta,
    ReconnectPolicy,
    SessionHeartbeat,
    StreamDisconnectedError,
    UnknownEvent,
)

SID = "a" * 32
HEARTBEAT = (
    b'retry: 1000\nevent: session.heartbeat\ndata: {"type":"session.heartbeat","sequence_number":null}\n\n'
)
PLANNED_CLOSE = b"retry: 1000\n\n"


def frame(seq: int, delta: str | None = None) -> bytes:
    payload = {"type": "response.output_text.delta", "delta": delta or f"d{seq}", "sequence_number": seq}
    return f"id: {seq}\nevent: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


class Drop(Exception):
    """Marker in a script: the connection breaks here."""


class ScriptedStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes | type[Drop]]) -> None:
        self.parts = parts

    def __iter__(self) -> Iterator[bytes]:
        for part in self.parts:
            if part is Drop:
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            assert isinstance(part, bytes)
            yield part

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.iter_parts():
            yield part

    def iter_parts(self) -> Iterator[bytes]:
        return iter(self)


class ScriptedServer:
    """Serves one scripted answer per stream request and records the cursor headers."""

    def __init__(self, answers: list[Any], *, last_event_id: int = 0) -> None:
        self.answers = list(answers)
        self.cursors: list[str | None] = []
        self.snapshot_reads = 0
        self.last_event_id = last_event_id

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/stream"):
            self.snapshot_reads += 1
            return httpx.Response(200, json={"id": SID, "last_event_id": self.last_event_id})
        self.cursors.append(request.headers.get("last-event-id"))
        assert request.headers["accept"] == "text/event-stream"
        answer = self.answers.pop(0) if self.answers else [HEARTBEAT]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=ScriptedStream(answer)
        )

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        return self(request)


def make_client(server: ScriptedServer, sleeps: list[float], **policy: Any) -> Client:
    return Client(
        "http://sky.test",
        transport=httpx.MockTransport(server),
        reconnect=ReconnectPolicy(sleep=sleeps.append, **policy),
    )


def take(events: Iterator[Any], n: int) -> list[Any]:
    return [next(events) for _ in range(n)]


def ids(events: list[Any]) -> list[int | None]:
    return [e.event_id for e in events]


def test_resumes_after_a_drop_with_last_event_id() -> None:
    # Given a stream that drops after seq 2, and a server that then replays from the cursor
    server = ScriptedServer(
        [[HEARTBEAT, frame(1), frame(2), Drop], [HEARTBEAT, frame(3), frame(4)]], last_event_id=0
    )
    sleeps: list[float] = []
    with make_client(server, sleeps) as client, client.stream(SID) as events:
        # When reading through the drop
        got = take(events, 6)
        # Then every stored event once, a heartbeat per connection, and the right cursors
        assert ids(got) == [None, 1, 2, None, 3, 4]
        assert isinstance(got[0], SessionHeartbeat)
        assert isinstance(got[1], OutputTextDelta)
        assert got[1].delta == "d1"
        assert server.cursors == ["0", "2"]
        assert events.last_event_id == 4
        assert events.reconnects == 1
        assert sleeps == [0.2]  # one failure, the first backoff step


def test_planned_close_reconnects_at_once_without_counting_a_failure() -> None:
    server = ScriptedServer(
        [[HEARTBEAT, frame(5), PLANNED_CLOSE], [HEARTBEAT, frame(6), PLANNED_CLOSE], [HEARTBEAT, frame(7)]]
    )
    sleeps: list[float] = []
    with make_client(server, sleeps, max_failures=0) as client, client.stream(SID, after=4) as events:
        got = [e for e in take(events, 6) if e.event_id is not None]
    assert ids(got) == [5, 6, 7]
    assert server.cursors == ["4", "5", "6"]
    assert sleeps == []
    assert server.snapshot_reads == 0  # an explicit cursor needs no snapshot


def test_overlapping_replay_is_never_yielded_twice() -> None:
    # Given a server that replays events the client already has (and more)
    server = ScriptedServer(
        [[HEARTBEAT, frame(1), frame(2), frame(3), Drop], [HEARTBEAT, frame(2), frame(3), frame(4)]]
    )
    with make_client(server, []) as client, client.stream(SID, after=0) as events:
        got = [e for e in take(events, 6) if e.event_id is not None]
    assert ids(got) == [1, 2, 3, 4]


def test_live_tail_starts_at_the_snapshot_cursor() -> None:
    # Given a session whose snapshot says last_event_id=9
    server = ScriptedServer([[HEARTBEAT, Drop], [HEARTBEAT, frame(10)]], last_event_id=9)
    with make_client(server, []) as client, client.stream(SID) as events:
        got = take(events, 3)
    # Then even a drop before any stored event resumes from 9, not from "now"
    assert server.cursors == ["9", "9"]
    assert ids(got) == [None, None, 10]


def test_backoff_doubles_to_the_cap_and_gives_up() -> None:
    # Given a stream that drops, then a server that refuses every connection
    refused = httpx.ConnectError("refused")
    server = ScriptedServer([[HEARTBEAT, frame(1), Drop]] + [refused] * 20)
    sleeps: list[float] = []
    with make_client(server, sleeps, max_failures=8) as client, client.stream(SID, after=0) as events:
        take(events, 2)
        with pytest.raises(StreamDisconnectedError) as info:
            next(events)
    assert sleeps == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert server.cursors[-1] == "1"


def test_a_working_connection_resets_the_failure_budget() -> None:
    # Given repeated short-lived connections that each deliver a frame and then drop
    answers: list[Any] = []
    for seq in range(1, 6):
        answers += [httpx.ConnectError("refused"), [HEARTBEAT, frame(seq), Drop]]
    server = ScriptedServer(answers)
    sleeps: list[float] = []
    with make_client(server, sleeps, max_failures=2) as client, client.stream(SID, after=0) as events:
        got = [e for e in take(events, 10) if e.event_id is not None]
    # Then each drop + refusal costs two failures, never more than the budget of 2
    assert ids(got) == [1, 2, 3, 4, 5]
    assert max(sleeps) == 0.4


def test_retryable_statuses_retry_and_others_raise() -> None:
    unavailable = httpx.Response(503, json={"error": {"code": "runner_unavailable", "message": "later"}})
    server = ScriptedServer([unavailable, [HEARTBEAT, frame(1)]])
    sleeps: list[float] = []
    with make_client(server, sleeps) as client, client.stream(SID, after=0) as events:
        assert ids(take(events, 2)) == [None, 1]
    assert sleeps == [0.2]

    gone = httpx.Response(404, json={"error": {"code": "not_found", "message": "Session not found"}})
    server = ScriptedServer([[HEARTBEAT, frame(1), Drop], gone])
    with make_client(server, []) as client, client.stream(SID, after=0) as events:
        take(events, 2)
        with pytest.raises(NotFoundError):
            next(events)


def test_a_read_abandoned_mid_way_resumes_from_the_last_delivered_event() -> None:
    # Given a connection whose read is interrupted (Ctrl-C) after seq 2 was delivered
    class Interrupting(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield HEARTBEAT + frame(1) + frame(2)
            raise KeyboardInterrupt

    def first(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Interrupting())

    server = ScriptedServer([first(httpx.Request("GET", "http://x")), [HEARTBEAT, frame(3)]])
    with make_client(server, []) as client, client.stream(SID, after=0) as events:
        assert ids(take(events, 3)) == [None, 1, 2]
        with pytest.raises(KeyboardInterrupt):
            next(events)
        # When iteration continues
        got = take(events, 2)
    # Then it reconnects from 2, with no failure counted against the stream's cursor
    assert ids(got) == [None, 3]
    assert server.cursors == ["0", "2"]


def test_wrong_content_type_is_an_error() -> None:
    html = httpx.Response(200, headers={"content-type": "text/html"}, text="<html>")
    server = ScriptedServer([html])
    with (
        make_client(server, []) as client,
        client.stream(SID, after=0) as events,
        pytest.raises(Exception, match="text/event-stream"),
    ):
        next(events)


def test_unknown_and_non_json_events_pass_through_typed_as_unknown() -> None:
    body = [
        HEARTBEAT,
        b'id: 1\nevent: session.brand_new\ndata: {"type":"session.brand_new","x":1}\n\n',
        b"id: 2\nevent: oddity\ndata: not json\n\n",
    ]
    with make_client(ScriptedServer([body]), []) as client, client.stream(SID, after=0) as events:
        _, new, odd = take(events, 3)
    assert isinstance(new, UnknownEvent)
    assert new.type == "session.brand_new"
    assert new.x == 1  # type: ignore[attr-defined]
    assert isinstance(odd, UnknownEvent)
    assert odd.type == "oddity"
    assert odd.event_id == 2


def test_close_ends_iteration() -> None:
    with make_client(ScriptedServer([[HEARTBEAT, frame(1)]]), []) as client:
        events = client.stream(SID, after=0)
        next(events)
        events.close()
        assert list(events) == []


def test_async_stream_resumes_after_drop_and_planned_close() -> None:
    server = ScriptedServer(
        [[HEARTBEAT, frame(1), Drop], [HEARTBEAT, frame(1), frame(2), PLANNED_CLOSE], [HEARTBEAT, frame(3)]],
        last_event_id=0,
    )
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def main() -> list[Any]:
        client = AsyncClient(
            "http://sky.test",
            transport=httpx.MockTransport(server.handle_async),
            reconnect=ReconnectPolicy(sleep=fake_sleep),
        )
        async with client, client.stream(SID) as events:
            got = []
            async for event in events:
                got.append(event)
                if event.event_id == 3:
                    break
            assert events.reconnects == 2
            return got

    got = asyncio.run(main())
    assert ids(got) == [None, 1, None, 2, None, 3]
    assert server.cursors == ["0", "1", "2"]
    assert sleeps == [0.2]


def test_async_stream_gives_up_after_the_budget() -> None:
    server = ScriptedServer([[HEARTBEAT, Drop]] + [httpx.ConnectError("refused")] * 5)
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def main() -> None:
        client = AsyncClient(
            "http://sky.test",
            transport=httpx.MockTransport(server.handle_async),
            reconnect=ReconnectPolicy(sleep=fake_sleep, max_failures=3),
        )
        async with client, client.stream(SID, after=0) as events:
            await events.next_event()
            with pytest.raises(StreamDisconnectedError):
                await events.next_event()

    asyncio.run(main())
    assert sleeps == [0.2, 0.4, 0.8]


# ------------------------------------------------------------ releasing connections
class RecordingStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """An SSE body that never ends by itself and records whether the client gave it back."""

    def __init__(self) -> None:
        self.closed = False
        self.reads = 0

    def __iter__(self) -> Iterator[bytes]:
        yield HEARTBEAT
        yield frame(1)
        while not self.closed:  # a live tail: comments forever, as long as someone reads
            self.reads += 1
            yield b": keep-alive\n\n"

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self:
            yield part

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


def _recording_server() -> tuple[ScriptedServer, RecordingStream]:
    body = RecordingStream()
    live = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)
    return ScriptedServer([live]), body


def test_close_releases_the_http_connection() -> None:
    # Given a stream reading a live connection
    server, body = _recording_server()
    with make_client(server, []) as client:
        events = client.stream(SID, after=0)
        assert ids(take(events, 2)) == [None, 1]
        assert not body.closed
        # When the caller closes the stream
        events.close()
        # Then the response is closed (its connection goes back to the pool), not left for the GC
        assert body.closed
        assert list(events) == []
    assert server.cursors == ["0"]  # and it did not reconnect


def test_leaving_the_stream_context_releases_the_http_connection() -> None:
    server, body = _recording_server()
    with make_client(server, []) as client:
        with client.stream(SID, after=0) as events:
            take(events, 2)
            assert not body.closed
        assert body.closed


def test_async_close_releases_the_http_connection() -> None:
    server, body = _recording_server()

    async def main() -> None:
        async with AsyncClient(
            "http://sky.test", transport=httpx.MockTransport(server.handle_async)
        ) as client:
            events = client.stream(SID, after=0)
            assert ids([await events.next_event(), await events.next_event()]) == [None, 1]
            assert not body.closed
            await events.aclose()
            assert body.closed
            assert [e async for e in events] == []

            # and leaving ``async with`` releases a fresh one just the same
            second = RecordingStream()
            server.answers.append(
                httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=second)
            )
            async with client.stream(SID, after=0) as again:
                await again.next_event()
                assert not second.closed
            assert second.closed

    asyncio.run(main())
