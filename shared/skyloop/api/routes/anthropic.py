"""``/anthropic/v1/...``: Claude Managed Agents (``client.beta.agents|environments|sessions``), thin over
:mod:`skyloop.anthropic_compat`.

The event stream (``GET .../sessions/{id}/events/stream``) is the stream function's
(:mod:`skyloop.stream.anthropic`); everything else is here. Errors under this prefix are Anthropic's
shape (``skyloop.api.app``). Queries arrive as the SDK writes them: lists with brackets
(``types[]=a&types[]=b``), ranges as ``created_at[gte]``; they are read from the raw query string.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop.api import openapi
from skyloop.api.body import parse_model
from skyloop.api.routes._common import current_event, json_response, request

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response
    from pydantic import BaseModel

router = Router()
P = "/anthropic/v1"


def _body(model: type[BaseModel], what: str) -> Any:
    data = request(router).json_object(required=False)
    return parse_model(model, data, what=what)


def _key() -> str | None:
    return request(router).idempotency_key()


def _query(model: type[BaseModel]) -> Any:
    """The query validated as ``model``: ``key[]`` repeated is a list, anything else one value."""
    raw = current_event(router).raw_query_string or ""
    data: dict[str, Any] = {}
    for key, value in parse_qsl(raw, keep_blank_values=True):
        if key.endswith("[]"):
            data.setdefault(key, []).append(value)
        else:
            data[key] = value
    return parse_model(model, data, what="query")


def _service() -> Any:
    from skyloop.anthropic_compat import service

    return service


def _ok(body: Any) -> Response:
    return json_response(200, body)


# ------------------------------------------------------------------------------------ agents
@openapi.operation(
    router, "POST", P + "/agents", summary="Claude Managed Agents: create an agent", status=200
)
def create_agent() -> Response:
    from skyloop.anthropic_compat.requests import AgentBody

    return _ok(_service().create_agent(_body(AgentBody, "agent")))


@openapi.operation(router, "GET", P + "/agents", summary="Claude Managed Agents: list agents", status=200)
def list_agents() -> Response:
    from skyloop.anthropic_compat.requests import AgentListQuery

    return _ok(_service().list_agents(_query(AgentListQuery)))


@openapi.operation(
    router, "GET", P + "/agents/<agent_id>", summary="Claude Managed Agents: retrieve an agent", status=200
)
def get_agent(agent_id: str) -> Response:
    from skyloop.anthropic_compat.requests import AgentRetrieveQuery

    return _ok(_service().get_agent(agent_id, _query(AgentRetrieveQuery).version))


@openapi.operation(
    router,
    "POST",
    P + "/agents/<agent_id>",
    summary="Claude Managed Agents: update an agent (a new version)",
    status=200,
)
def update_agent(agent_id: str) -> Response:
    from skyloop.anthropic_compat.requests import AgentBody

    return _ok(_service().update_agent(agent_id, _body(AgentBody, "agent update")))


@openapi.operation(
    router,
    "POST",
    P + "/agents/<agent_id>/archive",
    summary="Claude Managed Agents: archive an agent",
    status=200,
)
def archive_agent(agent_id: str) -> Response:
    return _ok(_service().archive_agent(agent_id))


@openapi.operation(
    router,
    "GET",
    P + "/agents/<agent_id>/versions",
    summary="Claude Managed Agents: an agent's versions",
    status=200,
)
def list_versions(agent_id: str) -> Response:
    from skyloop.anthropic_compat.requests import PageQuery

    return _ok(_service().list_versions(agent_id, _query(PageQuery)))


# ------------------------------------------------------------------------------ environments
@openapi.operation(
    router, "POST", P + "/environments", summary="Claude Managed Agents: create an environment", status=200
)
def create_environment() -> Response:
    from skyloop.anthropic_compat.requests import EnvironmentBody

    return _ok(_service().create_environment(_body(EnvironmentBody, "environment")))


@openapi.operation(
    router, "GET", P + "/environments", summary="Claude Managed Agents: list environments", status=200
)
def list_environments() -> Response:
    from skyloop.anthropic_compat.requests import EnvironmentListQuery

    return _ok(_service().list_environments(_query(EnvironmentListQuery)))


@openapi.operation(
    router,
    "GET",
    P + "/environments/<environment_id>",
    summary="Claude Managed Agents: retrieve an environment",
    status=200,
)
def get_environment(environment_id: str) -> Response:
    return _ok(_service().get_environment(environment_id))


@openapi.operation(
    router,
    "POST",
    P + "/environments/<environment_id>",
    summary="Claude Managed Agents: update an environment",
    status=200,
)
def update_environment(environment_id: str) -> Response:
    from skyloop.anthropic_compat.requests import EnvironmentBody

    return _ok(_service().update_environment(environment_id, _body(EnvironmentBody, "environment update")))


@openapi.operation(
    router,
    "DELETE",
    P + "/environments/<environment_id>",
    summary="Claude Managed Agents: delete an environment",
    status=200,
)
def delete_environment(environment_id: str) -> Response:
    return _ok(_service().delete_environment(environment_id))


@openapi.operation(
    router,
    "POST",
    P + "/environments/<environment_id>/archive",
    summary="Claude Managed Agents: archive an environment",
    status=200,
)
def archive_environment(environment_id: str) -> Response:
    return _ok(_service().archive_environment(environment_id))


# ---------------------------------------------------------------------------------- sessions
@openapi.operation(
    router, "POST", P + "/sessions", summary="Claude Managed Agents: create a session", status=200
)
def create_session() -> Response:
    from skyloop.anthropic_compat.requests import SessionCreate

    return _ok(_service().create_session(_body(SessionCreate, "session"), _key()))


@openapi.operation(router, "GET", P + "/sessions", summary="Claude Managed Agents: list sessions", status=200)
def list_sessions() -> Response:
    from skyloop.anthropic_compat.requests import SessionListQuery

    return _ok(_service().list_sessions(_query(SessionListQuery)))


@openapi.operation(
    router,
    "GET",
    P + "/sessions/<session_id>",
    summary="Claude Managed Agents: retrieve a session",
    status=200,
)
def get_session(session_id: str) -> Response:
    return json_response(200, _service().get_session(session_id), headers={"Cache-Control": "no-store"})


@openapi.operation(
    router,
    "POST",
    P + "/sessions/<session_id>",
    summary="Claude Managed Agents: update a session",
    status=200,
)
def update_session(session_id: str) -> Response:
    from skyloop.anthropic_compat.requests import SessionUpdate

    return _ok(_service().update_session(session_id, _body(SessionUpdate, "session update")))


@openapi.operation(
    router,
    "DELETE",
    P + "/sessions/<session_id>",
    summary="Claude Managed Agents: delete a session",
    status=200,
)
def delete_session(session_id: str) -> Response:
    return _ok(_service().delete_session(session_id))


@openapi.operation(
    router,
    "POST",
    P + "/sessions/<session_id>/archive",
    summary="Claude Managed Agents: archive a session",
    status=200,
)
def archive_session(session_id: str) -> Response:
    return _ok(_service().archive_session(session_id))


@openapi.operation(
    router,
    "POST",
    P + "/sessions/<session_id>/events",
    summary="Claude Managed Agents: send events (messages, tool results, confirmations, an interrupt)",
    status=200,
)
def send_events(session_id: str) -> Response:
    from skyloop.anthropic_compat.requests import EventsSend

    return _ok(_service().send_events(session_id, _body(EventsSend, "events"), _key()))


@openapi.operation(
    router,
    "GET",
    P + "/sessions/<session_id>/events",
    summary="Claude Managed Agents: a session's events, paged",
    status=200,
)
def list_events(session_id: str) -> Response:
    from skyloop.anthropic_compat.requests import EventListQuery

    return json_response(
        200, _service().list_events(session_id, _query(EventListQuery)), headers={"Cache-Control": "no-store"}
    )
