"""What a ``scripted`` executor declares: its answers, checked when the agent is registered.

The harness (:mod:`skyloop.harnesses.scripted`) plays them; the schema lives
with the agent's model so that a bad script is a 400 at registration.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

MAX_ANSWERS = 200
MAX_DELAY_MS = 300_000  # five minutes: enough for an interrupt to land, short of any step timeout
MAX_WORD_DELAY_MS = 10_000
_TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"


class ScriptedCall(BaseModel):
    """One tool call of an answer; ``arguments`` may be an object or a JSON object string."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_TOOL_NAME)
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> str:
        if isinstance(value, dict):
            return json.dumps(value)
        if isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError:
                raise ValueError("must be a JSON object (or a string holding one)") from None
            if isinstance(parsed, dict):
                return value
        raise ValueError("must be a JSON object (or a string holding one)")


class ScriptedUsage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = Field(default=0, ge=0, le=10_000_000)
    output_tokens: int = Field(default=0, ge=0, le=10_000_000)


class ScriptedAnswer(BaseModel):
    """One answer: text and/or tool calls, for inputs containing ``match`` (or any input without it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str | None = Field(default=None, min_length=1, max_length=256)
    text: str = Field(default="", max_length=100_000)
    tool_calls: list[ScriptedCall] = Field(default_factory=list, max_length=16)
    delay_ms: int = Field(default=0, ge=0, le=MAX_DELAY_MS)
    word_delay_ms: int = Field(default=0, ge=0, le=MAX_WORD_DELAY_MS)
    # the tokens this answer reports as its usage (spend control prices them; skyloop.pricing)
    usage: ScriptedUsage | None = None

    @model_validator(mode="after")
    def _says_something(self) -> ScriptedAnswer:
        if not self.text and not self.tool_calls:
            raise ValueError("an answer needs text, tool_calls or both")
        return self


_SCRIPT: TypeAdapter[list[ScriptedAnswer]] = TypeAdapter(list[ScriptedAnswer])


def validate_script(raw: Any) -> list[ScriptedAnswer]:
    """The script of a ``scripted`` executor; ValueError names the first problems and where they are."""
    if raw is None:
        raise ValueError("script is required for the scripted harness (a list of answers)")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_ANSWERS:
        raise ValueError(f"script must be a list of 1 to {MAX_ANSWERS} answers")
    try:
        return _SCRIPT.validate_python(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False, include_input=False, include_context=False)[:5]:
            where = "script" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
            problems.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
        raise ValueError("; ".join(problems)) from None
