"""Turns: the Step Functions steps and the API-side operations that start and resume them."""

from skyloop.turns.state import TurnError, TurnState

__all__ = ["TurnError", "TurnState"]
