"""``/v1/sessions``: create (from an agent id or an uploaded bundle), list, read, edit, delete, items."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import bundles, deps, principals, quotas, sessions
from skyloop.api import openapi
from skyloop.api.body import parse_model, query
from skyloop.api.requests import (
    CreateSessionRequest,
    ItemListQuery,
    SessionEventRequest,
    SessionListQuery,
    UpdateSessionRequest,
)
from skyloop.api.routes._common import current_event, json_response, page, request
from skyloop.errors import InvalidInputError, UnsupportedMediaTypeError
from skyloop.turns import lifecycle

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

router = Router()


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
        agent = deps.register_agent(spec)
        session = sessions.create_session(
            store, agent, deps.runners(), title=metadata.title, labels=metadata.labels
        )
        return json_response(201, {"session_id": session.id, "agent_id": agent.id, "agent_name": agent.name})
    if req.media_type and req.media_type != "application/json":
        raise UnsupportedMediaTypeError(
            f"Content-Type must be application/json or multipart/form-data, got '{req.media_type}'"
        )
    body, _ = req.model(CreateSessionRequest, what="session create request")
    initial = [initial_message(item) for item in body.initial_items]  # all checked before any write
    agent = sessions.get_agent(store, body.agent_id)
    session = sessions.create_session(
        store,
        agent,
        deps.runners(),
        title=body.title,
        labels=body.labels,
        workspace=body.workspace,
        reasoning_effort=body.reasoning_effort,
        model_override=body.model_override,
    )
    for event in initial:
        lifecycle.start_or_join(
            store,
            deps.engine(),
            agent,
            session.id,
            event.message().model_dump(mode="json"),
            [t.to_client_tool() for t in event.tools or []],
            model_override=event.model_override or None,
        )
    session = store.get_session(session.id)
    return json_response(201, sessions.snapshot(store, session, deps.runners()))


def initial_message(raw: dict[str, Any]) -> SessionEventRequest:
    """An ``initial_items`` entry: a user message, validated like a posted one."""
    event = parse_model(SessionEventRequest, raw, what="initial_items entry")
    if event.type != "message":
        raise InvalidInputError(f"initial_items takes 'message' events, got '{event.type}'")
    event.message()
    return event


@openapi.operation(
    router,
    "GET",
    "/v1/sessions",
    summary="List sessions, newest first (omnigent's visibility and sort_by)",
    query=SessionListQuery,
)
def list_sessions() -> Response:
    q = query(current_event(router), SessionListQuery)
    found, has_more = sessions.list_sessions(deps.store(), q, owner=principals.list_owner(q.owner))
    return json_response(200, page([sessions.list_item(s) for s in found], has_more))


@openapi.operation(router, "GET", "/v1/sessions/<session_id>", summary="A session with its newest items")
def get_session(session_id: str) -> Response:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    return json_response(
        200, sessions.snapshot(store, session, deps.runners()), headers={"Cache-Control": "no-store"}
    )


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
    return json_response(200, lifecycle.delete_session(store, deps.engine(), session_id))


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
