"""The client's one retry policy: which failures deserve another attempt, how long to wait, when to stop.

Every retry in the SDK goes through here: stream reconnects (``_stream``),
re-posting a message with its ``Idempotency-Key`` and re-posting a tool
output (``_turn``). The decisions (:meth:`ReconnectPolicy.retryable`,
:class:`Backoff`) hold no I/O; :func:`retry_call` and :func:`aretry_call` are
the thin sync and async loops around them, so both clients wait and give up
in exactly the same way.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from skyloop.client._errors import APIConnectionError, APIError, is_retryable_status

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["Backoff", "ReconnectPolicy", "apause", "aretry_call", "pause", "retry_call"]

T = TypeVar("T")


@dataclass(frozen=True)
class ReconnectPolicy:
    """How the client retries: exponential backoff, then give up.

    One policy serves every retry: stream reconnects, message re-posts (safe
    thanks to the turn's ``Idempotency-Key``) and tool-output re-posts (the
    server ignores a repeated output). ``max_failures`` counts consecutive
    failed attempts; for streams, any connection that delivers its first
    frame resets the count. ``read_timeout`` must exceed the server's
    heartbeat interval (15 s) so a silent, half-dead connection is noticed
    and replaced.
    """

    initial_delay: float = 0.2
    max_delay: float = 5.0
    max_failures: int = 10
    read_timeout: float = 60.0
    sleep: Callable[[float], Any] | None = field(default=None, compare=False)
    """Injected sleep (``time.sleep``-like for ``Client``, awaitable for ``AsyncClient``); for tests."""

    def delay(self, failures: int) -> float:
        """Seconds to wait before attempt number ``failures + 1``."""
        if failures <= 0:
            return 0.0
        return min(self.initial_delay * (2 ** (failures - 1)), self.max_delay)

    def retryable(self, error: BaseException) -> bool:
        """Whether another attempt may succeed: no answer came, or a transient status (408, 425, 429, 5xx)."""
        if isinstance(error, APIError):
            return is_retryable_status(error.status)
        return isinstance(error, APIConnectionError | httpx.TransportError)

    def backoff(self) -> Backoff:
        """A fresh failure count for one operation under this policy."""
        return Backoff(self)


class Backoff:
    """Consecutive failures of one operation against the policy's budget (no I/O)."""

    def __init__(self, policy: ReconnectPolicy) -> None:
        self.policy = policy
        self.failures = 0

    def failed(self) -> float | None:
        """Count a failure: the seconds to wait before the next attempt, or ``None`` once the budget is spent."""
        self.failures += 1
        if self.failures > self.policy.max_failures:
            return None
        return self.policy.delay(self.failures)

    def reset(self) -> None:
        """A success: the next failure starts the backoff from the beginning."""
        self.failures = 0


def _next_delay(
    policy: ReconnectPolicy, backoff: Backoff, error: Exception, final: tuple[type[BaseException], ...]
) -> float | None:
    if isinstance(error, final) or not policy.retryable(error):
        return None
    return backoff.failed()


def retry_call(
    policy: ReconnectPolicy, attempt: Callable[[], T], *, final: tuple[type[BaseException], ...] = ()
) -> T:
    """``attempt()`` until it succeeds; re-raises its error when not retryable or the budget is spent.

    Only for requests that are safe to repeat. ``final`` names errors that are
    retryable in general but settle this request (a message refused for want
    of a runner).
    """
    backoff = policy.backoff()
    while True:
        try:
            return attempt()
        except Exception as exc:
            delay = _next_delay(policy, backoff, exc, final)
            if delay is None:
                raise
        pause(policy, delay)


async def aretry_call(
    policy: ReconnectPolicy,
    attempt: Callable[[], Awaitable[T]],
    *,
    final: tuple[type[BaseException], ...] = (),
) -> T:
    """The async twin of :func:`retry_call` (``policy.sleep``, when given, must return an awaitable)."""
    backoff = policy.backoff()
    while True:
        try:
            return await attempt()
        except Exception as exc:
            delay = _next_delay(policy, backoff, exc, final)
            if delay is None:
                raise
        await apause(policy, delay)


def pause(policy: ReconnectPolicy, seconds: float) -> None:
    """Wait ``seconds`` with the policy's sleep (for loops that keep their own :class:`Backoff`)."""
    if seconds > 0:
        (policy.sleep or time.sleep)(seconds)


async def apause(policy: ReconnectPolicy, seconds: float) -> None:
    """The async twin of :func:`pause`."""
    if seconds > 0:
        await (policy.sleep or asyncio.sleep)(seconds)
