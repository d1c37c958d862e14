"""Model prices, for spend control (the OpenAI Agents API's ``spend_control``, in USD cents).

skyloop records each model call's tokens; a price turns them into money. A
price is USD per million tokens, input and output. Where one comes from, first
match wins:

1. the agent's ``executor.pricing`` (``{input, output}``), for a model only its
   agent knows (a vLLM server, a fine-tune);
2. ``SKYLOOP_MODEL_PRICES``, a JSON object ``{"<model>": {"input": 0.4, "output": 1.6}}``
   (a deployment's own prices, over the table below);
3. :data:`DEFAULT_PRICES`, public list prices at the time of writing (check
   them: providers change prices, and this table is not a bill).

A model id matches a table key exactly, else the longest key it starts with
(``gpt-4.1-mini-2025-04-14`` is priced as ``gpt-4.1-mini``). A model with no
price costs nothing here: a session whose agent's model has none cannot take a
spend limit (400), so a limit is never silently unenforced.
"""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

if TYPE_CHECKING:
    from skyloop.models.agent import AgentExecutor

PRICES_ENV = "SKYLOOP_MODEL_PRICES"
MICROS_PER_CENT = 10_000  # a spend is counted in millionths of a USD


class ModelPrice(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, le=10_000)
    output: float = Field(ge=0, le=10_000)

    def cost_micros(self, input_tokens: int, output_tokens: int) -> int:
        """What a call cost, in millionths of a USD, rounded up (tokens x USD per million = micro-USD)."""
        return math.ceil(input_tokens * self.input + output_tokens * self.output)


DEFAULT_PRICES: dict[str, ModelPrice] = {
    name: ModelPrice(input=i, output=o)
    for name, (i, o) in {
        "gpt-5": (1.25, 10.0),
        "gpt-5-mini": (0.25, 2.0),
        "gpt-5-nano": (0.05, 0.4),
        "gpt-4.1": (2.0, 8.0),
        "gpt-4.1-mini": (0.4, 1.6),
        "gpt-4.1-nano": (0.1, 0.4),
        "gpt-4o": (2.5, 10.0),
        "gpt-4o-mini": (0.15, 0.6),
        "o3": (2.0, 8.0),
        "o4-mini": (1.1, 4.4),
        "us.anthropic.claude-3-5-haiku-20241022-v1:0": (0.8, 4.0),
        "anthropic.claude-3-5-haiku-20241022-v1:0": (0.8, 4.0),
        "us.anthropic.claude-sonnet-4-20250514-v1:0": (3.0, 15.0),
        "anthropic.claude-sonnet-4-20250514-v1:0": (3.0, 15.0),
    }.items()
}

_TABLE: TypeAdapter[dict[str, ModelPrice]] = TypeAdapter(dict[str, ModelPrice])


def parse_prices(raw: str) -> dict[str, ModelPrice]:
    """``SKYLOOP_MODEL_PRICES``; ValueError says what is wrong with it."""
    try:
        return _TABLE.validate_python(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        raise ValueError(
            f"{PRICES_ENV} must be a JSON object of {{model: {{input, output}}}}: {exc}"
        ) from None


@lru_cache(maxsize=4)
def _table(raw: str) -> dict[str, ModelPrice]:
    return {**DEFAULT_PRICES, **(parse_prices(raw) if raw.strip() else {})}


def price_of(executor: AgentExecutor, model: str | None = None) -> ModelPrice | None:
    """The price of ``model`` (default: the executor's) for this agent, or None if nobody set one."""
    if executor.pricing is not None:
        return executor.pricing
    model = model or executor.model
    table = _table(os.environ.get(PRICES_ENV, ""))
    if model in table:
        return table[model]
    prefixes = [key for key in table if model.startswith(key)]
    return table[max(prefixes, key=len)] if prefixes else None


def cents_floor(micros: int) -> int:
    return micros // MICROS_PER_CENT


def budget_reached(limit_cents: int | None, spend_micros: int) -> bool:
    return limit_cents is not None and spend_micros >= limit_cents * MICROS_PER_CENT
