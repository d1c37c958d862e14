"""The Step Functions port maps the service's answers to what the lifecycle expects."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from skyloop.errors import RunnerUnavailableError
from skyloop.turns.engine import StaleTokenError, StepFunctionsEngine
from skyloop.turns.state import TurnState

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:turns"


def _error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "op")


class FakeSfn:
    def __init__(self, fail: dict[str, str] | None = None) -> None:
        self.fail = fail or {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> dict[str, Any]:
            self.calls.append((name, kwargs))
            if name in self.fail:
                raise _error(self.fail[name])
            return {}

        return call


STATE = TurnState(session_id="s", response_id="resp_1")


def test_start_names_the_execution_and_an_existing_one_is_fine() -> None:
    sfn = FakeSfn()
    StepFunctionsEngine(sfn, ARN).start(STATE)
    assert sfn.calls[0][1]["name"] == "resp_1"
    assert sfn.calls[0][1]["stateMachineArn"] == ARN
    StepFunctionsEngine(FakeSfn({"start_execution": "ExecutionAlreadyExists"}), ARN).start(STATE)
    with pytest.raises(ClientError):
        StepFunctionsEngine(FakeSfn({"start_execution": "ThrottlingException"}), ARN).start(STATE)
    with pytest.raises(RunnerUnavailableError):
        StepFunctionsEngine(FakeSfn(), None).start(STATE)


@pytest.mark.parametrize("code", ["InvalidToken", "TaskTimedOut", "TaskDoesNotExist"])
def test_a_void_token_is_stale(code: str) -> None:
    with pytest.raises(StaleTokenError):
        StepFunctionsEngine(FakeSfn({"send_task_success": code}), ARN).resume("t", {"x": 1})


def test_resume_sends_the_output_and_other_failures_propagate() -> None:
    sfn = FakeSfn()
    StepFunctionsEngine(sfn, ARN).resume("t", {"resumed_iteration": 0})
    assert sfn.calls == [("send_task_success", {"taskToken": "t", "output": '{"resumed_iteration": 0}'})]
    with pytest.raises(ClientError):
        StepFunctionsEngine(FakeSfn({"send_task_success": "ServiceUnavailable"}), ARN).resume("t", {})


def test_stop_and_wake_never_raise() -> None:
    sfn = FakeSfn()
    engine = StepFunctionsEngine(sfn, ARN)
    engine.stop("resp_1")
    assert sfn.calls[0][1]["executionArn"] == ARN.replace(":stateMachine:", ":execution:") + ":resp_1"
    for code in ("ExecutionDoesNotExist", "ServiceUnavailable"):
        StepFunctionsEngine(FakeSfn({"stop_execution": code}), ARN).stop("resp_1")
    for code in ("InvalidToken", "ServiceUnavailable"):
        StepFunctionsEngine(FakeSfn({"send_task_success": code}), ARN).wake("t")
    StepFunctionsEngine(FakeSfn(), None).stop("resp_1")  # nothing to stop without a machine
