"""Request bodies of the OpenAI routes, as the pinned SDK's ``*_params`` types define them.

Every model forbids unknown fields (a typo is a 400, not silently dropped).
Fields skyloop accepts but cannot honour are checked by :mod:`.unsupported`,
which names the feature; everything here is only the shape.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
ServiceTier = Literal["auto", "default", "flex", "priority", "fast", "ultrafast"]
Metadata = Annotated[
    dict[Annotated[str, Field(min_length=1, max_length=64)], Annotated[str, Field(max_length=512)]],
    Field(max_length=16),
]
TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """A shape skyloop only names in an error (its fields are not read)."""

    model_config = ConfigDict(extra="allow")


class Reasoning(_Strict):
    effort: Effort | None = None
    summary: Literal["concise", "detailed", "auto"] | None = None


class TextFormat(_Open):
    type: Literal["text", "json_schema"]


class Text(_Strict):
    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class Compaction(_Strict):
    async_: bool | None = Field(default=None, alias="async")


class Experimental(_Strict):
    time_awareness: bool | None = None


class MultiAgent(_Strict):
    enabled: bool
    max_concurrent_subagents: int | None = None


class FunctionTool(_Strict):
    type: Literal["function"]
    name: str = Field(pattern=TOOL_NAME)
    description: str = Field(max_length=10_000)
    parameters: dict[str, Any]
    defer_loading: bool = False
    async_: bool | None = Field(default=None, alias="async")


class McpTransport(_Strict):
    type: Literal["http", "stdio"]
    server_url: str | None = Field(default=None, max_length=2048)
    headers: dict[str, str] | None = None
    authorization: str | None = Field(default=None, max_length=8192)
    command: str | None = None
    cwd: str | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None
    env_vars: list[str] | None = None


class McpTool(_Strict):
    type: Literal["mcp"]
    server_label: str = Field(pattern=TOOL_NAME)
    transport: McpTransport
    allowed_tools: list[str] | None = None
    connection_origin: Literal["service", "environment"] | None = None
    credential_id: str | None = None
    request_metadata: dict[str, Any] | None = None
    required: bool = False


class OtherTool(_Open):
    type: Literal["tool_search", "programmatic_tool_calling", "web_search", "computer_use", "automations"]


Tool = Annotated[FunctionTool | McpTool | OtherTool, Field(discriminator="type")]


class AgentConfig(_Strict):
    """What an agent is made of: ``agents.create``/``update`` and a session's inline ``agent``."""

    model: str | None = Field(default=None, min_length=1, max_length=2048)
    instructions: str | None = Field(default=None, max_length=200_000)
    metadata: Metadata | None = None
    name: str | None = Field(default=None, max_length=256)
    reasoning: Reasoning | None = None
    service_tier: ServiceTier | None = None
    text: Text | None = None
    tools: list[Tool] | None = Field(default=None, max_length=128)
    compaction: Compaction | None = None
    experimental: Experimental | None = None
    multi_agent: MultiAgent | None = None


class Environment(_Open):
    type: Literal["none", "self_hosted", "openai_hosted"]
    workspace_directory: str | None = Field(default=None, max_length=4096)
    capability_directories: list[str] | None = None


class SpendControl(_Strict):
    limit: int | None = Field(ge=1, le=100_000_000)


class InputText(_Strict):
    type: Literal["input_text"]
    text: str = Field(max_length=1_000_000)


class InputImage(_Strict):
    type: Literal["input_image"]
    image_url: str = Field(max_length=20_000_000)


Content = Annotated[InputText | InputImage, Field(discriminator="type")]


class InputMessage(_Strict):
    role: Literal["user"]
    content: list[Content] = Field(min_length=1, max_length=100)
    type: Literal["message"] = "message"


class SessionCreate(_Strict):
    environment: Environment
    agent: AgentConfig | None = None
    agent_id: str | None = None
    input: str | list[InputMessage] | None = None
    metadata: Metadata | None = None
    prompt_cache_options: dict[str, Any] | None = None
    review: Literal["none", "auto_review"] | None = None
    spend_control: SpendControl | None = None
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    vault_ids: list[str] | None = None


class SessionAgentUpdate(_Strict):
    model: str | None = Field(default=None, min_length=1, max_length=2048)
    reasoning: Reasoning | None = None
    service_tier: ServiceTier | None = None
    tools: list[Tool] | None = None


