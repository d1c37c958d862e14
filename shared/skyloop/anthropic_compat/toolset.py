"""The agent toolset (``agent_toolset_20260401``) as skyloop tools, per environment.

Claude's eight built-ins map onto skyloop's hosted ones by name (``bash`` is ``Bash``...):

* in a ``cloud`` environment they are skyloop's hosted built-ins, run in the session's sandbox
  (:mod:`skyloop.environments`) with nobody connected; ``always_ask`` and ``auto`` become
  ``approval: required`` (skyloop cannot judge a call: ``auto`` asks every time, as Claude's
  ``auto`` does when its judgement is indeterminate);
* in a ``self_hosted`` environment they are client tools under Claude's names and input schemas
  (the pinned SDK's ``BetaManagedAgentsAgentToolset20260401*Input``), answered with
  ``user.tool_result`` by the client: the SDK's ``events.tool_runner`` or its environment worker.

``web_fetch`` and ``web_search`` have no skyloop counterpart: they are shown disabled, and enabling
one explicitly is a 400 naming it. The saved agent holds the cloud form (hosted tools), so it runs
the same through skyloop's own ``/v1`` sessions; a self-hosted session runs an inline version with
the client form (:func:`client_form`).
"""

from __future__ import annotations

from typing import Any, Literal

TOOLSET = "agent_toolset_20260401"
BUILTINS = ("bash", "edit", "read", "write", "glob", "grep", "web_fetch", "web_search")
UNAVAILABLE = ("web_fetch", "web_search")
HOSTED_NAME = {
    "bash": "Bash",
    "edit": "Edit",
    "read": "Read",
    "write": "Write",
    "glob": "Glob",
    "grep": "Grep",
}
CLAUDE_NAME = {hosted: claude for claude, hosted in HOSTED_NAME.items()}
Policy = Literal["always_allow", "always_ask", "auto"]
POLICIES: tuple[Policy, ...] = ("always_allow", "always_ask", "auto")
TOOLSET_DEFAULT_POLICY: Policy = "always_allow"
MCP_DEFAULT_POLICY: Policy = "always_ask"  # an MCP server reaches outside skyloop: asked unless allowed

_OPTIONAL_STR = {"anyOf": [{"type": "string"}, {"type": "null"}]}
# The client form: Claude's names and the pinned SDK's input schemas (a test holds them equal).
CLIENT_TOOLS: dict[str, dict[str, Any]] = {
    "bash": {
        "description": "Run a shell command in the workspace; restart=true restarts the shell session.",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {**_OPTIONAL_STR, "description": "The command to run."},
                "restart": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
                "timeout_ms": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            },
        },
    },
    "read": {
        "description": "Read a file; view_range [start, end] limits it to those lines.",
        "parameters": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "view_range": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]},
            },
            "required": ["file_path"],
        },
    },
    "write": {
        "description": "Write (overwrite) a whole file.",
        "parameters": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["content", "file_path"],
        },
    },
    "edit": {
        "description": "Replace old_string with new_string in a file (once, unless replace_all).",
        "parameters": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
            },
            "required": ["file_path", "new_string", "old_string"],
        },
    },
    "glob": {
        "description": "Paths matching a glob pattern, newest first.",
        "parameters": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": _OPTIONAL_STR},
            "required": ["pattern"],
        },
    },
    "grep": {
        "description": "Lines of files matching a regular expression.",
        "parameters": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": _OPTIONAL_STR},
            "required": ["pattern"],
        },
    },
}


def policy_object(policy: str) -> dict[str, str]:
    return {"type": policy}


def asks(policy: str | None) -> bool:
    return policy in ("always_ask", "auto")


def evaluation(policy: str) -> dict[str, Any]:
    """The ``evaluation`` of a call that waits for a confirmation (``auto``: indeterminate, so ask)."""
    if policy == "auto":
        return {"type": "auto", "evaluated_permission": {"type": "ask", "reason_code": "indeterminate"}}
    return {"type": policy}


def hosted_form(enabled: dict[str, str]) -> dict[str, Any]:
    """``{claude name: policy}`` of the enabled built-ins as a skyloop ``tools`` map (hosted)."""
    return {
        HOSTED_NAME[name]: {"type": "hosted", **({"approval": "required"} if asks(policy) else {})}
        for name, policy in enabled.items()
        if name in HOSTED_NAME
    }


def client_form(tools: dict[str, Any]) -> dict[str, Any] | None:
    """A skyloop ``tools`` map with its hosted built-ins as Claude's client tools; None if it has none."""
    hosted = [
        name for name, entry in tools.items() if isinstance(entry, dict) and entry.get("type") == "hosted"
    ]
    if not any(name in CLAUDE_NAME for name in hosted):
        return None
    out = {name: entry for name, entry in tools.items() if name not in CLAUDE_NAME}
    for name in hosted:
        if name in CLAUDE_NAME:
            claude = CLAUDE_NAME[name]
            out[claude] = {"type": "function", "runtime": "client", **CLIENT_TOOLS[claude]}
    return out


def toolset_view(enabled: dict[str, str], default: dict[str, Any]) -> dict[str, Any]:
    """The response's toolset: every built-in with whether it is enabled and its policy."""
    return {
        "type": TOOLSET,
        "configs": [
            {
                "type": name,
                "name": name,
                "enabled": name in enabled,
                "permission_policy": policy_object(enabled.get(name) or default["policy"]),
            }
            for name in BUILTINS
        ],
        "default_config": {
            "enabled": bool(default["enabled"]),
            "permission_policy": policy_object(default["policy"]),
        },
    }
