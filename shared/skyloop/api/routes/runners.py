"""``/v1/runners``: the deployment's one runner, its turn state machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import deps
from skyloop.api import openapi
from skyloop.api.routes._common import json_response

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

router = Router()


@openapi.operation(router, "GET", "/v1/runners", summary="List runners")
def list_runners() -> Response:
    return json_response(200, deps.runners().list())


@openapi.operation(router, "GET", "/v1/runners/<runner_id>/status", summary="Whether a runner is online")
def runner_status(runner_id: str) -> Response:
    return json_response(200, {"runner_id": runner_id, "online": deps.runners().is_online(runner_id)})
