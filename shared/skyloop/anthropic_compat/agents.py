"""Claude agents as skyloop agents: one skyloop agent name per Claude agent, its versions skyloop's.

* ``system`` is the prompt, ``model`` the executor's model (a bare model id gets the deployment's
  default executor, as OpenAI's agents do: :func:`skyloop.agent_versions.default_executor`),
  ``effort`` its reasoning effort; custom tools are ``runtime: client`` tools, the agent toolset
  skyloop's hosted built-ins (:mod:`.toolset`), an MCP toolset with its ``mcp_servers`` entry an MCP
  server (``approval: required`` unless its policy is ``always_allow``).
* What only the Claude object has (its display name, metadata, the requested model, the toolset's
  configs, when it was archived) rides in the spec's ``anthropic`` key.
* The Claude id is the first version's skyloop id and resolves to the newest version whose
  ``anthropic.id`` names it; ``version`` is skyloop's version number of the name. An agent
  registered through ``/v1/agents`` is usable here by its own id, and the reverse.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from skyloop.anthropic_compat import toolset
from skyloop.anthropic_compat.errors import UnsupportedFeatureError
from skyloop.errors import ConflictError, InvalidInputError, NotFoundError
from skyloop.ids import new_id

if TYPE_CHECKING:
    from skyloop.anthropic_compat.requests import AgentBody, McpToolset, Toolset
    from skyloop.models.agent import Agent, AgentSpec
    from skyloop.store import Store

NAME_PREFIX = "anthropic-"  # skyloop names of agents made here: one name per Claude agent (its versions)
MAX_SCAN = 10_000  # agent versions one listing looks through


def rfc3339(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def meta_of(agent: Agent) -> dict[str, Any]:
    extra = agent.spec.model_extra or {}
    meta = extra.get("anthropic")
    return meta if isinstance(meta, dict) else {}


def claude_id(agent: Agent) -> str:
    """The id Claude's API shows: the first version's for agents made or updated here, else its own."""
    return str(meta_of(agent).get("id") or agent.id)


def is_listed(agent: Agent) -> bool:
    return not meta_of(agent).get("inline")


def _scan(store: Store) -> list[Agent]:
    """The caller's agent versions, newest first (at most :data:`MAX_SCAN`)."""
    from skyloop import principals

    owner = principals.list_owner(None)
    found: list[Agent] = []
    cursor: str | None = None
    while len(found) < MAX_SCAN:
        batch, more = store.list_agents(owner=owner, limit=100, descending=True, after=cursor)
        found += batch
        if not more or not batch:
            break
        cursor = batch[-1].id
    return found


def versions(store: Store, agent: Agent) -> list[Agent]:
    """Every version of the Claude agent ``agent`` is one of, newest first."""
    wanted = claude_id(agent)
    return [
        a
        for a in _scan(store)
        if a.name == agent.name and a.owner == agent.owner and claude_id(a) == wanted and is_listed(a)
    ]


def resolve(store: Store, agent_id: str, version: int | None = None) -> Agent:
    """The agent a Claude id names: its newest version, or ``version`` of it (404 if unknown)."""
    from skyloop import sessions

    agent = sessions.get_agent(store, agent_id)
    if meta_of(agent).get("id") not in (None, agent_id) or meta_of(agent).get("inline"):
        raise NotFoundError(f"Agent not found: '{agent_id}'")  # an old version's own id, or a session's
    if version is not None:
        for candidate in versions(store, agent):
            if candidate.version == version:
                return candidate
        raise NotFoundError(f"Agent '{agent_id}' has no version {version}")
    newest = store.find_agent_by_name(agent.name, owner=agent.owner)
    if newest is not None and newest.id != agent.id and claude_id(newest) == agent_id:
        return newest
    return agent


