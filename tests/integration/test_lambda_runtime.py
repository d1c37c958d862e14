"""The local Lambda runtime's worker pool leaves nothing behind, even when its stack is killed."""

from __future__ import annotations

import json
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from skyloop.local.handlers import LocalContext
from skyloop.local.lambda_runtime import Invocation, ProcessRuntime


def _entries() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("skyloop-lambda")}


def test_the_worker_socket_is_not_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack killed with SIGKILL never runs ``close``; an abstract socket has no file to leak."""
    for name, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "x"),
    ):
        monkeypatch.setenv(name, value)  # the workers build (and warm) their clients at start
    before = _entries()
    runtime = ProcessRuntime(["turn"], max_environments=2)
    try:
        assert _entries() == before
    finally:
        runtime.close()


def test_a_fork_server_that_cannot_start_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials: the fork server's warm-up raises; the stack says so at once, not after a minute."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(RuntimeError, match="exited with status"):
        ProcessRuntime(["turn"], max_environments=2)


TOOLS = str(Path(__file__).with_name("tool_functions.py"))


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "x"),
        ("SKYLOOP_LAMBDA_TOOLS", TOOLS),
    ):
        monkeypatch.setenv(name, value)


def dawdle(seconds: float, timeout_s: float = 30.0) -> Invocation:
    context = LocalContext(
        "dawdle", "1", "arn:dawdle", 128, uuid.uuid4().hex, "g", "s", time.time() + timeout_s
    )
    payload = json.dumps({"arguments": {"seconds": seconds}, "call_id": "c", "session_id": "s"}).encode()
    return Invocation(function_name="dawdle", payload=payload, context=context, timeout_s=timeout_s)


def invoke_all(
    runtime: ProcessRuntime, invocations: list[Invocation]
) -> tuple[list[tuple[bytes, bool]], float]:
    results: list[tuple[bytes, bool]] = [(b"", True)] * len(invocations)

    def one(i: int) -> None:
        results[i] = runtime.invoke(invocations[i])

    start = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(invocations))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, time.monotonic() - start


@pytest.mark.usefixtures("aws_env")
def test_an_environment_with_room_serves_invocations_at_once() -> None:
    # Given a function whose one environment serves 4 invocations at once (as the turn function's do)
    runtime = ProcessRuntime(["dawdle"], concurrency={"dawdle": 4}, environments={"dawdle": 1})
    try:
        # When 4 invocations of one second each arrive together
        results, wall = invoke_all(runtime, [dawdle(1.0) for _ in range(4)])

        # Then they run side by side in that one environment
        assert [json.loads(body) for body, failed in results] == ["late"] * 4
        assert not any(failed for _, failed in results)
        assert wall < 2.5, wall
        assert len(runtime.environments("dawdle")) == 1
    finally:
        runtime.close()


@pytest.mark.usefixtures("aws_env")
def test_an_environment_of_one_serves_one_invocation_at_a_time_and_the_pool_is_capped() -> None:
    # Given a function of one invocation per environment (as the API's), at most 2 environments
    runtime = ProcessRuntime(["dawdle"], environments={"dawdle": 2}, spawn_after_s=0.05)
    try:
        # When 4 invocations of half a second arrive together
        results, wall = invoke_all(runtime, [dawdle(0.5) for _ in range(4)])

        # Then two environments serve them, two after two
        assert not any(failed for _, failed in results)
        assert wall >= 1.0, wall
        assert len(runtime.environments("dawdle")) == 2
    finally:
        runtime.close()


@pytest.mark.usefixtures("aws_env")
def test_a_timed_out_invocation_ends_its_environment_and_what_it_served_beside_it() -> None:
    runtime = ProcessRuntime(["dawdle"], concurrency={"dawdle": 2}, environments={"dawdle": 1})
    try:
        results, _ = invoke_all(runtime, [dawdle(5.0, timeout_s=1.0), dawdle(3.0, timeout_s=10.0)])
        (late, late_failed), (beside, beside_failed) = results
        assert late_failed
        assert json.loads(late)["errorType"] == "Sandbox.Timedout"
        assert beside_failed
        assert json.loads(beside)["errorType"] == "Runtime.ExitError"
        # and the function gets a new environment for what comes next
        ((body, failed),) = [runtime.invoke(dawdle(0.1))]
        assert (json.loads(body), failed) == ("late", False)
    finally:
        runtime.close()


@pytest.mark.usefixtures("aws_env")
def test_an_output_recorded_in_the_stack_reaches_a_step_waiting_in_an_environment() -> None:
    from skyloop.store import notifier

    # Given an environment whose invocation waits for an output of session "s" (up to 20 s)
    runtime = ProcessRuntime(["await_answer"], environments={"await_answer": 1})
    try:
        context = LocalContext(
            "await_answer", "1", "arn:await_answer", 128, uuid.uuid4().hex, "g", "s", time.time() + 30
        )
        payload = json.dumps({"arguments": {"seconds": 20}, "call_id": "c", "session_id": "s"}).encode()
        invocation = Invocation(function_name="await_answer", payload=payload, context=context, timeout_s=30)
        result: list[tuple[bytes, bool]] = []
        waiting = threading.Thread(target=lambda: result.append(runtime.invoke(invocation)))
        started = time.monotonic()
        waiting.start()
        # When the stack's process hears of an output of "s" (from an API environment, or its own),
        # again until the invocation ends (it may not be waiting yet the first time)
        while waiting.is_alive() and time.monotonic() - started < 25:
            notifier.deliver("s", notifier.ANSWERED)
            waiting.join(0.05)
        # Then the waiting invocation was woken, long before its 20 s
        assert result == [(b"true", False)]
        assert time.monotonic() - started < 10
    finally:
        runtime.close()
