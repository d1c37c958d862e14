"""Paging cursors, page slices and metadata patches: what the service, environments and the work queue share."""

from __future__ import annotations

import base64
import json
from typing import Any

from skyloop.errors import InvalidInputError


def page_token(*parts: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(parts, separators=(",", ":")).encode()).decode().rstrip("=")


def read_token(token: str) -> list[Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, TypeError):
        raise InvalidInputError(f"page: {token!r} is not a page cursor this API gave", param="page") from None
    if not isinstance(value, list):
        raise InvalidInputError(f"page: {token!r} is not a page cursor this API gave", param="page")
    return value


def slice_rows(rows: list[dict[str, Any]], page: str | None, limit: int, key: str = "id") -> dict[str, Any]:
    """A page of rows already in order; the cursor is the ``key`` of the last row given."""
    start = 0
    if page:
        after = (read_token(page) or [None])[0]
        ids = [r[key] for r in rows]
        if after not in ids:
            raise InvalidInputError("page: the cursor's row is no longer listed", param="page")
        start = ids.index(after) + 1
    chunk = rows[start : start + limit]
    more = start + limit < len(rows)
    return {"data": chunk, "next_page": page_token(chunk[-1][key]) if more and chunk else None}


def patch_metadata(old: dict[str, str], patch: dict[str, str | None] | None) -> dict[str, str]:
    """Metadata after an update's patch: a string sets the key, null (or "") deletes it."""
    out = dict(old)
    for key, value in (patch or {}).items():
        if value:
            out[key] = value
        else:
            out.pop(key, None)
    if len(out) > 16:
        raise InvalidInputError("metadata: at most 16 keys", param="metadata")
    return out
