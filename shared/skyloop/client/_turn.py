"""Turns: send a message, watch its events, run the client-side tools it calls, stop at its end.

Order matters and is fixed here once for both clients:

1. subscribe first and wait for the first frame (the heartbeat), so nothing
   the message causes can be missed; the stream starts at the snapshot's
   cursor, so even a drop before the first stored event resumes without a gap;
2. post the message (with the tool schemas) and learn its item id;
3. our turn is the one that consumes that item (``session.input.consumed``);
   its ``action_required`` calls are answered, every one of them, with an
   error string when the tool is unknown, raises or is declined;
4. the first terminal event after our item was consumed ends the turn (a
   message that joins a running turn ends with that turn, which always reads
   it before finishing).

Tools run off the reading path (worker threads / tasks), so the stream keeps
being read, and a Ctrl-C or task cancellation in the middle of a read leaves
the turn resumable: iterate again (typically after :meth:`Turn.interrupt`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from skyloop.client._errors import (
    APIConnectionError,
    APIError,
    ConflictError,
    NotFoundError,
    is_retryable_status,
)
from skyloop.client._models import (
    FunctionCallItem,
    MessageItem,
    OutputItemDone,
    OutputTextDelta,
    ResponseInProgress,
    SessionInputConsumed,
    SessionInterrupted,
    SessionStatus,
    TaskError,
    is_terminal,
)
from skyloop.client._requests import message_event, tool_output_event
from skyloop.client._tools import ToolBox

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from types import TracebackType

    from skyloop.client._async_client import AsyncClient
    from skyloop.client._client import Client
    from skyloop.client._models import Agent, EventAccepted, Item, SessionSnapshot
    from skyloop.client._stream import AsyncEventStream, EventStream
    from skyloop.client._tools import ToolsSpec

__all__ = [
    "AsyncSession",
    "AsyncTurn",
    "ConfirmTool",
    "Session",
    "ToolCall",
    "ToolEndHook",
    "ToolStartHook",
    "Turn",
    "TurnResult",
]

_UNSET: Any = object()


@dataclass(frozen=True)
class ToolCall:
    """A parked client-side call, as handed to the confirmation and tool hooks."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str
    response_id: str | None = None


class ConfirmTool(Protocol):
    """Return False to decline; the model then reads ``Error: the user declined to run <name>``.

    Called on the iterating thread (or task), after the call's event was yielded, so a
    terminal UI can render the call and then prompt.
    """

    def __call__(self, name: str, arguments: dict[str, Any], /) -> bool: ...


class ToolStartHook(Protocol):
    """Called on the iterating thread just before the tool starts (after confirmation)."""

    def __call__(self, call: ToolCall, /) -> Any: ...


class ToolEndHook(Protocol):
    """Called with the output before it is posted: on the tool's worker thread (sync) or task (async)."""

    def __call__(self, call: ToolCall, output: str, /) -> Any: ...


@dataclass
class TurnResult:
    """A finished turn folded into one value."""

    status: str
    """``completed``, ``failed``, ``cancelled`` or ``incomplete``."""
    text: str = ""
    items: list[Any] = field(default_factory=list)
    """Output items of the turn, in order (calls, outputs, assistant messages)."""
    error: TaskError | None = None
    response_id: str | None = None
    item_id: str | None = None
    events: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "completed"


def declined_output(name: str) -> str:
    return f"Error: the user declined to run {name}"


