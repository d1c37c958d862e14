"""Request bodies and queries of the Claude Managed Agents routes, as the pinned SDK's ``*_params`` define them.

Every model forbids unknown fields (a typo is a 400, not silently dropped). Fields skyloop accepts
but cannot honour (skills, multiagent, vaults, resources, outcomes...) are typed loosely here and
refused by name in :mod:`.service`; everything here is only the shape.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from skyloop.anthropic_compat.toolset import BUILTINS

Effort = Literal["low", "medium", "high", "xhigh", "max"]
MetadataKey = Annotated[str, Field(min_length=1, max_length=64)]
Metadata = Annotated[dict[MetadataKey, Annotated[str, Field(max_length=512)]], Field(max_length=16)]
MetadataPatch = Annotated[
    dict[MetadataKey, Annotated[str, Field(max_length=512)] | None], Field(max_length=16)
]
TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"
MAX_TOOLS = 256


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """A shape skyloop only names in an error (its fields are not read)."""

    model_config = ConfigDict(extra="allow")


# ----------------------------------------------------------------------------------- agents
class EffortObject(_Strict):
    type: Effort


class ModelConfig(_Strict):
    id: str = Field(min_length=1, max_length=256)
    effort: Effort | EffortObject | None = None
    inference_geo: str | None = None
    speed: Literal["standard", "fast"] | None = None

    def effort_name(self) -> str | None:
        return self.effort.type if isinstance(self.effort, EffortObject) else self.effort


class PermissionPolicy(_Strict):
    type: Literal["always_allow", "always_ask", "auto"]


class ToolsetDefault(_Strict):
    enabled: bool | None = None
    permission_policy: PermissionPolicy | None = None


class ToolConfig(_Open):
    """One built-in's config; web_fetch/web_search options are only named in errors."""

    name: Literal["bash", "edit", "read", "write", "glob", "grep", "web_fetch", "web_search"]
    type: str | None = None
    enabled: bool | None = None
    permission_policy: PermissionPolicy | None = None

    @field_validator("type")
    @classmethod
    def _same(cls, value: str | None) -> str | None:
        if value is not None and value not in BUILTINS:
            raise ValueError(f"must be one of {list(BUILTINS)}")
        return value


class Toolset(_Strict):
    type: Literal["agent_toolset_20260401"]
    configs: list[ToolConfig] | None = None
    default_config: ToolsetDefault | None = None


class McpToolConfig(_Strict):
    name: str = Field(min_length=1, max_length=256)
    enabled: bool | None = None
    permission_policy: PermissionPolicy | None = None


class McpToolset(_Strict):
    type: Literal["mcp_toolset"]
    mcp_server_name: str = Field(min_length=1, max_length=64)
    configs: list[McpToolConfig] | None = None
    default_config: ToolsetDefault | None = None


class InputSchema(_Open):
    type: Literal["object"]


class CustomTool(_Strict):
    type: Literal["custom"]
    name: str = Field(pattern=TOOL_NAME)
    description: str = Field(max_length=10_000)
    input_schema: InputSchema


Tool = Annotated[Toolset | McpToolset | CustomTool, Field(discriminator="type")]


class McpServer(_Strict):
    type: Literal["url"]
    name: str = Field(pattern=TOOL_NAME)
    url: str = Field(min_length=1, max_length=2048)


class AgentBody(_Strict):
    """``agents.create`` and ``agents.update`` (every field optional here; create requires two)."""

    model: str | ModelConfig | None = None
    name: str | None = Field(default=None, min_length=1, max_length=256)
    description: str | None = Field(default=None, max_length=2048)
    system: str | None = Field(default=None, max_length=200_000)
    tools: list[Tool] | None = Field(default=None, max_length=MAX_TOOLS)
    mcp_servers: list[McpServer] | None = Field(default=None, max_length=20)
    metadata: MetadataPatch | None = None
    skills: list[Any] | None = None
    multiagent: Any = None
    execution_identity: Any = None
    version: int | None = Field(default=None, ge=1)

    def model_config_of(self) -> ModelConfig | None:
        if self.model is None:
            return None
        return ModelConfig(id=self.model) if isinstance(self.model, str) else self.model


class AgentRetrieveQuery(_Strict):
    version: int | None = Field(default=None, ge=1)


class PageQuery(_Strict):
    limit: int = Field(default=20, ge=1, le=100)
    page: str | None = None


class AgentListQuery(PageQuery):
    include_archived: bool = False
    created_at_gte: str | None = Field(default=None, alias="created_at[gte]")
    created_at_lte: str | None = Field(default=None, alias="created_at[lte]")


# ----------------------------------------------------------------------------- environments
class Networking(_Strict):
    type: Literal["unrestricted", "limited"]
    allow_mcp_servers: bool | None = None
    allow_package_managers: bool | None = None
    allowed_hosts: list[str] | None = None


class Packages(_Strict):
    type: Literal["packages"] | None = None
    apt: list[str] | None = None
    cargo: list[str] | None = None
    gem: list[str] | None = None
    go: list[str] | None = None
    npm: list[str] | None = None
    pip: list[str] | None = None


class CloudConfig(_Strict):
    type: Literal["cloud"]
    networking: Networking | None = None
    packages: Packages | None = None


class SelfHostedConfig(_Strict):
    type: Literal["self_hosted"]


