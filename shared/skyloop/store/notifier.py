"""In-process wake-ups for stream readers.

In the local stack every writer and every stream live in one process, and
moto's Query walks the whole table, so streams must not poll blindly: each
successful append wakes the readers of that session. In the cloud nobody
calls :func:`notify` across processes and readers fall back to polling with
backoff; the code path is the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import defaultdict

_lock = threading.Lock()
_waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = defaultdict(set)


def notify(session_id: str) -> None:
    with _lock:
        waiters = list(_waiters.get(session_id, ()))
    for loop, event in waiters:
        with contextlib.suppress(RuntimeError):  # loop closed: the reader is gone
            loop.call_soon_threadsafe(event.set)


class Subscription:
    """An asyncio-side handle: ``await wait(timeout)`` returns early on an append."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._event = asyncio.Event()
        self._key = (asyncio.get_running_loop(), self._event)
        with _lock:
            _waiters[session_id].add(self._key)

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
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
