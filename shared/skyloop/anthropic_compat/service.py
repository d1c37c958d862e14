"""The operations behind the Claude Managed Agents routes: each reads and writes through skyloop's layers."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from skyloop import deps, pricing, principals, sessions
from skyloop.anthropic_compat import agents as ca
from skyloop.anthropic_compat import environments as envs
from skyloop.anthropic_compat import toolset, translate, views
from skyloop.anthropic_compat.common import page_token, patch_metadata, read_token, slice_rows
from skyloop.anthropic_compat.errors import UnsupportedFeatureError
from skyloop.errors import InvalidInputError, NotFoundError
from skyloop.turns import engine as turn_engine
from skyloop.turns import lifecycle

if TYPE_CHECKING:
    from skyloop.anthropic_compat import requests as rq
    from skyloop.models.agent import Agent
    from skyloop.models.session import PendingCall, Session
    from skyloop.store import Store

MAX_EVENT_SCAN = 100_000  # stored events one events listing reads through


def _epoch(value: str | None, param: str) -> float | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise InvalidInputError(f"{param}: {value!r} is not an RFC 3339 time", param=param) from None


def _in_window(at: float, bounds: dict[str, float | None]) -> bool:
    checks = {
        "gt": lambda b: at > b,
        "gte": lambda b: at >= b,
        "lt": lambda b: at < b,
        "lte": lambda b: at <= b,
    }
    return all(bound is None or checks[op](bound) for op, bound in bounds.items())


# ---------------------------------------------------------------------------------- agents
def create_agent(body: rq.AgentBody) -> dict[str, Any]:
    if body.model is None:
        raise InvalidInputError("model is required", param="model")
    if not body.name:
        raise InvalidInputError("name is required", param="name")
    if body.version is not None:
        raise InvalidInputError("version is only for updates", param="version")
    return ca.to_claude(sessions.register(ca.build_spec(body, base=None)))


def get_agent(agent_id: str, version: int | None) -> dict[str, Any]:
    return ca.to_claude(ca.resolve(deps.store(), agent_id, version))


def update_agent(agent_id: str, body: rq.AgentBody) -> dict[str, Any]:
    from skyloop.agent_versions import register

    base = ca.resolve(deps.store(), agent_id)
    if ca.is_archived(base):
        raise InvalidInputError(f"agent '{agent_id}' is archived: it cannot be updated")
    ca.check_version(body, base)
    spec = ca.build_spec(body, base=base)
    if spec.model_dump(mode="json") == base.spec.model_dump(mode="json"):
        return ca.to_claude(base)  # nothing changed: no new version
    return ca.to_claude(register(spec, keep_key_of=base))


def archive_agent(agent_id: str) -> dict[str, Any]:
    """Archive every version (not a new one: archiving changes no behaviour, only listing and new sessions)."""
    import time

    store = deps.store()
    agent = ca.resolve(store, agent_id)
    at = int(time.time())
    for version in ca.versions(store, agent):
        store.archive_agent(version.id, at)
    return ca.to_claude(store.get_agent(agent.id))


def list_agents(q: rq.AgentListQuery) -> dict[str, Any]:
    newest: dict[str, Agent] = {}
    for agent in ca._scan(deps.store()):
        if ca.is_listed(agent):
            newest.setdefault(ca.claude_id(agent), agent)
    bounds = {
        "gte": _epoch(q.created_at_gte, "created_at[gte]"),
        "lte": _epoch(q.created_at_lte, "created_at[lte]"),
    }
    rows = []
    for agent in newest.values():
        created = float(ca.meta_of(agent).get("created_at") or agent.created_at)
        if (q.include_archived or not ca.is_archived(agent)) and _in_window(created, bounds):
            rows.append(ca.to_claude(agent))
    rows.sort(key=lambda r: (r["created_at"], r["id"]), reverse=True)
    return slice_rows(rows, q.page, q.limit)


def list_versions(agent_id: str, q: rq.PageQuery) -> dict[str, Any]:
    store = deps.store()
    rows = [ca.to_claude(a) for a in ca.versions(store, ca.resolve(store, agent_id))]
    return slice_rows(rows, q.page, q.limit, key="version")


# ----------------------------------------------------------------------------- environments
def create_environment(body: rq.EnvironmentBody) -> dict[str, Any]:
    env = envs.new(body, principals.current().name)
    envs.records().create(env)
    return env.to_claude()


def get_environment(environment_id: str) -> dict[str, Any]:
    return envs.get_owned(environment_id).to_claude()


def update_environment(environment_id: str, body: rq.EnvironmentBody) -> dict[str, Any]:
    from skyloop.errors import ConflictError

    records = envs.records()
    for _ in range(5):
        env = envs.get_owned(environment_id)
        changed = envs.updated(env, body)
        if records.replace(changed, revision=env.revision):
            return changed.model_copy(update={"revision": env.revision + 1}).to_claude()
    raise ConflictError("the environment changed too often while updating; try again")


def archive_environment(environment_id: str) -> dict[str, Any]:
    import time

    records = envs.records()
    env = envs.get_owned(environment_id)
    if env.archived_at is None:
        env = env.model_copy(update={"archived_at": time.time(), "updated_at": time.time()})
        if not records.replace(env, revision=env.revision):
            return archive_environment(environment_id)
    return env.to_claude()


def delete_environment(environment_id: str) -> dict[str, Any]:
    envs.get_owned(environment_id)
    envs.records().delete(environment_id)
    return {"id": environment_id, "type": "environment_deleted"}


def list_environments(q: rq.EnvironmentListQuery) -> dict[str, Any]:
    owner = principals.list_owner(None)
    rows = [e.to_claude() for e in envs.records().list(owner) if q.include_archived or e.archived_at is None]
    rows.reverse()  # newest first
    return slice_rows(rows, q.page, q.limit)


# -------------------------------------------------------------------------------- sessions
def load(session_id: str) -> tuple[Store, Session, Agent]:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    return store, session, store.get_agent(session.agent_id)


def for_environment(store: Store, agent: Agent, env: envs.Environment) -> Agent:
    """The agent a session in ``env`` runs: in a self-hosted one, its built-ins are the client's.

    That is an inline version of its own (not listed here), one per agent version: its name derives
    from the version's id, so every self-hosted session of the version shares it.
    """
    from skyloop.agent_versions import register

    if env.kind != "self_hosted" or not isinstance(agent.spec.tools, dict):
        return agent
    client = toolset.client_form(agent.spec.tools)
    if client is None:
        return agent
    name = f"{ca.NAME_PREFIX}sh-{agent.id[:24]}"
    made = store.find_agent_by_name(name, owner=agent.owner)
    if made is not None:
        return made
    base = ca.meta_of(agent)
    meta = {
        **base,
        "inline": True,
        "id": ca.claude_id(agent),
        "version": agent.version,
        "name": base.get("name") or agent.name,
    }
    if meta.get("toolset") is None:
        view = ca.tools_view(agent)[0][0]
        meta["toolset"] = {
            "enabled": {c["name"]: c["permission_policy"]["type"] for c in view["configs"] if c["enabled"]},
            "default": {"enabled": False, "policy": toolset.TOOLSET_DEFAULT_POLICY},
        }
    spec = agent.spec.model_copy(update={"name": name, "tools": client}, deep=True)
    if spec.model_extra is not None:
        spec.model_extra["anthropic"] = meta
    return register(spec, keep_key_of=agent)


def _check_session_options(body: rq.SessionCreate | rq.SessionUpdate) -> None:
    if body.vault_ids:
        raise UnsupportedFeatureError("vaults", param="vault_ids")
    if isinstance(getattr(body, "resources", None), list) and body.resources:  # type: ignore[union-attr]
        kind = str((body.resources[0] or {}).get("type", "resources"))  # type: ignore[union-attr]
        raise UnsupportedFeatureError(f"session resources ({kind})", param="resources[0]")


def _initial_messages(events: list[dict[str, Any]] | None) -> list[rq.UserMessage]:
    from pydantic import ValidationError

    from skyloop.anthropic_compat.requests import UserMessage

    out = []
    for n, raw in enumerate(events or []):
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind == "user.define_outcome":
            raise UnsupportedFeatureError("outcomes (user.define_outcome)", param=f"initial_events[{n}]")
        if kind != "user.message":
            raise InvalidInputError(
                f"initial_events[{n}].type must be user.message, got {kind!r}",
                param=f"initial_events[{n}].type",
            )
        try:
            out.append(UserMessage.model_validate(raw))
        except ValidationError as exc:
            raise InvalidInputError(
                f"initial_events[{n}]: {exc.errors()[0]['msg']}", param=f"initial_events[{n}]"
            ) from None
    return out


def _require_price(agent: Agent, model: str | None) -> None:
    if pricing.price_of(agent.spec.executor, model) is None:
        raise InvalidInputError(
            f"budget needs a price for the model '{model or agent.spec.executor.model}': set "
            f"{pricing.PRICES_ENV} or the agent's executor.pricing (docs/anthropic.md)",
            param="budget",
        )


def _session_agent(store: Store, body: rq.SessionCreate) -> Agent:
    from skyloop.anthropic_compat.requests import AgentOverrides, AgentRef

    ref = body.agent
    if isinstance(ref, AgentOverrides):
        raise UnsupportedFeatureError(
            "agent_with_overrides",
            param="agent",
            detail="update the agent (a new version), then pin that version",
        )
    agent_id, version = (ref.id, ref.version) if isinstance(ref, AgentRef) else (ref, None)
    agent = ca.resolve(store, agent_id, version)
    if ca.is_archived(agent):
        raise InvalidInputError(
            f"agent '{agent_id}' is archived: sessions cannot be opened with it", param="agent"
        )
    return agent


def create_session(body: rq.SessionCreate, idempotency_key: str | None) -> dict[str, Any]:
    from skyloop import quotas

    store = deps.store()
    _check_session_options(body)
    messages = _initial_messages(body.initial_events)
    agent = _session_agent(store, body)
    env = envs.get_owned(body.environment_id, for_session=True)
    if body.budget is not None:
        _require_price(agent, None)
    quotas.before_session(store, deps.get_settings(), principals.current().name)
    run_agent = for_environment(store, agent, env)
    session = sessions.create_session(
        store,
        run_agent,
        deps.runners(),
        title=body.title,
        labels=dict(body.metadata or {}),
        environment=envs.hosted(env.config) if env.kind == "cloud" else None,
        environment_id=env.id,
    )
    if body.budget is not None:
        session = store.update_session(session.id, {"spend_limit_cents": body.budget.cents()})
    for n, message in enumerate(messages):
        key = f"{idempotency_key}:{n}" if idempotency_key else None
        post_message(store, session, run_agent, to_skyloop_message(message, f"initial_events[{n}]"), key)
        session = store.get_session(session.id)
    return views.session_object(store, session, run_agent)


def get_session(session_id: str) -> dict[str, Any]:
    store, session, agent = load(session_id)
    return views.session_object(store, session, agent)


def update_session(session_id: str, body: rq.SessionUpdate) -> dict[str, Any]:
    store, session, agent = load(session_id)
    _check_session_options(body)
    sent = body.model_fields_set
    if body.agent:
        raise UnsupportedFeatureError(
            "changing a session's tools or MCP servers",
            param="agent",
            detail="update the agent and open a session",
        )
    changes: dict[str, Any] = {}
    if "metadata" in sent:
        changes["labels"] = patch_metadata(session.labels, body.metadata)
    if "title" in sent:
        changes["title"] = body.title
    if "budget" in sent:
        if body.budget is None:
            changes["spend_limit_cents"] = None
        elif session.spend_limit_cents is None:
            raise InvalidInputError(
                "budget: a session opened without a budget cannot get one; open a session with a budget",
                param="budget",
            )
        else:
            _require_price(agent, session.model_override)
            changes["spend_limit_cents"] = body.budget.cents()
    if changes:
        session = store.update_session(session.id, changes)
    return views.session_object(store, session, agent)


def archive_session(session_id: str) -> dict[str, Any]:
    store, session, agent = load(session_id)
    if not session.archived:
        session = store.update_session(session.id, {"archived": True})
    return views.session_object(store, session, agent)


def delete_session(session_id: str) -> dict[str, Any]:
    store = deps.store()
    sessions.get_session(store, session_id)
    lifecycle.delete_session(store, turn_engine.deployed(), session_id)
    return {"id": session_id, "type": "session_deleted"}


def list_sessions(q: rq.SessionListQuery) -> dict[str, Any]:
    store = deps.store()
    owner = principals.list_owner(None)
    wanted = ca.claude_id(ca.resolve(store, q.agent_id)) if q.agent_id else None
    bounds = {
        "gt": _epoch(q.created_at_gt, "created_at[gt]"),
        "gte": _epoch(q.created_at_gte, "created_at[gte]"),
        "lt": _epoch(q.created_at_lt, "created_at[lt]"),
        "lte": _epoch(q.created_at_lte, "created_at[lte]"),
    }
    agents: dict[str, Agent | None] = {}
    rows: list[dict[str, Any]] = []
    cursor: str | None = read_token(q.page)[0] if q.page else None
    more = True
    while more and len(rows) <= q.limit:
        batch, more = store.list_sessions(
            owner=owner,
            archived=None if q.include_archived else False,
            limit=100,
            descending=q.order == "desc",
            after=cursor,
        )
        for session in batch:
            cursor = session.id
            row = _session_row(store, session, agents, q, wanted, bounds)
            if row is not None:
                rows.append(row)
            if len(rows) > q.limit:
                break
        if not batch:
            break
    chunk = rows[: q.limit]
    has_more = len(rows) > q.limit
    return {
        "data": chunk,
        "next_page": page_token(chunk[-1]["id"]) if has_more and chunk else None,
        "prev_page": None,
    }


def _session_row(
    store: Store,
    session: Session,
    agents: dict[str, Agent | None],
    q: rq.SessionListQuery,
    wanted: str | None,
    bounds: dict[str, float | None],
) -> dict[str, Any] | None:
    if not _in_window(float(session.created_at), bounds):
        return None
    if session.agent_id not in agents:
        try:
            agents[session.agent_id] = store.get_agent(session.agent_id)
        except NotFoundError:
            agents[session.agent_id] = None
    agent = agents[session.agent_id]
    if agent is None or (wanted is not None and ca.claude_id(agent) != wanted):
        return None
    row = views.session_object(store, session, agent)
    if q.agent_version is not None and row["agent"]["version"] != q.agent_version:
        return None
    if q.statuses and row["status"] not in q.statuses:
        return None
    return row


# ---------------------------------------------------------------------------------- events
def to_skyloop_message(message: rq.UserMessage, where: str) -> dict[str, Any]:
    """A ``user.message`` as skyloop's message (text; base64 or URL images; text documents as text)."""
    from skyloop.anthropic_compat.requests import DocumentBlock, ImageBlock, TextBlock

    content: list[dict[str, Any]] = []
    for n, block in enumerate(message.content):
        here = f"{where}.content[{n}]"
        if isinstance(block, TextBlock):
            content.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageBlock):
            source = block.source.model_dump()
            if source["type"] == "base64":
                url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
            elif source["type"] == "url":
                url = str(source.get("url", ""))
            else:
                raise UnsupportedFeatureError(
                    "images by file_id", param=f"{here}.source", detail="send base64"
                )
            content.append({"type": "input_image", "image_url": url})
        elif isinstance(block, DocumentBlock) and block.source.get("type") == "text":
            content.append({"type": "input_text", "text": str(block.source.get("data", ""))})
        else:
            raise UnsupportedFeatureError(f"{block.type} blocks", param=here, detail="send text or images")
    return {"role": "user", "content": content}


