"""Which skyloop function the running code is, where more than one share a process (the local stack).

In Lambda a process is one function, and its role decides what its AWS calls
may do. The local stack runs several functions' code in one process (the
stream app, the lifecycle publisher, webhook deliveries, the reconciler, and
every handler under the in-process runtime), and checks each call against the
policy of the function that makes it (:mod:`skyloop.local.iam`). Code that
runs as a function says so with :func:`acting_as`; a Lambda worker process
sets its one function with :func:`set_process`. Nothing here costs more than a
context variable, and nothing reads it in the cloud.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

_current: ContextVar[str | None] = ContextVar("skyloop_function", default=None)
_process: list[str | None] = [None]


def current() -> str | None:
    """The function this code runs as (the innermost :func:`acting_as`, else the process's), or None."""
    return _current.get() or _process[0]


def set_process(function_name: str | None) -> None:
    """Every call of this process is ``function_name``'s (a Lambda worker process)."""
    _process[0] = function_name


@contextlib.contextmanager
def acting_as(function_name: str | None) -> Iterator[None]:
    """Run the block as ``function_name`` (threads it starts do not inherit it: they say so themselves)."""
    token = _current.set(function_name)
    try:
        yield
    finally:
        _current.reset(token)
