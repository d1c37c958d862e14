"""What a turn hands to the caller's code around each client-side tool call.

The sync and async clients take the same three hooks. ``AsyncClient`` also
accepts their awaitable versions (``AsyncConfirmTool``, ...), awaited on the
loop; ``Client`` takes only plain callables, so an ``async def`` hook given to
it (which would never run) is a type error rather than a silent no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = [
    "AsyncConfirmTool",
    "AsyncToolEndHook",
    "AsyncToolStartHook",
    "ConfirmTool",
    "ToolCall",
    "ToolEndHook",
    "ToolStartHook",
]


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
    """Called on the iterating thread (or task) just before the tool starts (after confirmation)."""

    def __call__(self, call: ToolCall, /) -> None: ...


class ToolEndHook(Protocol):
    """Called with the output before it is posted: on the tool's worker thread (sync) or task (async).

    A hook that raises is ignored: the call is answered all the same.
    """

    def __call__(self, call: ToolCall, output: str, /) -> None: ...


class AsyncConfirmTool(Protocol):
    """:class:`ConfirmTool`, awaitable (``AsyncClient`` only)."""

    def __call__(self, name: str, arguments: dict[str, Any], /) -> Awaitable[bool]: ...


class AsyncToolStartHook(Protocol):
    """:class:`ToolStartHook`, awaitable (``AsyncClient`` only)."""

    def __call__(self, call: ToolCall, /) -> Awaitable[None]: ...


class AsyncToolEndHook(Protocol):
    """:class:`ToolEndHook`, awaitable (``AsyncClient`` only)."""

    def __call__(self, call: ToolCall, output: str, /) -> Awaitable[None]: ...