class TurnTracker:
    """Which events belong to our turn, which calls to answer, and when it is over (no I/O)."""

    def __init__(self) -> None:
        self.item_id: str | None = None
        self.consumed = False
        self.current_response: str | None = None
        self.response_id: str | None = None
        self.status: str | None = None
        self.error: TaskError | None = None
        self.interrupted = False
        self.items: list[Any] = []
        self.deltas: list[str] = []
        self.events: list[Any] = []
        self.seen_calls: set[str] = set()

    @property
    def done(self) -> bool:
        return self.status is not None

    def observe(self, event: Any) -> list[FunctionCallItem]:
        """Record ``event``; returns the calls this client must now answer."""
        self.events.append(event)
        if isinstance(event, SessionStatus) and event.status == "running" and event.response_id:
            self.current_response = event.response_id
        elif isinstance(event, ResponseInProgress):
            self.current_response = event.response.id
        if isinstance(event, SessionInputConsumed) and self.item_id and event.data.item_id == self.item_id:
            self.consumed = True
            self.response_id = self.response_id or self.current_response
            return []
        if not self.consumed:
            return []
        if self.response_id is None:
            self.response_id = _response_of(event)
        elif (other := _response_of(event)) is not None and other != self.response_id:
            return []  # another turn's event (possible only around a join)
        calls: list[FunctionCallItem] = []
        if isinstance(event, OutputTextDelta):
            self.deltas.append(event.delta)
        elif isinstance(event, OutputItemDone):
            item = event.item
            if isinstance(item, FunctionCallItem) and item.action_required:
                if item.call_id not in self.seen_calls:
                    self.seen_calls.add(item.call_id)
                    calls.append(item)
            else:
                self.items.append(item)
        elif isinstance(event, SessionInterrupted):
            self.interrupted = True
        elif is_terminal(event):
            self.status = event.type.removeprefix("response.")
            response = getattr(event, "response", None)
            self.error = getattr(response, "error", None)
            self.response_id = getattr(response, "id", None) or self.response_id
        elif isinstance(event, SessionStatus) and event.status == "failed":
            self.status = "failed"  # a turn that could not even start has no response.failed
            self.error = event.error
        return calls

    def result(self) -> TurnResult:
        messages = [i.text for i in self.items if isinstance(i, MessageItem) and i.role == "assistant"]
        return TurnResult(
            status=self.status or "incomplete",
            text="".join(messages) if messages else "".join(self.deltas),
            items=list(self.items),
            error=self.error,
            response_id=self.response_id,
            item_id=self.item_id,
            events=list(self.events),
        )


def _response_of(event: Any) -> str | None:
    response = getattr(event, "response", None)
    if response is not None:
        return getattr(response, "id", None)
    if isinstance(event, OutputItemDone):
        return event.item.response_id
    if isinstance(event, OutputTextDelta | SessionStatus | SessionInterrupted):
        return event.response_id
    return None


def _tool_call(item: FunctionCallItem) -> ToolCall:
    return ToolCall(
        call_id=item.call_id,
        name=item.name,
        arguments=item.parsed_arguments(),
        raw_arguments=item.arguments,
        response_id=item.response_id,
    )


def _message_retryable(exc: Exception) -> bool:
    """A lost or transiently failed message post is re-sent (its Idempotency-Key makes that safe)."""
    if isinstance(exc, APIConnectionError):
        return True
    return isinstance(exc, APIError) and exc.status in (429, 500, 502, 504)


def _final_post_error(exc: Exception) -> bool:
    """Errors after which posting the same output again cannot help."""
    if isinstance(exc, NotFoundError | ConflictError):
        return True  # the call was cancelled (interrupt) or answered elsewhere
    return isinstance(exc, APIError) and not is_retryable_status(exc.status)


