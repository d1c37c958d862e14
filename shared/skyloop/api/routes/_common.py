"""Small helpers every route module shares: the current request and JSON responses."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools.event_handler import Response, content_types

from skyloop.api.body import RequestBody

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import Router
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        headers=headers,
    )


def request(router: Router) -> RequestBody:
    return RequestBody(current_event(router))


def current_event(router: Router) -> APIGatewayProxyEventV2:
    """The invocation's event (the app is an HTTP API resolver, so it is always payload v2)."""
    return cast("APIGatewayProxyEventV2", router.current_event)


def page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
