"""The operations behind the OpenAI routes: each reads and writes through skyloop's own layers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyloop import agent_versions, deps, pricing, principals, sessions
from skyloop.errors import InvalidInputError, NotFoundError
from skyloop.openai_compat import agents as oa_agents
from skyloop.openai_compat import unsupported, views
from skyloop.turns import engine as turn_engine
from skyloop.turns import lifecycle

if TYPE_CHECKING:
    from skyloop.models.agent import Agent
    from skyloop.models.session import Session
    from skyloop.openai_compat.requests import (
        AgentConfig,
        EventsCreate,
        InputMessage,
        SessionCreate,
        SessionUpdate,
    )
    from skyloop.store import Store

MAX_SCAN = 10_000  # agents or sessions one filtered listing looks through


def page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


def slice_page(rows: list[dict[str, Any]], *, after: str | None, limit: int, what: str) -> dict[str, Any]:
    if after:
        ids = [r["id"] for r in rows]
        if after not in ids:
            raise InvalidInputError(f"after: '{after}' is not a {what} of this listing", param="after")
        rows = rows[ids.index(after) + 1 :]
    return page(rows[:limit], len(rows) > limit)


# ----------------------------------------------------------------------------- agents
def create_agent(config: AgentConfig) -> dict[str, Any]:
    unsupported.check_agent(config)
    if not config.model:
        raise InvalidInputError("model is required", param="model")
    spec = oa_agents.build_spec(config, base=None, first_id=None, inline=False)
    return oa_agents.to_openai(agent_versions.register(spec))


def get_agent(agent_id: str) -> dict[str, Any]:
    return oa_agents.to_openai(agent_versions.resolve(deps.store(), agent_id))


def update_agent(agent_id: str, config: AgentConfig) -> dict[str, Any]:
    unsupported.check_agent(config)
    base = agent_versions.resolve(deps.store(), agent_id)
    spec = oa_agents.build_spec(config, base=base, first_id=agent_versions.openai_id(base), inline=False)
    return oa_agents.to_openai(agent_versions.register(spec, keep_key_of=base))


def delete_agent(agent_id: str) -> dict[str, Any]:
    store = deps.store()
    agent = agent_versions.resolve(store, agent_id)
    sessions.remove_agent(store, agent, deps.secrets())
    return {"id": agent_id, "object": "agent.deleted", "deleted": True}


def list_agents(*, after: str | None, limit: int, order: str) -> dict[str, Any]:
    store = deps.store()
    owner = principals.list_owner(None)
    found: list[Agent] = []
    cursor: str | None = None
    newest: dict[str, Agent] = {}
    while len(found) < MAX_SCAN:
        batch, more = store.list_agents(owner=owner, limit=100, descending=True, after=cursor)
        found += batch
        if not more or not batch:
            break
        cursor = batch[-1].id
    for agent in found:  # newest first: the first of each OpenAI id is its current version
        if oa_agents.is_listed(agent):
            newest.setdefault(agent_versions.openai_id(agent), agent)
    rows = [oa_agents.to_openai(a) for a in newest.values()]
    rows.sort(key=lambda r: (r["created_at"], r["id"]), reverse=order == "desc")
    return slice_page(rows, after=after, limit=limit, what="agent")


# ---------------------------------------------------------------------------- sessions
def _require_price(agent: Agent, model: str | None, limit: int | None) -> None:
    if limit is not None and pricing.price_of(agent.spec.executor, model) is None:
        raise InvalidInputError(
            f"spend_control needs a price for the model '{model or agent.spec.executor.model}': set "
            f"{pricing.PRICES_ENV} or the agent's executor.pricing (docs/openai.md)",
            param="spend_control",
        )


def messages_of(value: str | list[InputMessage]) -> list[dict[str, Any]]:
    if isinstance(value, str):
        if not value:
            raise InvalidInputError("input must not be empty", param="input")
        return [{"role": "user", "content": [{"type": "input_text", "text": value}]}]
    return [{"role": "user", "content": [c.model_dump() for c in m.content]} for m in value]


def post_messages(
    store: Store, session: Session, agent: Agent, messages: list[dict[str, Any]], key: str | None
) -> None:
    """Each message as skyloop's ``message`` event: the first starts the turn, the others join it."""
    if views.budget_reached(session):
        raise InvalidInputError(
            f"the session reached its spend limit of {session.spend_limit_cents} cents; raise "
            "spend_control.limit to continue",
            param="spend_control",
        )
    if not deps.runners().is_online(session.runner_id):
        from skyloop.errors import RunnerUnavailableError

        raise RunnerUnavailableError("No runner bound for session")
    for n, message in enumerate(messages):
        lifecycle.start_or_join(
            store,
            turn_engine.deployed(),
            agent,
            session.id,
            message,
            [],
            idempotency_key=(key if n == 0 else f"{key}:{n}") if key else None,
            session=session if n == 0 else None,
        )