# ------------------------------------------------------------------------------- sync
class Turn:
    """One turn of a session, as an iterator of typed events (see the module docstring).

    ``result`` is set once the terminal event has been yielded. Use it as a
    context manager (or call :meth:`close`) to stop early.
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
        self._client = client
        self.session_id = session_id
        self.text = text
        self.tools = tools
        self._confirm = confirm
        self._on_tool_start = on_tool_start
        self._on_tool_end = on_tool_end
        self._model_override = model_override
        self._idempotency_key = uuid.uuid4().hex  # one per turn: a re-post after a lost answer is safe
        self._tracker = TurnTracker()
        self._stream: EventStream | None = None
        self._workers: list[threading.Thread] = []
        self._pending: list[FunctionCallItem] = []
        self._post_errors: list[Exception] = []
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self.result: TurnResult | None = None

    @property
    def item_id(self) -> str | None:
        return self._tracker.item_id

    @property
    def response_id(self) -> str | None:
        return self._tracker.response_id

    @property
    def last_event_id(self) -> int | None:
        return self._stream.last_event_id if self._stream else None

    @property
    def reconnects(self) -> int:
        return self._stream.reconnects if self._stream else 0

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
        self._pending.extend(self._tracker.observe(event))
        if self._tracker.done:
            self.result = self._tracker.result()
            self.close()
        return event

    def run(self) -> TurnResult:
        """Consume the rest of the turn and return its result."""
        for _ in self:
            pass
        if self.result is None:
            raise RuntimeError("the turn was closed before it ended")
        return self.result

    def interrupt(self) -> EventAccepted:
        """Ask the server to stop this turn; keep iterating to see ``response.cancelled``."""
        self._pending.clear()
        return self._client.interrupt(self.session_id)

    def close(self) -> None:
        self._closed = True
        if self._stream is not None:
            self._stream.close()
        # Running tools are left to finish and post: a parked call still gets its answer.

    def _start(self) -> Any:
        self._started = True
        self._stream = self._client.stream(self.session_id)
        try:
            first = next(self._stream)  # the subscription is live: now the message may go
            call = self._message_call()
            policy = self._client.reconnect
            failures = 0
            while True:
                try:
                    accepted = self._client._call(call)
                    break
                except (APIConnectionError, APIError) as exc:
                    # Safe to repeat: the Idempotency-Key makes the server answer the first post.
                    failures += 1
                    if not _message_retryable(exc) or failures > policy.max_failures:
                        raise
                    (policy.sleep or time.sleep)(policy.delay(failures))
        except BaseException:
            self.close()
            raise
        self._tracker.item_id = accepted.item_id
        self._tracker.observe(first)
        return first

    def _message_call(self) -> Any:
        return message_event(
            self.session_id,
            self.text,
            tools=self.tools.schemas() or None,
            model_override=self._model_override,
            idempotency_key=self._idempotency_key,
        )

    def _dispatch_pending(self) -> None:
        """Confirm and start each new call on this thread, so prompts never interleave."""
        while self._pending:
            item = self._pending[0]
            call = _tool_call(item)
            if self._confirm is not None and not self._confirm(call.name, call.arguments):
                self._pending.pop(0)
                self._submit(self._post_only, call, declined_output(call.name))
                continue
            self._pending.pop(0)
            if self._on_tool_start is not None:
                self._on_tool_start(call)
            self._submit(self._run_and_post, call, item.arguments)

    def _submit(self, fn: Any, *args: Any) -> None:
        # Daemon threads: a tool still running when the program exits (second Ctrl-C) must not block exit.
        worker = threading.Thread(
            target=self._guarded, args=(fn, *args), name=f"skyloop-tool-{len(self._workers)}", daemon=True
        )
        self._workers.append(worker)
        worker.start()

    def _guarded(self, fn: Any, *args: Any) -> None:
        """Nothing escapes a worker thread: failures surface from the turn's next ``__next__``."""
        try:
            fn(*args)
        except Exception as exc:
            if self._client._http.is_closed:
                return  # the caller closed the client and moved on; nobody is left to tell
            with self._lock:
                self._post_errors.append(exc)

    def _run_and_post(self, call: ToolCall, raw_arguments: str) -> None:
        output = self.tools.run(call.name, raw_arguments)
        if self._on_tool_end is not None:
            with contextlib.suppress(Exception):  # a failing hook must not leave the call unanswered
                self._on_tool_end(call, output)
        self._post_only(call, output)

    def _post_only(self, call: ToolCall, output: str) -> None:
        policy = self._client.reconnect
        sleep = policy.sleep or time.sleep
        failures = 0
        while True:
            try:
                self._client._call(tool_output_event(self.session_id, call.call_id, output))
                return
            except (APIConnectionError, APIError) as exc:
                if _final_post_error(exc):
                    if not isinstance(exc, NotFoundError | ConflictError):
                        with self._lock:
                            self._post_errors.append(exc)
                    return
                failures += 1
                if failures > policy.max_failures:
                    with self._lock:
                        self._post_errors.append(exc)
                    return
                sleep(policy.delay(failures))  # the same output again is a no-op on the server


