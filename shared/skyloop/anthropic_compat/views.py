"""Sessions as Claude's ``BetaManagedAgentsSession``; their status is derived from skyloop's:

=========================================  ===========
skyloop                                    Claude
=========================================  ===========
running, waiting on client calls/approvals ``idle`` (its last ``session.status_idle`` says why)
running                                    ``running``
idle or failed                             ``idle``
=========================================  ===========

A budget is skyloop's spend control (``spend_limit_cents``): ``max_list_cost`` in USD; the usage's
``list_cost`` is what the session's model calls cost at skyloop's prices (``skyloop.pricing``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyloop.anthropic_compat.agents import rfc3339, session_agent

if TYPE_CHECKING:
    from skyloop.models.agent import Agent
    from skyloop.models.session import Session
    from skyloop.store import Store


def waiting(store: Store, session: Session) -> bool:
    """Whether the running turn waits on the client: an unanswered client call or a pending approval."""
    if session.status != "running" or not session.active_response_id:
        return False
    return any(
        c.output is None and not c.cancelled and (c.kind == "client" or c.approval == "pending")
        for c in store.list_calls(session.id, session.active_response_id)
    )


def status_of(store: Store, session: Session) -> str:
    if session.status == "running" and not waiting(store, session):
        return "running"
    return "idle"


def budget(session: Session) -> dict[str, Any] | None:
    if session.spend_limit_cents is None:
        return None
    cents = session.spend_limit_cents
    return {
        "type": "limit",
        "max_list_cost": {"amount": f"{cents // 100}.{cents % 100:02d}", "currency": "USD"},
    }


def usage(session: Session, agent: Agent) -> dict[str, Any]:
    from skyloop import pricing

    priced = pricing.price_of(agent.spec.executor, session.model_override) is not None
    out: dict[str, Any] = {
        "input_tokens": session.input_tokens,
        "output_tokens": session.output_tokens,
        "cache_read_input_tokens": 0,
    }
    if priced or session.spend_micros:
        out["list_cost"] = {"amount": f"{session.spend_micros / 1_000_000:.6f}", "currency": "USD"}
    return out


def session_object(
    store: Store, session: Session, agent: Agent, *, status: str | None = None
) -> dict[str, Any]:
    """A ``BetaManagedAgentsSession``."""
    archived = rfc3339(session.updated_at) if session.archived else None
    return {
        "id": session.id,
        "type": "session",
        "status": status or status_of(store, session),
        "agent": session_agent(agent),
        "environment_id": session.environment_id or "",
        "metadata": dict(session.labels),
        "title": session.title,
        "resources": [],
        "outcome_evaluations": [],
        "stats": {
            "active_seconds": None,
            "duration_seconds": float(max(0, session.updated_at - session.created_at)),
        },
        "usage": usage(session, agent),
        "budget": budget(session),
        "vault_ids": [],
        "deployment_id": None,
        "created_at": rfc3339(session.created_at),
        "updated_at": rfc3339(session.updated_at),
        "archived_at": archived,
    }
