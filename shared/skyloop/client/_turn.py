"""Turns: send a message, watch its events, run the client-side tools it calls, stop at its end.

Order matters, and one implementation keeps it for both clients (``AsyncTurn`` in
``_async/_turn.py``; the sync ``Turn`` is generated from it):

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

This module holds what both turns share and read at run time: the state
apart from I/O (:class:`TurnState`) and the constants (:data:`HEARTBEAT_S`
is read from here on every tool call, so a test may tune it here).
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from skyloop.client._errors import ConflictError, NotFoundError, RunnerUnavailableError
from skyloop.client._hooks import ToolCall
from skyloop.client._tracker import TurnResult, TurnTracker

if TYPE_CHECKING:
    from skyloop.client._models import FunctionCallItem
    from skyloop.client._tools import ToolBox

__all__ = [
    "HEARTBEAT_S",
    "MESSAGE_REFUSALS",
    "SETTLED_OUTPUTS",
    "TurnResult",
    "TurnState",
    "declined_output",
    "tool_call",
]

# While a client tool runs, a heartbeat this often: agents with limits.client_heartbeat_s fail a turn whose
# client went quiet for that long (it must be larger than this).
HEARTBEAT_S = 10.0

MESSAGE_REFUSALS: tuple[type[Exception], ...] = (RunnerUnavailableError,)
"""Retryable answers in general, but final for a message: with no runner the turn cannot start, so say so now."""

SETTLED_OUTPUTS: tuple[type[Exception], ...] = (NotFoundError, ConflictError)
"""Refusals of a tool output that need no report: the call was cancelled (interrupt) or answered elsewhere."""


def declined_output(name: str) -> str:
    return f"Error: the user declined to run {name}"


def tool_call(item: FunctionCallItem) -> ToolCall:
    """The parked call as the hooks see it."""
    return ToolCall(
        call_id=item.call_id,
        name=item.name,
        arguments=item.parsed_arguments(),
        raw_arguments=item.arguments,
        response_id=item.response_id,
    )


class _Watch(Protocol):
    """What a turn asks of the stream it follows (SSE or live), besides iterating it."""

    @property
    def last_event_id(self) -> int | None: ...

    @property
    def reconnects(self) -> int: ...


StreamT = TypeVar("StreamT", bound=_Watch)


class TurnState(Generic[StreamT]):
    """A turn apart from its I/O: the tracker, the idempotency key, the outcome, the failed posts."""

    def __init__(self, session_id: str, text: str, *, tools: ToolBox, model_override: str | None) -> None:
        self.session_id = session_id
        self.text = text
        self.tools = tools
        self._model_override = model_override
        self._idempotency_key = uuid.uuid4().hex  # one per turn: a re-post after a lost answer is safe
        self._tracker = TurnTracker()
        self._stream: StreamT | None = None
        self._post_errors: list[Exception] = []
        self._post_errors_lock = threading.Lock()  # tool workers report from their own threads
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

    def _report(self, error: Exception) -> None:
        """A tool output that could not be delivered: raised from the turn's next step."""
        with self._post_errors_lock:
            self._post_errors.append(error)

    def _raise_reported(self) -> None:
        with self._post_errors_lock:
            if self._post_errors:
                raise self._post_errors.pop(0)

    def _no_result(self) -> TurnResult:
        if self.result is None:
            raise RuntimeError("the turn was closed before it ended")
        return self.result