def create_session(body: SessionCreate, idempotency_key: str | None) -> dict[str, Any]:
    from skyloop import quotas

    store = deps.store()
    unsupported.check_environment(body.environment)
    unsupported.check_session_options(body.review, body.vault_ids)
    if body.stream:
        raise InvalidInputError(
            "stream: true is served by the stream endpoint (POST /openai/v1/agents/sessions through the "
            "deployment's URL)",
            param="stream",
        )
    if body.agent is not None:
        unsupported.check_agent(body.agent, "agent.")
    if body.environment.type == "none" and body.input is None:
        raise InvalidInputError('input is required when environment.type is "none"', param="input")
    if body.agent_id is None and (body.agent is None or not body.agent.model):
        raise InvalidInputError("agent_id, or agent with a model, is required", param="agent")
    base = agent_versions.resolve(store, body.agent_id) if body.agent_id else None
    messages = messages_of(body.input) if body.input is not None else []
    limit = body.spend_control.limit if body.spend_control else None
    if base is not None and (body.agent is None or not body.agent.model_fields_set):
        agent = base
    else:
        assert body.agent is not None
        first = agent_versions.openai_id(base) if base else None
        spec = oa_agents.build_spec(body.agent, base=base, first_id=first, inline=True)
        _require_price_spec(spec, limit)
        agent = agent_versions.register(spec, keep_key_of=base)
    _require_price(agent, None, limit)
    hosted = None
    if body.environment.type == "openai_hosted":
        from skyloop.openai_compat import environments

        hosted = environments.hosted_environment(body.environment)
        agent = environments.with_hosted_tools(agent)
    quotas.before_session(store, deps.get_settings(), principals.current().name)
    session = sessions.create_session(
        store,
        agent,
        deps.runners(),
        labels=dict(body.metadata or {}),
        workspace=body.environment.workspace_directory if body.environment.type == "self_hosted" else None,
        environment=hosted,
    )
    if limit is not None:
        session = store.update_session(session.id, {"spend_limit_cents": limit})
    if messages:
        post_messages(store, session, agent, messages, idempotency_key)
        session = store.get_session(session.id)
    return views.read_session(store, session, agent)


def _require_price_spec(spec: Any, limit: int | None) -> None:
    if limit is not None and pricing.price_of(spec.executor) is None:
        raise InvalidInputError(
            f"spend_control needs a price for the model '{spec.executor.model}': set {pricing.PRICES_ENV} "
            "or the agent's executor.pricing (docs/openai.md)",
            param="spend_control",
        )


def load(session_id: str) -> tuple[Store, Session, Agent]:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    return store, session, store.get_agent(session.agent_id)


def get_session(session_id: str) -> dict[str, Any]:
    store, session, agent = load(session_id)
    return views.read_session(store, session, agent)


def update_session(session_id: str, body: SessionUpdate) -> dict[str, Any]:
    store, session, agent = load(session_id)
    unsupported.check_session_options(body.review, body.vault_ids)
    sent = body.model_fields_set
    changes: dict[str, Any] = {}
    if body.agent is not None:
        unsupported.check_agent(body.agent, "agent.")
        if body.agent.tools is not None or "tools" in body.agent.model_fields_set:
            from skyloop.openai_compat.errors import UnsupportedFeatureError

            raise UnsupportedFeatureError(
                "changing a session's tools",
                param="agent.tools",
                detail="update the agent, or start a session",
            )
        agent_sent = body.agent.model_fields_set
        if "model" in agent_sent:
            changes["model_override"] = body.agent.model
        if "reasoning" in agent_sent:
            changes["reasoning_effort"] = body.agent.reasoning.effort if body.agent.reasoning else None
    if "metadata" in sent:
        changes["labels"] = dict(body.metadata or {})
    if "spend_control" in sent:
        limit = body.spend_control.limit if body.spend_control else None
        _require_price(agent, changes.get("model_override", session.model_override), limit)
        changes["spend_limit_cents"] = limit
    if changes:
        session = store.update_session(session.id, changes)
    return views.read_session(store, session, agent)


def delete_session(session_id: str) -> dict[str, Any]:
    store = deps.store()
    sessions.get_session(store, session_id)
    lifecycle.delete_session(store, turn_engine.deployed(), session_id)
    return {"id": session_id, "object": "agent.session.deleted", "deleted": True}