# ------------------------------------------------------------------------------ async
class AsyncTurn:
    """The async twin of :class:`Turn`: ``async for event in turn``; tools run as tasks."""

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        text: str,
        *,
        tools: ToolBox,
        confirm: Any,
        on_tool_start: Any,
        on_tool_end: Any,
        model_override: str | None = None,
    ) -> None:
        self._client = client
        self.session_id = session_id
        self.text = text
        self.tools = tools
        self._confirm = confirm
        self._on_tool_start = on_tool_start
        self._on_tool_end = on_tool_end
        self._model_override = model_override
        self._idempotency_key = uuid.uuid4().hex  # one per turn: a re-post after a lost answer is safe
        self._tracker = TurnTracker()
        self._stream: AsyncEventStream | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending: list[FunctionCallItem] = []
        self._post_errors: list[Exception] = []
        self._started = False
        self._closed = False
        self.result: TurnResult | None = None

    @property
    def item_id(self) -> str | None:
        return self._tracker.item_id

    @property
    def response_id(self) -> str | None:
        return self._tracker.response_id

    @property
    def last_event_id(self) -> int | None:
        return self._stream.last_event_id if self._stream else None

    @property
    def reconnects(self) -> int:
        return self._stream.reconnects if self._stream else 0

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
        self._pending.extend(self._tracker.observe(event))
        if self._tracker.done:
            self.result = self._tracker.result()
            await self.aclose()
        return event

    async def run(self) -> TurnResult:
        async for _ in self:
            pass
        if self.result is None:
            raise RuntimeError("the turn was closed before it ended")
        return self.result

    async def interrupt(self) -> EventAccepted:
        self._pending.clear()
        return await self._client.interrupt(self.session_id)

    async def aclose(self) -> None:
        self._closed = True
        if self._stream is not None:
            await self._stream.aclose()
        # Running tool tasks are left to finish: a parked call still gets its answer.

    async def _start(self) -> Any:
        self._started = True
        self._stream = self._client.stream(self.session_id)
        try:
            first = await self._stream.__anext__()
            call = self._message_call()
            policy = self._client.reconnect
            failures = 0
            while True:
                try:
                    accepted = await self._client._call(call)
                    break
                except (APIConnectionError, APIError) as exc:
                    failures += 1  # safe to repeat: see the sync twin
                    if not _message_retryable(exc) or failures > policy.max_failures:
                        raise
                    await (policy.sleep or asyncio.sleep)(policy.delay(failures))
        except BaseException:
            await self.aclose()
            raise
        self._tracker.item_id = accepted.item_id
        self._tracker.observe(first)
        return first

    def _message_call(self) -> Any:
        return message_event(
            self.session_id,
            self.text,
            tools=self.tools.schemas() or None,
            model_override=self._model_override,
            idempotency_key=self._idempotency_key,
        )

    async def _dispatch_pending(self) -> None:
        while self._pending:
            item = self._pending[0]
            call = _tool_call(item)
            if self._confirm is not None and not await _maybe_await(self._confirm(call.name, call.arguments)):
                self._pending.pop(0)
                self._spawn(self._post_only(call, declined_output(call.name)))
                continue
            self._pending.pop(0)
            if self._on_tool_start is not None:
                await _maybe_await(self._on_tool_start(call))
            self._spawn(self._run_and_post(call, item.arguments))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._guarded(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, coro: Any) -> None:
        try:
            await coro
        except Exception as exc:
            if not self._client._http.is_closed:
                self._post_errors.append(exc)

    async def _run_and_post(self, call: ToolCall, raw_arguments: str) -> None:
        output = await self.tools.arun(call.name, raw_arguments)
        if self._on_tool_end is not None:
            with contextlib.suppress(Exception):
                await _maybe_await(self._on_tool_end(call, output))
        await self._post_only(call, output)

    async def _post_only(self, call: ToolCall, output: str) -> None:
        policy = self._client.reconnect
        sleep = policy.sleep or asyncio.sleep
        failures = 0
        while True:
            try:
                await self._client._call(tool_output_event(self.session_id, call.call_id, output))
                return
            except (APIConnectionError, APIError) as exc:
                if _final_post_error(exc):
                    if not isinstance(exc, NotFoundError | ConflictError):
                        self._post_errors.append(exc)
                    return
                failures += 1
                if failures > policy.max_failures:
                    self._post_errors.append(exc)
                    return
                await sleep(policy.delay(failures))


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


