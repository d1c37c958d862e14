"""The Step Functions port: the only code that starts, stops, resumes or wakes a turn's execution.

It owns the state machine's ARN. :class:`StepFunctionsEngine` talks to Step
Functions; unit tests pass a recording fake with the same four methods.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Protocol

from skyloop import deps
from skyloop.errors import ConflictError, RunnerUnavailableError

if TYPE_CHECKING:
    from skyloop.turns.state import TurnState

log = logging.getLogger("skyloop.turns")

# Answers to SendTaskSuccess for a token nobody waits on any more (AWS says TaskTimedOut, moto InvalidToken).
STALE_TOKEN_ERRORS = frozenset({"InvalidToken", "TaskTimedOut", "TaskDoesNotExist"})


class StaleTokenError(ConflictError):
    """The execution no longer waits on this task token (it timed out, stopped or was resumed)."""


class TurnEngine(Protocol):
    def start(self, state: TurnState) -> None:
        """Start the turn's execution; starting one that already runs is a no-op."""
        ...

    def stop(self, response_id: str) -> None:
        """Stop the turn's execution, if it still runs."""
        ...

    def resume(self, task_token: str, output: dict[str, Any]) -> None:
        """Complete the parked task; raises :class:`StaleTokenError` when the token is void."""
        ...

    def wake(self, task_token: str) -> None:
        """Let a parked execution of an ended turn run on to its end (best effort)."""
        ...

    def heartbeat(self, task_token: str) -> None:
        """Tell a parked task its client is still there; raises :class:`StaleTokenError` when the token is void."""
        ...

    def status(self, response_id: str) -> str | None:
        """The execution's status (``RUNNING``, ``SUCCEEDED``, ``FAILED``...), None when there is none."""
        ...


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


class StepFunctionsEngine:
    """Turns as Standard executions of one state machine, named by their response id.

    Args:
        sfn: a ready ``boto3`` Step Functions client.
        state_machine_arn: the turn machine; ``None`` means this deployment cannot run turns.
    """

    def __init__(self, sfn: Any, state_machine_arn: str | None) -> None:
        self.sfn = sfn
        self.state_machine_arn = state_machine_arn

    def start(self, state: TurnState) -> None:
        if not self.state_machine_arn:
            raise RunnerUnavailableError("no turn state machine is configured for this deployment")
        try:
            self.sfn.start_execution(
                stateMachineArn=self.state_machine_arn,
                name=state.response_id,  # always named: an idempotent start (and moto needs it)
                input=state.model_dump_json(),
            )
        except Exception as exc:
            if _code(exc) == "ExecutionAlreadyExists":
                return  # started by an earlier attempt of the same idempotent post
            raise

    def execution_arn(self, response_id: str) -> str:
        assert self.state_machine_arn
        return self.state_machine_arn.replace(":stateMachine:", ":execution:") + ":" + response_id

    def stop(self, response_id: str) -> None:
        if not self.state_machine_arn:
            return
        try:
            self.sfn.stop_execution(
                executionArn=self.execution_arn(response_id),
                error="Interrupted",
                cause="the session's turn was interrupted or the session deleted",
            )
        except Exception as exc:
            if _code(exc) in ("ExecutionDoesNotExist", "ExecutionAlreadyStopped"):
                return
            # the turn already ended in the table; a live execution stops at its next step
            log.warning("could not stop execution %s: %s", response_id, exc)

    def resume(self, task_token: str, output: dict[str, Any]) -> None:
        try:
            self.sfn.send_task_success(taskToken=task_token, output=json.dumps(output))
        except Exception as exc:
            if _code(exc) in STALE_TOKEN_ERRORS:
                raise StaleTokenError("the turn is no longer waiting for this call") from exc
            raise

    def wake(self, task_token: str) -> None:
        try:
            self.sfn.send_task_success(taskToken=task_token, output=json.dumps({"stopped": True}))
        except Exception as exc:
            if _code(exc) not in STALE_TOKEN_ERRORS:  # a stopped execution's token is void already
                log.warning("could not wake a parked execution: %s", exc)

    def heartbeat(self, task_token: str) -> None:
        try:
            self.sfn.send_task_heartbeat(taskToken=task_token)
        except Exception as exc:
            if _code(exc) in STALE_TOKEN_ERRORS:
                raise StaleTokenError("the turn is no longer waiting") from exc
            raise

    def status(self, response_id: str) -> str | None:
        if not self.state_machine_arn:
            return None
        try:
            return str(self.sfn.describe_execution(executionArn=self.execution_arn(response_id))["status"])
        except Exception as exc:
            if _code(exc) == "ExecutionDoesNotExist":
                return None
            raise


@deps.per_container
def deployed() -> StepFunctionsEngine:
    """The port to this deployment's turn state machine."""
    return StepFunctionsEngine(deps.client("stepfunctions"), deps.get_settings().state_machine_arn)
