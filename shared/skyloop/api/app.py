"""The REST API: one Powertools resolver, the routes of ``api/routes`` (one module per resource).

Every route reads its input through :mod:`skyloop.api.body` (bad input is a
4xx before anything is written), calls one operation in ``skyloop.sessions``
or ``skyloop.turns.lifecycle``, and returns JSON. One exception handler renders
every ``SkyloopError`` as ``{"error": {"code", "message"}}``; every response
carries the request's correlation id (``X-Request-Id``), which is also on
every log line of the invocation.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from skyloop import deps, principals
from skyloop.api import audit
from skyloop.api.routes import ROUTERS
from skyloop.api.routes._common import json_response
from skyloop.errors import InternalError, NotFoundError, SkyloopError
from skyloop.observability import logger

app = APIGatewayHttpResolver()
for _router in ROUTERS:
    app.include_router(_router)

OPEN_PATHS = frozenset({"/health", "/api/version", "/v1/info"})  # omnigent clients read these before login
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


OPENAI_PREFIX = "/openai"  # OpenAI's Agents API: its errors are OpenAI's shape (skyloop.openai_compat)
ANTHROPIC_PREFIX = "/anthropic"  # Claude Managed Agents: Anthropic's shape (skyloop.anthropic_compat)


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is the contract's: the bare prefix too (``/anthropic`` is Anthropic's 404, not
    skyloop's), but not a longer first segment (``/anthropicx``)."""
    return path == prefix or path.startswith(prefix + "/")


def request_headers(path: str) -> dict[str, str]:
    """The request's id (the HTTP API's, the invocation's correlation id): ``X-Request-Id``, and
    ``request-id`` on Claude's contract (the SDK's ``_request_id`` and its error messages)."""
    correlation_id = logger.get_correlation_id()
    if not correlation_id:
        return {}
    if under(path, ANTHROPIC_PREFIX):
        return {"X-Request-Id": correlation_id, "request-id": correlation_id}
    return {"X-Request-Id": correlation_id}


def error_response(path: str, exc: SkyloopError, headers: dict[str, str] | None = None) -> Response:
    """skyloop's ``{"error": {"code", "message"}}``, or OpenAI's under ``/openai``, Anthropic's under ``/anthropic``
    (an error answered by an exception handler passes no middleware: it carries the request's id itself)."""
    headers = {**request_headers(path), **(headers or {})}
    if under(path, OPENAI_PREFIX):
        from skyloop.openai_compat.errors import error_body, error_headers

        return json_response(exc.status, error_body(exc), headers={**error_headers(exc), **(headers or {})})
    if under(path, ANTHROPIC_PREFIX):
        from skyloop.anthropic_compat import errors

        request_id = logger.get_correlation_id()
        return json_response(
            exc.status,
            errors.error_body(exc, request_id),
            headers={**errors.error_headers(exc), **(headers or {})},
        )
    extra = {**exc.headers, **(headers or {})}
    return json_response(exc.status, exc.to_body(), headers=extra or None)


@app.exception_handler(SkyloopError)
def _skyloop_error(exc: SkyloopError) -> Response:
    if exc.status >= 500:
        logger.warning("request failed", extra={"code": exc.code, "error": exc.message})
    return error_response(app.current_event.path, exc)


@app.exception_handler(Exception)
def _unexpected(_exc: Exception) -> Response:
    logger.exception("unhandled error")
    return error_response(app.current_event.path, InternalError("An internal error occurred."))


@app.not_found
def _not_found(_: Exception) -> Response:
    path = app.current_event.path
    if under(path, OPENAI_PREFIX):
        from skyloop.openai_compat import unsupported

        return error_response(path, unsupported.for_path(path) or NotFoundError(f"Not found: {path}"))
    if under(path, ANTHROPIC_PREFIX):
        from skyloop.anthropic_compat import unsupported as claude_unsupported

        return error_response(path, claude_unsupported.for_path(path) or NotFoundError(f"Not found: {path}"))
    return json_response(
        404, {"error": {"code": "not_found", "message": "Not found"}}, headers=request_headers(path)
    )


def _as_principal(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    """Run the request as its token's principal (401 without one, 403 for a read-only write)."""
    settings = deps.get_settings()
    event = app.current_event
    if not settings.require_token or event.path in OPEN_PATHS:
        with principals.acting_as(principals.OPEN):
            return audit.logged(event, principals.OPEN, next_middleware, app)
    from skyloop.auth import authenticate, claude_authorization

    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    authorization = headers.get("authorization")
    if under(event.path, ANTHROPIC_PREFIX):  # Anthropic's other auth header, x-api-key, too
        authorization = claude_authorization(authorization, headers.get("x-api-key"))
    try:
        principal = authenticate(deps.store(), authorization, settings)
        if event.http_method not in READ_METHODS:
            principal.require_write()
    except SkyloopError as exc:
        audit.refused(event, exc)
        extra = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
        return error_response(event.path, exc, headers=extra)
    with principals.acting_as(principal):
        return audit.logged(event, principal, next_middleware, app)


def _correlation_header(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    response: Response = next_middleware(app)
    response.headers.update(request_headers(app.current_event.path))
    return response


app.use(middlewares=[_correlation_header, _as_principal])


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
