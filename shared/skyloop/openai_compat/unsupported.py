"""What skyloop's OpenAI Agents API does not do: each a 400 in OpenAI's shape naming the feature.

skyloop runs agents on the user's own AWS account with the user's own model;
what only OpenAI's hosted service has (its environments, hosted tools, its
multi-agent runtime, vaults) is refused up front, never accepted and ignored.
``docs/openai.md`` lists the same table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyloop.openai_compat.errors import UnsupportedFeatureError

if TYPE_CHECKING:
    from skyloop.openai_compat.requests import AgentConfig, Environment, SessionAgentUpdate

TOOL_FEATURES = {
    "web_search": "web search (the web_search tool)",
    "computer_use": "computer use (the computer_use tool)",
    "tool_search": "tool search (the tool_search tool)",
    "programmatic_tool_calling": "programmatic tool calling",
    "automations": "the automations tool",
}

# Resources under /openai/v1 skyloop does not serve, by the path segment that names them.
PATH_FEATURES = {
    "environments": "OpenAI-hosted environments and environment templates (/agents/environments)",
    "vaults": "vaults and their credentials (/agents/vaults)",
    "subagents": "subagents (/sessions/{id}/subagents)",
    "artifacts": "session artifacts (/sessions/{id}/artifacts)",
    "traces": "session traces (/sessions/{id}/traces)",
}


def for_path(path: str) -> UnsupportedFeatureError | None:
    """The error for a path that names a resource skyloop does not serve, if it does."""
    parts = path.split("/")
    for segment, feature in PATH_FEATURES.items():
        if segment in parts:
            return UnsupportedFeatureError(feature)
    return None


def check_tools(tools: list[object] | None, where: str) -> None:
    from skyloop.openai_compat.requests import FunctionTool, McpTool

    for n, tool in enumerate(tools or []):
        param = f"{where}[{n}]"
        if isinstance(tool, FunctionTool):
            if tool.defer_loading:
                raise UnsupportedFeatureError("deferred function loading (defer_loading)", param=param)
            if tool.async_:
                raise UnsupportedFeatureError("asynchronous functions (async: true)", param=param)
        elif isinstance(tool, McpTool):
            if tool.transport.type != "http" or not tool.transport.server_url:
                raise UnsupportedFeatureError(
                    "MCP over stdio",
                    param=f"{param}.transport",
                    detail="use an http transport with server_url",
                )
            if tool.connection_origin == "environment":
                raise UnsupportedFeatureError("MCP connections from an environment", param=param)
            if tool.credential_id:
                raise UnsupportedFeatureError("vault credentials (credential_id)", param=param)
            if tool.transport.authorization:
                raise UnsupportedFeatureError(
                    "an inline MCP authorization",
                    param=f"{param}.transport.authorization",
                    detail="declare the server on a /v1/agents agent with a {secret: NAME} header",
                )
        else:
            feature = TOOL_FEATURES.get(str(getattr(tool, "type", "")), "this tool")
            raise UnsupportedFeatureError(feature, param=param)


def check_agent(config: AgentConfig | SessionAgentUpdate, where: str = "") -> None:
    from skyloop.openai_compat.requests import AgentConfig

    check_tools(list(config.tools) if config.tools is not None else None, f"{where}tools")
    if not isinstance(config, AgentConfig):
        return
    if config.multi_agent is not None and config.multi_agent.enabled:
        raise UnsupportedFeatureError("subagents (multi_agent)", param=f"{where}multi_agent")
    if config.text is not None and config.text.format is not None and config.text.format.type != "text":
        raise UnsupportedFeatureError(
            "structured output (text.format json_schema, output_type)", param=f"{where}text.format"
        )
    if config.compaction is not None and config.compaction.async_:
        raise UnsupportedFeatureError("background compaction", param=f"{where}compaction")
    if config.experimental is not None and config.experimental.time_awareness:
        raise UnsupportedFeatureError("time awareness", param=f"{where}experimental.time_awareness")


# An openai_hosted environment becomes skyloop's hosted one (skyloop.environments); what has no
# counterpart there is refused by name.
HOSTED_FIELDS = {"type", "network", "files", "env", "setup_commands", "capability_directories"}
HOSTED_FEATURES = {
    "packages": "installing packages into the environment (run them as setup_commands)",
    "container_size": "choosing a container size",
    "desktop": "a desktop and browser proxy",
    "environment_id": "attaching an existing prewarmed environment",
    "environment_template_id": "environment templates",
    "plugins": "plugins",
    "skills": "skills",
}


def check_environment(environment: Environment) -> None:
    if environment.type != "openai_hosted":
        return
    extra = environment.model_extra or {}
    for name, value in extra.items():
        if value in (None, [], {}):
            continue
        if name in HOSTED_FEATURES:
            raise UnsupportedFeatureError(HOSTED_FEATURES[name], param=f"environment.{name}")
        if name not in HOSTED_FIELDS:
            raise UnsupportedFeatureError(f"environment.{name}", param=f"environment.{name}")
    if environment.capability_directories:
        raise UnsupportedFeatureError("capability directories", param="environment.capability_directories")


def check_session_options(review: str | None, vault_ids: list[str] | None) -> None:
    if review == "auto_review":
        raise UnsupportedFeatureError("automatic action review (review: auto_review)", param="review")
    if vault_ids:
        raise UnsupportedFeatureError("vaults (vault_ids)", param="vault_ids")
