"""Webhook endpoints, deliveries and attempts; and the API's request bodies for them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from skyloop.webhooks.formats import MAX_TYPES, SKYLOOP, WebhookFormat, check_types

EndpointStatus = Literal["enabled", "disabled"]
DeliveryStatus = Literal["pending", "retrying", "succeeded", "dead"]
MAX_URL = 2048
MAX_DESCRIPTION = 512


class Endpoint(BaseModel):
    """A webhook endpoint as stored: where to post, what, signed with which secrets, in what state."""

    id: str
    owner: str
    url: str
    # what is posted (skyloop.webhooks.formats); rows written before formats existed read as skyloop
    format: WebhookFormat = SKYLOOP
    events: list[str] = Field(default_factory=list)  # types of its format; empty: every type
    description: str | None = None
    name: str | None = None  # OpenAI's webhook endpoint name (/openai/v1/webhook_endpoints)
    all_sessions: bool = False  # an admin's endpoint that takes every principal's sessions
    secret: str
    previous_secret: str | None = None  # still signed with until previous_secret_expires_at (a rotation)
    previous_secret_expires_at: int | None = None
    status: EndpointStatus = "enabled"
    disabled_reason: str | None = None
    failing_since: int | None = None  # the first failed attempt since the last success
    created_at: int
    updated_at: int

    def wants(self, event_type: str) -> bool:
        """Whether to send an event of ``event_type`` (a type of the endpoint's format) now."""
        return self.status == "enabled" and (not self.events or event_type in self.events)

    def secrets(self, now: float) -> list[str]:
        """What to sign with now: the secret, and the previous one during its grace period."""
        live = [self.secret]
        if self.previous_secret and (self.previous_secret_expires_at or 0) > now:
            live.append(self.previous_secret)
        return live

    def to_api(self, *, with_secret: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "webhook_endpoint",
            "url": self.url,
            "format": self.format,
            "events": self.events,
            "description": self.description,
            "all_sessions": self.all_sessions,
            "status": self.status,
            "disabled_reason": self.disabled_reason,
            "owner": self.owner,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "secret_hint": f"{self.secret[:10]}…",
        }
        if with_secret:
            body["secret"] = self.secret
        return body


class Attempt(BaseModel):
    """One try at delivering: what the receiver answered, how fast, and when the next try is due."""

    attempt: int
    at: float
    status: Literal["succeeded", "failed"]
    response_code: int | None = None
    latency_ms: int
    error: str | None = None
    next_retry_at: float | None = None


class Delivery(BaseModel):
    """One event's delivery to one endpoint (``id`` = the event's id = the ``webhook-id`` header).

    ``id``, ``event_type`` and ``body`` are the event as the endpoint's format has it (Claude's id and
    ``data.type`` for an ``anthropic`` endpoint).
    """

    id: str
    endpoint_id: str
    event_type: str
    session_id: str | None = None
    body: str  # the event's JSON exactly as signed and posted on every attempt
    status: DeliveryStatus = "pending"
    attempts: list[Attempt] = Field(default_factory=list)
    next_retry_at: float | None = None
    created_at: int
    queued: bool = False  # its queue message was sent (the publisher sends once, then marks it)

    @property
    def group(self) -> str:
        """Deliveries of one group are attempted in order: one endpoint, one session."""
        return f"{self.endpoint_id}:{self.session_id or '-'}"

    def to_api(self) -> dict[str, Any]:
        import json

        return {
            "id": self.id,
            "object": "webhook_delivery",
            "endpoint_id": self.endpoint_id,
            "event_type": self.event_type,
            "session_id": self.session_id,
            "status": self.status,
            "attempts": [a.model_dump() for a in self.attempts],
            "next_retry_at": self.next_retry_at,
            "created_at": self.created_at,
            "event": json.loads(self.body),
        }


def _check_events(value: list[str] | None, info: ValidationInfo) -> list[str] | None:
    """Against the request's format (a field before ``events``, so validated first); without one (an update
    that keeps it, or a malformed one already refused) the service checks against the endpoint's."""
    fmt = info.data.get("format")
    return value if fmt is None else check_types(value, fmt)


class CreateWebhookRequest(BaseModel):
    """``POST /v1/webhooks``."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=MAX_URL)
    format: WebhookFormat = Field(
        default=SKYLOOP,
        description="what is posted: `skyloop` (the `agent.session.*` events) or `anthropic` (Claude Managed "
        "Agents' webhook events, `session.*` types)",
    )
    events: list[str] | None = Field(
        default=None, max_length=MAX_TYPES, description="types of the format; default: all"
    )
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION)
    all_sessions: bool = Field(default=False, description="admin only: every principal's sessions")

    _types = field_validator("events")(_check_events)


class UpdateWebhookRequest(BaseModel):
    """``PATCH /v1/webhooks/{id}``: ``enabled: true`` re-enables an endpoint that was disabled."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(default=None, min_length=1, max_length=MAX_URL)
    format: WebhookFormat | None = Field(
        default=None, description="a new format; an endpoint that filters types needs `events` of it too"
    )
    events: list[str] | None = Field(default=None, max_length=MAX_TYPES)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION)
    all_sessions: bool | None = None
    enabled: bool | None = None

    _types = field_validator("events")(_check_events)


class RotateSecretRequest(BaseModel):
    """``POST /v1/webhooks/{id}/rotate_secret``: the old secret keeps signing for the grace period."""

    model_config = ConfigDict(extra="forbid")

    grace_period_s: int = Field(default=24 * 3600, ge=0, le=7 * 24 * 3600)


class TestWebhookRequest(BaseModel):
    """``POST /v1/webhooks/{id}/test``."""

    model_config = ConfigDict(extra="forbid")

    event_type: Literal["skyloop.webhook.test"] = "skyloop.webhook.test"


class WebhookListQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str | None = Field(default=None, min_length=1, max_length=256)


class DeliveryListQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=20, ge=1, le=100)
    after: str | None = Field(default=None, min_length=1, max_length=64)
    status: DeliveryStatus | None = None
