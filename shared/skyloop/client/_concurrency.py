"""The few primitives whose sync and async forms genuinely differ: threads or tasks, blocking or awaited I/O.

The SDK is written once, async, in ``_async/``; ``scripts/unasync_client.py``
derives ``_sync/`` from it by renaming each async form here to its sync twin
(``AsyncWorkers`` -> ``Workers``, ``aheartbeats`` -> ``heartbeats``,
``AsyncWebSocket`` -> ``WebSocket``) and dropping :func:`resolve` around hook
answers. Each pair keeps the same names and signatures, so that renaming is
all it takes; what differs lives here, small enough to read side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator

    from websockets.asyncio.client import ClientConnection as AsyncConnection
    from websockets.sync.client import ClientConnection

__all__ = ["AsyncWebSocket", "AsyncWorkers", "WebSocket", "Workers", "aheartbeats", "heartbeats", "resolve"]

P = ParamSpec("P")
T = TypeVar("T")


# ----------------------------------------------------------------------------- workers
class Workers:
    """Client tools off the reading path, a thread each.

    Daemon threads: a tool still running when the program exits (a second Ctrl-C) must not hold it up.
    """

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def spawn(self, fn: Callable[P, None], /, *args: P.args, **kwargs: P.kwargs) -> None:
        worker = threading.Thread(
            target=fn, args=args, kwargs=kwargs, name=f"skyloop-tool-{len(self.threads)}", daemon=True
        )
        self.threads.append(worker)
        worker.start()

    def __iter__(self) -> Iterator[threading.Thread]:
        """Every worker started, running or done (for a caller that must wait for them: ``join``)."""
        return iter(self.threads)


class AsyncWorkers:
    """Client tools off the reading path, a task each.

    Each task is held here until done: the event loop keeps only weak references to its tasks.
    """

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, fn: Callable[P, Coroutine[Any, Any, None]], /, *args: P.args, **kwargs: P.kwargs) -> None:
        task = asyncio.get_running_loop().create_task(fn(*args, **kwargs))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def __iter__(self) -> Iterator[asyncio.Task[None]]:
        """The tasks still running."""
        return iter(set(self.tasks))


# -------------------------------------------------------------------------- heartbeats
@contextlib.contextmanager
def heartbeats(interval: float, beat: Callable[[], object]) -> Iterator[None]:
    """``beat()`` every ``interval`` seconds on a daemon thread while the block runs; its failures are ignored."""
    done = threading.Event()

    def loop() -> None:
        while not done.wait(interval):
            with contextlib.suppress(Exception):  # best effort: what the block makes is what matters
                beat()

    threading.Thread(target=loop, name="skyloop-heartbeat", daemon=True).start()
    try:
        yield
    finally:
        done.set()


@contextlib.asynccontextmanager
async def aheartbeats(interval: float, beat: Callable[[], Awaitable[object]]) -> AsyncIterator[None]:
    """``await beat()`` every ``interval`` seconds in a task while the block runs; cancelled at its end."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(Exception):  # best effort: what the block makes is what matters
                await beat()

    task = asyncio.get_running_loop().create_task(loop())
    try:
        yield
    finally:
        task.cancel()


async def resolve(value: T | Awaitable[T]) -> T:
    """A hook's answer, awaited when the hook was an awaitable one (the sync side takes plain hooks only)."""
    if inspect.isawaitable(value):
        return await value
    return value


# -------------------------------------------------------------------------- websockets
class WebSocket:
    """``websockets``' sync client, as the live stream uses it (imported on first connect)."""

    def __init__(self, connection: ClientConnection) -> None:
        self._connection = connection

    @classmethod
    def connect(cls, url: str, *, open_timeout: float, max_size: int) -> WebSocket:
        from websockets.sync.client import connect

        # entered as a context manager (what websockets 16+ asks for); close() ends it
        connection = connect(url, open_timeout=open_timeout, ping_interval=None, max_size=max_size)
        return cls(connection.__enter__())

    def send(self, frame: str) -> None:
        self._connection.send(frame)

    def recv(self, timeout: float) -> str | bytes:
        """The next frame; ``TimeoutError`` when none came within ``timeout`` seconds."""
        return self._connection.recv(timeout=timeout)

    def close(self) -> None:
        self._connection.close()


class AsyncWebSocket:
    """``websockets``' asyncio client, as the live stream uses it (imported on first connect)."""

    def __init__(self, connection: AsyncConnection) -> None:
        self._connection = connection

    @classmethod
    async def connect(cls, url: str, *, open_timeout: float, max_size: int) -> AsyncWebSocket:
        from websockets.asyncio.client import connect

        return cls(await connect(url, open_timeout=open_timeout, ping_interval=None, max_size=max_size))

    async def send(self, frame: str) -> None:
        await self._connection.send(frame)

    async def recv(self, timeout: float) -> str | bytes:
        """The next frame; ``TimeoutError`` when none came within ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            return await self._connection.recv()

    async def aclose(self) -> None:
        await self._connection.close()
