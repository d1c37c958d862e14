"""OpenAI's ``openai_hosted`` environment as skyloop's hosted one (:mod:`skyloop.environments`).

``network.access`` ``disabled`` is ``network: none`` and ``enabled`` is
``public``; inline ``files`` (base64) are written into ``/workspace``;
``env`` is the commands' environment; ``setup_commands`` run once, in order,
when the workspace is made (a ``cwd`` inside ``/workspace`` is honoured). What
skyloop cannot honour (domain restrictions, files by OpenAI file id, binary
files, packages, templates...) is a 400 naming the field
(:func:`skyloop.openai_compat.unsupported.check_environment` and here). A
session of such an environment gets the six hosted built-ins (Bash, Read,
Write, Edit, Glob, Grep) unless its agent declares them already; their calls
are ``command_execution`` items (Bash) on OpenAI's side.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from skyloop.errors import InvalidInputError
from skyloop.openai_compat.errors import UnsupportedFeatureError

if TYPE_CHECKING:
    from skyloop.models.agent import Agent
    from skyloop.models.environment import HostedEnvironment
    from skyloop.openai_compat.requests import Environment


def hosted_environment(environment: Environment) -> HostedEnvironment:
    from skyloop import workspace as paths
    from skyloop.models.environment import HostedEnvironment

    extra: dict[str, Any] = environment.model_extra or {}
    network = extra.get("network") or {}
    access = network.get("access", "disabled") if isinstance(network, dict) else "disabled"
    if access == "restricted" or (
        isinstance(network, dict) and (network.get("allowed_domains") or network.get("blocked_domains"))
    ):
        raise UnsupportedFeatureError(
            "network restrictions by domain",
            param="environment.network.access",
            detail="use enabled or disabled",
        )
    if access not in ("enabled", "disabled"):
        raise InvalidInputError(
            "environment.network.access must be enabled or disabled", param="environment.network.access"
        )
    files = []
    for index, item in enumerate(extra.get("files") or []):
        where = f"environment.files[{index}]"
        if not isinstance(item, dict) or item.get("type") != "inline":
            raise UnsupportedFeatureError(
                "files by OpenAI file id", param=f"{where}.type", detail="send them inline"
            )
        try:
            content = base64.b64decode(str(item.get("data", "")), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidInputError(
                f"{where}.data must be base64 of UTF-8 text", param=f"{where}.data"
            ) from None
        files.append({"path": str(item.get("path", "")), "content": content})
    setup = []
    for index, item in enumerate(extra.get("setup_commands") or []):
        where = f"environment.setup_commands[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("command"), str):
            raise InvalidInputError(f"{where}.command is required", param=f"{where}.command")
        cwd = item.get("cwd")
        try:
            setup.append(
                f"cd {shlex.quote(paths.absolute(cwd))} && {item['command']}" if cwd else item["command"]
            )
        except paths.PathOutsideWorkspace as exc:
            raise InvalidInputError(f"{where}.cwd: {exc}", param=f"{where}.cwd") from None
    env = extra.get("env") or {}
    try:
        return HostedEnvironment.model_validate(
            {
                "network": "public" if access == "enabled" else "none",
                "files": files,
                "env": env,
                "setup": setup,
            }
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise InvalidInputError(f"environment.{field}: {err['msg']}", param=f"environment.{field}") from None


def with_hosted_tools(agent: Agent) -> Agent:
    """The agent, or an inline version of it that also has the hosted built-ins it lacks."""
    from skyloop import agent_versions
    from skyloop.ids import new_id
    from skyloop.models.environment import HOSTED_TOOLS
    from skyloop.models.tools import declared_tools
    from skyloop.openai_compat import agents as oa_agents

    tools = agent.spec.tools if isinstance(agent.spec.tools, dict) else {}
    missing = [name for name in HOSTED_TOOLS if name not in tools]
    if not missing or declared_tools(tools).hosted:
        return agent
    meta = {**agent_versions.openai_meta(agent), "inline": True}
    spec = agent.spec.model_copy(
        update={
            "name": f"{oa_agents.NAME_PREFIX}{new_id()[:20]}",
            "tools": {**tools, **{name: {"type": "hosted"} for name in missing}},
        }
    )
    spec = spec.model_copy(update={}, deep=True)
    if spec.model_extra is not None:
        spec.model_extra["openai"] = meta
    return agent_versions.register(spec, keep_key_of=agent)