def post_message(
    store: Store, session: Session, agent: Agent, message: dict[str, Any], key: str | None
) -> str:
    """skyloop's ``message`` event (the first starts the turn, others join it); the item's id."""
    if pricing.budget_reached(session.spend_limit_cents, session.spend_micros):
        raise InvalidInputError(
            "the session reached its budget; raise budget.max_list_cost to continue", param="budget"
        )
    if not deps.runners().is_online(session.runner_id):
        from skyloop.errors import RunnerUnavailableError

        raise RunnerUnavailableError("No runner bound for session")
    result = lifecycle.start_or_join(
        store, turn_engine.deployed(), agent, session.id, message, [], idempotency_key=key, session=session
    )
    if session.environment_id:
        from skyloop.anthropic_compat import work

        work.after_message(store, session)  # a self-hosted environment's worker gets the session
    return str(result["item_id"])


def find_call(store: Store, session: Session, use_id: str, param: str) -> PendingCall:
    """The call a Claude tool-use event id names, in the running or the last turn."""
    for rid in (session.active_response_id, session.last_response_id):
        if not rid:
            continue
        for call in store.list_calls(session.id, rid):
            if translate.tool_use_id(call.response_id, call.call_id) == use_id:
                return call
    raise InvalidInputError(f"no tool use '{use_id}' waits in this session", param=param)


