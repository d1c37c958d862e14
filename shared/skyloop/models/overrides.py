"""The vocabulary of a session's overrides (omnigent's): reasoning efforts, model ids, the clear aliases.

Shared by every request that sets one (a session's, a scheduled task's), so it
lives below the API and the schedules.
"""

from __future__ import annotations

import re

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
CLEAR_ALIASES = frozenset({"default", "off", "reset", ""})  # omnigent's "remove the override" spellings
MODEL_OVERRIDE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}$"


def parse_effort(value: str | None) -> str | None:
    """A reasoning effort from omnigent's vocabulary; a clear alias becomes ``""`` (remove)."""
    if value is None:
        return None
    v = value.strip().lower()
    if v in CLEAR_ALIASES:
        return ""
    if v not in REASONING_EFFORTS:
        raise ValueError(f"reasoning_effort must be one of {list(REASONING_EFFORTS)} or 'default'")
    return v


def parse_model_override(value: str | None) -> str | None:
    """A model id; a clear alias (``default``/``off``/``reset``) becomes ``""`` (remove)."""
    if value is None:
        return None
    v = value.strip()
    if v.lower() in CLEAR_ALIASES:
        return ""
    if not re.fullmatch(MODEL_OVERRIDE_PATTERN, v):
        raise ValueError("model_override must be a model id (letters, digits and ._:/@+-, at most 256)")
    return v
