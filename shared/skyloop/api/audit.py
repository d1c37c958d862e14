"""The audit trail: one structured log line per write the API is asked for, whoever asked.

Each line has ``"audit": true`` and ``principal``, ``action`` (method and
route with ids templated), ``resource_id`` (the id the path names, or the one
a create returned), ``outcome`` (the HTTP status) and the request's
correlation id; ``docs/deploy.md`` has the Logs Insights query. Bodies are
never logged, so neither model keys nor tool outputs reach the log.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from skyloop.errors import SkyloopError
from skyloop.observability import logger

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
    from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

    from skyloop.principals import Principal

READS = frozenset({"GET", "HEAD", "OPTIONS"})
_ID = re.compile(r"/([0-9a-f]{32})(?=/|$)")


def action_of(method: str, path: str) -> str:
    """``POST /v1/sessions/{id}/events``: the route, with no id in it."""
    return f"{method} {_ID.sub('/{id}', path)}"


def resource_of(path: str, response: Response | None) -> str | None:
    """The last id the path names, else the id a create answered with."""
    ids = _ID.findall(path)
    if ids:
        return str(ids[-1])
    if response is None or not isinstance(response.body, str | bytes):
        return None
    try:
        body = json.loads(response.body)
    except ValueError:
        return None
    if isinstance(body, dict):
        found = body.get("session_id") or body.get("id")
        return str(found) if found else None
    return None


def record(event: BaseProxyEvent, principal: str, outcome: int, response: Response | None = None) -> None:
    logger.info(
        "audit",
        extra={
            "audit": True,
            "principal": principal,
            "action": action_of(event.http_method, event.path),
            "resource_id": resource_of(event.path, response),
            "outcome": outcome,
        },
    )


def logged(
    event: BaseProxyEvent, principal: Principal, next_middleware: Any, app: APIGatewayHttpResolver
) -> Response:
    """Run the route; a write leaves its audit line whatever the route answers or raises."""
    if event.http_method in READS:
        response: Response = next_middleware(app)
        return response
    try:
        response = next_middleware(app)
    except SkyloopError as exc:
        record(event, principal.name, exc.status)
        raise
    except Exception:
        record(event, principal.name, 500)
        raise
    record(event, principal.name, response.status_code, response)
    return response


def refused(event: BaseProxyEvent, exc: SkyloopError) -> None:
    """A write turned away before it ran (no or bad token, read-only token)."""
    if event.http_method not in READS:
        record(event, "-", exc.status)
