"""``/openai/v1/agents...``: OpenAI's Agents API (``client.beta.agents``), thin over :mod:`skyloop.openai_compat`.

The SSE stream (``GET .../agents/sessions/{id}/events``) is the stream
function's (:mod:`skyloop.stream.openai`); everything else is here. A create
with ``stream: true`` creates the session here and answers ``303 See Other``
to its events stream from the start (``?created=turn|session``), which the
SDKs follow with a GET: the stream function behind CloudFront's Origin Access
Control cannot take a request body (docs/deploy.md, "Routing"). Errors under
this prefix are OpenAI's shape (``skyloop.api.app``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop.api import openapi
from skyloop.api.body import parse_model
from skyloop.api.routes._common import current_event, json_response, request

if TYPE_CHECKING:
    from pydantic import BaseModel

router = Router()
P = "/openai/v1/agents"


def _body(model: type[BaseModel], what: str) -> Any:
    req = request(router)
    data = req.json_object(required=False)
    return parse_model(model, data, what=what), req.idempotency_key()


def _query(model: type[BaseModel]) -> tuple[Any, dict[str, str]]:
    """The query validated as ``model``; ``metadata[key]=value`` pairs apart (the SDK's deepObject form)."""
    raw = dict(current_event(router).query_string_parameters or {})
    metadata = {
        k[len("metadata[") : -1]: v for k, v in raw.items() if k.startswith("metadata[") and k.endswith("]")
    }
    rest = {k: v for k, v in raw.items() if not k.startswith("metadata[")}
    return parse_model(model, rest, what="query"), metadata


def _service() -> Any:
    from skyloop.openai_compat import service

    return service


def _unsupported_segment(name: str) -> None:
    from skyloop.openai_compat import unsupported

    error = unsupported.for_path(f"/{name}/")
    if error is not None:
        raise error


# ------------------------------------------------------------------------------ agents
@openapi.operation(router, "POST", P, summary="OpenAI Agents API: create an agent", status=200)
def create_agent() -> Response:
    from skyloop.openai_compat.requests import AgentConfig

    config, _ = _body(AgentConfig, "agent")
    return json_response(200, _service().create_agent(config))


@openapi.operation(router, "GET", P, summary="OpenAI Agents API: list agents", status=200)
def list_agents() -> Response:
    from skyloop.openai_compat.requests import ListQuery

    q, _ = _query(ListQuery)
    return json_response(200, _service().list_agents(after=q.after, limit=q.limit, order=q.order))


@openapi.operation(
    router, "GET", P + "/<agent_id>", summary="OpenAI Agents API: retrieve an agent", status=200
)
def get_agent(agent_id: str) -> Response:
    _unsupported_segment(agent_id)
    return json_response(200, _service().get_agent(agent_id))


@openapi.operation(
    router,
    "POST",
    P + "/<agent_id>",
    summary="OpenAI Agents API: update an agent (a new version, the same id)",
    status=200,
)
def update_agent(agent_id: str) -> Response:
    from skyloop.openai_compat.requests import AgentConfig

    _unsupported_segment(agent_id)
    config, _ = _body(AgentConfig, "agent update")
    return json_response(200, _service().update_agent(agent_id, config))


@openapi.operation(
    router, "DELETE", P + "/<agent_id>", summary="OpenAI Agents API: delete an agent", status=200
)
def delete_agent(agent_id: str) -> Response:
    _unsupported_segment(agent_id)
    return json_response(200, _service().delete_agent(agent_id))


# ---------------------------------------------------------------------------- sessions
@openapi.operation(
    router,
    "POST",
    P + "/sessions",
    summary="OpenAI Agents API: create a session (stream: true answers 303 to its events stream)",
    status=200,
)
def create_session() -> Response:
    from skyloop.openai_compat.requests import SessionCreate

    body, key = _body(SessionCreate, "session")
    if not body.stream:
        return json_response(200, _service().create_session(body, key))
    created = _service().create_session(body.model_copy(update={"stream": None, "stream_options": None}), key)
    return json_response(
        303, created, headers={"Location": _created_stream(created["id"], body.input is not None)}
    )


def _created_stream(session_id: str, with_turn: bool) -> str:
    """Where a streamed create's events are: the session's events stream from its creation, to the
    end of its first turn (``turn``) or of the created event alone (``session``: no input, no turn)."""
    from skyloop.openai_compat.translate import CREATED_STREAM_PARAM

    return f"{P}/sessions/{session_id}/events?{CREATED_STREAM_PARAM}={'turn' if with_turn else 'session'}"


@openapi.operation(router, "GET", P + "/sessions", summary="OpenAI Agents API: list sessions", status=200)
def list_sessions() -> Response:
    from skyloop.openai_compat.requests import SessionListQuery

    q, metadata = _query(SessionListQuery)
    return json_response(
        200,
        _service().list_sessions(
            after=q.after, limit=q.limit, order=q.order, agent_id=q.agent_id, metadata=metadata
        ),
    )


@openapi.operation(
    router, "GET", P + "/sessions/<session_id>", summary="OpenAI Agents API: retrieve a session", status=200
)
def get_session(session_id: str) -> Response:
    return json_response(200, _service().get_session(session_id), headers={"Cache-Control": "no-store"})


@openapi.operation(
    router, "POST", P + "/sessions/<session_id>", summary="OpenAI Agents API: update a session", status=200
)
def update_session(session_id: str) -> Response:
    from skyloop.openai_compat.requests import SessionUpdate

    body, _ = _body(SessionUpdate, "session update")
    return json_response(200, _service().update_session(session_id, body))


@openapi.operation(
    router, "DELETE", P + "/sessions/<session_id>", summary="OpenAI Agents API: delete a session", status=200
)
def delete_session(session_id: str) -> Response:
    return json_response(200, _service().delete_session(session_id))


@openapi.operation(
    router,
    "POST",
    P + "/sessions/<session_id>/events",
    summary="OpenAI Agents API: post input, tool results, approvals, a cancel",
    status=202,
)
def post_events(session_id: str) -> Response:
    from skyloop.openai_compat.requests import EventsCreate

    body, key = _body(EventsCreate, "events")
    _service().post_events(session_id, body, key)
    return Response(status_code=202, body="")


@openapi.operation(
    router,
    "GET",
    P + "/sessions/<session_id>/items",
    summary="OpenAI Agents API: a session's items",
    status=200,
)
def list_items(session_id: str) -> Response:
    from skyloop.openai_compat.requests import ListQuery

    q, _ = _query(ListQuery)
    return json_response(200, _service().list_items(session_id, after=q.after, limit=q.limit, order=q.order))


@openapi.operation(
    router,
    "GET",
    P + "/sessions/<session_id>/turns",
    summary="OpenAI Agents API: a session's turns",
    status=200,
)
def list_turns(session_id: str) -> Response:
    from skyloop.openai_compat.requests import ListQuery

    q, _ = _query(ListQuery)
    return json_response(200, _service().list_turns(session_id, after=q.after, limit=q.limit, order=q.order))


@openapi.operation(
    router,
    "GET",
    P + "/sessions/<session_id>/turns/<turn_id>",
    summary="OpenAI Agents API: one turn",
    status=200,
)
def get_turn(session_id: str, turn_id: str) -> Response:
    return json_response(200, _service().get_turn(session_id, turn_id))


@openapi.operation(
    router,
    "GET",
    P + "/sessions/<session_id>/turns/<turn_id>/items",
    summary="OpenAI Agents API: one turn's items",
    status=200,
)
def list_turn_items(session_id: str, turn_id: str) -> Response:
    from skyloop.openai_compat.requests import ListQuery

    q, _ = _query(ListQuery)
    return json_response(
        200,
        _service().list_items(session_id, after=q.after, limit=q.limit, order=q.order, turn_id=turn_id),
    )


# --------------------------------------------------------------------------- automations
def _automations() -> Any:
    from skyloop.openai_compat import automations

    return automations


def _named_body(model: type[BaseModel], what: str) -> Any:
    """The body validated as ``model``; a 400 whose ``param`` names the field at fault."""
    from skyloop.schedules.requests import parse

    return parse(model, request(router).json_object(required=False), what=what)


A = P + "/automations"


@openapi.operation(router, "POST", A, summary="OpenAI Agents API: create an automation", status=200)
def create_automation() -> Response:
    from skyloop.openai_compat.requests import AutomationCreate

    return json_response(200, _automations().create(_named_body(AutomationCreate, "automation")))


@openapi.operation(router, "GET", A, summary="OpenAI Agents API: list automations", status=200)
def list_automations() -> Response:
    from skyloop.openai_compat.requests import AutomationListQuery

    q, _ = _query(AutomationListQuery)
    return json_response(
        200,
        _automations().list_automations(after=q.after, limit=q.limit, order=q.order, session_id=q.session_id),
    )


@openapi.operation(
    router, "GET", A + "/<automation_id>", summary="OpenAI Agents API: retrieve an automation", status=200
)
def get_automation(automation_id: str) -> Response:
    return json_response(200, _automations().retrieve(automation_id))


@openapi.operation(
    router, "POST", A + "/<automation_id>", summary="OpenAI Agents API: update an automation", status=200
)
def update_automation(automation_id: str) -> Response:
    from skyloop.openai_compat.requests import AutomationUpdate

    body = _named_body(AutomationUpdate, "automation update")
    return json_response(200, _automations().update(automation_id, body))


@openapi.operation(
    router, "DELETE", A + "/<automation_id>", summary="OpenAI Agents API: delete an automation", status=200
)
def delete_automation(automation_id: str) -> Response:
    return json_response(200, _automations().delete(automation_id))


@openapi.operation(
    router, "POST", A + "/<automation_id>/pause", summary="OpenAI Agents API: pause an automation", status=200
)
def pause_automation(automation_id: str) -> Response:
    return json_response(200, _automations().set_state(automation_id, "paused"))


@openapi.operation(
    router,
    "POST",
    A + "/<automation_id>/resume",
    summary="OpenAI Agents API: resume an automation",
    status=200,
)
def resume_automation(automation_id: str) -> Response:
    return json_response(200, _automations().set_state(automation_id, "active"))


@openapi.operation(
    router,
    "POST",
    A + "/<automation_id>/invocations",
    summary="OpenAI Agents API: invoke an automation now",
    status=200,
)
def invoke_automation(automation_id: str) -> Response:
    return json_response(200, _automations().invoke(automation_id))


@openapi.operation(
    router,
    "GET",
    A + "/<automation_id>/invocations",
    summary="OpenAI Agents API: an automation's invocations",
    status=200,
)
def list_invocations(automation_id: str) -> Response:
    from skyloop.openai_compat.requests import ListQuery

    q, _ = _query(ListQuery)
    return json_response(
        200, _automations().list_invocations(automation_id, after=q.after, limit=q.limit, order=q.order)
    )


@openapi.operation(
    router,
    "GET",
    A + "/<automation_id>/invocations/<invocation_id>",
    summary="OpenAI Agents API: one invocation",
    status=200,
)
def get_invocation(automation_id: str, invocation_id: str) -> Response:
    return json_response(200, _automations().get_invocation(automation_id, invocation_id))


# ------------------------------------------------------------------------ webhook endpoints
def _endpoints() -> Any:
    from skyloop.openai_compat import webhook_endpoints

    return webhook_endpoints


W = "/openai/v1/webhook_endpoints"


@openapi.operation(router, "POST", W, summary="OpenAI API: create a webhook endpoint", status=200)
def create_webhook_endpoint() -> Response:
    m = _endpoints()
    return json_response(200, m.create(_named_body(m.EndpointCreate, "webhook endpoint")))


@openapi.operation(router, "GET", W, summary="OpenAI API: list webhook endpoints", status=200)
def list_webhook_endpoints() -> Response:
    m = _endpoints()
    q, _ = _query(m.EndpointListQuery)
    return json_response(200, m.list_endpoints(after=q.after, limit=q.limit))


@openapi.operation(
    router, "GET", W + "/<endpoint_id>", summary="OpenAI API: retrieve a webhook endpoint", status=200
)
def get_webhook_endpoint(endpoint_id: str) -> Response:
    return json_response(200, _endpoints().retrieve(endpoint_id))


@openapi.operation(
    router, "POST", W + "/<endpoint_id>", summary="OpenAI API: update a webhook endpoint", status=200
)
def update_webhook_endpoint(endpoint_id: str) -> Response:
    m = _endpoints()
    return json_response(200, m.update(endpoint_id, _named_body(m.EndpointUpdate, "webhook endpoint update")))


@openapi.operation(
    router, "DELETE", W + "/<endpoint_id>", summary="OpenAI API: delete a webhook endpoint", status=200
)
def delete_webhook_endpoint(endpoint_id: str) -> Response:
    return json_response(200, _endpoints().delete(endpoint_id))


@openapi.operation(
    router,
    "POST",
    W + "/<endpoint_id>/rotate_secret",
    summary="OpenAI API: rotate a webhook endpoint's signing secret",
    status=200,
)
def rotate_webhook_endpoint_secret(endpoint_id: str) -> Response:
    m = _endpoints()
    return json_response(200, m.rotate(endpoint_id, _named_body(m.RotateSecret, "rotation")))


@openapi.operation(
    router,
    "POST",
    W + "/<endpoint_id>/test",
    summary="OpenAI API: send a sample event to a webhook endpoint",
    status=200,
)
def test_webhook_endpoint(endpoint_id: str) -> Response:
    m = _endpoints()
    return json_response(200, m.send_test(endpoint_id, _named_body(m.SendTest, "webhook test")))


@openapi.operation(
    router, "GET", "/openai/v1/webhook_event_types", summary="OpenAI API: the webhook event types", status=200
)
def list_webhook_event_types() -> Response:
    from skyloop.lifecycle_events.models import EVENT_TYPES

    return json_response(200, {"object": "list", "data": list(EVENT_TYPES)})
