"""The harness interface: what every model integration takes and returns, whatever its wire format.

A harness module (one per ``executor.harness``, see :mod:`skyloop.harnesses`)
exposes :func:`call_model` with this signature and maps the conversation
(skyloop's items) to its provider's messages and the provider's answer back
to a :class:`ModelResult`. Harness modules import their SDK lazily, so a model
step loads only the SDK its agent uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.agent import AgentSpec
    from skyloop.models.session import ClientTool, ConversationItem


class FunctionCall(BaseModel):
    call_id: str
    name: str
    arguments: str = "{}"


class Usage(BaseModel):
    """Tokens of one model call (Responses-API names)."""

    input_tokens: int = 0
    output_tokens: int = 0

    @classmethod
    def of(cls, usage: dict[str, Any] | None) -> Usage:
        """A harness's usage dict (Responses names; anything else counts as nothing)."""
        usage = usage or {}
        return cls(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_api(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }


class ModelResult(BaseModel):
    """One model response: its text (possibly empty) and the tools it called, in order."""

    text: str = ""
    calls: list[FunctionCall] = Field(default_factory=list)
    usage: dict[str, Any] | None = None
    model: str | None = None


class ModelCaller(Protocol):
    def __call__(
        self,
        spec: AgentSpec,
        items: list[ConversationItem],
        tools: list[ClientTool],
        on_delta: Callable[[str], None],
        *,
        timeout_s: float,
    ) -> ModelResult:
        """Stream one response; text deltas go to ``on_delta`` as they arrive.

        ``timeout_s`` bounds the whole call, the harness's own retries
        included. Failures raise :class:`skyloop.errors.ModelCallError` with a
        code (``model_rate_limited``, ``model_http_error``, ``model_timeout``...).
        """
        ...
