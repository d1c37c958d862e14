"""``/v1/sessions``: create (from an agent id or an uploaded bundle), list, read, edit, delete, items."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import bundles, deps, principals, quotas, sessions
from skyloop.api import openapi
from skyloop.api.body import parse_model, query
from skyloop.api.requests import (
    MAX_INITIAL_EVENTS,
    ChildListQuery,
    CreateSessionRequest,
    ForkSessionRequest,
    ItemListQuery,
    SessionEventRequest,
    SessionGetQuery,
    SessionListQuery,
    UpdateSessionRequest,
    imported_items,
)
from skyloop.api.responses import ChildSessionList
from skyloop.api.routes._common import current_event, json_response, page, request
from skyloop.errors import InvalidInputError, UnsupportedMediaTypeError
from skyloop.ids import new_id
from skyloop.models.session import ConversationItem
from skyloop.turns import engine as turn_engine
from skyloop.turns import lifecycle

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

router = Router()
SEED_RESPONSE_ID = "seed"  # omnigent's response id for imported history


@openapi.operation(
    router,
    "POST",
    "/v1/sessions",
    summary="Create a session (JSON: of an agent; multipart: register a bundle and open its first session)",
    status=201,
    body=CreateSessionRequest,
    multipart=True,
)
def create_session() -> Response:
    req = request(router)
    store = deps.store()
    quotas.before_session(store, deps.get_settings(), principals.current().name)
    if req.is_multipart():
        spec, fields = req.agent_upload()
        if "metadata" not in fields:
            raise InvalidInputError("multipart field 'metadata' (a JSON string, may be '{}') is required")
        metadata = bundles.parse_session_metadata(fields["metadata"])
        agent = sessions.register(spec)
        session = sessions.create_session(
            store, agent, deps.runners(), title=metadata.title, labels=metadata.labels
        )
        return json_response(201, {"session_id": session.id, "agent_id": agent.id, "agent_name": agent.name})
    if req.media_type and req.media_type != "application/json":
        raise UnsupportedMediaTypeError(
            f"Content-Type must be application/json or multipart/form-data, got '{req.media_type}'"
        )
    body, raw = req.model(CreateSessionRequest, what="session create request")
    agent = sessions.get_agent(store, body.agent_id)
    # initial_items: an import's history when host_type "external" is explicit (omnigent's session
    # import), else events that start the first turn; both checked whole before anything is written
    items: list[ConversationItem] = []
    initial: list[SessionEventRequest] = []
    if "host_type" in raw:
        now = int(time.time())
        items = [
            ConversationItem(id=new_id(), type=kind, response_id=SEED_RESPONSE_ID, created_at=now, data=data)
            for kind, data in imported_items(body.initial_items, agent.name)
        ]
    else:
        if len(body.initial_items) > MAX_INITIAL_EVENTS:
            raise InvalidInputError(
                f"initial_items: at most {MAX_INITIAL_EVENTS} events start a session's turns "
                '(an import of history says host_type "external")',
                param="initial_items",
            )
        initial = [
            initial_message(item.model_dump(exclude_none=True), index)
            for index, item in enumerate(body.initial_items)
        ]
    session = sessions.create_session(
        store,
        agent,
        deps.runners(),
        title=body.title,
        labels=body.labels,
        workspace=body.workspace,
        reasoning_effort=body.reasoning_effort,
        model_override=body.model_override,
        items=items,
        environment=body.environment,
    )
    for event in initial:
        lifecycle.start_or_join(
            store,
            turn_engine.deployed(),
            agent,
            session.id,
            event.message().model_dump(mode="json"),
            [t.to_client_tool() for t in event.tools or []],
            model_override=event.model_override or None,
        )
    session = store.get_session(session.id)
    return json_response(201, sessions.snapshot(store, session, deps.runners()))


def initial_message(raw: dict[str, Any], index: int) -> SessionEventRequest:
    """A queued ``initial_items`` entry: a user message, validated like a posted one."""
    where = f"initial_items[{index}]"
    event = parse_model(SessionEventRequest, raw, what=f"{where} entry")
    if event.type != "message":
        raise InvalidInputError(
            f"{where}: initial_items takes 'message' events, got '{event.type}'", param=where
        )
    event.message()
    return event


@openapi.operation(
    router,
    "POST",
    "/v1/sessions/<session_id>/fork",
    summary="Fork a session: a new one of the same agent with its history (up to a response)",
    status=201,
    body=ForkSessionRequest,
)
def fork_session(session_id: str) -> Response:
    store = deps.store()
    source = sessions.get_session(store, session_id)
    body, _ = request(router).model(ForkSessionRequest, what="fork request", required=False)
    quotas.before_session(store, deps.get_settings(), principals.current().name)
    fork = sessions.fork_session(
        store, source, deps.runners(), up_to_response_id=body.up_to_response_id, title=body.title
    )
    return json_response(201, sessions.snapshot(store, fork, deps.runners()))


@openapi.operation(
    router,
    "GET",
    "/v1/sessions/<session_id>/child_sessions",
    summary="The sessions forked from this one, newest first",
    query=ChildListQuery,
    response=ChildSessionList,
)
def list_child_sessions(session_id: str) -> Response:
    store = deps.store()
    q = query(current_event(router), ChildListQuery)
    parent = sessions.get_session(store, session_id)
    data, has_more = sessions.page_children(
        store, parent, limit=q.limit, after=q.after, descending=q.order == "desc"
    )
    return json_response(200, page(data, has_more))


@openapi.operation(
    router, "GET", "/v1/sessions", summary="List sessions, newest first", query=SessionListQuery
)
def list_sessions() -> Response:
    q = query(current_event(router), SessionListQuery)
    store = deps.store()
    found, has_more = sessions.list_sessions(store, q, owner=principals.list_owner(q.owner))
    rows = [sessions.list_item(s, sessions.attention(store, s)) for s in found]
    return json_response(200, page(rows, has_more))


@openapi.operation(
    router,
    "GET",
    "/v1/sessions/<session_id>",
    summary="A session with its newest items",
    query=SessionGetQuery,
)
def get_session(session_id: str) -> Response:
    q = query(current_event(router), SessionGetQuery)
    store = deps.store()
    session = sessions.get_session(store, session_id)
    snap = sessions.snapshot(store, session, deps.runners(), include_items=q.include_items)
    if not q.include_liveness:
        snap["runner_online"] = None
    return json_response(200, snap, headers={"Cache-Control": "no-store"})


@openapi.operation(
    router, "PATCH", "/v1/sessions/<session_id>", summary="Edit a session's fields", body=UpdateSessionRequest
)
def update_session(session_id: str) -> Response:
    store = deps.store()
    body, raw = request(router).model(UpdateSessionRequest, what="session update")
    session = sessions.get_session(store, session_id)
    changes = {k: getattr(body, k) for k in raw}
    session = sessions.update_session(store, session, deps.runners(), changes)
    return json_response(
        200, {**sessions.snapshot(store, session, deps.runners(), include_items=False), "items": []}
    )


@openapi.operation(router, "DELETE", "/v1/sessions/<session_id>", summary="Delete a session and all it holds")
def delete_session(session_id: str) -> Response:
    store = deps.store()
    sessions.get_session(store, session_id)
    return json_response(200, lifecycle.delete_session(store, turn_engine.deployed(), session_id))


@openapi.operation(
    router,
    "GET",
    "/v1/sessions/<session_id>/items",
    summary="A session's items, oldest first",
    query=ItemListQuery,
)
def list_items(session_id: str) -> Response:
    store = deps.store()
    q = query(current_event(router), ItemListQuery)
    session = sessions.get_session(store, session_id)
    data, has_more = sessions.page_items(
        store, session, limit=q.limit, after=q.after, descending=q.order == "desc"
    )
    return json_response(200, page(data, has_more))


@openapi.operation(router, "GET", "/v1/sessions/<session_id>/agent", summary="The agent a session runs")
def get_session_agent(session_id: str) -> Response:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    return json_response(200, store.get_agent(session.agent_id).to_api())


@openapi.operation(
    router, "GET", "/v1/sessions/<session_id>/usage", summary="Token usage in total and per turn (newest 200)"
)
def get_session_usage(session_id: str) -> Response:
    """The web console's usage chart: one row per turn, from the turn records the model steps count into."""
    store = deps.store()
    session = sessions.get_session(store, session_id)
    return json_response(200, sessions.usage_report(store, session))
