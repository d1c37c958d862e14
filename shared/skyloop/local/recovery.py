"""Continue, after a restart, the turns the table says were running (see :mod:`skyloop.turns.recovery`).

moto keeps Step Functions executions in memory, so a restarted stack has
none, while its data directory still has every turn that was running. For
each, :func:`skyloop.turns.recovery.plan` says where the turn stood; this
module starts a new execution of the same state machine, named by the
turn's response id as always:

* at ``CallModel`` (the definition's start) when the model is to be called;
* at ``Route``, the Choice on ``$.next``, when the turn is to wait for its
  client again, run its server tools, or finish: the execution's input
  carries :data:`START_AT`, which the local stack's Step Functions reads as
  "begin at this state" (:func:`skyloop.local.moto_stepfunctions.install`).
  The state machine and its states are the deployed ones; only the entry
  differs, and only here: AWS keeps executions across anything, so the
  cloud never needs to start one midway.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from skyloop.turns.engine import StepFunctionsEngine
from skyloop.turns.recovery import Report, recover

if TYPE_CHECKING:
    from skyloop.turns.state import TurnState

START_AT = "__skyloop_start_at"  # an execution input field: the state the local stack begins it at
ROUTE_STATE = "Route"

__all__ = ["START_AT", "LocalEngine", "Report", "recover"]


class LocalEngine(StepFunctionsEngine):
    """The Step Functions port, plus starting an execution at ``Route`` (the local stack's restarts)."""

    def start_routed(self, state: TurnState) -> None:
        if not self.state_machine_arn:
            raise RuntimeError("no turn state machine")
        payload: dict[str, Any] = {**json.loads(state.model_dump_json()), START_AT: ROUTE_STATE}
        try:
            self.sfn.start_execution(
                stateMachineArn=self.state_machine_arn, name=state.response_id, input=json.dumps(payload)
            )
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") == "ExecutionAlreadyExists":
                return
            raise
