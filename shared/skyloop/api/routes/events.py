"""``POST /v1/sessions/{id}/events``: a message (starts or joins a turn), a tool output, an approval, an interrupt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import deps, sessions
from skyloop.api import openapi
from skyloop.api.requests import SessionEventRequest
from skyloop.api.routes._common import json_response, request
from skyloop.errors import RunnerUnavailableError
from skyloop.turns import engine as turn_engine
from skyloop.turns import lifecycle

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

router = Router()


@openapi.operation(
    router,
    "POST",
    "/v1/sessions/<session_id>/events",
    summary="Post a message, a function_call_output, an approval, an interrupt or a heartbeat",
    status=202,
    body=SessionEventRequest,
)
def post_event(session_id: str) -> Response:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    req = request(router)
    event, _ = req.model(SessionEventRequest, what="event")
    engine = turn_engine.deployed()
    if event.type == "message":
        data = event.message()
        if not deps.runners().is_online(session.runner_id):
            raise RunnerUnavailableError(
                f"runner '{session.runner_id}' is not online"
                if session.runner_id
                else "No runner bound for session"
            )
        agent = store.get_agent(session.agent_id)
        tools = [t.to_client_tool() for t in event.tools or []]
        result = lifecycle.start_or_join(
            store,
            engine,
            agent,
            session_id,
            data.model_dump(mode="json"),
            tools,
            idempotency_key=req.idempotency_key(),
            model_override=event.model_override or None,
            session=session,
        )
        return json_response(202, result)
    if event.type == "function_call_output":
        out = event.function_call_output()
        return json_response(
            202, lifecycle.answer(store, engine, session_id, out.call_id, out.output, session=session)
        )
    if event.type == "approval":
        answer = event.approval()
        return json_response(
            202, lifecycle.approve(store, engine, session_id, answer.elicitation_id, answer.action)
        )
    if event.type == "heartbeat":
        return json_response(202, lifecycle.heartbeat(store, engine, session_id, session=session))
    return json_response(202, lifecycle.cancel(store, engine, session_id))
