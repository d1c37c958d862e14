"""Session and agent operations behind the REST routes (everything but turns)."""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from skyloop import principals
from skyloop.errors import ConflictError, InvalidInputError, NotFoundError, SecretNotAllowedError
from skyloop.ids import is_hex32, new_id
from skyloop.models.agent import Agent, AgentSpec
from skyloop.models.session import ConversationItem, PendingCall, Session, token_usage
from skyloop.models.tools import environment_of
from skyloop.runners import Runners  # noqa: TC001  (kept here too: callers name it sessions.Runners)
from skyloop.secrets import api_key_secret_name

if TYPE_CHECKING:
    from collections.abc import Sequence

    from skyloop.api.requests import SessionListQuery
    from skyloop.models.environment import HostedEnvironment
    from skyloop.models.tools import DeclaredTools
    from skyloop.secrets import SecretStore
    from skyloop.store import Store

SNAPSHOT_ITEMS = 100
# A synchronous Lambda response is at most 6 MB: pages and snapshots stop adding items at this many
# bytes of JSON (one item always fits: the largest the API stores is well under it).
MAX_PAGE_BYTES = 4 * 1024 * 1024


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _within_budget(items: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The leading items whose JSON fits in ``budget`` bytes (at least one)."""
    out: list[dict[str, Any]] = []
    used = 0
    for item in items:
        used += _json_size(item) + 1
        if out and used > budget:
            break
        out.append(item)
    return out


def register_agent(
    store: Store,
    spec: AgentSpec,
    *,
    secrets: SecretStore | None = None,
    secrets_prefix: str = "skyloop/agents",
) -> Agent:
    """Store a new agent version; re-using a name makes a newer version, found first by name.

    A model key in the spec goes to the secret store; the stored version keeps
    only the secret's name (see :mod:`skyloop.secrets`).
    """
    from skyloop.models.tools import declared_client_tools, declared_tools

    declared = declared_tools(spec.tools)  # a bad server tool is a 400 now, not a failed turn later
    declared_client_tools(spec.tools)  # and so is a bad client tool
    check_outbound(spec, declared)
    agent_id = new_id()
    owner = principals.current().name
    previous = store.find_agent_by_name(spec.name, owner=owner)
    secret_name = None
    auth = spec.executor.auth
    if auth is not None and auth.api_key is not None:
        if secrets is None:
            raise InvalidInputError("this deployment has no secret store for the agent's api_key")
        secret_name = secrets.put(
            api_key_secret_name(secrets_prefix, agent_id), auth.api_key.get_secret_value()
        )
        spec = spec.model_copy(
            update={
                "executor": spec.executor.model_copy(
                    update={"auth": auth.model_copy(update={"api_key": None})}
                )
            }
        )
    agent = Agent(
        id=agent_id,
        name=spec.name,
        created_at=int(time.time()),
        spec=spec,
        api_key_secret=secret_name,
        owner=owner,
        version=previous.version + 1 if previous else 1,
    )
    store.put_agent(agent)
    return agent


def check_outbound(spec: AgentSpec, declared: DeclaredTools) -> None:
    """The model endpoint and MCP servers the agent names must be callable from the stack."""
    from skyloop.outbound import check_url
    from skyloop.settings import get_settings

    settings = get_settings()
    auth = spec.executor.auth
    if auth is not None and auth.base_url:
        check_url(auth.base_url, settings, what="executor.auth.base_url")
    for name, server in declared.mcp.items():
        check_url(server.url, settings, what=f"tools.{name}.url")
    if settings.tool_secrets_prefix:
        check_tool_secrets(declared, settings.tool_secrets_prefix)
    if spec.environment is not None:
        check_environment_secrets(spec.environment)


def check_environment_secrets(environment: HostedEnvironment) -> None:
    """A hosted environment's secrets follow the MCP header secrets' rule: the caller's own folder."""
    from skyloop.settings import get_settings

    prefix = get_settings().tool_secrets_prefix
    if not prefix:
        return
    me = principals.current()
    mine = f"{prefix.rstrip('/')}/" if me.is_admin else f"{prefix.rstrip('/')}/{me.name}/"
    for name, value in environment.env.items():
        secret = getattr(value, "secret", None)
        if secret is not None and (not secret.startswith(mine) or (not me.is_admin and "/" in me.name)):
            raise SecretNotAllowedError(
                f"environment.env.{name}: secret {secret!r} must be named under {mine!r}"
                " (this deployment reads environment secrets only there)",
                param=f"environment.env.{name}",
            )


def check_tool_secrets(declared: DeclaredTools, prefix: str) -> None:
    """MCP header secrets must be the caller's own: another principal's would leave with our request."""
    from skyloop.models.tools import SecretRef

    me = principals.current()
    mine = f"{prefix.rstrip('/')}/" if me.is_admin else f"{prefix.rstrip('/')}/{me.name}/"
    # a "/" in a principal (a JWT subject may hold one) would make its folder part of another's
    shared_folder = not me.is_admin and "/" in me.name
    for name, server in declared.mcp.items():
        for header, value in server.headers.items():
            if isinstance(value, SecretRef) and shared_folder:
                raise SecretNotAllowedError(
                    f"tools.{name}.headers.{header}: principal '{me.name}' has a '/' in its name, so it has "
                    "no folder of its own for MCP header secrets; pass the header as a plain value"
                )
            if isinstance(value, SecretRef) and not value.secret.startswith(mine):
                raise SecretNotAllowedError(
                    f"tools.{name}.headers.{header}: secret {value.secret!r} must be named under {mine!r}"
                    " (this deployment reads MCP header secrets only there)"
                )


def get_agent(store: Store, agent_id: str) -> Agent:
    """The agent, if the caller's principal may see it; another principal's is "not found" too."""
    missing = NotFoundError(f"Agent not found: '{agent_id}'")
    if not is_hex32(agent_id):
        raise missing
    agent = store.get_agent(agent_id)
    if not principals.current().owns(agent.owner):
        raise missing
    return agent


def list_latest_agents(
    store: Store, *, owner: str, limit: int, after: str | None
) -> tuple[list[Agent], bool]:
    """The newest version of each of the owner's agent names, newest first; ``after`` is an id on it."""
    latest: dict[str, Agent] = {}
    cursor: str | None = None
    while True:
        found, more = store.list_agents(owner=owner, limit=1000, descending=True, after=cursor)
        for agent in found:
            latest.setdefault(agent.name, agent)
        if not more or not found:
            break
        cursor = found[-1].id
    rows = list(latest.values())
    if after:
        ids = [a.id for a in rows]
        if after not in ids:
            raise InvalidInputError(f"cursor agent '{after}' is not in this listing")
        rows = rows[ids.index(after) + 1 :]
    return rows[:limit], len(rows) > limit


def count_agent_sessions(store: Store, agent: Agent) -> int:
    """Sessions (archived too) of the agent's name and owner: the ones a removal would break."""
    count, after = 0, None
    while True:
        found, more = store.list_sessions(
            owner=agent.owner, agent_name=agent.name, archived=None, limit=1000, after=after
        )
        count += len(found)
        if not more or not found:
            return count
        after = found[-1].id


def remove_agent(store: Store, agent: Agent, secrets: SecretStore | None = None) -> int:
    """Delete every version of the agent's name (omnigent removes an agent, not a version).

    Each version's model key goes first, then its row: a removal that fails half way is
    finished by its retry (a key already gone is no error), and no row outlives its key
    unnoticed, nor a key its row.
    """
    removed = 0
    while (newest := store.find_agent_by_name(agent.name, owner=agent.owner)) is not None:
        _forget(store, newest, secrets)
        removed += 1
    _forget(store, agent, secrets)  # an older version passed by id, if the name moved on (else a no-op)
    return max(removed, 1)


def _forget(store: Store, agent: Agent, secrets: SecretStore | None) -> None:
    if agent.api_key_secret and secrets is not None:
        secrets.delete(agent.api_key_secret)
    store.delete_agent(agent.id)


def get_session(store: Store, session_id: str) -> Session:
    """The session, if the caller's principal may see it; another principal's is "not found" too."""
    missing = NotFoundError(f"Session not found: '{session_id}'")
    if not is_hex32(session_id):
        raise missing
    session = store.get_session(session_id)
    if not principals.current().owns(session.owner):
        raise missing
    return session


def create_session(
    store: Store,
    agent: Agent,
    runners: Runners,
    *,
    title: str | None = None,
    labels: dict[str, str] | None = None,
    workspace: str | None = None,
    reasoning_effort: str | None = None,
    model_override: str | None = None,
    items: Sequence[ConversationItem] = (),
    parent_session_id: str | None = None,
    session_id: str | None = None,
    environment: HostedEnvironment | None = None,
    environment_id: str | None = None,
) -> Session:
    """A new idle session of the caller's; ``items`` are its history (an import's or a fork's).
    ``environment`` replaces the agent's hosted environment for this session (its secrets checked as
    an agent's are).

    ``session_id``: an id of the caller's choosing (a scheduled run derives its session's from the
    run, so a retried start opens the same one); a taken id is a ConflictError.
    """
    if environment is not None:
        check_environment_secrets(environment)
    now = int(time.time())
    session = Session(
        id=session_id or new_id(),
        agent_id=agent.id,
        agent_name=agent.name,
        created_at=now,
        updated_at=now,
        title=title,
        labels=labels or {},
        runner_id=runners.default_runner_id,
        owner=principals.current().name,
        workspace=workspace,
        reasoning_effort=reasoning_effort or None,
        model_override=model_override or None,
        parent_session_id=parent_session_id,
        environment=environment,
        environment_id=environment_id,
    )
    store.create_session(session, items)
    return store.get_session(session.id) if items else session


def fork_session(
    store: Store,
    source: Session,
    runners: Runners,
    *,
    up_to_response_id: str | None = None,
    title: str | None = None,
) -> Session:
    """A new session of the source's agent with a copy of its history, the source untouched.

    With ``up_to_response_id`` the copy ends with that response's last item
    (omnigent's truncation; an id the session never had is 400). While a turn
    runs, its items are partial, so only what ended with the last finished
    response is copied, and naming a point after that is 409.
    """
    agent = store.get_agent(source.agent_id)
    items = store.list_items(source.id, through_seq=source.last_seq)
    forkable = len(items)
    if source.status == "running":
        forkable = _end_of(items, source.last_response_id) if source.last_response_id else 0
    end = forkable
    if up_to_response_id is not None:
        end = _end_of(items, up_to_response_id)
        if source.status == "running" and up_to_response_id == source.active_response_id:
            end = forkable + 1  # its items, whether any are written yet or not, are partial
        if end == 0:
            raise InvalidInputError(
                f"response not found in session '{source.id}': '{up_to_response_id}'",
                param="up_to_response_id",
            )
        if end > forkable:
            raise ConflictError(
                f"response '{up_to_response_id}' belongs to the turn still running; "
                "fork from a finished response or once the turn ends"
            )
    copies = [
        ConversationItem(
            id=new_id(),
            type=i.type,
            response_id=i.response_id,
            created_at=i.created_at,
            data=i.data,
        )
        for i in items[:end]
    ]
    fork = create_session(
        store,
        agent,
        runners,
        title=title if title is not None else f"Fork of {source.title or source.id[:16] + '…'}",
        labels=source.labels,
        workspace=source.workspace,
        reasoning_effort=source.reasoning_effort,
        model_override=source.model_override,
        items=copies,
        parent_session_id=source.id,
        environment=source.environment,
    )
    if environment_of(agent.spec, source.environment) is not None:  # the workspace goes with the fork
        from skyloop.environments import service

        service.copy(source.id, fork.id)
    return fork


def _end_of(items: list[ConversationItem], response_id: str) -> int:
    """How many leading items end with the last item of ``response_id`` (0 if it has none)."""
    for index in range(len(items) - 1, -1, -1):
        if items[index].response_id == response_id:
            return index + 1
    return 0


def child_summary(child: Session) -> dict[str, Any]:
    """omnigent's ``ChildSessionSummary`` of a fork (``kind: "fork"``: skyloop has no sub-agents)."""
    return {
        "id": child.id,
        "object": "child_session",
        "parent_session_id": child.parent_session_id,
        "title": child.title,
        "task_summary": None,
        "tool": None,
        "session_name": None,
        "kind": "fork",
        "created_at": child.created_at,
        "updated_at": child.updated_at,
        "agent_id": child.agent_id,
        "agent_name": child.agent_name,
        "current_task_id": child.active_response_id or child.last_response_id,
        "current_task_status": child.status,
        "busy": child.status == "running",
        "labels": child.labels,
        "last_task_error": child.last_task_error.model_dump() if child.last_task_error else None,
        "last_message_preview": None,
        "pending_elicitations_count": 0,
        "routed_model": None,
        "routing_decision_id": None,
    }


def page_children(
    store: Store, parent: Session, *, limit: int, after: str | None, descending: bool
) -> tuple[list[dict[str, Any]], bool]:
    """The parent's forks the caller may see, newest first by default; ``after`` is a child id."""
    me = principals.current()
    children = [c for c in store.list_child_sessions(parent.id) if me.owns(c.owner)]
    if descending:
        children.reverse()
    if after:
        ids = [c.id for c in children]
        if after not in ids:
            raise InvalidInputError(f"cursor session '{after}' is not a child of this session")
        children = children[ids.index(after) + 1 :]
    return [child_summary(c) for c in children[:limit]], len(children) > limit


def snapshot(
    store: Store, session: Session, runners: Runners, *, include_items: bool = True
) -> dict[str, Any]:
    """The session with its newest items, consistent with ``last_event_id``.

    Items are read after the session row and filtered to positions at or
    below its ``last_seq``, so "snapshot, then stream after last_event_id"
    neither misses nor repeats anything. At most the newest 100 items, and
    only as many of the newest as fit in :data:`MAX_PAGE_BYTES` (page
    ``/items`` for the rest).
    """
    items: list[dict[str, Any]] = []
    more = False
    if include_items:
        # one more than shown says whether older items exist (page them with /items)
        stored = store.list_items(session.id, through_seq=session.last_seq, newest=SNAPSHOT_ITEMS + 1)
        more, stored = len(stored) > SNAPSHOT_ITEMS, stored[-SNAPSHOT_ITEMS:]
        newest_first = [i.to_api() for i in reversed(stored)]
        items = list(reversed(_within_budget(newest_first, MAX_PAGE_BYTES)))
        more = more or len(items) < len(stored)
    waiting = waiting_calls(store, session)
    counts = (
        sum(1 for c in waiting if c.kind == "client"),
        sum(1 for c in waiting if c.approval == "pending"),
    )
    return {
        **list_item(session, counts),
        "object": "session",
        "waiting": [waiting_json(c) for c in waiting],
        "runner_online": runners.is_online(session.runner_id),
        "items": items,
        "has_more_items": more,
        "last_task_error": session.last_task_error.model_dump() if session.last_task_error else None,
        "active_response_id": session.active_response_id,
        "last_event_id": session.last_seq,
        **usage_fields(store, session),
        **agent_fields(_agent_or_none(store, session.agent_id), session),
    }


def _agent_or_none(store: Store, agent_id: str) -> Agent | None:
    try:
        return store.get_agent(agent_id)
    except NotFoundError:  # a removed agent leaves its sessions readable
        return None


def agent_fields(agent: Agent | None, session: Session) -> dict[str, Any]:
    """What omnigent's snapshot says of the model: the agent's model and harness, the override."""
    return {
        "llm_model": agent.spec.executor.model if agent else None,
        "harness": agent.spec.executor.harness if agent else None,
        "model_override": session.model_override,
        "context_window": None,
    }


def usage_fields(store: Store, session: Session) -> dict[str, Any]:
    """Token totals: the session's, and its current (or last) turn's, which omnigent calls ``last_total_tokens``."""
    turn_id = session.active_response_id or session.last_response_id
    turn_usage = None
    if turn_id:
        with contextlib.suppress(NotFoundError):
            turn_usage = {"response_id": turn_id, **store.get_turn(session.id, turn_id).usage()}
    return {
        "usage": token_usage(session.input_tokens, session.output_tokens),
        "turn_usage": turn_usage,
        "last_total_tokens": turn_usage["total_tokens"] if turn_usage else None,
    }


def waiting_calls(store: Store, session: Session) -> list[PendingCall]:
    """The running turn's calls that wait on someone: client calls without an output, approvals.

    Only a running session is asked (one query of its turn's calls), so a page of idle
    sessions costs nothing more.
    """
    if session.status != "running" or not session.active_response_id:
        return []
    calls = store.list_calls(session.id, session.active_response_id)
    return [
        c
        for c in calls
        if c.output is None and not c.cancelled and (c.kind == "client" or c.approval == "pending")
    ]


def attention(store: Store, session: Session) -> tuple[int, int]:
    """``(client calls, approvals)`` the running turn waits on (the web console's badge and inbox)."""
    calls = waiting_calls(store, session)
    return sum(1 for c in calls if c.kind == "client"), sum(1 for c in calls if c.approval == "pending")


def waiting_json(call: PendingCall) -> dict[str, Any]:
    """A waiting call as the snapshot's ``waiting`` lists it: what to answer, and how."""
    return {
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
        "response_id": call.response_id,
        "kind": "approval" if call.approval == "pending" else "client",
        "elicitation_id": f"approve_{call.call_id}" if call.approval == "pending" else None,
    }


USAGE_TURNS = 200  # the newest turns a usage report lists


def usage_report(store: Store, session: Session) -> dict[str, Any]:
    """The session's tokens and spend, and its newest turns', oldest first (one query).

    ``price`` (USD per million tokens) is :mod:`skyloop.pricing`'s for the model the session
    calls (override, else the agent's); without one the report has tokens and no money
    (``cost_usd`` null), as the web console then shows.
    """
    from skyloop import pricing

    turns = store.list_turns(session.id)[-USAGE_TURNS:]
    agent = _agent_or_none(store, session.agent_id)
    model = session.model_override or (agent.spec.executor.model if agent else None)
    price = pricing.price_of(agent.spec.executor, model) if agent else None

    def usd(micros: int) -> float | None:
        return micros / 1_000_000 if price is not None else None

    return {
        "object": "session.usage",
        "session_id": session.id,
        "model": model,
        "price": price.model_dump() if price is not None else None,
        "usage": token_usage(session.input_tokens, session.output_tokens),
        "cost_usd": usd(session.spend_micros),
        "turns": [
            {
                "response_id": t.response_id,
                "created_at": t.created_at,
                **t.usage(),
                "cost_usd": usd(t.spend_micros),
            }
            for t in turns
        ],
    }


def list_item(session: Session, waiting: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """The list's row; ``waiting`` is :func:`attention`'s counts (the snapshot's and list's)."""
    return {
        "id": session.id,
        "agent_id": session.agent_id,
        "agent_name": session.agent_name,
        "status": session.status,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "title": session.title,
        "labels": session.labels,
        "runner_id": session.runner_id,
        "archived": session.archived,
        "workspace": session.workspace,
        "reasoning_effort": session.reasoning_effort,
        "model_override": session.model_override,
        "external_session_id": session.external_session_id,
        "owner": session.owner,
        "host_id": None,
        "parent_session_id": session.parent_session_id,
        "pending_elicitations_count": waiting[1],
        "pending_client_calls": waiting[0],
    }


def update_session(store: Store, session: Session, runners: Runners, changes: dict[str, Any]) -> Session:
    """Apply a PATCH: labels merge (an empty value removes the key) and ``""`` clears an override."""
    updates: dict[str, Any] = {}
    if "runner_id" in changes:
        runner_id = (changes["runner_id"] or "").strip()
        if runner_id and not runners.is_registered(runner_id):
            raise InvalidInputError(f"runner '{runner_id}' is not registered")
        updates["runner_id"] = runner_id or None
    for key in ("title", "archived", "external_session_id"):
        if key in changes and changes[key] is not None:
            updates[key] = changes[key]
    for key in ("reasoning_effort", "model_override"):
        if key in changes and changes[key] is not None:
            updates[key] = changes[key] or None  # "" (a clear alias) removes it
    if changes.get("labels") is not None:
        merged = {**session.labels, **changes["labels"]}
        updates["labels"] = {k: v for k, v in merged.items() if v != ""}
    if not updates:
        return session
    return store.update_session(session.id, updates)


def list_sessions(store: Store, q: SessionListQuery, *, owner: str) -> tuple[list[Session], bool]:
    """A page of sessions as omnigent lists them (``visibility``, ``sort_by``; see the query model).

    ``created_at`` order is the store's index; ``updated_at`` order reads the owner's matching
    sessions (bounded by the stored-sessions quota) and sorts them, newest edit first.
    """
    if q.lists_nothing():
        return [], False
    kwargs: dict[str, Any] = {
        "owner": owner,
        "agent_name": q.agent_name,
        "agent_id": q.agent_id,
        "archived": q.archived_filter(),
    }
    descending = q.order == "desc"
    if q.sort_by == "created_at" and not q.filters():
        return store.list_sessions(**kwargs, limit=q.limit, descending=descending, after=q.after)
    everything: list[Session] = []
    after: str | None = None
    while True:
        found, more = store.list_sessions(**kwargs, limit=1000, descending=True, after=after)
        everything.extend(found)
        if not more or not found:
            break
        after = found[-1].id
    everything = [s for s in everything if _matches(store, s, q)]
    if q.sort_by == "created_at":
        everything.sort(key=lambda s: (s.created_at, s.id), reverse=descending)
    else:
        everything.sort(key=lambda s: (s.updated_at, s.created_at, s.id), reverse=descending)
    if q.after:
        ids = [s.id for s in everything]
        if q.after not in ids:
            raise InvalidInputError(f"cursor session '{q.after}' is not in this listing")
        everything = everything[ids.index(q.after) + 1 :]
    return everything[: q.limit], len(everything) > q.limit


def _matches(store: Store, session: Session, q: SessionListQuery) -> bool:
    """The list's filters (status, a label, words of the title, waiting on someone), all must hold."""
    if q.status and session.status != q.status:
        return False
    if q.label:
        key, has_value, value = q.label.partition("=")
        if key not in session.labels or (has_value and session.labels[key] != value):
            return False
    if q.search_query and q.search_query.strip().lower() not in (session.title or "").lower():
        return False
    return not q.waiting or any(attention(store, session))


def page_items(
    store: Store, session: Session, *, limit: int, after: str | None, descending: bool
) -> tuple[list[dict[str, Any]], bool]:
    """Flat items in order; ``after`` is the id of the last item of the previous page.

    A page ends at ``limit`` items or :data:`MAX_PAGE_BYTES` of JSON, whichever
    comes first; ``has_more`` says whether items follow.
    """
    items = store.list_items(session.id, through_seq=session.last_seq)
    if descending:
        items.reverse()
    if after:
        ids = [i.id for i in items]
        if after not in ids:
            raise InvalidInputError(f"cursor item '{after}' is not in this session")
        items = items[ids.index(after) + 1 :]
    page = _within_budget([i.to_flat() for i in items[:limit]], MAX_PAGE_BYTES)
    return page, len(items) > len(page)


def register(spec: AgentSpec) -> Agent:
    """Register an agent version with this deployment's store and secret store."""
    from skyloop import deps

    return register_agent(
        deps.store(), spec, secrets=deps.secrets(), secrets_prefix=deps.get_settings().secrets_prefix
    )
