"""Turns: send a message, watch its events, run the client-side tools it calls, stop at its end.

Order matters and is fixed here once for both clients:

1. subscribe first and wait for the first frame (the heartbeat), so nothing
   the message causes can be missed; the stream starts at the snapshot's
   cursor, so even a drop before the first stored event resumes without a gap.
   The turn watches over the live channel when the server has one
   (``Client.watch``): a turn parked on a slow tool or a human's approval then
   holds no server function while it waits; else over the SSE stream;
2. post the message (with the tool schemas) and learn its item id;
3. our turn is the one that consumes that item (``session.input.consumed``);
   its ``action_required`` calls are answered, every one of them, with an
   error string when the tool is unknown, raises or is declined;
4. the first terminal event after our item was consumed ends the turn (a
   message that joins a running turn ends with that turn, which always reads
   it before finishing).

Which events are ours and which calls wait for us is decided by the I/O-free
:class:`~skyloop.client._tracker.TurnTracker`; the message post and every
tool-output post are retried under the client's one retry policy
(``_retry``). Both turns use only the client's public methods.

Tools run off the reading path (worker threads / tasks), so the stream keeps
being read, and a Ctrl-C or task cancellation in the middle of a read leaves
the turn resumable: iterate again (typically after :meth:`Turn.interrupt`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import uuid
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from skyloop.client._errors import ConflictError, NotFoundError, RunnerUnavailableError
from skyloop.client._hooks import ToolCall
from skyloop.client._live import AsyncLiveEventStream, LiveEventStream
from skyloop.client._retry import aretry_call, retry_call
from skyloop.client._stream import AsyncEventStream, EventStream, _StreamState
from skyloop.client._tracker import TurnResult, TurnTracker

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator
    from types import TracebackType

    from skyloop.client._async_client import AsyncClient
    from skyloop.client._client import Client
    from skyloop.client._hooks import (
        AsyncConfirmTool,
        AsyncToolEndHook,
        AsyncToolStartHook,
        ConfirmTool,
        ToolEndHook,
        ToolStartHook,
    )
    from skyloop.client._models import EventAccepted, FunctionCallItem
    from skyloop.client._tools import ToolBox

__all__ = ["AsyncTurn", "Turn", "TurnResult", "declined_output"]

T = TypeVar("T")
# While a client tool runs, a heartbeat this often: agents with limits.client_heartbeat_s fail a turn whose
# client went quiet for that long (it must be larger than this).
HEARTBEAT_S = 10.0
StreamT = TypeVar("StreamT", bound=_StreamState | LiveEventStream | AsyncLiveEventStream)

MESSAGE_REFUSALS: tuple[type[Exception], ...] = (RunnerUnavailableError,)
"""Retryable answers in general, but final for a message: with no runner the turn cannot start, so say so now."""

SETTLED_OUTPUTS: tuple[type[Exception], ...] = (NotFoundError, ConflictError)
"""Refusals of a tool output that need no report: the call was cancelled (interrupt) or answered elsewhere."""


def declined_output(name: str) -> str:
    return f"Error: the user declined to run {name}"


def _tool_call(item: FunctionCallItem) -> ToolCall:
    return ToolCall(
        call_id=item.call_id,
        name=item.name,
        arguments=item.parsed_arguments(),
        raw_arguments=item.arguments,
        response_id=item.response_id,
    )


class _TurnState(Generic[StreamT]):
    """What :class:`Turn` and :class:`AsyncTurn` share: the tracker, the idempotency key, the outcome."""

    def __init__(self, session_id: str, text: str, *, tools: ToolBox, model_override: str | None) -> None:
        self.session_id = session_id
        self.text = text
        self.tools = tools
        self._model_override = model_override
        self._idempotency_key = uuid.uuid4().hex  # one per turn: a re-post after a lost answer is safe
        self._tracker = TurnTracker()
        self._stream: StreamT | None = None
        self._post_errors: list[Exception] = []
        self._started = False
        self._closed = False
        self.result: TurnResult | None = None
        """Set once the terminal event has been yielded."""

    @property
    def item_id(self) -> str | None:
        """Our message's item id, once the server accepted it."""
        return self._tracker.item_id

    @property
    def response_id(self) -> str | None:
        """The response that consumed our message (the turn's id), once known."""
        return self._tracker.response_id

    @property
    def last_event_id(self) -> int | None:
        return self._stream.last_event_id if self._stream else None

    @property
    def reconnects(self) -> int:
        return self._stream.reconnects if self._stream else 0

    def _begin(self, first: Any, item_id: str) -> None:
        self._tracker.item_id = item_id or None
        self._tracker.observe(first)

    def _follow(self, event: Any) -> bool:
        """Feed ``event`` to the tracker; True once the turn is over (and :attr:`result` set)."""
        self._tracker.observe(event)
        if self._tracker.done:
            self.result = self._tracker.result()
        return self._tracker.done

    def _no_result(self) -> TurnResult:
        if self.result is None:
            raise RuntimeError("the turn was closed before it ended")
        return self.result


