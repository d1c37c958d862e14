"""Warm-ups (skyloop.prewarm) through moto's Lambda and the real handlers: sent asynchronously, answered at once."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps, prewarm
from skyloop.local import lambda_hook

if TYPE_CHECKING:
    from collections.abc import Iterator

    from skyloop.local.lambda_runtime import Invocation
    from tests.integration.conftest import Stack


class Recording:
    """The local Lambda runtime, recording each invocation and what it answered."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seen: list[tuple[str, bytes, tuple[bytes, bool]]] = []

    def invoke(self, invocation: Invocation) -> tuple[bytes, bool]:
        out = self.inner.invoke(invocation)
        self.seen.append((invocation.function_name, invocation.payload, out))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def recording(aws: Stack) -> Iterator[Recording]:
    inner = lambda_hook.runtime()
    runtime = Recording(inner)
    lambda_hook._runtime[0] = runtime
    try:
        yield runtime
    finally:
        lambda_hook._runtime[0] = inner


def _table_items(aws: Stack) -> int:
    return int(deps.client("dynamodb").scan(TableName=aws.table_name, Select="COUNT")["Count"])


def test_warm_ups_reach_each_target_asynchronously_and_are_answered_without_a_write(
    aws: Stack, recording: Recording
) -> None:
    # Given the table as it is
    before = _table_items(aws)
    # When a function starting cold warms the API and turn functions
    thread = prewarm.start({prewarm.ENV: "skyloop-turn, skyloop-api"})
    assert thread is not None
    thread.join(10)
    deadline = time.monotonic() + 10
    while len(recording.seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    # Then each target ran once with the warm-up event and answered it at once, without failing
    assert sorted(name for name, _, _ in recording.seen) == ["skyloop-api", "skyloop-turn"]
    for _, payload, (out, failed) in recording.seen:
        assert json.loads(payload) == prewarm.WARM_EVENT
        assert (json.loads(out), failed) == (prewarm.WARM_REPLY, False)
    # And nothing was read into or written to the table
    assert _table_items(aws) == before


def test_no_targets_no_thread() -> None:
    assert prewarm.start({}) is None
    assert prewarm.start({prewarm.ENV: " , "}) is None


def test_a_warm_up_that_fails_is_logged_never_raised(aws: Stack, caplog: pytest.LogCaptureFixture) -> None:
    # Given a target Lambda does not know (a renamed function, missing permission...)
    # When it is warmed, the sender goes on: the failure is a warning, not an exception
    assert prewarm.warm(["skyloop-no-such-function"]) == 0
    assert "pre-warming" in caplog.text