# ------------------------------------------------------------------------------ to skyloop
def _toolset(tool: Toolset, where: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The enabled built-ins ``{name: policy}`` and the default config of an agent toolset."""
    default = tool.default_config
    default_enabled = default.enabled if default and default.enabled is not None else True
    default_policy = (
        default.permission_policy.type
        if default and default.permission_policy
        else toolset.TOOLSET_DEFAULT_POLICY
    )
    configs: dict[str, Any] = {c.name: c for c in tool.configs or []}
    enabled: dict[str, str] = {}
    for name in toolset.BUILTINS:
        config = configs.get(name)
        explicit = config is not None and config.enabled is not None
        on = config.enabled if config is not None and config.enabled is not None else default_enabled
        if name in toolset.UNAVAILABLE:
            if explicit and on:
                n = list(configs).index(name)
                raise UnsupportedFeatureError(
                    f"the {name} tool",
                    param=f"{where}.configs[{n}].enabled",
                    detail="skyloop has no web access tools",
                )
            continue
        if on:
            policy = config.permission_policy.type if config and config.permission_policy else default_policy
            enabled[name] = policy
    return enabled, {"enabled": default_enabled, "policy": default_policy}


def _mcp_entry(tool: McpToolset, url: str, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A skyloop MCP server entry for one MCP toolset, and what the Claude view shows of it."""
    default = tool.default_config
    default_enabled = default.enabled if default and default.enabled is not None else True
    default_policy = (
        default.permission_policy.type
        if default and default.permission_policy
        else toolset.MCP_DEFAULT_POLICY
    )
    configs = tool.configs or []
    if default_enabled and any(c.enabled is False for c in configs):
        raise UnsupportedFeatureError(
            "disabling single MCP tools",
            param=f"{where}.configs",
            detail="set default_config.enabled to false and enable the tools to offer",
        )
    enabled = [c for c in configs if c.enabled or (c.enabled is None and default_enabled)]
    policies = {(c.permission_policy.type if c.permission_policy else default_policy) for c in enabled}
    policies = policies or {default_policy}
    if len(policies) > 1:
        raise UnsupportedFeatureError(
            "different permission policies within one MCP server", param=f"{where}.configs"
        )
    policy = policies.pop()
    entry: dict[str, Any] = {"type": "mcp", "url": url}
    if not default_enabled:
        entry["tools"] = [c.name for c in enabled]
    if toolset.asks(policy):
        entry["approval"] = "required"
    view = {
        "configs": [{"name": c.name, "policy": policy} for c in enabled],
        "default": {"enabled": default_enabled, "policy": policy if default_enabled else default_policy},
    }
    return entry, view


def _check_unsupported(body: AgentBody, prefix: str = "") -> None:
    if body.skills:
        raise UnsupportedFeatureError("skills", param=f"{prefix}skills")
    if body.multiagent is not None:
        raise UnsupportedFeatureError(
            "multiagent (subagents, workflows, advisors)", param=f"{prefix}multiagent"
        )
    identity = body.execution_identity
    if isinstance(identity, dict) and identity.get("type") not in (None, "service_account"):
        raise UnsupportedFeatureError(
            f"execution_identity {identity.get('type')}",
            param=f"{prefix}execution_identity",
            detail="tools run with the deployment's roles",
        )
    config = body.model_config_of()
    if config is not None and config.speed == "fast":
        raise UnsupportedFeatureError("fast mode", param=f"{prefix}model.speed")
    if config is not None and config.inference_geo:
        raise UnsupportedFeatureError(
            "inference_geo",
            param=f"{prefix}model.inference_geo",
            detail="models run in the deployment's region",
        )


def tools_map(body: AgentBody) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The skyloop ``tools`` map of a Claude agent's tools and MCP servers, and the meta its view reads."""
    from skyloop.anthropic_compat.requests import CustomTool, McpToolset, Toolset

    servers = {s.name: s.url for s in body.mcp_servers or []}
    out: dict[str, Any] = {}
    meta: dict[str, Any] = {"toolset": None, "mcp": {}}
    used: set[str] = set()
    for n, tool in enumerate(body.tools or []):
        where = f"tools[{n}]"
        if isinstance(tool, Toolset):
            if meta["toolset"] is not None:
                raise InvalidInputError("tools: the agent toolset is given twice", param=where)
            enabled, default = _toolset(tool, where)
            meta["toolset"] = {"enabled": enabled, "default": default}
            entries = toolset.hosted_form(enabled)
        elif isinstance(tool, McpToolset):
            name = tool.mcp_server_name
            if name not in servers:
                raise InvalidInputError(
                    f"{where}.mcp_server_name: no MCP server named '{name}' in mcp_servers",
                    param=f"{where}.mcp_server_name",
                )
            entry, view = _mcp_entry(tool, servers[name], where)
            meta["mcp"][name] = view
            used.add(name)
            entries = {name: entry}
        elif isinstance(tool, CustomTool):
            entries = {
                tool.name: {
                    "type": "function",
                    "runtime": "client",
                    "description": tool.description,
                    "parameters": tool.input_schema.model_dump(exclude_none=True),
                }
            }
        for key, entry in entries.items():
            if key in out:
                raise InvalidInputError(f"tools: the name '{key}' is used twice", param=where)
            out[key] = entry
    unused = [name for name in servers if name not in used]
    if unused:
        raise InvalidInputError(
            f"mcp_servers: '{unused[0]}' is not used by any mcp_toolset", param="mcp_servers"
        )
    return out or None, meta


def _patched(old: dict[str, str], patch: dict[str, str | None] | None, *, replace: bool) -> dict[str, str]:
    """Metadata after a create (``replace``) or an update's patch (a null value deletes the key)."""
    base = {} if replace else dict(old)
    for key, value in (patch or {}).items():
        if value is None or (value == "" and not replace):
            base.pop(key, None)
        else:
            base[key] = value
    if len(base) > 16:
        raise InvalidInputError("metadata: at most 16 keys", param="metadata")
    return base


def build_spec(body: AgentBody, *, base: Agent | None) -> AgentSpec:
    """The skyloop spec of a Claude agent body (over ``base``'s, field by field, for updates)."""
    from skyloop.agent_versions import default_executor
    from skyloop.models.agent import AgentSpec

    _check_unsupported(body)
    sent = body.model_fields_set
    old = base.spec.model_dump(mode="json", exclude={"executor": {"auth": {"api_key"}}}) if base else {}
    old.pop("anthropic", None)
    meta = dict(meta_of(base)) if base else {}
    config = body.model_config_of()
    if config is not None:
        executor = default_executor(config.id)
        executor["reasoning_effort"] = config.effort_name()
        meta["model"] = config.id
        meta["speed"] = config.speed
    elif base is not None:
        executor = old["executor"]
    else:
        raise InvalidInputError("model is required", param="model")
    if "name" in sent:
        if not body.name:
            raise InvalidInputError("name must not be empty", param="name")
        meta["name"] = body.name
    meta["metadata"] = _patched(meta.get("metadata") or {}, body.metadata, replace=base is None)
    meta["id"] = claude_id(base) if base is not None else None
    meta.setdefault("created_at", int(time.time()))
    spec: dict[str, Any] = {
        **{k: v for k, v in old.items() if k not in ("name", "executor")},
        "name": base.name if base is not None else f"{NAME_PREFIX}{new_id()[:20]}",
        "executor": executor,
    }
    if "system" in sent or base is None:
        spec["prompt"] = body.system or ""
    if "description" in sent:
        spec["description"] = body.description or None
    if "tools" in sent or "mcp_servers" in sent or base is None:
        if base is not None and ("tools" not in sent or "mcp_servers" not in sent):
            body = _with_old_tools(body, base)
        tools, tool_meta = tools_map(body)
        spec["tools"] = tools
        meta.update(tool_meta)
    spec["anthropic"] = meta
    return AgentSpec.model_validate(spec)


def _with_old_tools(body: AgentBody, base: Agent) -> AgentBody:
    """An update that replaces only ``tools`` or only ``mcp_servers`` keeps the other as it was."""
    from skyloop.anthropic_compat.requests import AgentBody as Body

    view = to_claude(base)
    merged = {
        "tools": [t for t in view["tools"] if t["type"] != toolset.TOOLSET or _any_enabled(t)],
        "mcp_servers": view["mcp_servers"],
    }
    for field in ("tools", "mcp_servers"):
        if field in body.model_fields_set:
            merged[field] = getattr(body, field) or []
    return Body.model_validate(
        {k: v for k, v in body.model_dump(exclude_unset=True).items() if k not in merged} | merged
    )


def _any_enabled(view: dict[str, Any]) -> bool:
    return any(c["enabled"] for c in view["configs"])


def check_version(body: AgentBody, current: Agent) -> None:
    if body.version is not None and body.version != current.version:
        raise ConflictError(
            f"version {body.version} is not the agent's current version ({current.version}); "
            "retrieve the agent and apply the update to its current version"
        )


# ---------------------------------------------------------------------------------- to Claude
def _model(agent: Agent) -> dict[str, Any]:
    meta = meta_of(agent)
    executor = agent.spec.executor
    effort = executor.reasoning_effort
    return {
        "id": meta.get("model") or executor.model,
        "effort": {"type": effort} if effort in ("low", "medium", "high", "xhigh", "max") else None,
        "speed": meta.get("speed") or "standard",
    }


def _policy_of(entry: Any) -> str:
    return "always_ask" if getattr(entry, "approval", "never") == "required" else "always_allow"


def tools_view(agent: Agent) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``tools`` and ``mcp_servers`` as Claude shows them (Lambda tools have no Claude form: not listed)."""
    from skyloop.models.tools import declared_client_tools, declared_tools

    meta = meta_of(agent)
    declared = declared_tools(agent.spec.tools)
    tools: list[dict[str, Any]] = []
    saved = meta.get("toolset")
    if saved is not None:
        tools.append(toolset.toolset_view(saved["enabled"], saved["default"]))
    elif declared.hosted:
        enabled = {
            toolset.CLAUDE_NAME[n]: _policy_of(t)
            for n, t in declared.hosted.items()
            if n in toolset.CLAUDE_NAME
        }
        tools.append(
            toolset.toolset_view(enabled, {"enabled": False, "policy": toolset.TOOLSET_DEFAULT_POLICY})
        )
    servers: list[dict[str, Any]] = []
    for name, server in declared.mcp.items():
        servers.append({"type": "url", "name": name, "url": server.url})
        view = (meta.get("mcp") or {}).get(name)
        policy = _policy_of(server)
        if view is None:
            names = server.tools or []
            view = {
                "configs": [{"name": t, "policy": policy} for t in names],
                "default": {"enabled": server.tools is None, "policy": policy},
            }
        tools.append(
            {
                "type": "mcp_toolset",
                "mcp_server_name": name,
                "configs": [
                    {"name": c["name"], "enabled": True, "permission_policy": {"type": c["policy"]}}
                    for c in view["configs"]
                ],
                "default_config": {
                    "enabled": bool(view["default"]["enabled"]),
                    "permission_policy": {"type": view["default"]["policy"]},
                },
            }
        )
    for client in declared_client_tools(agent.spec.tools):
        if client.name in toolset.CLIENT_TOOLS and meta.get("inline"):
            continue  # a self-hosted session's built-ins: shown as the toolset
        tools.append(
            {
                "type": "custom",
                "name": client.name,
                "description": client.description or "",
                "input_schema": client.parameters or {"type": "object", "properties": {}},
            }
        )
    return tools, servers


def common_fields(agent: Agent) -> dict[str, Any]:
    meta = meta_of(agent)
    tools, servers = tools_view(agent)
    return {
        "id": claude_id(agent),
        "name": meta.get("name") or agent.name,
        "description": agent.spec.description,
        "system": agent.spec.prompt or None,
        "model": _model(agent),
        "tools": tools,
        "mcp_servers": servers,
        "skills": [],
        "execution_identity": {"type": "service_account"},
        "multiagent": None,
        "version": int(meta.get("version") or agent.version),
    }


def to_claude(agent: Agent) -> dict[str, Any]:
    """A ``BetaManagedAgentsAgent``."""
    meta = meta_of(agent)
    return {
        **common_fields(agent),
        "type": "agent",
        "metadata": dict(meta.get("metadata") or {}),
        "created_at": rfc3339(meta.get("created_at") or agent.created_at),
        "updated_at": rfc3339(agent.created_at),
        "archived_at": rfc3339(agent.archived_at),
    }


def session_agent(agent: Agent) -> dict[str, Any]:
    """A ``BetaManagedAgentsSessionAgent``: the version a session runs."""
    return {**common_fields(agent), "type": "agent"}


def is_archived(agent: Agent) -> bool:
    return agent.archived_at is not None
