"""Typed views of what the service returns: snapshots, items, agents, runners, pages and stream events.

Every model allows extra fields and most fields are optional, so a newer
server adding fields never breaks an older client; stream events and output
items fall back to :class:`UnknownEvent` / :class:`UnknownItem` for types this
client does not know yet.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)

__all__ = [
    "Agent",
    "AgentPage",
    "CreatedSession",
    "DeletedSession",
    "EventAccepted",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "Health",
    "Item",
    "ItemPage",
    "MessageItem",
    "OutputItem",
    "OutputItemDone",
    "OutputTextDelta",
    "Page",
    "ResponseCancelled",
    "ResponseCompleted",
    "ResponseError",
    "ResponseFailed",
    "ResponseInProgress",
    "ResponseIncomplete",
    "ResponseInfo",
    "Runner",
    "RunnerStatus",
    "SessionHeartbeat",
    "SessionInputConsumed",
    "SessionInterrupted",
    "SessionPage",
    "SessionSnapshot",
    "SessionStatus",
    "SessionSummary",
    "StreamEvent",
    "TaskError",
    "TokenUsage",
    "UnknownEvent",
    "UnknownItem",
    "parse_event",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


T = TypeVar("T")


# --------------------------------------------------------------------------- REST
class Health(_Model):
    status: str


class TaskError(_Model):
    """Why the last turn failed (``last_task_error``, ``response.error``, ``session.status`` error)."""

    code: str = "unknown"
    message: str = ""


ResponseError = TaskError


class Item(_Model):
    """A conversation item; list pages send it flattened and are folded back into ``data``."""

    id: str
    type: str
    status: str = "completed"
    response_id: str | None = None
    created_at: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _fold_flat(cls, value: Any) -> Any:
        if isinstance(value, dict) and "data" not in value:
            core = {"id", "type", "status", "response_id", "created_at"}
            folded = {k: v for k, v in value.items() if k in core}
            folded["data"] = {k: v for k, v in value.items() if k not in core}
            return folded
        return value

    @property
    def role(self) -> str | None:
        return self.data.get("role")

    @property
    def text(self) -> str:
        """The text of a message item (input or output blocks), or ``""``."""
        return _blocks_text(self.data.get("content"))


class SessionSummary(_Model):
    """A session as ``GET /v1/sessions`` lists it."""

    id: str
    agent_id: str | None = None
    agent_name: str | None = None
    status: str = "idle"
    created_at: int | None = None
    updated_at: int | None = None
    title: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    runner_id: str | None = None
    archived: bool = False


class TokenUsage(_Model):
    """Tokens the model calls used (Responses-API names)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    response_id: str | None = None  # set on a turn's usage


class SessionSnapshot(SessionSummary):
    """``GET /v1/sessions/{id}``: the newest items plus ``last_event_id``, the matching stream cursor."""

    object: str = "session"
    runner_online: bool | None = None
    items: list[Item] = Field(default_factory=list)
    last_task_error: TaskError | None = None
    active_response_id: str | None = None
    last_event_id: int = 0
    usage: TokenUsage | None = None  # the session's model calls, all turns
    turn_usage: TokenUsage | None = None  # the active (or last) turn's
    last_total_tokens: int | None = None


class CreatedSession(_Model):
    """The answer to a bundle upload: the new agent version and its first session."""

    session_id: str
    agent_id: str
    agent_name: str


class DeletedSession(_Model):
    id: str
    object: str = "conversation.deleted"
    deleted: bool = True


class EventAccepted(_Model):
    """The 202 answer to a posted event; ``item_id`` is the message id or the answered call id."""

    queued: bool = False
    item_id: str | None = None
    parked: bool | None = None  # heartbeats: whether a turn was waiting for this client


class Agent(_Model):
    id: str
    object: str = "agent"
    name: str
    description: str | None = None
    created_at: int | None = None
    updated_at: int | None = None
    harness: str | None = None
    model: str | None = None
    prompt: str | None = None
    tools: Any = None
    limits: dict[str, Any] | None = None
    base_url: str | None = None


class Runner(_Model):
    runner_id: str
    online: bool = False
    kind: str | None = None
    harnesses: list[str] = Field(default_factory=list)


class RunnerStatus(_Model):
    runner_id: str
    online: bool = False


