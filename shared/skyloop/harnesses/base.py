"""What every harness returns, independent of the provider's wire format."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class FunctionCall(BaseModel):
    call_id: str
    name: str
    arguments: str = "{}"


class ModelResult(BaseModel):
    """One model response: its text (possibly empty) and the tools it called, in order."""

    text: str = ""
    calls: list[FunctionCall] = Field(default_factory=list)
    usage: dict[str, Any] | None = None
    model: str | None = None
