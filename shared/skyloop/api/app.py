"""The REST API: a Powertools HTTP API resolver whose routes only translate HTTP.

Every route parses its input with a pydantic model (bad input is a 400 before
anything is written), calls one operation in ``skyloop.sessions`` or
``skyloop.turns.service``, and returns JSON. One exception handler renders
every ``SkyloopError`` as ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types

from skyloop import deps, sessions
from skyloop.api.requests import (
    AgentListQuery,
    CreateSessionRequest,
    ItemListQuery,
    SessionEventRequest,
    SessionListQuery,
    UpdateSessionRequest,
    parse_model,
)
from skyloop.errors import (
    InternalError,
    InvalidInputError,
    PayloadTooLargeError,
    SkyloopError,
    UnsupportedMediaTypeError,
)
from skyloop.observability import logger
from skyloop.settings import get_settings

app = APIGatewayHttpResolver()

MAX_BODY_BYTES = 6 * 1024 * 1024
IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, separators=(",", ":")),
        headers=headers,
    )


def _runners() -> sessions.Runners:
    return deps.runners()


def _engine() -> Any:
    from skyloop.turns.service import TurnEngine

    return TurnEngine(deps.client("stepfunctions"), get_settings().state_machine_arn)


def _raw_body() -> bytes:
    event = app.current_event
    body = event.body or ""
    data = base64.b64decode(body) if event.is_base64_encoded else body.encode("utf-8")
    if len(data) > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"request body over {MAX_BODY_BYTES} bytes")
    return data


def _content_type() -> str:
    return (app.current_event.headers or {}).get("content-type", "")


def _json_body(*, required: bool = True) -> Any:
    raw = _raw_body()
    if not raw.strip():
        if required:
            raise InvalidInputError("request body must be a JSON object")
        return {}
    ctype = _content_type().split(";")[0].strip().lower()
    if ctype and ctype != "application/json" and not ctype.endswith("+json"):
        raise UnsupportedMediaTypeError(f"Content-Type must be application/json, got '{ctype}'")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInputError("request body must be a JSON object")
    return data


def _idempotency_key() -> str | None:
    """``Idempotency-Key``: a client-chosen id that makes re-posting a message safe."""
    key = (app.current_event.headers or {}).get("idempotency-key")
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.match(key):
        raise InvalidInputError(
            "Idempotency-Key must be 1-128 characters of letters, digits, '.', '_', ':' or '-'"
        )
    return key


def _query() -> dict[str, str]:
    return dict(app.current_event.query_string_parameters or {})


# ------------------------------------------------------------------------- errors
@app.exception_handler(SkyloopError)
def _skyloop_error(exc: SkyloopError) -> Response:
    if exc.status >= 500:
        logger.warning("request failed", extra={"code": exc.code, "error": exc.message})
    return _json(exc.status, exc.to_body())


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response:
    logger.exception("unhandled error")
    return _json(500, InternalError("An internal error occurred.").to_body())


@app.not_found
def _not_found(_: Exception) -> Response:
    return _json(404, {"error": {"code": "not_found", "message": "Not found"}})


# -------------------------------------------------------------------------- auth
def _require_token(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    """Every route but /health needs a bearer token when the deployment requires one."""
    settings = get_settings()
    if settings.require_token and app.current_event.path != "/health":
        from skyloop.auth import check_authorization

        headers = app.current_event.headers or {}
        try:
            check_authorization(deps.client("dynamodb"), settings.table_name, headers.get("authorization"))
        except SkyloopError as exc:
            return _json(exc.status, exc.to_body(), headers={"WWW-Authenticate": "Bearer"})
    return next_middleware(app)


app.use(middlewares=[_require_token])


# ------------------------------------------------------------------------- health
@app.get("/health")
def health() -> Response:
    return _json(200, {"status": "ok"})


# ----------------------------------------------------------------------- sessions
@app.post("/v1/sessions")
def create_session() -> Response:
    store = deps.store()
    ctype = _content_type().lower()
    if ctype.startswith("multipart/form-data"):
        from skyloop import bundles

        form = bundles.parse_multipart_form(_raw_body(), _content_type())
        if "bundle" not in form.files:
            raise InvalidInputError("multipart field 'bundle' (a gzipped tar file) is required")
        if "metadata" not in form.fields:
            raise InvalidInputError("multipart field 'metadata' (a JSON string, may be '{}') is required")
        metadata = bundles.parse_session_metadata(form.fields["metadata"])
        spec = bundles.load_agent_bundle(form.files["bundle"].data)
        agent = sessions.register_agent(store, spec)
        session = sessions.create_session(
            store, agent, _runners(), title=metadata.title, labels=metadata.labels
        )
        return _json(201, {"session_id": session.id, "agent_id": agent.id, "agent_name": agent.name})
    if ctype and not ctype.startswith("application/json"):
        raise UnsupportedMediaTypeError(
            f"Content-Type must be application/json or multipart/form-data, got '{ctype.split(';')[0]}'"
        )
    req = parse_model(CreateSessionRequest, _json_body(), what="session create request")
    agent = sessions.get_agent(store, req.agent_id)
    session = sessions.create_session(store, agent, _runners(), title=req.title, labels=req.labels)
    return _json(201, sessions.snapshot(store, session, _runners()))


def _page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


@app.get("/v1/sessions")
def list_sessions() -> Response:
    q = parse_model(SessionListQuery, _query(), what="query")
    found, has_more = deps.store().list_sessions(
        agent_name=q.agent_name,
        agent_id=q.agent_id,
        include_archived=q.include_archived,
        limit=q.limit,
        descending=q.order == "desc",
        after=q.after,
    )
    return _json(200, _page([sessions.list_item(s) for s in found], has_more))


@app.get("/v1/sessions/<session_id>")
def get_session(session_id: str) -> Response:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    return _json(200, sessions.snapshot(store, session, _runners()), headers={"Cache-Control": "no-store"})


@app.patch("/v1/sessions/<session_id>")
def update_session(session_id: str) -> Response:
    store = deps.store()
    body = _json_body()
    req = parse_model(UpdateSessionRequest, body, what="session update")
    session = sessions.get_session(store, session_id)
    changes = {k: getattr(req, k) for k in body}
    session = sessions.update_session(store, session, _runners(), changes)
    return _json(200, {**sessions.snapshot(store, session, _runners(), include_items=False), "items": []})


@app.delete("/v1/sessions/<session_id>")
def delete_session(session_id: str) -> Response:
    from skyloop.turns import service

    store = deps.store()
    sessions.get_session(store, session_id)
    result = service.delete_session(
        store, deps.client("stepfunctions"), get_settings().state_machine_arn, session_id
    )
    return _json(200, result)


@app.get("/v1/sessions/<session_id>/items")
def list_items(session_id: str) -> Response:
    store = deps.store()
    q = parse_model(ItemListQuery, _query(), what="query")
    session = sessions.get_session(store, session_id)
    data, has_more = sessions.page_items(
        store, session, limit=q.limit, after=q.after, descending=q.order == "desc"
    )
    return _json(200, _page(data, has_more))


@app.get("/v1/sessions/<session_id>/agent")
def get_session_agent(session_id: str) -> Response:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    return _json(200, store.get_agent(session.agent_id).to_api())


@app.post("/v1/sessions/<session_id>/events")
def post_event(session_id: str) -> Response:
    from skyloop.turns import service

    store = deps.store()
    session = sessions.get_session(store, session_id)
    req = parse_model(SessionEventRequest, _json_body(), what="event")
    if req.type == "message":
        data = req.message()
        runners = _runners()
        if not runners.is_online(session.runner_id):
            raise_unavailable(session.runner_id)
        agent = store.get_agent(session.agent_id)
        tools = [t.to_client_tool() for t in req.tools or []]
        result = service.post_message(
            store,
            _engine(),
            agent,
            session_id,
            data.model_dump(mode="json"),
            tools,
            idempotency_key=_idempotency_key(),
        )
        return _json(202, result)
    if req.type == "function_call_output":
        out = req.function_call_output()
        result = service.post_function_call_output(
            store, deps.client("stepfunctions"), session_id, out.call_id, out.output
        )
        return _json(202, result)
    result = service.interrupt(
        store, deps.client("stepfunctions"), get_settings().state_machine_arn, session_id
    )
    return _json(202, result)


def raise_unavailable(runner_id: str | None) -> None:
    from skyloop.errors import RunnerUnavailableError

    if not runner_id:
        raise RunnerUnavailableError("No runner bound for session")
    raise RunnerUnavailableError(f"runner '{runner_id}' is not online")


# ------------------------------------------------------------------------- agents
@app.post("/v1/agents")
def create_agent() -> Response:
    from skyloop import bundles

    ctype = _content_type().lower()
    if ctype.startswith("multipart/form-data"):
        form = bundles.parse_multipart_form(_raw_body(), _content_type())
        if "bundle" not in form.files:
            raise InvalidInputError("multipart field 'bundle' (a gzipped tar file) is required")
        spec = bundles.load_agent_bundle(form.files["bundle"].data)
    else:
        spec = bundles.load_agent_spec_dict(_json_body())
    agent = sessions.register_agent(deps.store(), spec)
    return _json(201, agent.to_api())


@app.get("/v1/agents")
def list_agents() -> Response:
    q = parse_model(AgentListQuery, _query(), what="query")
    if q.name is not None:  # the newest version of one name
        agent = deps.store().find_agent_by_name(q.name)
        return _json(200, _page([agent.to_api()] if agent else [], False))
    found, has_more = deps.store().list_agents(limit=q.limit, descending=q.order == "desc", after=q.after)
    return _json(200, _page([a.to_api() for a in found], has_more))


@app.get("/v1/agents/<agent_id>")
def get_agent(agent_id: str) -> Response:
    return _json(200, sessions.get_agent(deps.store(), agent_id).to_api())


# ------------------------------------------------------------------------ runners
@app.get("/v1/runners")
def list_runners() -> Response:
    return _json(200, _runners().list())


@app.get("/v1/runners/<runner_id>/status")
def runner_status(runner_id: str) -> Response:
    return _json(200, {"runner_id": runner_id, "online": _runners().is_online(runner_id)})


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
