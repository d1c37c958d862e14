"""OpenAI agents as skyloop agents.

* ``instructions`` is the prompt, ``model`` the executor's model, ``function``
  tools the agent's client tools (``runtime: client``: the client runs them and
  the turn parks), ``mcp`` tools its MCP servers (run by the ``run_tool`` step).
* What only the OpenAI object has (its name, metadata, the requested model name,
  reasoning summary, verbosity, service tier) rides in the spec's ``openai`` key.
* skyloop agent versions are immutable (warm functions cache them): an update
  registers a new version of the same skyloop name, and the OpenAI id (the first
  version's) resolves to the newest version whose ``openai.id`` names it.
* A bare model name gets the deployment's default executor
  (``SKYLOOP_DEFAULT_EXECUTOR``: a JSON executor without a key; when it names a
  ``model`` that model answers, whatever name was requested; unset: the
  ``openai-agents`` harness with the function's ``OPENAI_API_KEY``). The local
  stack sets it to the example agent's executor.

The versions and the default executor are :mod:`skyloop.agent_versions`' (Claude's
agents and the schedules use them too); this module maps OpenAI's shapes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from skyloop.agent_versions import default_executor, openai_id, openai_meta
from skyloop.errors import InvalidInputError
from skyloop.ids import new_id

if TYPE_CHECKING:
    from skyloop.models.agent import Agent, AgentSpec
    from skyloop.openai_compat.requests import AgentConfig, McpTool

NAME_PREFIX = "openai-"  # skyloop names of agents made here: one name per OpenAI agent (its versions)


def _mcp_entry(tool: McpTool) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "mcp", "url": tool.transport.server_url}
    if tool.transport.headers:
        entry["headers"] = dict(tool.transport.headers)
    if tool.allowed_tools is not None:
        entry["tools"] = list(tool.allowed_tools)
    return entry


def tools_map(tools: list[Any] | None) -> dict[str, Any] | None:
    """OpenAI tools as a skyloop spec's ``tools`` map (checked by :mod:`.unsupported` first)."""
    from skyloop.openai_compat.requests import FunctionTool, McpTool

    if not tools:
        return None
    out: dict[str, Any] = {}
    for n, tool in enumerate(tools):
        name = tool.name if isinstance(tool, FunctionTool) else tool.server_label
        if name in out:
            raise InvalidInputError(f"tools: the name '{name}' is used twice", param=f"tools[{n}]")
        if isinstance(tool, FunctionTool):
            out[name] = {
                "type": "function",
                "runtime": "client",
                "description": tool.description,
                "parameters": tool.parameters,
            }
        elif isinstance(tool, McpTool):
            out[name] = _mcp_entry(tool)
    return out


def build_spec(config: AgentConfig, *, base: Agent | None, first_id: str | None, inline: bool) -> AgentSpec:
    """The skyloop spec of an OpenAI agent config (over ``base``'s, field by field, for updates)."""
    from skyloop.models.agent import AgentSpec

    sent = config.model_fields_set
    old = base.spec.model_dump(mode="json", exclude={"executor": {"auth": {"api_key"}}}) if base else {}
    meta = dict(openai_meta(base)) if base else {}
    if "model" in sent and config.model:
        executor = default_executor(config.model)
        meta["model"] = config.model
    elif base is not None:
        executor = old["executor"]
    else:
        raise InvalidInputError("model is required", param="model")
    if "reasoning" in sent:
        executor["reasoning_effort"] = config.reasoning.effort if config.reasoning else None
        meta["reasoning_summary"] = config.reasoning.summary if config.reasoning else None
    for field in ("name", "metadata", "service_tier"):
        if field in sent:
            meta[field] = getattr(config, field)
    if "text" in sent:
        meta["verbosity"] = config.text.verbosity if config.text else None
    meta["id"] = first_id
    meta["inline"] = inline
    meta.setdefault("created_at", int(time.time()))
    spec: dict[str, Any] = {
        **{k: v for k, v in old.items() if k not in ("name", "executor")},
        "name": base.name if base is not None and not inline else f"{NAME_PREFIX}{new_id()[:20]}",
        "executor": executor,
        "openai": meta,
    }
    if "instructions" in sent:
        spec["prompt"] = config.instructions or ""
    if "tools" in sent:
        spec["tools"] = tools_map(config.tools)
    return AgentSpec.model_validate(spec)


def function_tools(spec_tools: Any) -> list[dict[str, Any]]:
    from skyloop.models.tools import declared_client_tools

    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description or "",
            "parameters": t.parameters or {"type": "object", "properties": {}},
            "defer_loading": False,
        }
        for t in declared_client_tools(spec_tools)
    ]


def mcp_tools(spec_tools: Any, *, persisted: bool) -> list[dict[str, Any]]:
    from skyloop.models.tools import declared_tools

    out = []
    for label, server in declared_tools(spec_tools).mcp.items():
        transport: dict[str, Any] = {"type": "http", "server_url": server.url}
        if persisted:  # plain headers only: a {secret: NAME} header is never shown
            transport["headers"] = {k: v for k, v in server.headers.items() if isinstance(v, str)}
        out.append(
            {
                "type": "mcp",
                "server_label": label,
                "transport": transport,
                "allowed_tools": server.tools,
                "connection_origin": "service",
                "credential_id": None,
                "request_metadata": {},
                "required": False,
            }
        )
    return out


def tools_of(agent: Agent, *, persisted: bool) -> list[dict[str, Any]]:
    """The agent's tools in OpenAI's shapes (Lambda tools have none: they are not listed)."""
    return function_tools(agent.spec.tools) + mcp_tools(agent.spec.tools, persisted=persisted)


def common_fields(agent: Agent, *, model: str | None = None) -> dict[str, Any]:
    meta = openai_meta(agent)
    executor = agent.spec.executor
    return {
        "instructions": agent.spec.prompt or None,
        "model": model or meta.get("model") or executor.model,
        "multi_agent": {"enabled": False, "max_concurrent_subagents": None},
        "name": meta.get("name") if meta else agent.name,
        "reasoning": {"effort": executor.reasoning_effort, "summary": meta.get("reasoning_summary")},
        "service_tier": meta.get("service_tier") or "auto",
        "text": {"format": {"type": "text"}, "verbosity": meta.get("verbosity") or "medium"},
        "compaction": {"async": False},
        "experimental": {"time_awareness": False},
    }


def to_openai(agent: Agent) -> dict[str, Any]:
    """An ``Agent`` object (``openai.types.beta.Agent``)."""
    meta = openai_meta(agent)
    return {
        "id": openai_id(agent),
        "object": "agent",
        "created_at": int(meta.get("created_at") or agent.created_at),
        "updated_at": agent.created_at,
        "metadata": meta.get("metadata") or {},
        "tools": tools_of(agent, persisted=True),
        **common_fields(agent),
    }


def is_listed(agent: Agent) -> bool:
    """Agents listed here: not a session's inline agent, and only the newest version of an OpenAI one."""
    return not openai_meta(agent).get("inline")
