"""One reader per session per process: every open stream of a session shares its reads.

A chat client keeps a stream open per session on screen, and several viewers
(or reconnects) may watch one session, so reads must not multiply with the
number of open streams. A :class:`SessionFeed` reads the session's log once
per change and keeps the recent events in memory; each stream (a
:class:`FeedCursor`) takes what lies after its own position from there. A
stream whose cursor is older than the feed's memory (a long replay) reads
those pages itself first, then joins the feed.

When to read:

* where writers share this process (the local stack; see
  :mod:`skyloop.store.notifier`), a feed reads only when an append wakes it;
  an idle stream reads nothing at all;
* elsewhere (the cloud, one stream per Lambda invocation) it polls: every
  ``poll_busy_s`` while a turn runs, and when idle backing off by doubling
  from ``poll_busy_s`` to ``poll_idle_s`` after the last change.

Reads are the same gapless Query either way (``seq > cursor``, strongly
consistent), so a feed never skips an event and delivers each once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import TYPE_CHECKING

import anyio

from skyloop import events as ev
from skyloop.store import notifier

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.settings import Settings
    from skyloop.store import Store, StoredEvent

log = logging.getLogger("skyloop.stream")
PAGE = 500  # events per read; a full page is followed by another read at once
KEEP = 2000  # events a feed keeps in memory for cursors that lag behind its head
CHUNKS = 64  # recent pages a feed keeps encoded, for the streams that write the same page


class SessionFeed:
    """The process-wide tail of one session's event log."""

    def __init__(self, store: Store, settings: Settings, session_id: str, start: int, running: bool):
        self.store = store
        self.settings = settings
        self.session_id = session_id
        self.base = start  # memory holds every retained event with seq in (base, head]
        self.head = start
        self.events: list[StoredEvent] = []
        self.frames: dict[int, str] = {}  # encoded once, written to every stream of the session
        self._chunks: dict[tuple[int, int, int], bytes] = {}  # recent pages, as written
        self.running = running
        self.cursors = 0
        self._changed = asyncio.Event()  # set (and replaced) whenever the head moves
        self._subscription = notifier.Subscription(session_id)
        self._task = asyncio.get_running_loop().create_task(self._follow(), name=f"feed-{session_id}")

    async def _follow(self) -> None:
        wakeups = notifier.wakeups_enabled()
        idle_wait = self.settings.poll_busy_s
        while True:
            try:
                found = await self._read()  # first at once: a replaying cursor must not wait
            except Exception:  # a failed read (store unreachable): try again, never leave streams stalled
                log.exception("reading the event log of session %s failed", self.session_id)
                await asyncio.sleep(self.settings.poll_busy_s)
                continue
            idle_wait = self.settings.poll_busy_s if found else min(self.settings.poll_idle_s, idle_wait * 2)
            if wakeups:
                await self._subscription.wait(None)
            else:
                await self._subscription.wait(self.settings.poll_busy_s if self.running else idle_wait)

    async def _read(self) -> bool:
        """Read everything after the head; True when any event was found."""
        found_any = False
        moved = False
        while True:
            page, covered, full = await anyio.to_thread.run_sync(
                functools.partial(self.store.read_event_page, self.session_id, self.head, limit=PAGE)
            )
            if covered > self.head:
                self._add(page, covered)
                moved = True
                found_any = found_any or bool(page)
            if not full:
                break
        if moved:
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()
        return found_any

    def _add(self, page: list[StoredEvent], covered: int) -> None:
        for event in page:
            if event.type == ev.SESSION_STATUS:
                self.running = event.data.get("status") == "running"
        self.events.extend(page)
        self.head = covered
        if len(self.events) > KEEP:
            dropped = self.events[: len(self.events) - KEEP]
            self.events = self.events[len(dropped) :]
            self.base = dropped[-1].seq
            for event in dropped:
                self.frames.pop(event.seq, None)

    def chunk(self, page: list[StoredEvent], encode: Callable[[StoredEvent], str]) -> bytes:
        """One write's bytes for a page of held events, built once for every stream at that position.

        Every viewer of a live session is at the head, so after each read all
        of them write the same page: it is joined and encoded once.
        """
        key = (page[0].seq, page[-1].seq, len(page))
        data = self._chunks.get(key)
        if data is None:
            data = "".join(self.frame(event, encode) for event in page).encode()
            if len(self._chunks) >= CHUNKS:
                self._chunks.clear()
            self._chunks[key] = data
        return data

    def frame(self, event: StoredEvent, encode: Callable[[StoredEvent], str]) -> str:
        """The SSE frame of a held event, encoded on first use."""
        text = self.frames.get(event.seq)
        if text is None:
            text = encode(event)
            if self.base < event.seq <= self.head:
                self.frames[event.seq] = text
        return text

    def after(self, cursor: int) -> list[StoredEvent]:
        """What memory holds after ``cursor`` (the caller has checked ``cursor >= base``)."""
        lo, hi = 0, len(self.events)
        while lo < hi:  # first event with seq > cursor
            mid = (lo + hi) // 2
            if self.events[mid].seq <= cursor:
                lo = mid + 1
            else:
                hi = mid
        return self.events[lo:]

    async def wait_for_more(self, cursor: int, timeout: float) -> None:
        """Return once the feed's head moves past ``cursor``, or after ``timeout`` seconds."""
        if self.head > cursor:
            return
        # asyncio.timeout, not wait_for: no extra task per wait (every viewer waits after every page)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()

    def close(self) -> None:
        self._task.cancel()
        self._subscription.close()


