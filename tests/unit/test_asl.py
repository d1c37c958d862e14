"""The turn machine's retry and catch policy, read from the ASL file both stacks run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skyloop.manifest import ASL_PATH

ASL = json.loads(ASL_PATH.read_text())
TASKS = {name: s for name, s in ASL["States"].items() if s["Type"] == "Task"}


def _retried(state: dict[str, Any], error: str) -> dict[str, Any] | None:
    return next((r for r in state.get("Retry", []) if error in r["ErrorEquals"]), None)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_throttling_is_retried_long_with_backoff(name: str) -> None:
    rule = _retried(TASKS[name], "Lambda.TooManyRequestsException")
    assert rule is not None
    assert rule["MaxAttempts"] >= 6
    assert rule["BackoffRate"] > 1
    assert rule["JitterStrategy"] == "FULL"


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_turns_own_errors_and_deadlines_are_never_retried(name: str) -> None:
    for error in (
        "States.ALL",
        "States.TaskFailed",
        "TurnError",
        "States.Timeout",
        "States.HeartbeatTimeout",
    ):
        assert _retried(TASKS[name], error) is None, (name, error)


def test_a_timed_out_model_call_is_not_run_again_but_short_steps_are() -> None:
    assert _retried(TASKS["CallModel"], "Lambda.Unknown") is None
    for name in ("PrepareTurn", "AwaitClient", "FinishTurn", "FailTurn"):
        assert _retried(TASKS[name], "Lambda.Unknown") is not None, name


def test_every_failure_is_caught_and_failturn_itself_ends_the_execution() -> None:
    for name, state in TASKS.items():
        catch = state.get("Catch") or []
        assert any("States.ALL" in c["ErrorEquals"] for c in catch), name
    assert TASKS["FailTurn"]["Catch"][0]["Next"] == "FailTurnFailed"
    assert ASL["States"]["FailTurnFailed"]["Type"] == "Fail"
    for name in set(TASKS) - {"FailTurn"}:
        assert TASKS[name]["Catch"][0]["Next"] == "FailTurn", name
