"""``/v1/webhooks``: endpoints that receive the caller's sessions' lifecycle events, signed (Standard Webhooks).

Each endpoint has a ``format``: skyloop's ``agent.session.*`` events, or Claude Managed Agents' webhook
events (``anthropic``), so a receiver written for either platform reads them with its own SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import deps, principals
from skyloop.api import openapi
from skyloop.api.body import query
from skyloop.api.routes._common import current_event, json_response, page, request
from skyloop.webhooks import service
from skyloop.webhooks.models import (
    CreateWebhookRequest,
    DeliveryListQuery,
    RotateSecretRequest,
    TestWebhookRequest,
    UpdateWebhookRequest,
    WebhookListQuery,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

    from skyloop.webhooks.records import WebhookRecords

router = Router()


def _records() -> WebhookRecords:
    from skyloop.webhooks.records import webhook_records

    return webhook_records()


@openapi.operation(
    router,
    "POST",
    "/v1/webhooks",
    summary="Register a webhook endpoint, format skyloop or anthropic (the signing secret is in this answer only)",
    status=201,
    body=CreateWebhookRequest,
)
def create_webhook() -> Response:
    req, _ = request(router).model(CreateWebhookRequest, what="webhook")
    return json_response(201, service.create(_records(), deps.get_settings(), req))


@openapi.operation(
    router, "GET", "/v1/webhooks", summary="The caller's webhook endpoints", query=WebhookListQuery
)
def list_webhooks() -> Response:
    q = query(current_event(router), WebhookListQuery)
    owner = principals.list_owner(q.owner)
    found = _records().list_endpoints(owner)
    return json_response(200, page([e.to_api() for e in found], False))


@openapi.operation(router, "GET", "/v1/webhooks/<webhook_id>", summary="One webhook endpoint")
def get_webhook(webhook_id: str) -> Response:
    return json_response(200, service.get_endpoint(_records(), webhook_id).to_api())


@openapi.operation(
    router,
    "PATCH",
    "/v1/webhooks/<webhook_id>",
    summary="Edit an endpoint: url, format, events, description, all_sessions; enabled=true re-enables a "
    "disabled one",
    body=UpdateWebhookRequest,
)
def update_webhook(webhook_id: str) -> Response:
    req, raw = request(router).model(UpdateWebhookRequest, what="webhook")
    return json_response(200, service.update(_records(), deps.get_settings(), webhook_id, req, set(raw)))


@openapi.operation(
    router, "DELETE", "/v1/webhooks/<webhook_id>", summary="Remove an endpoint and its delivery history"
)
def delete_webhook(webhook_id: str) -> Response:
    records = _records()
    endpoint = service.get_endpoint(records, webhook_id)
    records.delete_endpoint(endpoint.id)
    return json_response(200, {"id": endpoint.id, "object": "webhook_endpoint.deleted", "deleted": True})


@openapi.operation(
    router,
    "POST",
    "/v1/webhooks/<webhook_id>/rotate_secret",
    summary="A new signing secret; the old one also signs for grace_period_s (default 24 h)",
    body=RotateSecretRequest,
)
def rotate_webhook_secret(webhook_id: str) -> Response:
    req, _ = request(router).model(RotateSecretRequest, what="rotation", required=False)
    return json_response(200, service.rotate(_records(), webhook_id, req))


@openapi.operation(
    router,
    "GET",
    "/v1/webhooks/<webhook_id>/deliveries",
    summary="Deliveries, newest first, each with every attempt (status, response code, latency, next retry)",
    query=DeliveryListQuery,
)
def list_webhook_deliveries(webhook_id: str) -> Response:
    q = query(current_event(router), DeliveryListQuery)
    found, more = service.deliveries(_records(), webhook_id, q)
    return json_response(200, page([d.to_api() for d in found], more))


@openapi.operation(
    router,
    "POST",
    "/v1/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver",
    summary="Attempt a delivery again, with the same webhook-id (e.g. one that was dead-lettered)",
    status=202,
)
def redeliver_webhook(webhook_id: str, delivery_id: str) -> Response:
    settings = deps.get_settings()
    return json_response(
        202, service.redeliver(_records(), service.queue_for(settings), webhook_id, delivery_id)
    )


@openapi.operation(
    router,
    "POST",
    "/v1/webhooks/<webhook_id>/test",
    summary="Post a signed test event (in the endpoint's format) to the endpoint now and report its answer",
    body=TestWebhookRequest,
)
def test_webhook(webhook_id: str) -> Response:
    req, _ = request(router).model(TestWebhookRequest, what="test", required=False)
    return json_response(200, service.send_test(_records(), deps.get_settings(), webhook_id, req))