def list_sessions(
    *, after: str | None, limit: int, order: str, agent_id: str | None, metadata: dict[str, str]
) -> dict[str, Any]:
    store = deps.store()
    owner = principals.list_owner(None)
    agent_name = agent_versions.resolve(store, agent_id).name if agent_id else None
    if after:
        sessions.get_session(store, after)  # a cursor must be one of the caller's sessions
    rows: list[dict[str, Any]] = []
    cursor, more, scanned = after, True, 0
    agent_cache: dict[str, Agent | None] = {}
    while more and len(rows) <= limit and scanned < MAX_SCAN:
        batch, more = store.list_sessions(
            owner=owner,
            agent_name=agent_name,
            archived=None,
            limit=max(limit + 1, 20),
            descending=order == "desc",
            after=cursor,
        )
        scanned += len(batch)
        for session in batch:
            cursor = session.id
            if any(session.labels.get(k) != v for k, v in metadata.items()):
                continue
            if session.agent_id not in agent_cache:
                try:
                    agent_cache[session.agent_id] = store.get_agent(session.agent_id)
                except NotFoundError:
                    agent_cache[session.agent_id] = None
            agent = agent_cache[session.agent_id]
            if agent is not None:
                rows.append(views.read_session(store, session, agent))
        if not batch:
            break
    return page(rows[:limit], len(rows) > limit or (more and len(rows) >= limit))


def post_events(session_id: str, body: EventsCreate, idempotency_key: str | None) -> None:
    from skyloop.openai_compat import requests as rq

    store, session, agent = load(session_id)
    engine = turn_engine.deployed()
    for n, event in enumerate(body.events):
        key = (idempotency_key if n == 0 else f"{idempotency_key}.{n}") if idempotency_key else None
        if isinstance(event, rq.MessageInput):
            post_messages(store, session, agent, messages_of(event.input), key)
        elif isinstance(event, rq.ToolResultInput):
            output = tool_output(event)
            try:
                lifecycle.answer(store, engine, session_id, event.call_id, output)
            except NotFoundError:
                raise InvalidInputError(
                    f"Unknown pending tool call: {event.call_id}", param=f"events[{n}].call_id"
                ) from None
        elif isinstance(event, rq.CancelInput):
            lifecycle.cancel(store, engine, session_id)
        elif isinstance(event, rq.McpApprovalInput):
            action = {"approve": "accept", "deny": "decline", "cancel": "cancel"}[event.response.decision]
            lifecycle.approve(store, engine, session_id, event.request_id, action)
        else:
            from skyloop.openai_compat.errors import UnsupportedFeatureError

            raise UnsupportedFeatureError("computer use approvals", param=f"events[{n}]")
        if n + 1 < len(body.events):
            session = store.get_session(session_id)


def tool_output(event: Any) -> str:
    """A tool result as skyloop's string output: text as given, text blocks joined, a failure as an error."""
    if not event.success:
        return f"Error: {event.error or 'the tool failed'}"
    if event.output is None:
        return ""
    if isinstance(event.output, str):
        return event.output
    from skyloop.openai_compat.requests import InputText

    if any(not isinstance(block, InputText) for block in event.output):
        from skyloop.openai_compat.errors import UnsupportedFeatureError

        raise UnsupportedFeatureError("images in tool results", param="events.output")
    return "\n".join(block.text for block in event.output)


# ------------------------------------------------------------------------- items, turns
def _items(store: Store, session: Session) -> list[dict[str, Any]]:
    items = store.list_items(session.id, through_seq=session.last_seq)
    pairs = zip(items, views.turn_ids(items, session), strict=True)
    # a hosted command is one command_execution item (its output's), not a function call and an output
    commands = {
        i.data.get("call_id")
        for i in items
        if i.type == "function_call_output" and (i.data.get("details") or {}).get("kind") == "command"
    }
    return [
        views.item_object(i, t)
        for i, t in pairs
        if not (i.type == "function_call" and i.data.get("call_id") in commands)
    ]


def list_items(
    session_id: str, *, after: str | None, limit: int, order: str, turn_id: str | None = None
) -> dict[str, Any]:
    store, session, _ = load(session_id)
    rows = _items(store, session)
    if turn_id is not None:
        get_turn(session_id, turn_id)
        rows = [r for r in rows if r["turn_id"] == turn_id]
    if order == "desc":
        rows.reverse()
    return slice_page(rows, after=after, limit=limit, what="item")


def _turns(store: Store, session: Session) -> list[dict[str, Any]]:
    waiting = bool(views.open_calls(store, session))
    agents: dict[str, str] = {}
    out = []
    for turn in store.list_turns(session.id):
        if turn.agent_id not in agents:
            try:
                agents[turn.agent_id] = agent_versions.openai_id(store.get_agent(turn.agent_id))
            except NotFoundError:
                agents[turn.agent_id] = turn.agent_id
        out.append(views.turn_object(turn, session, agents[turn.agent_id], waiting=waiting))
    return out


def list_turns(session_id: str, *, after: str | None, limit: int, order: str) -> dict[str, Any]:
    store, session, _ = load(session_id)
    rows = _turns(store, session)
    if order == "desc":
        rows.reverse()
    return slice_page(rows, after=after, limit=limit, what="turn")


def get_turn(session_id: str, turn_id: str) -> dict[str, Any]:
    store, session, _ = load(session_id)
    for row in _turns(store, session):
        if row["id"] == turn_id:
            return row
    raise NotFoundError(f"Turn not found: '{turn_id}'")
