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
    for name in ("AwaitClient", "FinishTurn", "FailTurn"):
        assert _retried(TASKS[name], "Lambda.Unknown") is not None, name


def test_every_failure_is_caught_and_failturn_itself_ends_the_execution() -> None:
    for name, state in TASKS.items():
        catch = state.get("Catch") or []
        assert any("States.ALL" in c["ErrorEquals"] for c in catch), name
    assert TASKS["FailTurn"]["Catch"][0]["Next"] == "FailTurnFailed"
    assert ASL["States"]["FailTurnFailed"]["Type"] == "Fail"
    for name in set(TASKS) - {"FailTurn"}:
        assert TASKS[name]["Catch"][0]["Next"] == "FailTurn", name


def _all_tasks(states: dict[str, Any]) -> dict[str, Any]:
    """Every Task of the machine, Map and Parallel bodies included."""
    out: dict[str, Any] = {}
    for name, state in states.items():
        if state["Type"] == "Task":
            out[name] = state
        for branch in state.get("Branches", []):
            out |= _all_tasks(branch["States"])
        if "ItemProcessor" in state:
            out |= _all_tasks(state["ItemProcessor"]["States"])
    return out


ALL_TASKS = _all_tasks(ASL["States"])


@pytest.mark.parametrize("name", sorted(ALL_TASKS))
def test_every_task_retries_what_aws_recommends_for_lambda(name: str) -> None:
    # AWS's recommended Retry for Lambda tasks names these four service errors
    rule = _retried(ALL_TASKS[name], "Lambda.ServiceException")
    assert rule is not None, name
    for error in (
        "Lambda.ClientExecutionTimeoutException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
    ):
        assert error in rule["ErrorEquals"], (name, error)


@pytest.mark.parametrize("name", sorted(ALL_TASKS))
def test_every_task_resource_follows_the_stacks_partition(name: str) -> None:
    # arn:aws: is refused in aws-cn and aws-us-gov: the stack substitutes its own partition
    assert ALL_TASKS[name]["Resource"] in {"${LambdaInvoke}", "${LambdaInvokeWaitForTaskToken}"}, name


def test_a_turn_starts_with_its_model_call_and_a_text_turn_needs_no_other_step() -> None:
    # The API's start append announces the turn: no prepare step before the model call
    assert ASL["StartAt"] == "CallModel"
    assert "PrepareTurn" not in ASL["States"]
    # A model call that ended the turn says "stop", which the router sends to Done
    route = ASL["States"]["Route"]
    assert "stop" not in {c.get("StringEquals") for c in route["Choices"]}
    assert ASL["States"][route["Default"]]["Type"] == "Succeed"


def test_the_client_waits_take_heartbeats_only_for_agents_that_ask() -> None:
    # The wait states with a heartbeat are chosen only when the state carries client_heartbeat_s
    # (HeartbeatSecondsPath needs a number, and Step Functions wants it below the timeout)
    waits = {n: s for n, s in ALL_TASKS.items() if s["Resource"] == "${LambdaInvokeWaitForTaskToken}"}
    assert set(waits) == {
        "AwaitClient",
        "AwaitClientWithHeartbeat",
        "AwaitClientAndApprovals",
        "AwaitClientAndApprovalsWithHeartbeat",
    }
    for name, state in waits.items():
        assert state["TimeoutSecondsPath"] == "$.wait_timeout_s", name
        assert ("HeartbeatSecondsPath" in state) is name.endswith("WithHeartbeat"), name
        if name.endswith("WithHeartbeat"):
            assert state["HeartbeatSecondsPath"] == "$.client_heartbeat_s"
            twin = {k: v for k, v in waits[name.removesuffix("WithHeartbeat")].items() if k != "Comment"}
            assert {k: v for k, v in state.items() if k not in ("Comment", "HeartbeatSecondsPath")} == twin
    route = ASL["States"]["Route"]["Choices"]
    (rule,) = [c for c in route if c.get("Next") == "AwaitClientWithHeartbeat"]
    assert {"Variable": "$.client_heartbeat_s", "IsNumeric": True} in rule["And"]
    assert route.index(rule) < next(i for i, c in enumerate(route) if c.get("Next") == "AwaitClient")