def result_text(event: rq.UserCustomToolResult | rq.UserToolResult, param: str) -> str:
    from skyloop.anthropic_compat.requests import TextBlock

    parts = []
    for n, block in enumerate(event.content or []):
        if not isinstance(block, TextBlock):
            raise UnsupportedFeatureError(
                f"{block.type} blocks in tool results", param=f"{param}.content[{n}]"
            )
        parts.append(block.text)
    text = "\n".join(parts)
    if event.is_error and not translate.is_error_output(text):
        return f"Error: {text}" if text else "Error: the tool failed"
    return text


def send_events(session_id: str, body: rq.EventsSend, idempotency_key: str | None) -> dict[str, Any]:
    from skyloop.anthropic_compat import requests as rq

    store, session, agent = load(session_id)
    for n, event in enumerate(body.events):
        if isinstance(event, rq.Unsupported):
            feature = (
                "outcomes (user.define_outcome)" if event.type == "user.define_outcome" else "system messages"
            )
            raise UnsupportedFeatureError(feature, param=f"events[{n}]")
        if getattr(event, "session_thread_id", None):
            raise UnsupportedFeatureError("threads (multiagent)", param=f"events[{n}].session_thread_id")
    echoes: list[dict[str, Any]] = []
    for n, event in enumerate(body.events):
        key = f"{idempotency_key}:{n}" if idempotency_key else None
        echoes.append(_send_one(store, session, agent, event, f"events[{n}]", key))
        session = store.get_session(session_id)
    return {"data": echoes}


