"""Following one turn through a session's events, without I/O.

A session's stream carries every turn's events; :class:`TurnTracker` decides
which belong to ours (the turn that consumes our message item), which
client-side calls are waiting for this client, the text so far, and when the
turn is over. ``Turn`` and ``AsyncTurn`` feed it every event and act on what it
says, so both follow a turn by exactly the same rules, and the rules can be
tested event by event.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

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

__all__ = ["TurnResult", "TurnTracker"]


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


class TurnTracker:
    """Which events belong to our turn, which calls to answer, and when it is over (no I/O).

    Set :attr:`item_id` once the message is accepted, then :meth:`observe`
    every event in stream order. Calls this client must answer queue up in
    :attr:`pending`, each once even if the stream replays it; the caller
    takes them with :meth:`next_call` / :meth:`take_call` (a call stays
    pending until taken, so a confirmation interrupted by Ctrl-C is asked
    again).
    """

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
        self.pending: deque[FunctionCallItem] = deque()

    @property
    def done(self) -> bool:
        """The turn reached its terminal event."""
        return self.status is not None

    @property
    def text(self) -> str:
        """The assistant's text so far: its finished messages, else the streamed deltas."""
        messages = [i.text for i in self.items if isinstance(i, MessageItem) and i.role == "assistant"]
        return "".join(messages) if messages else "".join(self.deltas)

    def next_call(self) -> FunctionCallItem | None:
        """The oldest call waiting for this client, left in place (see :meth:`take_call`)."""
        return self.pending[0] if self.pending else None

    def take_call(self) -> FunctionCallItem:
        """Remove the oldest pending call: it is being answered."""
        return self.pending.popleft()

    def drop_pending(self) -> None:
        """Forget the calls not yet started (after an interrupt the server cancels them)."""
        self.pending.clear()

    def observe(self, event: Any) -> list[FunctionCallItem]:  # noqa: C901  (one branch per event type)
        """Record ``event``; returns (and queues in :attr:`pending`) the calls this client must now answer."""
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
        self.pending.extend(calls)
        return calls

    def result(self) -> TurnResult:
        return TurnResult(
            status=self.status or "incomplete",
            text=self.text,
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