class SessionUpdate(_Strict):
    agent: SessionAgentUpdate | None = None
    metadata: Metadata | None = None
    prompt_cache_options: dict[str, Any] | None = None
    review: Literal["none", "auto_review"] | None = None
    spend_control: SpendControl | None = None
    vault_ids: list[str] | None = None


class MessageInput(_Strict):
    type: Literal["agent.session.input.message"]
    input: list[InputMessage] = Field(min_length=1, max_length=16)


class ToolResultInput(_Strict):
    type: Literal["agent.session.input.tool_result"]
    call_id: str = Field(min_length=1, max_length=256)
    turn_id: str = Field(min_length=1, max_length=256)
    success: bool
    output: str | list[Content] | None = None
    error: str | None = Field(default=None, max_length=200_000)


class CancelInput(_Strict):
    type: Literal["agent.session.input.cancel"]


class McpDecision(_Strict):
    type: Literal["mcp_tool_call"]
    decision: Literal["approve", "deny", "cancel"]


class McpApprovalInput(_Strict):
    type: Literal["agent.session.input.mcp_approval_request_result"]
    request_id: str = Field(min_length=1, max_length=512)
    response: McpDecision


class ComputerUseApprovalInput(_Open):
    type: Literal["agent.session.input.computer_use_approval_request_result"]


SessionInput = Annotated[
    MessageInput | ToolResultInput | CancelInput | McpApprovalInput | ComputerUseApprovalInput,
    Field(discriminator="type"),
]


class EventsCreate(_Strict):
    events: list[SessionInput] = Field(min_length=1, max_length=32)


class ListQuery(_Strict):
    after: str | None = None
    limit: int = Field(default=20, ge=1, le=100)
    order: Literal["asc", "desc"] = "desc"


class SessionListQuery(ListQuery):
    agent_id: str | None = None


class StreamQuery(_Strict):
    include_obfuscation: bool | None = None
    after: str | None = None  # skyloop's: the same cursor as Last-Event-ID


# ------------------------------------------------------------------------------ automations
class AutomationAgent(_Strict):
    """``AutomationTargetParamNewSessionAgent``: an agent config without a name or metadata."""

    model: str | None = Field(default=None, min_length=1, max_length=2048)
    instructions: str | None = Field(default=None, max_length=200_000)
    reasoning: Reasoning | None = None
    service_tier: ServiceTier | None = None
    text: Text | None = None
    tools: list[Tool] | None = Field(default=None, max_length=128)
    compaction: Compaction | None = None
    experimental: Experimental | None = None
    multi_agent: MultiAgent | None = None


class NewSessionTarget(_Strict):
    type: Literal["new_session"]
    environment: Environment
    input: list[InputMessage] = Field(min_length=1, max_length=16)
    agent: AutomationAgent | None = None
    agent_id: str | None = Field(default=None, min_length=1, max_length=64)
    metadata: Metadata | None = None
    vault_ids: list[str] | None = None


class ExistingSessionTarget(_Strict):
    type: Literal["existing_session"]
    instructions: str = Field(min_length=1, max_length=100_000)
    session_id: str = Field(min_length=1, max_length=64)


AutomationTargetIn = Annotated[NewSessionTarget | ExistingSessionTarget, Field(discriminator="type")]


class AutomationCreate(_Strict):
    """``automations.create``: ``periodic`` (cron ``expression`` in ``timezone``) or ``once`` (``run_at``)."""

    type: Literal["periodic", "once"]
    name: str = Field(min_length=1, max_length=200)
    target: AutomationTargetIn
    expression: str | None = Field(default=None, max_length=256)
    timezone: str | None = Field(default=None, max_length=64)
    run_at: int | None = None
    metadata: Metadata | None = None


class AutomationUpdate(_Strict):
    """``automations.update``: the fields sent change; ``target`` and ``metadata`` are replaced whole."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    target: AutomationTargetIn | None = None
    expression: str | None = Field(default=None, max_length=256)
    timezone: str | None = Field(default=None, max_length=64)
    run_at: int | None = None
    metadata: Metadata | None = None


class AutomationListQuery(ListQuery):
    session_id: str | None = None
