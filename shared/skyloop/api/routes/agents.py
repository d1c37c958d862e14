"""``/v1/agents``: agent versions (a JSON spec or a multipart bundle); secrets are never returned."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import deps, principals, sessions
from skyloop.api import openapi
from skyloop.api.body import query
from skyloop.api.requests import AgentDeleteQuery, AgentListQuery, AgentSpecBody
from skyloop.api.routes._common import current_event, json_response, page, request

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

router = Router()


@openapi.operation(
    router,
    "POST",
    "/v1/agents",
    summary="Register an agent version",
    status=201,
    body=AgentSpecBody,
    multipart=True,
)
def create_agent() -> Response:
    req = request(router)
    if req.is_multipart():
        spec, _ = req.agent_upload()
    else:
        from skyloop import bundles

        spec = bundles.load_agent_spec_dict(req.json_object())
    agent = sessions.register(spec)
    return json_response(201, agent.to_api())


@openapi.operation(
    router, "GET", "/v1/agents", summary="List agent versions, newest first", query=AgentListQuery
)
def list_agents() -> Response:
    q = query(current_event(router), AgentListQuery)
    owner = principals.list_owner(q.owner)
    if q.name is not None:  # the newest version of one name
        agent = deps.store().find_agent_by_name(q.name, owner=owner)
        return json_response(200, page([agent.to_api()] if agent else [], False))
    if q.scope == "user":  # one row per name, as omnigent's `agent list` shows them
        latest, more = sessions.list_latest_agents(deps.store(), owner=owner, limit=q.limit, after=q.after)
        return json_response(200, page([a.to_api() for a in latest], more))
    found, has_more = deps.store().list_agents(
        owner=owner, limit=q.limit, descending=q.order == "desc", after=q.after
    )
    return json_response(200, page([a.to_api() for a in found], has_more))


@openapi.operation(router, "GET", "/v1/agents/<agent_id>", summary="One agent version")
def get_agent(agent_id: str) -> Response:
    return json_response(200, sessions.get_agent(deps.store(), agent_id).to_api())


@openapi.operation(
    router,
    "DELETE",
    "/v1/agents/<agent_id>",
    summary="Remove an agent: every version of its name (409 with sessions_in_use unless force=true)",
    query=AgentDeleteQuery,
)
def delete_agent(agent_id: str) -> Response:
    store = deps.store()
    agent = sessions.get_agent(store, agent_id)
    force = query(current_event(router), AgentDeleteQuery).force
    in_use = sessions.count_agent_sessions(store, agent)
    if in_use and not force:
        body = {
            "error": {
                "code": "conflict",
                "message": f"{in_use} session(s) use agent '{agent.name}'; pass force=true to remove it anyway",
            },
            "sessions_in_use": in_use,
        }
        return json_response(409, body)
    removed = sessions.remove_agent(store, agent, deps.secrets())
    return json_response(
        200, {"id": agent.id, "object": "agent.deleted", "deleted": True, "versions": removed}
    )
