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

from skyloop import deps
from skyloop.api.routes import ROUTERS
from skyloop.api.routes._common import json_response
from skyloop.errors import InternalError, SkyloopError
from skyloop.observability import logger

app = APIGatewayHttpResolver()
for _router in ROUTERS:
    app.include_router(_router)

OPEN_PATHS = frozenset({"/health"})


@app.exception_handler(SkyloopError)
def _skyloop_error(exc: SkyloopError) -> Response:
    if exc.status >= 500:
        logger.warning("request failed", extra={"code": exc.code, "error": exc.message})
    return json_response(exc.status, exc.to_body())


@app.exception_handler(Exception)
def _unexpected(_exc: Exception) -> Response:
    logger.exception("unhandled error")
    return json_response(500, InternalError("An internal error occurred.").to_body())


@app.not_found
def _not_found(_: Exception) -> Response:
    return json_response(404, {"error": {"code": "not_found", "message": "Not found"}})


def _require_token(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    """Every route but /health needs a bearer token when the deployment requires one."""
    settings = deps.get_settings()
    if settings.require_token and app.current_event.path not in OPEN_PATHS:
        from skyloop.auth import check_authorization

        headers = {k.lower(): v for k, v in (app.current_event.headers or {}).items()}
        try:
            check_authorization(deps.store(), headers.get("authorization"))
        except SkyloopError as exc:
            return json_response(exc.status, exc.to_body(), headers={"WWW-Authenticate": "Bearer"})
    return next_middleware(app)


def _correlation_header(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    response: Response = next_middleware(app)
    correlation_id = logger.get_correlation_id()
    if correlation_id:
        response.headers["X-Request-Id"] = correlation_id
    return response


app.use(middlewares=[_correlation_header, _require_token])


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
