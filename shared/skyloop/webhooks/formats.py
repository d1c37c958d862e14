"""What an endpoint is posted, by its ``format``: skyloop's own events, or Claude Managed Agents' shape.

One place for both the publisher (every lifecycle event, in the cloud and in
``skyloop dev``) and the test route, so what is signed and posted (the
delivery's ``body``), the ``webhook-id`` (the delivery's ``id``) and the type
an endpoint's ``events`` filter reads always agree for a format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from skyloop.lifecycle_events import claude
from skyloop.lifecycle_events.models import EVENT_TYPES

if TYPE_CHECKING:
    from skyloop.lifecycle_events.claude import Source

WebhookFormat = Literal["skyloop", "anthropic"]
SKYLOOP: Final = "skyloop"
ANTHROPIC: Final = "anthropic"
# What each format's ``events`` filter may name.
TYPES: dict[str, tuple[str, ...]] = {SKYLOOP: EVENT_TYPES, ANTHROPIC: claude.EVENT_TYPES}
MAX_TYPES = max(len(t) for t in TYPES.values())


@dataclass(frozen=True)
class Payload:
    """One event as one format posts it: the ``webhook-id``, the type filters read, the exact body."""

    id: str
    type: str
    body: str


def check_types(events: list[str] | None, fmt: str) -> list[str] | None:
    """The filter, deduplicated in order; ValueError naming what ``fmt`` does not send."""
    if events is None:
        return None
    known = TYPES[fmt]
    unknown = sorted(set(events) - set(known))
    if unknown:
        raise ValueError(f"unknown event type(s) {unknown} for format '{fmt}'; known: {list(known)}")
    return sorted(set(events), key=events.index)


def render(event: Source, fmt: str, *, owner: str, budget_turn: str | None = None) -> Payload | None:
    """``event`` in ``fmt``; None when the format has no such event (nothing is sent)."""
    if fmt == ANTHROPIC:
        found = claude.to_claude(event, workspace_id=owner, budget_turn=budget_turn)
        return None if found is None else Payload(found.id, found.data.type, found.model_dump_json())
    return Payload(event.id, event.type, event.model_dump_json())