EnvironmentConfig = Annotated[CloudConfig | SelfHostedConfig, Field(discriminator="type")]


class EnvironmentBody(_Strict):
    name: str | None = Field(default=None, min_length=1, max_length=256)
    config: EnvironmentConfig | None = None
    description: str | None = Field(default=None, max_length=2048)
    metadata: MetadataPatch | None = None
    scope: Literal["organization", "account"] | None = None


class EnvironmentListQuery(PageQuery):
    include_archived: bool = False


# --------------------------------------------------------------------------------- sessions
class AgentRef(_Strict):
    type: Literal["agent"]
    id: str = Field(min_length=1)
    version: int | None = Field(default=None, ge=1)


class AgentOverrides(_Open):
    type: Literal["agent_with_overrides"]
    id: str = Field(min_length=1)


class Money(_Strict):
    amount: str = Field(pattern=r"^\d{1,9}(\.\d{1,2})?$")
    currency: Literal["USD"]


class Budget(_Strict):
    type: Literal["limit"]
    max_list_cost: Money

    def cents(self) -> int:
        whole, _, frac = self.max_list_cost.amount.partition(".")
        return int(whole) * 100 + int((frac + "00")[:2])


class SessionCreate(_Strict):
    agent: str | AgentRef | AgentOverrides
    environment_id: str = Field(min_length=1)
    budget: Budget | None = None
    initial_events: list[dict[str, Any]] | None = Field(default=None, max_length=50)
    metadata: Metadata | None = None
    resources: list[dict[str, Any]] | None = None
    title: str | None = Field(default=None, max_length=500)
    vault_ids: list[str] | None = None


class SessionUpdate(_Strict):
    agent: dict[str, Any] | None = None
    budget: Budget | None = None
    metadata: MetadataPatch | None = None
    title: str | None = Field(default=None, max_length=500)
    vault_ids: list[str] | None = None


class SessionListQuery(PageQuery):
    agent_id: str | None = None
    agent_version: int | None = Field(default=None, ge=1)
    include_archived: bool = False
    order: Literal["asc", "desc"] = "desc"
    statuses: list[Literal["rescheduling", "running", "idle", "terminated"]] | None = Field(
        default=None, alias="statuses[]"
    )
    deployment_id: str | None = None
    memory_store_id: str | None = None
    created_at_gt: str | None = Field(default=None, alias="created_at[gt]")
    created_at_gte: str | None = Field(default=None, alias="created_at[gte]")
    created_at_lt: str | None = Field(default=None, alias="created_at[lt]")
    created_at_lte: str | None = Field(default=None, alias="created_at[lte]")


# ----------------------------------------------------------------------------------- events
class TextBlock(_Strict):
    type: Literal["text"]
    text: str


class ImageSource(_Open):
    type: Literal["base64", "url", "file"]


class ImageBlock(_Strict):
    type: Literal["image"]
    source: ImageSource


class DocumentBlock(_Open):
    type: Literal["document"]
    source: dict[str, Any]


class RedactedBlock(_Strict):
    type: Literal["redacted"]


class SearchResultBlock(_Open):
    type: Literal["search_result"]


MessageBlock = Annotated[TextBlock | ImageBlock | DocumentBlock | RedactedBlock, Field(discriminator="type")]
ResultBlock = Annotated[
    TextBlock | ImageBlock | DocumentBlock | SearchResultBlock, Field(discriminator="type")
]


class UserMessage(_Strict):
    type: Literal["user.message"]
    content: list[MessageBlock] = Field(min_length=1)


class UserInterrupt(_Strict):
    type: Literal["user.interrupt"]
    session_thread_id: str | None = None


class UserToolConfirmation(_Strict):
    type: Literal["user.tool_confirmation"]
    tool_use_id: str = Field(min_length=1)
    result: Literal["allow", "deny"]
    deny_message: str | None = Field(default=None, max_length=10_000)
    session_thread_id: str | None = None


class UserCustomToolResult(_Strict):
    type: Literal["user.custom_tool_result"]
    custom_tool_use_id: str = Field(min_length=1)
    content: list[ResultBlock] | None = None
    is_error: bool | None = None
    session_thread_id: str | None = None


class UserToolResult(_Strict):
    type: Literal["user.tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: list[ResultBlock] | None = None
    is_error: bool | None = None
    session_thread_id: str | None = None


class Unsupported(_Open):
    type: Literal["user.define_outcome", "system.message"]


SendEvent = Annotated[
    UserMessage | UserInterrupt | UserToolConfirmation | UserCustomToolResult | UserToolResult | Unsupported,
    Field(discriminator="type"),
]


class EventsSend(_Strict):
    events: list[SendEvent] = Field(min_length=1, max_length=50)


class EventListQuery(_Strict):
    limit: int = Field(default=20, ge=1, le=1000)
    page: str | None = None
    order: Literal["asc", "desc"] = "asc"
    types: list[str] | None = Field(default=None, alias="types[]")
    created_at_gt: str | None = Field(default=None, alias="created_at[gt]")
    created_at_gte: str | None = Field(default=None, alias="created_at[gte]")
    created_at_lt: str | None = Field(default=None, alias="created_at[lt]")
    created_at_lte: str | None = Field(default=None, alias="created_at[lte]")


class StreamQuery(_Strict):
    event_deltas: list[Literal["agent.message", "agent.thinking"]] | None = Field(
        default=None, alias="event_deltas[]"
    )