class Page(_Model, Generic[T]):
    """One page of a cursor-paginated list; pass ``last_id`` as ``after`` for the next."""

    object: str = "list"
    data: list[T] = Field(default_factory=list)
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


SessionPage = Page[SessionSummary]
ItemPage = Page[Item]
AgentPage = Page[Agent]


# ----------------------------------------------------------------- output items
class _OutputItem(_Model):
    id: str | None = None
    type: str
    status: str | None = None
    response_id: str | None = None


class FunctionCallItem(_OutputItem):
    """A model's tool call; ``status == "action_required"`` means the client must answer it."""

    type: Literal["function_call"] = "function_call"
    name: str
    arguments: str = "{}"
    call_id: str
    agent: str | None = None

    @property
    def action_required(self) -> bool:
        return self.status == "action_required"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; ``{}`` for empty, ``{"_raw": ...}`` when they are not a JSON object."""
        if not self.arguments or not self.arguments.strip():
            return {}
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return {"_raw": self.arguments}
        return value if isinstance(value, dict) else {"_raw": value}


class FunctionCallOutputItem(_OutputItem):
    type: Literal["function_call_output"] = "function_call_output"
    call_id: str
    output: str = ""


class MessageItem(_OutputItem):
    type: Literal["message"] = "message"
    role: str = "assistant"
    content: list[dict[str, Any]] = Field(default_factory=list)
    model: str | None = None
    created_at: int | None = None

    @property
    def text(self) -> str:
        return _blocks_text(self.content)


class UnknownItem(_OutputItem):
    """An output item of a type this client does not know."""


def _item_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in ("function_call", "function_call_output", "message") else "unknown"


OutputItem = Annotated[
    Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[MessageItem, Tag("message")]
    | Annotated[UnknownItem, Tag("unknown")],
    Discriminator(_item_tag),
]


# ---------------------------------------------------------------- stream events
class _Event(_Model):
    type: str
    sequence_number: int | None = None
    event_id: int | None = Field(default=None, exclude=True)
    """The SSE ``id:`` (the event's seq); ``None`` for heartbeats, which are never stored."""


class SessionHeartbeat(_Event):
    type: Literal["session.heartbeat"] = "session.heartbeat"
    server_time: str | None = None


class SessionStatus(_Event):
    type: Literal["session.status"] = "session.status"
    status: str
    conversation_id: str | None = None
    response_id: str | None = None
    error: TaskError | None = None


class InputConsumedData(_Model):
    item_id: str
    type: str = "message"
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        return _blocks_text(self.data.get("content"))


class SessionInputConsumed(_Event):
    type: Literal["session.input.consumed"] = "session.input.consumed"
    data: InputConsumedData


class SessionInterrupted(_Event):
    type: Literal["session.interrupted"] = "session.interrupted"
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def response_id(self) -> str | None:
        return self.data.get("response_id")


class ResponseInfo(_Model):
    id: str
    object: str = "response"
    status: str | None = None
    model: str | None = None
    created_at: int | None = None
    completed_at: int | None = None
    error: TaskError | None = None


class _ResponseEvent(_Event):
    response: ResponseInfo

    @property
    def response_id(self) -> str:
        return self.response.id


class ResponseInProgress(_ResponseEvent):
    type: Literal["response.in_progress"] = "response.in_progress"


class ResponseCompleted(_ResponseEvent):
    type: Literal["response.completed"] = "response.completed"


class ResponseFailed(_ResponseEvent):
    type: Literal["response.failed"] = "response.failed"

    @property
    def error(self) -> TaskError | None:
        return self.response.error


class ResponseCancelled(_ResponseEvent):
    type: Literal["response.cancelled"] = "response.cancelled"


class ResponseIncomplete(_ResponseEvent):
    type: Literal["response.incomplete"] = "response.incomplete"


class OutputTextDelta(_Event):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    delta: str = ""
    message_id: str | None = None
    response_id: str | None = None


class OutputItemDone(_Event):
    type: Literal["response.output_item.done"] = "response.output_item.done"
    item: OutputItem


class UnknownEvent(_Event):
    """Any event this client cannot type (a newer server's event, or a malformed one); kept as-is."""


_EVENT_TYPES: dict[str, type[_Event]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        SessionHeartbeat,
        SessionStatus,
        SessionInputConsumed,
        SessionInterrupted,
        ResponseInProgress,
        OutputTextDelta,
        OutputItemDone,
        ResponseCompleted,
        ResponseFailed,
        ResponseCancelled,
        ResponseIncomplete,
    )
}
TERMINAL_EVENT_TYPES = frozenset(
    {"response.completed", "response.failed", "response.cancelled", "response.incomplete"}
)


