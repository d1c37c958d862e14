"""Lifecycle events in Claude Managed Agents' webhook shape, for endpoints whose ``format`` is ``anthropic``.

Claude's payload is thin: ``{"type": "event", "id", "created_at": <RFC 3339>,
"data": {"type", "id": <session id>, "organization_id", "workspace_id"}}``
(``anthropic.types.beta.BetaWebhookEvent``), so a receiver written for
Anthropic's platform verifies and parses skyloop's deliveries with
``client.beta.webhooks.unwrap`` unchanged, then reads the session for the rest.

| skyloop | Claude ``data.type`` |
| --- | --- |
| ``agent.session.created`` | ``session.created`` |
| ``agent.session.in_progress`` | ``session.status_run_started`` |
| ``agent.session.action_required`` | ``session.requires_action`` |
| ``agent.session.idle`` | ``session.status_idled`` (``session.budget_reached`` when the turn spent the session's budget) |
| ``agent.session.failed`` | ``session.status_idled`` (``session.budget_reached`` when the budget stopped the turn) |

A pure mapping: the event's id derives from skyloop's (deriving twice gives the
same id, so deliveries and receivers dedupe on it). Imports pydantic only.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, Literal

from pydantic import BaseModel, ConfigDict

from skyloop import pricing
from skyloop.ids import derived_id
from skyloop.lifecycle_events import models as m

if TYPE_CHECKING:
    from skyloop.models.session import Session

SESSION_CREATED: Final = "session.created"
STATUS_RUN_STARTED: Final = "session.status_run_started"
REQUIRES_ACTION: Final = "session.requires_action"
STATUS_IDLED: Final = "session.status_idled"
BUDGET_REACHED: Final = "session.budget_reached"
# What an anthropic endpoint may subscribe to: every Claude type skyloop sends.
EVENT_TYPES: tuple[str, ...] = (
    SESSION_CREATED,
    STATUS_RUN_STARTED,
    REQUIRES_ACTION,
    STATUS_IDLED,
    BUDGET_REACHED,
)
ClaudeType = Literal[
    "session.created",
    "session.status_run_started",
    "session.requires_action",
    "session.status_idled",
    "session.budget_reached",
]

# Claude scopes events to an organization and a workspace; a deployment is one organization, and a
# principal's sessions are its workspace.
ORGANIZATION_ID: Final = "skyloop"
BUDGET_CODE: Final = "session_budget_exceeded"  # the turn error spend control ends a turn with (model_step)
TEST_SESSION_ID: Final = "skyloop_webhook_test"  # the session a test delivery names (none: it is a test)

_DIRECT: dict[str, ClaudeType] = {
    m.SESSION_CREATED: SESSION_CREATED,
    m.SESSION_IN_PROGRESS: STATUS_RUN_STARTED,
    m.SESSION_ACTION_REQUIRED: REQUIRES_ACTION,
    m.SESSION_IDLE: STATUS_IDLED,
    m.SESSION_FAILED: STATUS_IDLED,  # the turn failed; the session is idle again, ready for the next
    m.WEBHOOK_TEST: SESSION_CREATED,  # the most harmless type a receiver knows
}
_SKYLOOP_ID = re.compile(r"^evt_([0-9a-f]{12})")

Source = (
    m.SessionCreated
    | m.SessionInProgress
    | m.SessionActionRequired
    | m.SessionIdle
    | m.SessionFailed
    | m.WebhookTest
)


class ClaudeData(BaseModel):
    """``data`` of every session event Claude sends: which session, in which organization and workspace."""

    model_config = ConfigDict(extra="forbid")

    type: ClaudeType
    id: str
    organization_id: str
    workspace_id: str


class ClaudeEvent(BaseModel):
    """The envelope (``BetaWebhookEvent``); its ``id`` is also the ``webhook-id`` header."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["event"] = "event"
    id: str
    created_at: str
    data: ClaudeData


def budget_turn(session: Session) -> str | None:
    """The turn whose end found the session's spend at its limit (its idle is Claude's ``budget_reached``).

    Read from the session when the events are derived, as the OpenAI view reads it
    (``openai_compat.views.status_of``): only the session's last turn can have spent it.
    """
    if pricing.budget_reached(session.spend_limit_cents, session.spend_micros):
        return session.last_response_id
    return None


def data_type(event: Source, *, budget_turn: str | None = None) -> ClaudeType | None:
    """Claude's ``data.type`` for a skyloop lifecycle event; None for a type Claude has no word for."""
    error = event.data.error if isinstance(event, m.SessionFailed) else None
    if error is not None and error.code == BUDGET_CODE:
        return BUDGET_REACHED  # spend control stopped the turn before a model call
    if isinstance(event, m.SessionIdle) and budget_turn is not None and event.data.turn_id == budget_turn:
        return BUDGET_REACHED  # the turn completed, its spend reaching the limit
    return _DIRECT.get(event.type)


def event_id(skyloop_id: str) -> str:
    """``evt_`` + skyloop's time prefix (ids still sort by time) + a hash of skyloop's id: stable per event."""
    found = _SKYLOOP_ID.match(skyloop_id)
    prefix = found.group(1) if found else ""
    return f"evt_{prefix}{derived_id('claude', skyloop_id)[: 32 - len(prefix)]}"


def created_at(event: Source) -> str:
    """RFC 3339, UTC; to the millisecond when skyloop's id carries it (it does: its first 12 hex)."""
    found = _SKYLOOP_ID.match(event.id)
    ms = int(found.group(1), 16) if found else event.created_at * 1000
    if ms // 1000 != event.created_at:
        ms = event.created_at * 1000
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def to_claude(
    event: Source,
    *,
    workspace_id: str,
    organization_id: str = ORGANIZATION_ID,
    budget_turn: str | None = None,
) -> ClaudeEvent | None:
    """The Claude event for a skyloop lifecycle event (None when Claude has no such type).

    ``workspace_id``: the session owner's principal; ``budget_turn``: see :func:`budget_turn`.
    """
    kind = data_type(event, budget_turn=budget_turn)
    if kind is None:
        return None
    session_id = TEST_SESSION_ID if isinstance(event, m.WebhookTest) else event.data.id
    return ClaudeEvent(
        id=event_id(event.id),
        created_at=created_at(event),
        data=ClaudeData(type=kind, id=session_id, organization_id=organization_id, workspace_id=workspace_id),
    )
