"""Sessions, conversation items and the turn/call records behind a parked turn."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skyloop.models.environment import HostedEnvironment  # noqa: TC001  (pydantic needs it at runtime)

SessionStatus = Literal["idle", "running", "failed"]
ItemType = Literal["message", "function_call", "function_call_output"]


class TaskError(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class Session(BaseModel):
    """The session row; ``last_seq`` is the stream cursor every write advances."""

    id: str
    agent_id: str
    agent_name: str
    status: SessionStatus = "idle"
    created_at: int
    updated_at: int
    title: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    runner_id: str | None = None
    archived: bool = False
    active_response_id: str | None = None
    last_response_id: str | None = None
    last_task_error: TaskError | None = None
    last_seq: int = 0
    input_seq: int = 0
    owner: str = "local"  # the principal the session belongs to
    input_tokens: int = 0  # over every model call of the session
    output_tokens: int = 0
    workspace: str | None = None  # the client's starting directory, recorded for display (omnigent)
    reasoning_effort: str | None = None  # applies to the session's next model calls
    model_override: str | None = None  # replaces the agent's model on the next model calls
    external_session_id: str | None = None  # a wrapper's native session id (omnigent), stored as given
    parent_session_id: str | None = None  # the session this one was forked from
    # Spend control (the OpenAI Agents API's ``spend_control``, skyloop.pricing): a limit in USD cents that
    # stops a turn before its next model call once reached; the spend so far, in millionths of a USD.
    spend_limit_cents: int | None = None
    spend_micros: int = 0
    # The hosted environment of this session, when it overrides its agent's (skyloop.environments)
    environment: HostedEnvironment | None = None
    environment_id: str | None = None  # the Claude Managed Agents environment it was opened in


# The output a call gets when its turn was interrupted: harnesses show it to the model as an error.
CANCELLED_OUTPUT = "[Cancelled — tool execution was interrupted.]"


class ConversationItem(BaseModel):
    """A persisted item; ``position`` orders items and equals the seq that published it."""

    id: str
    type: ItemType
    status: Literal["completed"] = "completed"
    response_id: str | None = None
    created_at: int
    data: dict[str, Any]
    position: int = 0

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "status": self.status,
            "response_id": self.response_id,
            "created_at": self.created_at,
            "data": self.data,
        }

    def to_flat(self) -> dict[str, Any]:
        flat: dict[str, Any] = {
            "id": self.id,
            "response_id": self.response_id,
            "type": self.type,
            "status": self.status,
            "created_at": self.created_at,
        }
        flat.update({k: v for k, v in self.data.items() if v is not None})
        return flat


class SessionFile(BaseModel):
    """A file uploaded into a session: metadata in the table, bytes in the blob bucket."""

    id: str
    session_id: str
    filename: str
    bytes: int
    content_type: str
    created_at: int
    sha256: str

    def to_api(self) -> dict[str, Any]:
        """omnigent's ``session.resource`` shape with ``type: "file"``."""
        return {
            "id": self.id,
            "object": "session.resource",
            "type": "file",
            "session_id": self.session_id,
            "name": self.filename,
            "metadata": {
                "filename": self.filename,
                "bytes": self.bytes,
                "created_at": self.created_at,
                "content_type": self.content_type,
                "sha256": self.sha256,
                "source_metadata": None,
            },
        }


class ClientTool(BaseModel):
    """A client-side function tool, stored in the flat Responses-API form."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,256}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None

    def to_responses_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "name": self.name,
            "description": self.description or "",
            "parameters": self.parameters or {"type": "object", "properties": {}},
            "strict": False,
        }


class Turn(BaseModel):
    """One turn (= one Step Functions execution), keyed by its response id."""

    session_id: str
    response_id: str
    agent_id: str
    created_at: int
    # the session's event seq where the turn began (set by the store): orders turns begun in one second
    start_seq: int | None = None
    tools: list[ClientTool] = Field(default_factory=list)
    model_override: str | None = None  # the starting message's per-event model (omnigent), over the session's
    task_token: str | None = None
    await_iteration: int | None = None
    unanswered: int = 0
    resumed_iteration: int | None = None
    # the iteration of the last model call whose result landed (its decision, recorded with the result)
    decided_iteration: int | None = None
    input_tokens: int = 0  # over the turn's model calls
    output_tokens: int = 0
    spend_micros: int = 0  # what the turn's model calls cost, in millionths of a USD (skyloop.pricing)
    # how the turn ended (written with its terminal event): completed | failed | cancelled, when, why
    status: str | None = None
    completed_at: int | None = None
    error: dict[str, Any] | None = None
    # a cost cap (a scheduled task's max_cost_usd): the turn stops once its model calls cost this much
    max_cost_usd: float | None = None

    def usage(self) -> dict[str, int]:
        """Responses-shaped usage of the whole turn."""
        return token_usage(self.input_tokens, self.output_tokens)


def turn_order(turn: Turn) -> tuple[int, int, str]:
    """Oldest first: ``created_at`` is in seconds, so two turns of one second go by where they began."""
    return (turn.created_at, turn.start_seq or 0, turn.response_id)


def token_usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


class PendingCall(BaseModel):
    """A tool call of a model response; ``output`` is set exactly once.

    ``kind`` says who runs it: the client (the turn parks on it) or the server
    (the turn's ``RunTools`` state runs it). A server call whose tool needs
    approval starts with ``approval == "pending"``; the turn parks on it too
    until the client approves (it then runs) or denies (the denial is its output).
    """

    session_id: str
    response_id: str
    call_id: str
    iteration: int
    index: int
    name: str
    arguments: str
    item_id: str
    anchor_seq: int = 0  # the last seq the model call that made it had read (conversation order)
    output: str | None = None
    answered_at: int | None = None
    cancelled: bool = False
    kind: Literal["client", "server"] = "client"
    approval: Literal["pending", "approved", "denied"] | None = None
    # what the tool reported beside its output (a hosted command's exit code, duration, full output's file)
    details: dict[str, Any] | None = None