def _event_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _EVENT_TYPES else "unknown"


StreamEvent = Annotated[
    Annotated[SessionHeartbeat, Tag("session.heartbeat")]
    | Annotated[SessionStatus, Tag("session.status")]
    | Annotated[SessionInputConsumed, Tag("session.input.consumed")]
    | Annotated[SessionInterrupted, Tag("session.interrupted")]
    | Annotated[ResponseInProgress, Tag("response.in_progress")]
    | Annotated[OutputTextDelta, Tag("response.output_text.delta")]
    | Annotated[OutputItemDone, Tag("response.output_item.done")]
    | Annotated[ResponseCompleted, Tag("response.completed")]
    | Annotated[ResponseFailed, Tag("response.failed")]
    | Annotated[ResponseCancelled, Tag("response.cancelled")]
    | Annotated[ResponseIncomplete, Tag("response.incomplete")]
    | Annotated[UnknownEvent, Tag("unknown")],
    Discriminator(_event_tag),
]
"""Every typed stream event; dispatch on the class (``isinstance``) or on ``.type``."""

_adapter: TypeAdapter[Any] | None = None


def _event_adapter() -> TypeAdapter[Any]:
    """Built on first use: compiling the union is a noticeable share of the import otherwise."""
    global _adapter
    if _adapter is None:
        _adapter = TypeAdapter(StreamEvent)
    return _adapter


def parse_event(payload: Any, *, event_id: int | None = None, event: str | None = None) -> Any:
    """Type one stream payload; never raises, so an odd event cannot break a client's loop."""
    if not isinstance(payload, dict):
        payload = {"type": event or "unknown", "data": payload}
    elif "type" not in payload and event:
        payload = {**payload, "type": event}
    try:
        parsed = _event_adapter().validate_python(payload)
    except ValidationError:
        parsed = UnknownEvent.model_validate({**payload, "type": str(payload.get("type", "unknown"))})
    parsed.event_id = event_id
    return parsed


def is_terminal(event: Any) -> bool:
    return getattr(event, "type", None) in TERMINAL_EVENT_TYPES


def _blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(block.get("text") or "")
        for block in content
        if isinstance(block, dict) and block.get("type") in ("input_text", "output_text", "text")
    )


# ------------------------------------------------------------------------- webhooks
class WebhookEndpoint(_Model):
    """A webhook endpoint; ``secret`` only in the answers to create and rotate."""

    id: str
    object: str = "webhook_endpoint"
    url: str
    events: list[str] = Field(default_factory=list)
    description: str | None = None
    all_sessions: bool = False
    status: str = "enabled"
    disabled_reason: str | None = None
    owner: str | None = None
    created_at: int | None = None
    updated_at: int | None = None
    secret_hint: str | None = None
    secret: str | None = None


class WebhookAttempt(_Model):
    attempt: int
    at: float
    status: str
    response_code: int | None = None
    latency_ms: int = 0
    error: str | None = None
    next_retry_at: float | None = None


class WebhookDelivery(_Model):
    """One event's delivery to one endpoint (``id`` is the event id, the ``webhook-id`` header)."""

    id: str
    object: str = "webhook_delivery"
    endpoint_id: str
    event_type: str
    session_id: str | None = None
    status: str
    attempts: list[WebhookAttempt] = Field(default_factory=list)
    next_retry_at: float | None = None
    created_at: int | None = None
    event: dict[str, Any] = Field(default_factory=dict)


class WebhookTestResult(_Model):
    object: str = "webhook_endpoint.test"
    webhook_endpoint_id: str
    event_type: str
    event_id: str
    success: bool
    status_code: int | None = None
    latency_ms: int | None = None
    error: str | None = None


class DeletedWebhookEndpoint(_Model):
    id: str
    object: str = "webhook_endpoint.deleted"
    deleted: bool = True


class WebhookRedelivery(_Model):
    id: str
    object: str = "webhook_delivery"
    status: str = "pending"
    queued: bool = True


WebhookEndpointPage = Page[WebhookEndpoint]
WebhookDeliveryPage = Page[WebhookDelivery]