def _send_one(
    store: Store, session: Session, agent: Agent, event: Any, where: str, key: str | None
) -> dict[str, Any]:
    from skyloop.anthropic_compat import requests as rq

    if isinstance(event, rq.UserMessage):
        message = to_skyloop_message(event, where)
        item_id = post_message(store, session, agent, message, key)
        return {
            "id": translate.user_message_id(item_id),
            "type": "user.message",
            "content": translate.claude_blocks(message["content"]),
            "processed_at": None,
        }
    if isinstance(event, rq.UserInterrupt):
        rid = session.active_response_id
        lifecycle.cancel(store, turn_engine.deployed(), session.id)
        from skyloop.ids import new_id

        return {"id": translate.interrupt_id(rid or new_id()), "type": "user.interrupt", "processed_at": None}
    if isinstance(event, (rq.UserCustomToolResult, rq.UserToolResult)):
        return _tool_result(store, session, event, where)
    return _confirmation(store, session, event, where)


def _tool_result(
    store: Store, session: Session, event: rq.UserCustomToolResult | rq.UserToolResult, where: str
) -> dict[str, Any]:
    from skyloop.anthropic_compat import requests as rq
    from skyloop.anthropic_compat.translate import Context

    custom = isinstance(event, rq.UserCustomToolResult)
    use_id = event.custom_tool_use_id if isinstance(event, rq.UserCustomToolResult) else event.tool_use_id
    field = "custom_tool_use_id" if custom else "tool_use_id"
    call = find_call(store, session, use_id, f"{where}.{field}")
    builtin = call.name in Context.of(store, session).builtin_clients
    if call.kind != "client" or builtin == custom:
        wanted = (
            "user.tool_result" if builtin else ("user.custom_tool_result" if call.kind == "client" else None)
        )
        detail = f"answer it with {wanted}" if wanted else "it runs on the server"
        raise InvalidInputError(
            f"{where}: tool use '{use_id}' is not answered this way: {detail}", param=where
        )
    output = result_text(event, where)
    lifecycle.answer(store, turn_engine.deployed(), session.id, call.call_id, output, session=session)
    out: dict[str, Any] = {
        "id": translate.result_id(call.response_id, call.call_id),
        "type": event.type,
        field: use_id,
        "content": [{"type": "text", "text": output}],
        "is_error": translate.is_error_output(output),
        "processed_at": None,
    }
    return out


