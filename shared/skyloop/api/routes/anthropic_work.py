"""``/anthropic/v1/environments/{id}/work/...``: a self-hosted environment's work queue
(``client.beta.environments.work``), thin over :mod:`skyloop.anthropic_compat.work`.

The SDK's environment worker calls these with its environment key, a skyloop token. An empty poll is
``200`` with the JSON body ``null`` (the SDK reads it as ``None``; an empty body would break its poller).
``poll`` and ``stats`` are registered before ``{work_id}`` so they are not read as work ids.
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
W = "/anthropic/v1/environments/<environment_id>/work"


def _query(model: type[BaseModel]) -> Any:
    """The query string validated as ``model`` (one value a key)."""
    raw = current_event(router).raw_query_string or ""
    return parse_model(model, dict(parse_qsl(raw, keep_blank_values=True)), what="query")


def _body(model: type[BaseModel], what: str) -> Any:
    return parse_model(model, request(router).json_object(required=False), what=what)


def _work() -> Any:
    from skyloop.anthropic_compat import work

    return work


def _ok(body: Any) -> Response:
    return json_response(200, body, headers={"Cache-Control": "no-store"})


@openapi.operation(router, "GET", W, summary="Claude Managed Agents: list a self-hosted environment's work")
def list_work(environment_id: str) -> Response:
    from skyloop.anthropic_compat.requests import PageQuery

    return _ok(_work().list_work(environment_id, _query(PageQuery)))


@openapi.operation(
    router,
    "GET",
    W + "/poll",
    summary="Claude Managed Agents: claim a work item (null when there is none)",
)
def poll_work(environment_id: str) -> Response:
    work = _work()
    worker_id = request(router).headers.get("anthropic-worker-id")
    return _ok(work.poll(environment_id, _query(work.PollQuery), worker_id))


@openapi.operation(router, "GET", W + "/stats", summary="Claude Managed Agents: the work queue's statistics")
def work_stats(environment_id: str) -> Response:
    return _ok(_work().stats(environment_id))


@openapi.operation(router, "GET", W + "/<work_id>", summary="Claude Managed Agents: retrieve a work item")
def get_work(environment_id: str, work_id: str) -> Response:
    return _ok(_work().retrieve(environment_id, work_id))


@openapi.operation(
    router, "POST", W + "/<work_id>", summary="Claude Managed Agents: update a work item's metadata"
)
def update_work(environment_id: str, work_id: str) -> Response:
    work = _work()
    return _ok(work.update(environment_id, work_id, _body(work.WorkUpdate, "work update")))


@openapi.operation(
    router, "POST", W + "/<work_id>/ack", summary="Claude Managed Agents: acknowledge a work item"
)
def ack_work(environment_id: str, work_id: str) -> Response:
    return _ok(_work().acknowledge(environment_id, work_id))


@openapi.operation(
    router,
    "POST",
    W + "/<work_id>/heartbeat",
    summary="Claude Managed Agents: extend a work item's lease (412 when another worker may hold it)",
)
def heartbeat_work(environment_id: str, work_id: str) -> Response:
    work = _work()
    return _ok(work.beat(environment_id, work_id, _query(work.HeartbeatQuery)))


@openapi.operation(router, "POST", W + "/<work_id>/stop", summary="Claude Managed Agents: stop a work item")
def stop_work(environment_id: str, work_id: str) -> Response:
    work = _work()
    return _ok(work.stop_work(environment_id, work_id, _body(work.StopBody, "stop")))
