"""The Step Functions state of a turn: what every step receives and returns."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skyloop.store.records import NextStep  # noqa: TC001  (pydantic needs it at runtime)


class TurnState(BaseModel):
    """Small on purpose: Step Functions passes it between states (256 KiB cap).

    Conversation content lives in DynamoDB; the state only says where the turn is.
    """

    model_config = ConfigDict(extra="ignore")

    session_id: str
    response_id: str
    iteration: int = 0
    next: NextStep = "call_model"
    consumed_seq: int = 0
    client_tool_timeout_s: int = 3600
    client_heartbeat_s: int | None = None  # set: the wait for the client needs heartbeats this often
    # the parked wait's own deadline (TimeoutSecondsPath): the client-tool deadline less what a hot
    # wait already waited; None in older states: the client-tool deadline
    wait_timeout_s: int | None = None
    max_iterations: int = 50
    error: dict[str, Any] | None = None  # set by the state machine's Catch
    finished: bool = False  # the model step completed the turn itself (no FinishTurn state)
    # what the ``Act`` state does with the last model call's calls (see model_step.next_step)
    run_calls: list[str] = Field(default_factory=list)  # server calls to run now
    approval_calls: list[str] = Field(default_factory=list)  # server calls that run once approved
    await_calls: bool = False  # client calls or approvals to park on
    # The turn's own facts, fixed when it starts (None in an execution started without them: the
    # steps then read the turn row): its agent version and creation time.
    agent_id: str | None = None
    created_at: int | None = None
    # The session's last_seq as the previous step's last append left it: the next step's append
    # expects it instead of reading it (a stale value fails that append's condition, which then
    # re-reads and retries). None: unknown, the append reads it.
    last_seq: int | None = None

    @model_validator(mode="after")
    def _wait_deadline(self) -> TurnState:
        if self.wait_timeout_s is None:
            self.wait_timeout_s = self.client_tool_timeout_s
        return self


class TurnError(Exception):
    """A turn failure with an API error code; its message travels as JSON through Step Functions."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(json.dumps({"code": code, "message": message}))
        self.code = code
        self.message = message


TurnStep = Literal["call_model", "await_client", "finish_turn", "fail_turn"]


class TurnStepInput(BaseModel):
    """The turn function's payload: which state invoked it, the turn's state, and (parking) the task token."""

    step: TurnStep
    state: TurnState
    task_token: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _token_to_park(self) -> TurnStepInput:
        if self.step == "await_client" and self.task_token is None:
            raise ValueError("await_client needs the task token ($$.Task.Token)")
        return self


class ToolStepInput(BaseModel):
    """The payload of a ``RunTools`` step: the turn, the call, and (to record) how its invocation went."""

    action: Literal["prepare", "record", "poll"]  # poll: a hosted command still running (poll_tool)
    state: TurnState
    call_id: str = Field(min_length=1)
    outcome: dict[str, Any] | None = None  # {"payload": ...} or the Catch's {"Error", "Cause"}


def error_from_catch(error: dict[str, Any] | None) -> tuple[str, str]:
    """Turn a Step Functions Catch result ``{Error, Cause}`` into ``(code, message)``."""
    if not error:
        return "internal_error", "the turn failed"
    name = str(error.get("Error") or "")
    cause = error.get("Cause") or ""
    if name == "States.Timeout":
        return "client_tool_timeout", "no output arrived for a client-side tool call before its deadline"
    if name == "States.HeartbeatTimeout":
        return (
            "client_heartbeat_timeout",
            "the client stopped sending heartbeats while the turn waited for it (limits.client_heartbeat_s)",
        )
    try:
        detail = json.loads(cause)
    except (TypeError, ValueError):
        detail = {}
    message = detail.get("errorMessage") if isinstance(detail, dict) else None
    if isinstance(message, str):
        try:
            inner = json.loads(message)
        except ValueError:
            inner = None
        if isinstance(inner, dict) and "code" in inner:
            return str(inner["code"]), str(inner.get("message", ""))
        return _code_for(name), message
    return _code_for(name), cause or name or "the turn failed"


def _code_for(error_name: str) -> str:
    if error_name.startswith("Lambda.") or error_name.startswith("States."):
        return "runner_error"
    return "internal_error"
