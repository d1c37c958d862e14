"""The one retry policy: what is retried, how long it waits, when it gives up (sync and async alike)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from skyloop.client import (
    APIConnectionError,
    APITimeoutError,
    ConflictError,
    InternalServerError,
    InvalidInputError,
    NotFoundError,
    ReconnectPolicy,
    ResponseValidationError,
    RunnerUnavailableError,
)
from skyloop.client._config import ReconnectPolicy as ConfigReconnectPolicy
from skyloop.client._errors import APIError
from skyloop.client._retry import aretry_call, retry_call


def test_the_policy_retries_lost_answers_and_transient_statuses_only() -> None:
    policy = ReconnectPolicy()
    for error in (
        APIConnectionError("reset"),
        APITimeoutError("slow"),
        httpx.ReadError("cut"),
        InternalServerError("x"),
        RunnerUnavailableError("x"),
        APIError("busy", status=429),
        APIError("gateway", status=502),
    ):
        assert policy.retryable(error), error
    for error in (
        InvalidInputError("x"),
        NotFoundError("x"),
        ConflictError("x"),
        ResponseValidationError("x"),
        ValueError("x"),
    ):
        assert not policy.retryable(error), error


def test_backoff_doubles_to_the_cap_and_a_success_resets_it() -> None:
    backoff = ReconnectPolicy(initial_delay=0.5, max_delay=1.5, max_failures=4).backoff()
    assert [backoff.failed() for _ in range(5)] == [0.5, 1.0, 1.5, 1.5, None]
    backoff.reset()
    assert backoff.failed() == 0.5


def test_the_policy_still_imports_from_config() -> None:
    assert ConfigReconnectPolicy is ReconnectPolicy


class Flaky:
    """Fails with ``errors`` in turn, then answers ``"ok"``."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"

    async def acall(self) -> str:
        return self()


def test_retry_call_waits_by_the_policy_and_returns_the_answer() -> None:
    sleeps: list[float] = []
    attempt = Flaky(APIConnectionError("reset"), InternalServerError("x"))
    assert retry_call(ReconnectPolicy(sleep=sleeps.append), attempt) == "ok"
    assert (attempt.calls, sleeps) == (3, [0.2, 0.4])


def test_retry_call_gives_up_after_the_budget_with_the_last_error() -> None:
    sleeps: list[float] = []
    attempt = Flaky(*[InternalServerError(f"try {n}") for n in range(5)])
    with pytest.raises(InternalServerError, match="try 2"):
        retry_call(ReconnectPolicy(sleep=sleeps.append, max_failures=2), attempt)
    assert (attempt.calls, sleeps) == (3, [0.2, 0.4])


def test_retry_call_raises_final_and_non_retryable_errors_at_once() -> None:
    sleeps: list[float] = []
    policy = ReconnectPolicy(sleep=sleeps.append)
    refused = Flaky(RunnerUnavailableError("no runner"))
    with pytest.raises(RunnerUnavailableError):
        retry_call(policy, refused, final=(RunnerUnavailableError,))
    invalid = Flaky(InvalidInputError("bad"))
    with pytest.raises(InvalidInputError):
        retry_call(policy, invalid)
    assert (refused.calls, invalid.calls, sleeps) == (1, 1, [])


def test_aretry_call_is_the_same_policy_awaited() -> None:
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    policy = ReconnectPolicy(sleep=fake_sleep, max_failures=2)

    async def main() -> None:
        assert await aretry_call(policy, Flaky(APITimeoutError("slow")).acall) == "ok"
        spent = Flaky(*[APIConnectionError("reset")] * 3)
        with pytest.raises(APIConnectionError):
            await aretry_call(policy, spent.acall)
        assert spent.calls == 3
        refused = Flaky(RunnerUnavailableError("no runner"))
        with pytest.raises(RunnerUnavailableError):
            await aretry_call(policy, refused.acall, final=(RunnerUnavailableError,))
        assert refused.calls == 1

    asyncio.run(main())
    assert sleeps == [0.2, 0.2, 0.4]
