"""Error-message helpers shared by the bundle modules.

Messages name the problem and where it is, bounded in length, and never
repeat the offending value: an upload may carry API keys.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from skyloop.bundles import limits

if TYPE_CHECKING:
    from pydantic import ValidationError

BUNDLE_PREFIX = "invalid agent bundle: "
SPEC_PREFIX = "invalid agent spec: "
METADATA_PREFIX = "invalid session metadata: "

_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show(name: str) -> str:
    """Quote a user-supplied name for an error message, bounded in length."""
    return repr(truncate(name, limits.MAX_SHOWN_NAME_CHARS))


def kind(value: object) -> str:
    """Name a JSON value's type the way a caller thinks of it ("a list", "null")."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def format_validation_error(exc: ValidationError) -> str:
    """``loc: msg`` pairs without the offending input, so secrets never echo back."""
    items: list[str] = []
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    listed = limits.MAX_LISTED_ERRORS
    for error in errors[:listed]:
        location = _format_loc(error["loc"])
        message = truncate(
            error["msg"].removeprefix("Value error, "), limits.MAX_SHOWN_VALIDATION_MESSAGE_CHARS
        )
        items.append(f"{location}: {message}" if location else message)
    if len(errors) > listed:
        items.append(f"and {len(errors) - listed} more")
    return "; ".join(items)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    """``executor.auth.base_url``, ``tools[0]``, ``labels['a b'][key]``."""
    text = ""
    for part in loc:
        if isinstance(part, int) or part == "[key]":
            text += f"[{part}]" if isinstance(part, int) else part
        elif _PLAIN_KEY_RE.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{show(part)}]"
    return truncate(text, limits.MAX_SHOWN_LOCATION_CHARS)
