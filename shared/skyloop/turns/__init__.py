"""Turns: their lifecycle (every transition), the Step Functions tasks, and the engine port."""

from skyloop.turns.state import TurnError, TurnState

__all__ = ["TurnError", "TurnState"]
