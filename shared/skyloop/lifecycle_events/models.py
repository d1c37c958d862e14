"""The lifecycle events: OpenAI's ``agent.session.*`` webhook shape, plus what lets a receiver act at once.

The envelope is OpenAI's (``{"id", "object": "event", "type", "created_at",
"data": {"id": <session id>, ...}}``, see ``openai/types/webhooks/``), so a
receiver written for OpenAI's Agents API parses these with
``client.webhooks.unwrap`` unchanged. Under ``data`` skyloop adds the turn
id, and for ``action_required`` every call the turn waits for (id, name,
arguments) or every approval it waits for, so the receiver can answer from
the event alone; usage and error where they apply. skyloop's own types carry
the ``skyloop.`` prefix.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

SESSION_CREATED: Final = "agent.session.created"
SESSION_IN_PROGRESS: Final = "agent.session.in_progress"
SESSION_ACTION_REQUIRED: Final = "agent.session.action_required"
SESSION_IDLE: Final = "agent.session.idle"
SESSION_FAILED: Final = "agent.session.failed"
WEBHOOK_TEST: Final = "skyloop.webhook.test"

ENVIRONMENT_TYPE = "none"  # OpenAI's field: a session without a workspace runs in no environment


class _Data(BaseModel):
    model_config = ConfigDict(extra="allow")  # receivers read what they know; newer fields may follow

    id: str = Field(description="The session's id.")
    environment_type: str = Field(
        default=ENVIRONMENT_TYPE,
        description="OpenAI's field, as the OpenAI API shows the session: `openai_hosted` for a session "
        "with its own hosted environment, `self_hosted` for one with a workspace, else `none`.",
    )
    environment_id: str | None = Field(
        default=None, description="`env_<session id>` when the session has an environment."
    )
    owner: str | None = Field(default=None, description="The principal that owns the session.")
    agent_id: str | None = None


class _TurnData(_Data):
    turn_id: str | None = Field(default=None, description="The turn (response) id this event is about.")


class Usage(BaseModel):
    model_config = ConfigDict(extra="allow")

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class TurnError(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class ActionCall(BaseModel):
    """A client-side tool call the turn waits for: answer it with a ``function_call_output`` event."""

    call_id: str
    name: str
    arguments: str = Field(description="JSON text, as the model wrote it.")


class ApprovalRequest(BaseModel):
    """A server tool waiting for approval: answer it with an ``approval`` event naming ``id``."""

    id: str = Field(description="The elicitation id to answer (`approve_<call_id>`).")
    call_id: str
    tool: str
    arguments: str


class RequiredAction(BaseModel):
    type: Literal["function_call", "mcp_approval_request"]
    calls: list[ActionCall] | None = Field(
        default=None, description="With `function_call`: every call of the model response the turn waits for."
    )
    approvals: list[ApprovalRequest] | None = Field(
        default=None, description="With `mcp_approval_request`: every approval the turn waits for."
    )


class CreatedData(_Data):
    agent_name: str | None = None
    title: str | None = None
    parent_session_id: str | None = None


class InProgressData(_TurnData):
    pass


class ActionRequiredData(_TurnData):
    required_action: RequiredAction


class IdleData(_TurnData):
    status: Literal["completed", "cancelled"] | None = Field(
        default=None, description="How the turn ended: `completed`, or `cancelled` by an interrupt."
    )
    usage: Usage | None = None


class FailedData(_TurnData):
    error: TurnError | None = None
    usage: Usage | None = None


class TestData(BaseModel):
    model_config = ConfigDict(extra="allow")

    webhook_endpoint_id: str
    message: str = "a test event from skyloop"


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(description="The event's id; also the `webhook-id` header of every delivery attempt.")
    object: Literal["event"] = "event"
    created_at: int = Field(description="Unix seconds when the state change was recorded.")


class SessionCreated(_Event):
    """A session was created (by the API, a fork or an import)."""

    type: Literal["agent.session.created"] = SESSION_CREATED
    data: CreatedData


class SessionInProgress(_Event):
    """A turn started: the session is running."""

    type: Literal["agent.session.in_progress"] = SESSION_IN_PROGRESS
    data: InProgressData


class SessionActionRequired(_Event):
    """The turn waits for someone: client-side tool calls to run, or server tools to approve."""

    type: Literal["agent.session.action_required"] = SESSION_ACTION_REQUIRED
    data: ActionRequiredData


class SessionIdle(_Event):
    """A turn completed or was cancelled: the session is idle."""

    type: Literal["agent.session.idle"] = SESSION_IDLE
    data: IdleData


class SessionFailed(_Event):
    """A turn failed (model error, deadline, max iterations...): the session is failed until the next turn."""

    type: Literal["agent.session.failed"] = SESSION_FAILED
    data: FailedData


class WebhookTest(_Event):
    """Sent by ``POST /v1/webhooks/{id}/test`` only."""

    type: Literal["skyloop.webhook.test"] = WEBHOOK_TEST
    data: TestData


LifecycleEvent = Annotated[
    SessionCreated | SessionInProgress | SessionActionRequired | SessionIdle | SessionFailed | WebhookTest,
    Field(discriminator="type"),
]

EVENT_MODELS: dict[str, type[_Event]] = {
    SESSION_CREATED: SessionCreated,
    SESSION_IN_PROGRESS: SessionInProgress,
    SESSION_ACTION_REQUIRED: SessionActionRequired,
    SESSION_IDLE: SessionIdle,
    SESSION_FAILED: SessionFailed,
    WEBHOOK_TEST: WebhookTest,
}
# What an endpoint may subscribe to (the test event is sent on request, whatever the subscription).
EVENT_TYPES: tuple[str, ...] = (
    SESSION_CREATED,
    SESSION_IN_PROGRESS,
    SESSION_ACTION_REQUIRED,
    SESSION_IDLE,
    SESSION_FAILED,
)


def parse(data: dict[str, Any] | str | bytes) -> Any:
    """A lifecycle event from its JSON (typed by ``type``); unknown types raise ``ValueError``."""
    from pydantic import TypeAdapter

    return (
        TypeAdapter(LifecycleEvent).validate_json(data)
        if not isinstance(data, dict)
        else (TypeAdapter(LifecycleEvent).validate_python(data))
    )
