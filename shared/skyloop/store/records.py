"""What callers hand the store and get back: intent-level records, no keys, no expressions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from skyloop.errors import ConflictError, FileTooLargeError, SessionFileBytesError, SessionFileCountError

if TYPE_CHECKING:
    from skyloop.models.session import PendingCall, SessionStatus, Turn


@dataclass
class StoredEvent:
    """An event as read back from the log, with its assigned sequence number."""

    seq: int
    type: str
    data: dict[str, Any]
    at: int | None = field(default=None, compare=False)  # when it was recorded (epoch s), where known

    def payload(self) -> dict[str, Any]:
        return {**self.data, "type": self.type, "sequence_number": self.seq}


@dataclass
class NewItem:
    """A conversation item to persist with an append; published by ``event_index``."""

    id: str
    type: str
    data: dict[str, Any]
    response_id: str | None
    event_index: int = -1  # which event of the batch publishes it (default: the last)
    anchor_seq: int | None = None  # conversation order; default: the publishing event's seq


@dataclass(frozen=True)
class Guard:
    """What must hold of the session row for an append to land (all given conditions at once)."""

    running: bool | None = None  # True: status is running; False: it is not
    active_turn: str | None = None  # the session's active turn is this response id
    input_seen_through: int | None = None  # no user input newer than this seq


@dataclass(frozen=True)
class SessionChange:
    """Session-row fields an append changes together with its events."""

    status: SessionStatus | None = None
    active_turn: str | None = None
    end_active_turn: bool = False  # the session has no active turn afterwards
    last_response_id: str | None = None
    last_task_error: dict[str, Any] | None = None
    clear_task_error: bool = False
    mark_input: bool = False  # this append's last seq becomes the newest user input


NextStep = Literal["call_model", "await_client", "act", "finish_turn", "stop"]


@dataclass(frozen=True)
class TurnDecision:
    """What one model call decided, recorded on the turn with its result (a rerun returns it)."""

    response_id: str
    iteration: int
    next: NextStep
    consumed_seq: int
    unanswered: int
    input_tokens: int = 0  # what this model call used, added to the turn's and the session's totals
    output_tokens: int = 0
    cost_micros: int = 0  # what it cost in millionths of a USD (skyloop.pricing), added the same way
    # when the result landed (epoch seconds; the store fills it in): its calls were published then, so a
    # turn continued after a restart keeps the client-tool deadline they started with
    decided_at: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TurnEnd:
    """How a turn ended, recorded on its turn row in the append that publishes its terminal event."""

    response_id: str
    status: str  # completed | failed | cancelled
    completed_at: int
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class ApprovalResolution:
    """A client's answer to a server call awaiting approval: it runs, or the denial is its output."""

    call: PendingCall
    approved: bool
    output: str | None = None  # set when denied


@dataclass
class Append:
    """A unit of work on one session: events, items and the records a turn step writes with them.

    Nothing is written until the store flushes it as one transaction; a failed
    guard writes nothing at all. With a ``dedupe_key`` the append lands at most
    once: a repeat reports ``duplicate`` and writes nothing.
    """

    session_id: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    items: list[NewItem] = field(default_factory=list)
    dedupe_key: str | None = None
    after_seq: int | None = None  # the session's last_seq as the caller last read it (saves a read)
    guard: Guard | None = None
    change: SessionChange | None = None
    new_turn: Turn | None = None
    new_calls: list[PendingCall] = field(default_factory=list)
    decision: TurnDecision | None = None
    cancel_calls: list[tuple[PendingCall, str]] = field(default_factory=list)  # (unanswered call, output)
    approvals: list[ApprovalResolution] = field(default_factory=list)  # each counts the turn's wait down
    claims: list[str] = field(default_factory=list)  # further dedupe markers put in the same write
    turn_end: TurnEnd | None = None  # the turn this append ends, recorded on its row

    def event(self, type_: str, data: dict[str, Any] | None = None) -> int:
        self.events.append((type_, dict(data or {})))
        return len(self.events) - 1


@dataclass
class AppendResult:
    first_seq: int
    last_seq: int
    duplicate: bool = False


@dataclass(frozen=True)
class TokenRecord:
    """A stored bearer token: its hash (never the token) and who it belongs to."""

    token_hash: str
    id: str
    name: str
    created_at: int
    owner: str
    scopes: tuple[str, ...] = ("read", "write")  # skyloop.principals.SCOPES


@dataclass(frozen=True)
class FileLimits:
    """What one session may hold in files; the store enforces them in the write that adds one."""

    max_file_bytes: int
    max_files: int
    max_total_bytes: int

    def check(self, totals: tuple[int, int], size: int) -> None:
        """Raise the 413 naming the first limit one more file of ``size`` bytes would break."""
        count, used = totals
        if size > self.max_file_bytes:
            raise FileTooLargeError(f"the file is {size} bytes; the limit per file is {self.max_file_bytes}")
        if count >= self.max_files:
            raise SessionFileCountError(f"the session holds {count} files, its limit of {self.max_files}")
        if used + size > self.max_total_bytes:
            raise SessionFileBytesError(
                f"the session holds {used} bytes of files; {size} more would pass its limit of "
                f"{self.max_total_bytes}"
            )


class ConditionFailedError(ConflictError):
    """An append's guard did not hold; nothing was written."""


class ContentionError(ConflictError):
    """Too many writers raced on one session; the caller may try again."""