def _confirmation(
    store: Store, session: Session, event: rq.UserToolConfirmation, where: str
) -> dict[str, Any]:
    from skyloop.anthropic_compat.confirm import confirm_client_call

    call = find_call(store, session, event.tool_use_id, f"{where}.tool_use_id")
    allowed = event.result == "allow"
    if call.kind == "server" and call.approval:
        lifecycle.approve(
            store,
            turn_engine.deployed(),
            session.id,
            translate.APPROVAL_PREFIX + call.call_id,
            "accept" if allowed else "decline",
            deny_message=None if allowed else event.deny_message,
        )
    elif call.kind == "client":
        confirm_client_call(
            store, turn_engine.deployed(), session, call, allowed=allowed, deny_message=event.deny_message
        )
    else:
        raise InvalidInputError(f"{where}: tool use '{event.tool_use_id}' needs no confirmation", param=where)
    return {
        "id": translate.confirmation_id(call.response_id, call.call_id),
        "type": "user.tool_confirmation",
        "tool_use_id": event.tool_use_id,
        "result": event.result,
        "deny_message": None if allowed else event.deny_message,
        "processed_at": None,
    }


def list_events(session_id: str, q: rq.EventListQuery) -> dict[str, Any]:
    from skyloop.anthropic_compat.translate import Context

    store, session, agent = load(session_id)
    ctx = Context.of(store, session, agent)
    types = set(q.types or [])
    bounds = {
        "gt": _epoch(q.created_at_gt, "created_at[gt]"),
        "gte": _epoch(q.created_at_gte, "created_at[gte]"),
        "lt": _epoch(q.created_at_lt, "created_at[lt]"),
        "lte": _epoch(q.created_at_lte, "created_at[lte]"),
    }
    cursor = tuple(read_token(q.page)[:2]) if q.page else None
    rows: list[tuple[tuple[int, int], dict[str, Any]]] = []
    asc = q.order == "asc"
    after = (
        max(int(cursor[0]) - 1, 0) if cursor is not None and asc else 0
    )  # a later page starts at its cursor
    scanned = 0
    while scanned < MAX_EVENT_SCAN:
        page, covered, more = store.read_event_page(session_id, after)
        scanned += len(page)
        for stored in page:
            for k, payload in enumerate(translate.translate(stored, ctx)):
                pos = (stored.seq, k)
                if types and payload["type"] not in types:
                    continue
                at = _epoch(str(payload["processed_at"]), "processed_at") or 0.0
                if not _in_window(at, bounds):
                    continue
                if cursor is not None and (pos <= cursor if asc else pos >= cursor):
                    continue
                rows.append((pos, payload))
        if asc and len(rows) > q.limit:
            break
        if not more or covered == after:
            break
        after = covered
    if not asc:
        rows.reverse()
    chunk = rows[: q.limit]
    has_more = len(rows) > q.limit
    return {
        "data": [payload for _, payload in chunk],
        "next_page": page_token(*chunk[-1][0]) if has_more and chunk else None,
    }
