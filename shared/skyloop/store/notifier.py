"""Wake-ups for stream readers from appends made in the same process (or forwarded to it).

Also for a turn step that waits hot for client outputs (:mod:`skyloop.turns.hot_wait`):
an output recorded notifies :data:`ANSWERED`, which the local stack forwards to
its Lambda environments, so the step reads the turn at once instead of at its
next poll. In the cloud the step only polls.

In the local stack every append happens in this process or in one of its
Lambda worker processes, which forward each notification here, so streams
need not poll: :func:`enable_wakeups` switches readers to waiting for a
wake-up only. In the cloud nobody enables it, readers poll with backoff, and
:func:`notify` reaches no one; the code path is the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

_lock = threading.Lock()
_waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = defaultdict(set)
_answer_waiters: dict[str, set[threading.Event]] = defaultdict(set)
_wakeups = False
_publisher: Callable[[str, str], None] | None = None
_listeners: list[Callable[[str, str], None]] = []
APPEND = "append"
CREATED = "created"  # a session row was created (no append: the lifecycle publisher's cue)
ANSWERED = "answered"  # a client tool's output was recorded (no append: a hot wait's cue)


def enable_wakeups(enabled: bool = True) -> None:
    """Declare that every append to the table is notified here (the local stack does)."""
    global _wakeups
    _wakeups = enabled


def wakeups_enabled() -> bool:
    return _wakeups


def answers_reach_this_process() -> bool:
    """Whether an output recorded anywhere notifies this process: the local stack's, and its Lambda
    environments' (their notifications go to the stack, which forwards ``ANSWERED`` back to them)."""
    return _wakeups or _publisher is not None


def set_publisher(publisher: Callable[[str, str], None] | None) -> None:
    """Send this process's notifications elsewhere (a local Lambda worker sends them to the stack)."""
    global _publisher
    _publisher = publisher


def add_listener(listener: Callable[[str, str], None]) -> None:
    """Call ``listener(session_id, kind)`` on every notification reaching this process (it must not block)."""
    _listeners.append(listener)


def remove_listener(listener: Callable[[str, str], None]) -> None:
    with contextlib.suppress(ValueError):
        _listeners.remove(listener)


def notify(session_id: str, kind: str = APPEND) -> None:
    """Called after an append to ``session_id`` committed (``kind`` APPEND), or the session was created."""
    if _publisher is not None:
        _publisher(session_id, kind)
        return
    deliver(session_id, kind)


def deliver(session_id: str, kind: str = APPEND) -> None:
    for listener in list(_listeners):
        listener(session_id, kind)
    if kind == ANSWERED:
        with _lock:
            answered = list(_answer_waiters.get(session_id, ()))
        for flag in answered:
            flag.set()
        return
    if kind != APPEND:
        return
    with _lock:
        waiters = list(_waiters.get(session_id, ()))
    for loop, event in waiters:
        with contextlib.suppress(RuntimeError):  # loop closed: the reader is gone
            loop.call_soon_threadsafe(event.set)


@contextlib.contextmanager
def answers_of(session_id: str) -> Iterator[threading.Event]:
    """A flag set by every :data:`ANSWERED` notification of ``session_id`` reaching this process.

    Taken before the first read, so an output recorded between a read and the wait after it
    is not missed: the wait returns at once. Clear it before each read.
    """
    flag = threading.Event()
    with _lock:
        _answer_waiters[session_id].add(flag)
    try:
        yield flag
    finally:
        with _lock:
            group = _answer_waiters.get(session_id)
            if group is not None:
                group.discard(flag)
                if not group:
                    del _answer_waiters[session_id]


class Subscription:
    """An asyncio-side handle: ``await wait(timeout)`` returns early on an append."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._event = asyncio.Event()
        self._key = (asyncio.get_running_loop(), self._event)
        with _lock:
            _waiters[session_id].add(self._key)

    async def wait(self, timeout: float | None) -> bool:
        """Wait for a wake-up (``None``: for as long as it takes); the event is cleared on return.

        A wake-up that lands before the wait starts is not lost: it leaves the
        event set, so the wait returns at once.
        """
        try:
            async with asyncio.timeout(timeout):  # no extra task per wait, unlike wait_for
                await self._event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            self._event.clear()

    def close(self) -> None:
        with _lock:
            group = _waiters.get(self.session_id)
            if group is not None:
                group.discard(self._key)
                if not group:
                    del _waiters[self.session_id]
