"""The shared session feed: one reader per session, no reads while idle where wake-ups exist."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from skyloop.settings import Settings
from skyloop.store import StoredEvent, notifier
from skyloop.stream import feed


class FakeLog:
    """An in-memory event log with the store's ``read_event_page`` contract; counts reads."""

    def __init__(self) -> None:
        self.events: list[StoredEvent] = []
        self.reads = 0
        self.lock = threading.Lock()
        self.fail_next = 0

    def append(self, session_id: str, *types: str) -> None:
        with self.lock:
            for type_ in types:
                self.events.append(StoredEvent(seq=len(self.events) + 1, type=type_, data={}))
        notifier.notify(session_id)

    def read_event_page(self, session_id: str, after: int, *, limit: int = 500) -> Any:
        with self.lock:
            self.reads += 1
            if self.fail_next:
                self.fail_next -= 1
                raise ConnectionError("store unreachable")
            page = [e for e in self.events if e.seq > after][:limit]
            covered = page[-1].seq if page else after
            return page, covered, len(page) >= limit


SETTINGS = Settings.model_validate({"SKYLOOP_POLL_BUSY_S": 0.01, "SKYLOOP_POLL_IDLE_S": 0.05})


@pytest.fixture
def wakeups() -> Any:
    notifier.enable_wakeups()
    yield
    notifier.enable_wakeups(False)


async def _drain(cursor: feed.FeedCursor, want: int, timeout: float = 2.0) -> list[int]:
    seen: list[int] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while len(seen) < want and asyncio.get_running_loop().time() < deadline:
        page, _ = await cursor.next_page()
        seen += [e.seq for e in page]
        if len(seen) < want:
            await cursor.wait(0.05)
    return seen


def test_streams_of_one_session_share_one_reader_and_read_nothing_while_idle(wakeups: None) -> None:
    async def scenario() -> None:
        # GIVEN 30 open streams on one session, all at the live tail
        log = FakeLog()
        registry = feed.FeedRegistry()
        cursors = [registry.cursor(log, SETTINGS, "s1", 0, False) for _ in range(30)]
        await asyncio.sleep(0.05)
        reads_before_idle = log.reads
        # WHEN nothing is appended for a while
        await asyncio.gather(*(c.wait(0.3) for c in cursors))
        # THEN no read happened at all (wake-ups only; no blind polling)
        assert log.reads == reads_before_idle == 1
        # WHEN events are appended
        log.append("s1", "a", "b", "c")
        results = await asyncio.gather(*(_drain(c, 3) for c in cursors))
        # THEN every stream got every event once, in order, from a single shared read
        assert all(r == [1, 2, 3] for r in results)
        assert log.reads == 2
        for c in cursors:
            c.close()
        assert registry._feeds == {}

    asyncio.run(scenario())


def test_without_wakeups_the_feed_polls_with_backoff_and_still_delivers() -> None:
    async def scenario() -> None:
        log = FakeLog()
        registry = feed.FeedRegistry()
        cursor = registry.cursor(log, SETTINGS, "s2", 0, False)
        await asyncio.sleep(0.5)
        idle_reads = log.reads
        # idle polling backs off from 10 ms to 50 ms: far fewer than 50 reads in half a second
        assert 3 <= idle_reads <= 20
        with log.lock:  # an append the feed is not told about (another process, as in the cloud)
            log.events.append(StoredEvent(seq=1, type="x", data={}))
        assert await _drain(cursor, 1) == [1]
        cursor.close()

    asyncio.run(scenario())


def test_a_cursor_behind_the_feed_replays_from_the_log_then_joins(wakeups: None) -> None:
    async def scenario() -> None:
        log = FakeLog()
        log.append("s3", *["e"] * 5)
        registry = feed.FeedRegistry()
        live = registry.cursor(log, SETTINGS, "s3", 5, False)
        await asyncio.sleep(0.05)
        replay = registry.cursor(log, SETTINGS, "s3", 2, False)  # a reconnect with Last-Event-ID: 2
        assert await _drain(replay, 3) == [3, 4, 5]
        log.append("s3", "f")
        assert await _drain(replay, 1) == [6]
        assert await _drain(live, 1) == [6]
        live.close()
        replay.close()

    asyncio.run(scenario())


def test_a_failed_read_is_retried_and_streams_do_not_stall(wakeups: None) -> None:
    async def scenario() -> None:
        log = FakeLog()
        registry = feed.FeedRegistry()
        cursor = registry.cursor(log, SETTINGS, "s4", 0, False)
        await asyncio.sleep(0.05)
        log.fail_next = 1
        log.append("s4", "a")
        assert await _drain(cursor, 1) == [1]
        cursor.close()

    asyncio.run(scenario())


def test_waiting_out_a_timeout_while_the_feed_changes_never_breaks_the_feed(wakeups: None) -> None:
    async def scenario() -> None:
        # GIVEN streams whose waits time out just as the feed changes, again and again
        log = FakeLog()
        registry = feed.FeedRegistry()
        cursors = [registry.cursor(log, SETTINGS, "s5", 0, False) for _ in range(20)]
        loop = asyncio.get_running_loop()

        async def waiter(cursor: feed.FeedCursor) -> None:
            for _ in range(400):
                await cursor.wait(0)  # times out at once, racing the changes below

        async def writer() -> None:
            for _ in range(200):
                await loop.run_in_executor(None, log.append, "s5", "e")
                await asyncio.sleep(0)

        # WHEN they race; THEN no wait fails, and every stream still gets every event
        await asyncio.gather(writer(), *(waiter(c) for c in cursors))
        results = await asyncio.gather(*(_drain(c, 200, timeout=5) for c in cursors))
        assert all(r == list(range(1, 201)) for r in results)
        for c in cursors:
            c.close()

    asyncio.run(scenario())


def test_frames_are_encoded_once_per_event_for_all_streams(wakeups: None) -> None:
    async def scenario() -> None:
        log = FakeLog()
        registry = feed.FeedRegistry()
        cursors = [registry.cursor(log, SETTINGS, "s6", 0, False) for _ in range(5)]
        await asyncio.sleep(0.02)
        log.append("s6", "a")
        encoded: list[int] = []

        def encode(event: StoredEvent) -> str:
            encoded.append(event.seq)
            return f"id: {event.seq}\n\n"

        for c in cursors:
            await _drain(c, 1)
        for c in cursors:
            page = c.feed.after(0)
            assert [c.frame(e, encode) for e in page] == ["id: 1\n\n"]
        assert encoded == [1]
        for c in cursors:
            c.close()

    asyncio.run(scenario())


def test_a_page_is_joined_and_encoded_once_for_all_streams_at_its_position(wakeups: None) -> None:
    async def scenario() -> None:
        log = FakeLog()
        registry = feed.FeedRegistry()
        cursors = [registry.cursor(log, SETTINGS, "s7", 0, False) for _ in range(3)]
        await asyncio.sleep(0.02)
        log.append("s7", "a")
        log.append("s7", "b")
        for c in cursors:
            await _drain(c, 2)

        def encode(event: StoredEvent) -> str:
            return f"id: {event.seq}\n\n"

        chunks = [c.chunk(c.feed.after(0), encode) for c in cursors]
        assert chunks[0] == b"id: 1\n\nid: 2\n\n"
        assert all(chunk is chunks[0] for chunk in chunks)  # one bytes object, written by every stream
        assert cursors[0].chunk(cursors[0].feed.after(1), encode) == b"id: 2\n\n"
        for c in cursors:
            c.close()

    asyncio.run(scenario())
