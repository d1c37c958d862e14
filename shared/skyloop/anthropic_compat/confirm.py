"""Confirmations of a self-hosted built-in's call: the client runs it, but only once it was allowed.

A server tool's confirmation is skyloop's approval (:func:`skyloop.turns.lifecycle.approve`). A
client call has no approval of its own, so its confirmation is recorded as the same
``response.elicitation_resolved`` event (what ``user.tool_confirmation`` is translated from), once
per call (a deduplicated append, guarded on the call's turn still running); a denial answers the
call at once with the denial, which the model reads as the call's output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyloop import events as ev
from skyloop.errors import ConflictError
from skyloop.store import Append, ConditionFailedError, Guard
from skyloop.turns import lifecycle

if TYPE_CHECKING:
    from skyloop.models.session import PendingCall, Session
    from skyloop.store import Store
    from skyloop.turns.engine import TurnEngine


def confirm_client_call(
    store: Store,
    engine: TurnEngine,
    session: Session,
    call: PendingCall,
    *,
    allowed: bool,
    deny_message: str | None,
) -> None:
    if call.output is not None and not allowed:
        return  # answered already (the denial's own answer, re-posted)
    batch = Append(
        session.id,
        guard=Guard(active_turn=call.response_id),
        dedupe_key=f"confirm:{call.response_id}:{call.call_id}",
    )
    batch.event(
        ev.ELICITATION_RESOLVED,
        ev.approval_resolved(
            lifecycle.APPROVAL_PREFIX + call.call_id,
            "accept" if allowed else "decline",
            call.response_id,
            deny_message=None if allowed else deny_message,
        ),
    )
    try:
        store.append(batch)
    except ConditionFailedError:
        raise ConflictError(f"the turn of tool use '{call.call_id}' is no longer running") from None
    if not allowed:
        lifecycle.answer(store, engine, session.id, call.call_id, lifecycle.denied_output(deny_message))