# ---------------------------------------------------------------------------- handles
class Session:
    """A handle on one session, carrying default tools and hooks for its turns.

    Examples:
        >>> session = client.session(session_id, tools="coding")
        >>> for event in session.send("List the Python files here"):
        ...     if isinstance(event, OutputTextDelta):
        ...         print(event.delta, end="")
        >>> session.run("And now summarise them").text
    """

    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        tools: ToolsSpec = None,
        confirm: ConfirmTool | None = None,
        on_tool_start: ToolStartHook | None = None,
        on_tool_end: ToolEndHook | None = None,
    ) -> None:
        self._client = client
        self.id = session_id
        self._tools = ToolBox.from_spec(tools)
        self._confirm = confirm
        self._on_tool_start = on_tool_start
        self._on_tool_end = on_tool_end

    def send(
        self,
        text: str,
        *,
        tools: ToolsSpec = _UNSET,
        confirm: ConfirmTool | None = _UNSET,
        on_tool_start: ToolStartHook | None = _UNSET,
        on_tool_end: ToolEndHook | None = _UNSET,
        model_override: str | None = None,
    ) -> Turn:
        """Start a turn lazily: nothing is sent until the returned :class:`Turn` is iterated."""
        return Turn(
            self._client,
            self.id,
            text,
            tools=self._tools if tools is _UNSET else ToolBox.from_spec(tools),
            confirm=self._confirm if confirm is _UNSET else confirm,
            on_tool_start=self._on_tool_start if on_tool_start is _UNSET else on_tool_start,
            on_tool_end=self._on_tool_end if on_tool_end is _UNSET else on_tool_end,
            model_override=model_override,
        )

    def run(self, text: str, **kwargs: Any) -> TurnResult:
        """Send ``text`` and wait for the turn to end (tools included)."""
        with self.send(text, **kwargs) as turn:
            return turn.run()

    def snapshot(self) -> SessionSnapshot:
        return self._client.get_session(self.id)

    def items(self, *, order: str = "asc") -> Iterator[Item]:
        return self._client.iter_items(self.id, order=order)

    def agent(self) -> Agent:
        return self._client.get_session_agent(self.id)

    def interrupt(self) -> EventAccepted:
        return self._client.interrupt(self.id)

    def stream(self, *, after: int | None = None) -> EventStream:
        return self._client.stream(self.id, after=after)


class AsyncSession:
    """The async twin of :class:`Session`."""

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        *,
        tools: ToolsSpec = None,
        confirm: Any = None,
        on_tool_start: Any = None,
        on_tool_end: Any = None,
    ) -> None:
        self._client = client
        self.id = session_id
        self._tools = ToolBox.from_spec(tools)
        self._confirm = confirm
        self._on_tool_start = on_tool_start
        self._on_tool_end = on_tool_end

    def send(
        self,
        text: str,
        *,
        tools: ToolsSpec = _UNSET,
        confirm: Any = _UNSET,
        on_tool_start: Any = _UNSET,
        on_tool_end: Any = _UNSET,
        model_override: str | None = None,
    ) -> AsyncTurn:
        return AsyncTurn(
            self._client,
            self.id,
            text,
            tools=self._tools if tools is _UNSET else ToolBox.from_spec(tools),
            confirm=self._confirm if confirm is _UNSET else confirm,
            on_tool_start=self._on_tool_start if on_tool_start is _UNSET else on_tool_start,
            on_tool_end=self._on_tool_end if on_tool_end is _UNSET else on_tool_end,
            model_override=model_override,
        )

    async def run(self, text: str, **kwargs: Any) -> TurnResult:
        async with self.send(text, **kwargs) as turn:
            return await turn.run()

    async def snapshot(self) -> SessionSnapshot:
        return await self._client.get_session(self.id)

    def items(self, *, order: str = "asc") -> AsyncIterator[Item]:
        return self._client.iter_items(self.id, order=order)

    async def agent(self) -> Agent:
        return await self._client.get_session_agent(self.id)

    async def interrupt(self) -> EventAccepted:
        return await self._client.interrupt(self.id)

    def stream(self, *, after: int | None = None) -> AsyncEventStream:
        return self._client.stream(self.id, after=after)
