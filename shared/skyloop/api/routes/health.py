"""``/health`` and the API's own description, ``/openapi.json``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import __version__
from skyloop.api import openapi
from skyloop.api.routes._common import json_response

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

router = Router()


@openapi.operation(router, "GET", "/health", summary="Liveness (never requires a token)")
def health() -> Response:
    return json_response(200, {"status": "ok"})


@openapi.operation(router, "GET", "/openapi.json", summary="This API's OpenAPI 3.1 document")
def openapi_document() -> Response:
    return json_response(200, openapi.document(__version__))
