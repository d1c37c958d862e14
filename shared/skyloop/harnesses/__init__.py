"""Model harnesses: how a turn's model call is made for each ``executor.harness``."""

from skyloop.harnesses.base import FunctionCall, ModelResult

__all__ = ["FunctionCall", "ModelResult"]
