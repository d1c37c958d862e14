"""Fakes of skyloop's own ports, shared by the unit and integration suites."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skyloop.turns.engine import StaleTokenError

if TYPE_CHECKING:
    from skyloop.turns.state import TurnState


@dataclass
class RecordingEngine:
    """Stands in for Step Functions (``skyloop.turns.engine.TurnEngine``): records what it was asked.

    ``fail_resumes`` makes that many ``resume`` calls raise as an unreachable
    service would; ``stale_tokens`` lists tokens whose executions are gone.
    """

    started: list[TurnState] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    resumed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    woken: list[str] = field(default_factory=list)
    heartbeats: list[str] = field(default_factory=list)
    fail_starts: int = 0
    fail_resumes: int = 0
    stale_tokens: set[str] = field(default_factory=set)
    statuses: dict[str, str] = field(default_factory=dict)  # response id -> execution status

    def start(self, state: TurnState) -> None:
        if self.fail_starts:
            self.fail_starts -= 1
            raise ConnectionError("Step Functions unreachable")
        self.started.append(state)

    def stop(self, response_id: str) -> None:
        self.stopped.append(response_id)

    def resume(self, task_token: str, output: dict[str, Any]) -> None:
        if task_token in self.stale_tokens:
            raise StaleTokenError("the turn is no longer waiting for this call")
        if self.fail_resumes:
            self.fail_resumes -= 1
            raise ConnectionError("Step Functions unreachable")
        self.resumed.append((task_token, output))

    def wake(self, task_token: str) -> None:
        self.woken.append(task_token)

    def heartbeat(self, task_token: str) -> None:
        if task_token in self.stale_tokens:
            raise StaleTokenError("the turn is no longer waiting")
        self.heartbeats.append(task_token)

    def status(self, response_id: str) -> str | None:
        if response_id in self.statuses:
            return self.statuses[response_id]
        return "RUNNING" if any(s.response_id == response_id for s in self.started) else None
