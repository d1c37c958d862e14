"""Agents addressed across their versions, and the executor a bare model name gets.

skyloop agent versions are immutable (warm functions cache them); OpenAI's and
Claude's APIs update an agent in place. So an update registers a new version of
the same skyloop name, and the id those APIs show (the first version's, kept in
the spec's ``openai`` key) resolves to the newest version that names it. Here,
below both compatibility layers and the schedules, because a scheduled task
started through OpenAI's API runs its agent's newest version too.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from skyloop.errors import InternalError, NotFoundError

if TYPE_CHECKING:
    from skyloop.models.agent import Agent, AgentSpec
    from skyloop.store import Store

DEFAULT_EXECUTOR_ENV = "SKYLOOP_DEFAULT_EXECUTOR"


def openai_meta(agent: Agent) -> dict[str, Any]:
    extra = agent.spec.model_extra or {}
    meta = extra.get("openai")
    return meta if isinstance(meta, dict) else {}


def openai_id(agent: Agent) -> str:
    """The id the OpenAI API shows: the first version's for agents made or updated here, else its own."""
    return str(openai_meta(agent).get("id") or agent.id)


def resolve(store: Store, agent_id: str) -> Agent:
    """The agent an OpenAI id names: its newest version (404 if unknown or another principal's)."""
    from skyloop import sessions

    agent = sessions.get_agent(store, agent_id)
    newest = store.find_agent_by_name(agent.name, owner=agent.owner)
    if newest is not None and newest.id != agent.id and openai_id(newest) == agent_id:
        return newest
    if openai_meta(agent).get("id") not in (None, agent_id):
        raise NotFoundError(f"Agent not found: '{agent_id}'")  # an old version's own id
    return agent


def default_executor(model: str) -> dict[str, Any]:
    """The executor a bare model name gets (see the module docstring)."""
    raw = os.environ.get(DEFAULT_EXECUTOR_ENV, "").strip()
    base: dict[str, Any] = {"harness": "openai-agents"}
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            raise InternalError(f"{DEFAULT_EXECUTOR_ENV} is not JSON") from None
        if not isinstance(parsed, dict) or (parsed.get("auth") or {}).get("api_key"):
            raise InternalError(f"{DEFAULT_EXECUTOR_ENV} must be a JSON executor without an api_key")
        base = parsed
    return {**base, "model": base.get("model") or model}


def register(spec: AgentSpec, *, keep_key_of: Agent | None = None) -> Agent:
    """Register a version; a new version of an agent with a stored model key keeps using that key."""
    from skyloop import deps, sessions

    agent = sessions.register(spec)
    if keep_key_of is not None and keep_key_of.api_key_secret and agent.api_key_secret is None:
        agent = agent.model_copy(update={"api_key_secret": keep_key_of.api_key_secret})
        deps.store().put_agent(agent)
    return agent