class FeedRegistry:
    """The feeds of one event loop, created on first use and dropped with their last cursor."""

    def __init__(self) -> None:
        self._feeds: dict[str, SessionFeed] = {}

    def cursor(
        self, store: Store, settings: Settings, session_id: str, start: int, running: bool
    ) -> FeedCursor:
        feed = self._feeds.get(session_id)
        if feed is None:
            feed = self._feeds[session_id] = SessionFeed(store, settings, session_id, start, running)
        feed.cursors += 1
        return FeedCursor(self, feed, start)

    def release(self, feed: SessionFeed) -> None:
        feed.cursors -= 1
        if feed.cursors <= 0 and self._feeds.get(feed.session_id) is feed:
            del self._feeds[feed.session_id]
            feed.close()


_registries: dict[asyncio.AbstractEventLoop, FeedRegistry] = {}


def registry() -> FeedRegistry:
    loop = asyncio.get_running_loop()
    if loop not in _registries:
        for old in [other for other in _registries if other.is_closed()]:
            del _registries[old]
        _registries[loop] = FeedRegistry()
    return _registries[loop]


class FeedCursor:
    """One stream's position in a session's feed."""

    def __init__(self, registry: FeedRegistry, feed: SessionFeed, cursor: int) -> None:
        self._registry = registry
        self.feed = feed
        self.cursor = cursor

    async def next_page(self) -> tuple[list[StoredEvent], bool]:
        """The events after this cursor that are ready now, and whether more are ready at once."""
        feed = self.feed
        if self.cursor < feed.base:  # behind the feed's memory: replay from the log itself
            page, covered, full = await anyio.to_thread.run_sync(
                functools.partial(feed.store.read_event_page, feed.session_id, self.cursor, limit=PAGE)
            )
            self.cursor = covered
            return page, full or self.cursor < feed.base
        page = feed.after(self.cursor)
        self.cursor = max(self.cursor, feed.head)
        return page, False

    async def wait(self, timeout: float) -> None:
        await self.feed.wait_for_more(self.cursor, timeout)

    def frame(self, event: StoredEvent, encode: Callable[[StoredEvent], str]) -> str:
        return self.feed.frame(event, encode)

    def chunk(self, page: list[StoredEvent], encode: Callable[[StoredEvent], str]) -> bytes:
        """A page's bytes: shared with the feed's other streams when the page is held in memory."""
        if page and self.feed.base < page[0].seq and page[-1].seq <= self.feed.head:
            return self.feed.chunk(page, encode)
        return "".join(self.feed.frame(event, encode) for event in page).encode()

    @property
    def running(self) -> bool:
        return self.feed.running

    def close(self) -> None:
        self._registry.release(self.feed)
