"""From a session's event log to lifecycle events: one pure function, the same in the cloud and locally.

The log is the durable record of every state change (each change is one
append, committed with its events), so deriving from it loses nothing when a
function dies after writing: the cloud reads it off the table's stream, the
local stack off the log itself (:mod:`skyloop.webhooks.local`).

| log events (one append) | lifecycle event |
| --- | --- |
| ``session.status`` ``running`` | ``agent.session.in_progress`` |
| ``response.output_item.done`` with a ``function_call`` in ``action_required`` | ``agent.session.action_required`` (``function_call``) |
| ``response.elicitation_request`` | ``agent.session.action_required`` (``mcp_approval_request``) |
| ``response.completed`` / ``response.cancelled`` (then ``session.status idle``) | ``agent.session.idle`` |
| ``response.failed`` (then ``session.status failed``) | ``agent.session.failed`` |
| the session row's insert | ``agent.session.created`` (:func:`session_created`) |

Coalescing: the calls a model response waits for are published together,
as consecutive events of one append (the model step's result, or the
parking step's). A *run* is such a sequence: consecutive sequence numbers,
each an action, all of one response. A run is one ``action_required`` per
kind (its client calls; its approvals), carrying every call of the run, and
identified by the run's first sequence number. The caller hands a window
that holds every run starting in it to its end and says what came just
before the window (:func:`window_needs`), so a run cut by a batch boundary
is neither split nor announced twice.

Ids are deterministic (session, sequence number, kind) with the time the
change was recorded in front, so deriving the same change again gives the
same id: deliveries and receivers deduplicate on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skyloop import events as ev
from skyloop.ids import derived_id
from skyloop.lifecycle_events import models as m

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from skyloop.models.session import Session
    from skyloop.store import StoredEvent


@dataclass(frozen=True)
class SessionFacts:
    """What every event of a session names: who owns it (for routing) and what it runs."""

    id: str
    owner: str
    agent_id: str | None = None
    agent_name: str | None = None
    workspace: str | None = None  # a session with a workspace runs in a self-hosted environment
    hosted: bool = False  # a session with its own hosted environment (OpenAI's ``openai_hosted``)

    @classmethod
    def of(cls, session: Session) -> SessionFacts:
        return cls(
            id=session.id,
            owner=session.owner,
            agent_id=session.agent_id,
            agent_name=session.agent_name,
            workspace=session.workspace,
            hosted=session.environment is not None,
        )

    def base(self) -> dict[str, Any]:
        """What every event's ``data`` says of the session (OpenAI's ``environment_type``/``_id`` included,
        as the OpenAI API shows the session: ``openai_hosted`` with its hosted environment,
        ``self_hosted`` with a workspace, else ``none``)."""
        kind = "openai_hosted" if self.hosted else "self_hosted" if self.workspace else None
        env: dict[str, Any] = {"environment_type": kind, "environment_id": f"env_{self.id}"} if kind else {}
        return {"id": self.id, "owner": self.owner, "agent_id": self.agent_id, **env}


def event_id(session_id: str, seq: int, kind: str, at: float) -> str:
    """``evt_`` + the millisecond time (12 hex, so ids sort by time) + a hash of what changed."""
    return f"evt_{int(at * 1000):012x}{derived_id('lifecycle', session_id, seq, kind)[:20]}"


def is_action(event: StoredEvent) -> bool:
    """Whether the log event asks for someone: a client call in ``action_required``, or an approval."""
    if event.type == ev.ELICITATION_REQUEST:
        return True
    if event.type != ev.RESPONSE_ITEM_DONE:
        return False
    item = event.data.get("item") or {}
    return item.get("type") == "function_call" and item.get("status") == "action_required"


def _response_of(event: StoredEvent) -> str | None:
    if event.type == ev.ELICITATION_REQUEST:
        return event.data.get("response_id")
    return (event.data.get("item") or {}).get("response_id")


def continues_run(event: StoredEvent, previous: StoredEvent | None) -> bool:
    """Whether ``event`` is an action continuing the run ``previous`` (the event at seq - 1) is part of."""
    return (
        previous is not None
        and is_action(event)
        and previous.seq == event.seq - 1
        and is_action(previous)
        and _response_of(previous) == _response_of(event)
    )


def window_needs(events: Sequence[StoredEvent]) -> tuple[bool, bool]:
    """``(before, after)``: whether the window starts with an action (the event before it decides if
    that action starts a run) and whether it ends with one (the run may go on past the window)."""
    if not events:
        return False, False
    return is_action(events[0]), is_action(events[-1])


def derive(
    session: SessionFacts,
    events: Sequence[StoredEvent],
    *,
    at: float | Mapping[int, float],
    before: StoredEvent | None = None,
) -> list[Any]:
    """The lifecycle events of a window of one session's log, in log order.

    ``events`` are in seq order (gaps allowed: events no rule reads may be
    left out, as the cloud's stream filter does); ``before`` is the event just
    before the window when :func:`window_needs` says it matters; ``at`` is when
    the changes were recorded (one time, or one per seq).
    """
    by_seq = {e.seq: e for e in events}
    if before is not None:
        by_seq.setdefault(before.seq, before)
    out: list[Any] = []
    i = 0
    while i < len(events):
        event = events[i]
        when = at if isinstance(at, float | int) else at.get(event.seq, max(at.values(), default=0.0))
        if is_action(event):
            run = [event]
            while i + 1 < len(events) and continues_run(events[i + 1], run[-1]):
                i += 1
                run.append(events[i])
            if not continues_run(event, by_seq.get(event.seq - 1)):
                out += _action_required(session, run, float(when))
        else:
            found = _single(session, event, float(when))
            if found is not None:
                out.append(found)
        i += 1
    return out


def _single(session: SessionFacts, event: StoredEvent, at: float) -> Any:
    base = session.base()
    if event.type == ev.SESSION_STATUS and event.data.get("status") == "running":
        return m.SessionInProgress(
            id=event_id(session.id, event.seq, "in_progress", at),
            created_at=int(at),
            data=m.InProgressData(**base, turn_id=event.data.get("response_id")),
        )
    if event.type in (ev.RESPONSE_COMPLETED, ev.RESPONSE_CANCELLED):
        response = event.data.get("response") or {}
        return m.SessionIdle(
            id=event_id(session.id, event.seq, "idle", at),
            created_at=int(at),
            data=m.IdleData(
                **base,
                turn_id=response.get("id"),
                status="cancelled" if event.type == ev.RESPONSE_CANCELLED else "completed",
                usage=_usage(response.get("usage")),
            ),
        )
    if event.type == ev.RESPONSE_FAILED:
        response = event.data.get("response") or {}
        error = response.get("error") or {}
        return m.SessionFailed(
            id=event_id(session.id, event.seq, "failed", at),
            created_at=int(at),
            data=m.FailedData(
                **base,
                turn_id=response.get("id"),
                error=m.TurnError(
                    code=str(error.get("code") or "failed"), message=str(error.get("message") or "")
                )
                if error
                else None,
                usage=_usage(response.get("usage")),
            ),
        )
    return None


def _action_required(session: SessionFacts, run: list[StoredEvent], at: float) -> list[Any]:
    """One event per kind in the run: its client calls, its approvals."""
    calls = [e for e in run if e.type == ev.RESPONSE_ITEM_DONE]
    approvals = [e for e in run if e.type == ev.ELICITATION_REQUEST]
    base = session.base()
    out: list[Any] = []
    if calls:
        items = [c.data["item"] for c in calls]
        out.append(
            m.SessionActionRequired(
                id=event_id(session.id, calls[0].seq, "function_call", at),
                created_at=int(at),
                data=m.ActionRequiredData(
                    **base,
                    turn_id=items[0].get("response_id"),
                    required_action=m.RequiredAction(
                        type="function_call",
                        calls=[
                            m.ActionCall(
                                call_id=str(i["call_id"]), name=str(i["name"]), arguments=str(i["arguments"])
                            )
                            for i in items
                        ],
                    ),
                ),
            )
        )
    if approvals:
        out.append(
            m.SessionActionRequired(
                id=event_id(session.id, approvals[0].seq, "mcp_approval_request", at),
                created_at=int(at),
                data=m.ActionRequiredData(
                    **base,
                    turn_id=approvals[0].data.get("response_id"),
                    required_action=m.RequiredAction(
                        type="mcp_approval_request",
                        approvals=[_approval(a.data) for a in approvals],
                    ),
                ),
            )
        )
    return out


def _approval(data: dict[str, Any]) -> m.ApprovalRequest:
    params = data.get("params") or {}
    return m.ApprovalRequest(
        id=str(data.get("elicitation_id")),
        call_id=str(params.get("call_id")),
        tool=str(params.get("tool_name")),
        arguments=str(params.get("arguments") or ""),
    )


def _usage(raw: Any) -> m.Usage | None:
    if not isinstance(raw, dict):
        return None
    i, o = int(raw.get("input_tokens") or 0), int(raw.get("output_tokens") or 0)
    return m.Usage(input_tokens=i, output_tokens=o, total_tokens=int(raw.get("total_tokens") or i + o))


def session_created(session: SessionFacts | Session, *, created_at: int, at: float | None = None) -> Any:
    """``agent.session.created`` for a new session row (its id derives from the session alone)."""
    facts = session if isinstance(session, SessionFacts) else SessionFacts.of(session)
    extra: dict[str, Any] = {}
    if not isinstance(session, SessionFacts):
        extra = {"title": session.title, "parent_session_id": session.parent_session_id}
    when = float(created_at if at is None else at)
    return m.SessionCreated(
        id=event_id(facts.id, 0, "created", when),
        created_at=int(when),
        data=m.CreatedData(**facts.base(), agent_name=facts.agent_name, **extra),
    )