# ------------------------------------------------------------------------------- sync
class Turn(_TurnState[EventStream | LiveEventStream]):
    """One turn of a session, as an iterator of typed events (see the module docstring).

    ``result`` is set once the terminal event has been yielded. Use it as a
    context manager (or call :meth:`close`) to stop early. Made by :meth:`Session.send`.
    """

    def __init__(
        self,
        client: Client,
        session_id: str,
        text: str,
        *,
        tools: ToolBox,
        confirm: ConfirmTool | None,
        on_tool_start: ToolStartHook | None,
        on_tool_end: ToolEndHook | None,
        model_override: str | None = None,
    ) -> None:
        super().__init__(session_id, text, tools=tools, model_override=model_override)
        self._client = client
        self._confirm = confirm
        self._on_tool_start = on_tool_start
        self._on_tool_end = on_tool_end
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()

    def __enter__(self) -> Turn:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __iter__(self) -> Turn:
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        if not self._started:
            return self._start()
        self._dispatch_pending()
        with self._lock:
            if self._post_errors:
                raise self._post_errors.pop(0)  # an output that could not be delivered
        assert self._stream is not None
        event = next(self._stream)
        if self._follow(event):
            self.close()
        return event

    def run(self) -> TurnResult:
        """Consume the rest of the turn and return its result."""
        for _ in self:
            pass
        return self._no_result()

    def interrupt(self) -> EventAccepted:
        """Ask the server to stop this turn; keep iterating to see ``response.cancelled``."""
        self._tracker.drop_pending()
        return self._client.interrupt(self.session_id)

    def close(self) -> None:
        """Stop following the turn and release its stream (the turn itself goes on: see :meth:`interrupt`)."""
        self._closed = True
        if self._stream is not None:
            self._stream.close()
        # Running tools are left to finish and post: a parked call still gets its answer.

    def _start(self) -> Any:
        self._started = True
        self._stream = self._client.watch(self.session_id)  # the live channel when there is one, else SSE
        try:
            first = next(self._stream)  # the subscription is live: now the message may go
            item_id = retry_call(self._client.reconnect, self._post_message, final=MESSAGE_REFUSALS)
        except BaseException:
            self.close()
            raise
        self._begin(first, item_id)
        return first

    def _post_message(self) -> str:
        # Safe to repeat: the Idempotency-Key makes the server answer the first post.
        return self._client.send_message(
            self.session_id,
            self.text,
            tools=self.tools,
            model_override=self._model_override,
            idempotency_key=self._idempotency_key,
        )

    def _dispatch_pending(self) -> None:
        """Confirm and start each new call on this thread, so prompts never interleave."""
        while (item := self._tracker.next_call()) is not None:
            call = _tool_call(item)
            if self._confirm is not None and not self._confirm(call.name, call.arguments):
                self._tracker.take_call()
                self._submit(self._post_output, call, declined_output(call.name))
                continue
            self._tracker.take_call()
            if self._on_tool_start is not None:
                self._on_tool_start(call)
            self._submit(self._run_and_post, call, item.arguments)

    def _submit(self, fn: Callable[[ToolCall, str], None], call: ToolCall, text: str) -> None:
        # Daemon threads: a tool still running when the program exits (second Ctrl-C) must not block exit.
        worker = threading.Thread(
            target=self._guarded,
            args=(fn, call, text),
            name=f"skyloop-tool-{len(self._workers)}",
            daemon=True,
        )
        self._workers.append(worker)
        worker.start()

    def _guarded(self, fn: Callable[[ToolCall, str], None], call: ToolCall, text: str) -> None:
        """Nothing escapes a worker thread: failures surface from the turn's next ``__next__``."""
        try:
            fn(call, text)
        except Exception as exc:
            if self._client.is_closed:
                return  # the caller closed the client and moved on; nobody is left to tell
            with self._lock:
                self._post_errors.append(exc)

    def _run_and_post(self, call: ToolCall, raw_arguments: str) -> None:
        with self._beating():
            output = self.tools.run(call.name, raw_arguments)
        if self._on_tool_end is not None:
            with contextlib.suppress(Exception):  # a failing hook must not leave the call unanswered
                self._on_tool_end(call, output)
        self._post_output(call, output)

    @contextlib.contextmanager
    def _beating(self) -> Iterator[None]:
        """Heartbeats every :data:`HEARTBEAT_S` while a tool runs (a slow tool is not a vanished client)."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(HEARTBEAT_S):
                with contextlib.suppress(Exception):  # best effort: the output is what matters
                    self._client.heartbeat(self.session_id)

        beater = threading.Thread(target=beat, name="skyloop-heartbeat", daemon=True)
        beater.start()
        try:
            yield
        finally:
            done.set()

    def _post_output(self, call: ToolCall, output: str) -> None:
        try:
            retry_call(  # the same output again is a no-op on the server
                self._client.reconnect,
                lambda: self._client.submit_tool_output(self.session_id, call.call_id, output),
            )
        except SETTLED_OUTPUTS:
            return


# ------------------------------------------------------------------------------ async
class AsyncTurn(_TurnState[AsyncEventStream | AsyncLiveEventStream]):
    """The async twin of :class:`Turn`: ``async for event in turn``; tools run as tasks.

    Hooks may be plain callables or awaitable ones. Made by :meth:`AsyncSession.send`.
    """

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        text: str,
        *,
        tools: ToolBox,
        confirm: ConfirmTool | AsyncConfirmTool | None,
        on_tool_start: ToolStartHook | AsyncToolStartHook | None,
        on_tool_end: ToolEndHook | AsyncToolEndHook | None,
        model_override: str | None = None,
    ) -> None:
        super().__init__(session_id, text, tools=tools, model_override=model_override)
        self._client = client
        self._confirm = confirm
        self._on_tool_start = on_tool_start
        self._on_tool_end = on_tool_end
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> AsyncTurn:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncTurn:
        return self

    async def __anext__(self) -> Any:
        if self._closed:
            raise StopAsyncIteration
        if not self._started:
            return await self._start()
        await self._dispatch_pending()
        if self._post_errors:
            raise self._post_errors.pop(0)  # an output that could not be delivered
        assert self._stream is not None
        event = await self._stream.__anext__()
        if self._follow(event):
            await self.aclose()
        return event

    async def run(self) -> TurnResult:
        """Consume the rest of the turn and return its result."""
        async for _ in self:
            pass
        return self._no_result()

    async def interrupt(self) -> EventAccepted:
        """Ask the server to stop this turn; keep iterating to see ``response.cancelled``."""
        self._tracker.drop_pending()
        return await self._client.interrupt(self.session_id)

    async def aclose(self) -> None:
        """Stop following the turn and release its stream (the turn itself goes on: see :meth:`interrupt`)."""
        self._closed = True
        if self._stream is not None:
            await self._stream.aclose()
        # Running tool tasks are left to finish: a parked call still gets its answer.

    async def _start(self) -> Any:
        self._started = True
        self._stream = await self._client.watch(self.session_id)
        try:
            first = await self._stream.__anext__()
            item_id = await aretry_call(self._client.reconnect, self._post_message, final=MESSAGE_REFUSALS)
        except BaseException:
            await self.aclose()
            raise
        self._begin(first, item_id)
        return first

    async def _post_message(self) -> str:
        return await self._client.send_message(
            self.session_id,
            self.text,
            tools=self.tools,
            model_override=self._model_override,
            idempotency_key=self._idempotency_key,
        )

    async def _dispatch_pending(self) -> None:
        while (item := self._tracker.next_call()) is not None:
            call = _tool_call(item)
            if self._confirm is not None and not await _resolve(self._confirm(call.name, call.arguments)):
                self._tracker.take_call()
                self._spawn(self._post_output(call, declined_output(call.name)))
                continue
            self._tracker.take_call()
            if self._on_tool_start is not None:
                await _resolve(self._on_tool_start(call))
            self._spawn(self._run_and_post(call, item.arguments))

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(self._guarded(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, work: Awaitable[None]) -> None:
        """Nothing escapes a tool task: failures surface from the turn's next ``__anext__``."""
        try:
            await work
        except Exception as exc:
            if not self._client.is_closed:
                self._post_errors.append(exc)

    async def _run_and_post(self, call: ToolCall, raw_arguments: str) -> None:
        beater = asyncio.get_running_loop().create_task(self._beat())
        try:
            output = await self.tools.arun(call.name, raw_arguments)
        finally:
            beater.cancel()
        if self._on_tool_end is not None:
            with contextlib.suppress(Exception):
                await _resolve(self._on_tool_end(call, output))
        await self._post_output(call, output)

    async def _beat(self) -> None:
        """Heartbeats every :data:`HEARTBEAT_S` while a tool runs (cancelled when it is done)."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            with contextlib.suppress(Exception):
                await self._client.heartbeat(self.session_id)

    async def _post_output(self, call: ToolCall, output: str) -> None:
        try:
            await aretry_call(
                self._client.reconnect,
                lambda: self._client.submit_tool_output(self.session_id, call.call_id, output),
            )
        except SETTLED_OUTPUTS:
            return


async def _resolve(value: T | Awaitable[T]) -> T:
    """A hook's answer, awaited if the hook was an awaitable one."""
    if inspect.isawaitable(value):
        return await value
    return value
