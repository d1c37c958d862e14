"""OpenAI's webhook endpoints (``client.webhooks``) on skyloop's webhooks (:mod:`skyloop.webhooks`).

An OpenAI webhook endpoint is a skyloop webhook endpoint: ``event_types`` are
its ``events``, ``name`` its name; the same publisher routes the caller's
sessions' lifecycle events to it, and every delivery is signed the Standard
Webhooks way ``client.webhooks.unwrap`` verifies (``webhook-id``,
``webhook-timestamp``, ``webhook-signature`` over ``id.timestamp.body`` with
the endpoint's ``whsec_`` secret). The events are already OpenAI's
``agent.session.*`` shapes (:mod:`skyloop.lifecycle_events.models`); skyloop
has no batches, responses, evals, fine-tuning, realtime, videos, hosted
environments or safety alerts, so those types are a 400 naming them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from skyloop import deps, principals
from skyloop.errors import InvalidInputError
from skyloop.lifecycle_events.models import EVENT_TYPES
from skyloop.openai_compat.errors import UnsupportedFeatureError
from skyloop.webhooks import service

if TYPE_CHECKING:
    from skyloop.webhooks.models import Endpoint
    from skyloop.webhooks.records import WebhookRecords

# the pinned SDK's event types (``webhook_create_params``); skyloop sends the ``agent.session.*`` ones
OPENAI_EVENT_TYPES = (
    "batch.completed",
    "batch.failed",
    "batch.expired",
    "batch.cancelled",
    "response.completed",
    "response.failed",
    "response.cancelled",
    "response.incomplete",
    "eval.run.succeeded",
    "eval.run.failed",
    "eval.run.canceled",
    "fine_tuning.job.succeeded",
    "fine_tuning.job.failed",
    "fine_tuning.job.cancelled",
    "realtime.call.incoming",
    "video.completed",
    "video.failed",
    "agent.environment.ready",
    "agent.environment.failed",
    "agent.environment.suspended",
    "agent.environment.expired",
    "agent.session.created",
    "agent.session.action_required",
    "agent.session.in_progress",
    "agent.session.idle",
    "agent.session.failed",
    "safety.alert.created",
)
MAX_NAME = 256
GRACE_24H_S = 24 * 3600


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EndpointCreate(_Strict):
    event_types: list[str] = Field(max_length=len(OPENAI_EVENT_TYPES))
    name: str = Field(min_length=1, max_length=MAX_NAME)
    url: str = Field(min_length=1, max_length=2048)


class EndpointUpdate(_Strict):
    event_types: list[str] | None = Field(default=None, max_length=len(OPENAI_EVENT_TYPES))
    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    url: str | None = Field(default=None, min_length=1, max_length=2048)


class RotateSecret(_Strict):
    keep_old_secret_active_for_24_hours: bool = False


class SendTest(_Strict):
    event_type: str


class EndpointListQuery(_Strict):
    after: str | None = None
    limit: int = Field(default=20, ge=1, le=100)


def check_types(types: list[str], param: str = "event_types") -> list[str]:
    """OpenAI's event types skyloop sends; 400 for an unknown one, ``unsupported_feature`` for the others."""
    if not types:
        raise InvalidInputError(f"{param}: name at least one event type", param=param)
    for t in types:
        if t not in OPENAI_EVENT_TYPES:
            raise InvalidInputError(f"{param}: unknown event type '{t}'", param=param)
        if t not in EVENT_TYPES:
            raise UnsupportedFeatureError(
                f"the webhook event type '{t}'", param=param, detail=f"skyloop sends {', '.join(EVENT_TYPES)}"
            )
    return sorted(set(types), key=types.index)


def view(endpoint: Endpoint, *, with_secret: bool = False) -> dict[str, Any]:
    """A ``WebhookEndpoint`` (``WebhookEndpointWithSecret`` on create and rotate)."""
    out: dict[str, Any] = {
        "id": endpoint.id,
        "object": "webhook_endpoint",
        "created_at": endpoint.created_at,
        "event_types": endpoint.events or list(EVENT_TYPES),
        "name": endpoint.name or endpoint.description or "",
        "signing_secret_hint": f"{endpoint.secret[:10]}…{endpoint.secret[-4:]}",
        "url": endpoint.url,
        "updated_at": endpoint.updated_at,
    }
    if with_secret:
        out["signing_secret"] = endpoint.secret
    return out


def _records() -> WebhookRecords:
    from skyloop.webhooks.records import webhook_records

    return webhook_records()


def _endpoint(records: WebhookRecords, endpoint_id: str) -> Endpoint:
    """An endpoint of OpenAI's shape: one in Claude's format is not this API's (404, as unknown)."""
    from skyloop.errors import NotFoundError

    endpoint = service.get_endpoint(records, endpoint_id)
    if endpoint.format != "skyloop":
        raise NotFoundError(f"Webhook endpoint not found: '{endpoint_id}'")
    return endpoint


