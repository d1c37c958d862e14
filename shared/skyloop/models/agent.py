"""Agent specs: what a bundle's YAML or a ``POST /v1/agents`` body declares.

Secrets (``executor.auth.api_key``) are ``SecretStr`` so they never leak
through ``repr``, logs or ``model_dump``. A registered agent keeps no key at
all: the key goes to Secrets Manager and the agent keeps the secret's name
(``Agent.api_key_secret``); only the model step reads it back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from skyloop.models.environment import HostedEnvironment  # noqa: TC001  (pydantic needs it at runtime)
from skyloop.pricing import ModelPrice  # noqa: TC001  (pydantic needs it at runtime)

SUPPORTED_HARNESSES = ("openai-agents", "chat-completions", "bedrock-converse", "scripted")
AGENT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class AgentAuth(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["api_key"] = "api_key"
    api_key: SecretStr | None = Field(default=None, min_length=1, max_length=8192)  # omit it for no key
    base_url: str | None = Field(default=None, max_length=2048)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http(s) URL")
        return value


class AgentExecutor(BaseModel):
    model_config = ConfigDict(extra="allow")

    harness: str = "openai-agents"
    model: str = Field(min_length=1, max_length=2048)  # a model id, or a Bedrock inference-profile ARN
    profile: str | None = ""
    auth: AgentAuth | None = None
    region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")  # bedrock-converse only
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    temperature: float | None = Field(default=None, ge=0, le=2)
    # False for a text-only model: messages with input_image are then refused (400 image_not_supported)
    accepts_images: bool = True
    # openai-agents: reasoning={"effort": ...}; chat-completions: reasoning_effort; bedrock-converse: none.
    # A session's PATCHed reasoning_effort replaces it for that session's model calls.
    reasoning_effort: str | None = Field(default=None, pattern=r"^(none|minimal|low|medium|high|xhigh|max)$")
    # USD per million tokens, for spend control (skyloop.pricing); over the deployment's table
    pricing: ModelPrice | None = None

    @field_validator("harness")
    @classmethod
    def _known_harness(cls, value: str) -> str:
        if value not in SUPPORTED_HARNESSES:
            raise ValueError(
                f"harness {value!r} is not supported (supported: {', '.join(SUPPORTED_HARNESSES)})"
            )
        return value

    @model_validator(mode="after")
    def _valid_script(self) -> AgentExecutor:
        """A ``scripted`` executor's ``script`` is checked here, at registration (a 400, not a failed turn)."""
        if self.harness == "scripted":
            from skyloop.models.script import validate_script  # only agents that use it import it

            validate_script((self.model_extra or {}).get("script"))
        return self


class AgentLimits(BaseModel):
    """Per-agent guards; the defaults are the documented service defaults."""

    model_config = ConfigDict(extra="forbid")

    client_tool_timeout_s: int = Field(default=3600, ge=1, le=7 * 24 * 3600)
    # Off by default. When set, a turn parked on client calls or approvals fails with
    # ``client_heartbeat_timeout`` once no heartbeat (``{"type": "heartbeat"}``; the skyloop SDK sends one
    # every 10 s while it runs a call) arrived for this long: a vanished client is noticed long before the
    # deadline. Must be shorter than the deadline (Step Functions requires it).
    client_heartbeat_s: int | None = Field(default=None, ge=2, le=7 * 24 * 3600)
    max_iterations: int = Field(default=50, ge=1, le=1000)

    @model_validator(mode="after")
    def _heartbeat_within_deadline(self) -> AgentLimits:
        if self.client_heartbeat_s is not None and self.client_heartbeat_s >= self.client_tool_timeout_s:
            raise ValueError(
                f"limits.client_heartbeat_s ({self.client_heartbeat_s}) must be shorter than "
                f"limits.client_tool_timeout_s ({self.client_tool_timeout_s})"
            )
        return self


# The top-level keys an agent spec may have: skyloop's own, the OpenAI Agents API's and Claude Managed
# Agents' record of an agent made through them, and omnigent's config.yaml keys (its bundles carry them;
# skyloop keeps them as given).
SPEC_KEYS = frozenset(
    {"name", "prompt", "description", "executor", "tools", "limits", "environment", "openai", "anthropic"}
)
OMNIGENT_SPEC_KEYS = frozenset(
    {
        "spec_version", "llm", "interaction", "params", "instructions", "skills", "skills_filter",
        "mcp_servers", "local_tools", "sub_agents", "agents", "pass_history", "pass_histories",
        "max_sessions", "compaction", "guardrails", "policies", "async", "os_env", "model_egress",
        "terminals", "timers", "spawn", "agent_session_sharing", "labels", "label_schema",
    }
)  # fmt: skip


class AgentSpec(BaseModel):
    """A validated agent definition. Registration refuses a top-level key outside ``SPEC_KEYS`` and
    ``OMNIGENT_SPEC_KEYS`` (:func:`unknown_keys`); a stored spec keeps what it was stored with."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=AGENT_NAME_PATTERN)
    prompt: str = Field(default="", max_length=200_000)
    description: str | None = None
    executor: AgentExecutor
    tools: Any = None
    limits: AgentLimits = Field(default_factory=AgentLimits)
    # where its hosted tools run (skyloop.environments); a session may override it
    environment: HostedEnvironment | None = None

    def public_dict(self) -> dict[str, Any]:
        """The spec without secrets, for API responses."""
        data = self.model_dump(mode="json", exclude={"executor": {"auth": {"api_key"}}})
        return data


def unknown_keys(raw: dict[str, Any]) -> list[str]:
    """The top-level keys of a spec being registered that neither skyloop nor omnigent reads."""
    return sorted(str(k) for k in raw if k not in SPEC_KEYS and k not in OMNIGENT_SPEC_KEYS)


class Agent(BaseModel):
    """A stored agent version: every upload of a name creates a new one."""

    id: str
    name: str
    created_at: int
    spec: AgentSpec
    version: int = 1  # 1 for a name's first upload by its owner, then one more per upload (omnigent)
    owner: str = "local"  # the principal the agent version belongs to
    api_key_secret: str | None = (
        None  # the Secrets Manager secret holding the model key (see skyloop.secrets)
    )
    # when it was archived (Claude Managed Agents' agents.archive): still runs, not listed, no new sessions
    archived_at: int | None = None

    def to_api(self) -> dict[str, Any]:
        """``tools`` is omnigent's list (each with ``runtime``); ``tool_spec`` the spec's own form."""
        from skyloop.models.tools import tool_entries

        spec = self.spec
        return {
            "id": self.id,
            "object": "agent",
            "name": self.name,
            "version": self.version,
            "description": spec.description,
            "created_at": self.created_at,
            "updated_at": self.created_at,
            "harness": spec.executor.harness,
            "model": spec.executor.model,
            "prompt": spec.prompt,
            "tools": tool_entries(spec.tools),
            "tool_spec": spec.tools,
            "environment": spec.environment.model_dump(mode="json") if spec.environment else None,
            "limits": spec.limits.model_dump(),
            "base_url": spec.executor.auth.base_url if spec.executor.auth else None,
        }