def create(body: EndpointCreate) -> dict[str, Any]:
    from skyloop.webhooks.models import CreateWebhookRequest

    types = check_types(body.event_types)
    records = _records()
    req = CreateWebhookRequest(url=body.url, events=types, description=body.name)
    made = service.create(records, deps.get_settings(), req, name=body.name)
    return view(service.get_endpoint(records, made["id"]), with_secret=True)


def retrieve(endpoint_id: str) -> dict[str, Any]:
    return view(_endpoint(_records(), endpoint_id))


def update(endpoint_id: str, body: EndpointUpdate) -> dict[str, Any]:
    """The fields sent change (a URL checked as on create); an unchanged update leaves ``updated_at``."""
    records = _records()
    endpoint = _endpoint(records, endpoint_id)
    changes: dict[str, Any] = {}
    for field in body.model_fields_set:
        if getattr(body, field) is None:
            raise InvalidInputError(f"{field} cannot be null", param=field)
    if body.event_types is not None:
        changes["events"] = check_types(body.event_types)
    if body.url is not None:
        changes["url"] = service.check_url(body.url, deps.get_settings())
    if body.name is not None:
        changes["name"] = body.name
        changes["description"] = body.name
    if any(getattr(endpoint, k) != v for k, v in changes.items()):
        changes["updated_at"] = max(int(time.time()), endpoint.updated_at + 1)
        changed = endpoint.model_copy(update=changes)
        if not records.update_endpoint(changed, expected_updated_at=endpoint.updated_at):
            from skyloop.errors import ConflictError

            raise ConflictError("the endpoint changed meanwhile; read it and try again")
        endpoint = changed
    return view(endpoint)


def list_endpoints(*, after: str | None, limit: int) -> dict[str, Any]:
    from skyloop.openai_compat.service import slice_page

    found = _records().list_endpoints(principals.list_owner(None))
    rows = [view(e) for e in reversed(found) if e.format == "skyloop"]  # newest first
    return slice_page(rows, after=after, limit=limit, what="webhook endpoint")


def delete(endpoint_id: str) -> dict[str, Any]:
    records = _records()
    endpoint = _endpoint(records, endpoint_id)
    records.delete_endpoint(endpoint.id)
    return {"id": endpoint.id, "object": "webhook_endpoint.deleted", "deleted": True}


def rotate(endpoint_id: str, body: RotateSecret) -> dict[str, Any]:
    from skyloop.webhooks.models import RotateSecretRequest

    records = _records()
    _endpoint(records, endpoint_id)
    grace = GRACE_24H_S if body.keep_old_secret_active_for_24_hours else 0
    service.rotate(records, endpoint_id, RotateSecretRequest(grace_period_s=grace))
    return view(service.get_endpoint(records, endpoint_id), with_secret=True)


def send_test(endpoint_id: str, body: SendTest) -> dict[str, Any]:
    """A sample event of the type asked for, signed and posted once now (``WebhookEndpointTestResult``)."""
    from skyloop.webhooks.models import TestWebhookRequest

    event_type = check_types([body.event_type], param="event_type")[0]
    records = _records()
    _endpoint(records, endpoint_id)
    result = service.send_test(
        records, deps.get_settings(), endpoint_id, TestWebhookRequest(), sample=_sample(event_type)
    )
    if result["status_code"] is None:
        raise InvalidInputError(
            f"the test delivery reached no answer from the endpoint: {result['error']}", param="url"
        )
    return {
        "object": "webhook_endpoint.test",
        "event_type": event_type,
        "status_code": result["status_code"],
        "success": True,
        "webhook_endpoint_id": endpoint_id,
    }


def _sample(event_type: str) -> Any:
    """A sample ``agent.session.*`` event of ``event_type`` (about no real session)."""
    from skyloop.lifecycle_events import models as m

    extra: dict[str, dict[str, Any]] = {
        m.SESSION_CREATED: {},
        m.SESSION_IN_PROGRESS: {"turn_id": "resp_test"},
        m.SESSION_ACTION_REQUIRED: {
            "turn_id": "resp_test",
            "required_action": {
                "type": "function_call",
                "calls": [{"call_id": "call_test", "name": "lookup", "arguments": "{}"}],
            },
        },
        m.SESSION_IDLE: {"turn_id": "resp_test", "status": "completed"},
        m.SESSION_FAILED: {"turn_id": "resp_test", "error": {"code": "test", "message": "a sample failure"}},
    }

    def make(event_id: str, created_at: int) -> Any:
        data = {"id": "sess_test", "owner": principals.current().name, **extra[event_type]}
        return m.parse(
            {"id": event_id, "object": "event", "type": event_type, "created_at": created_at, "data": data}
        )

    return make
