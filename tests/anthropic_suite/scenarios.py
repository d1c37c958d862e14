"""Scenarios of the Claude Managed Agents suite; each takes a :class:`Target` and runs the SDK against it.

Every client validates every response strictly against the pinned SDK's types
(``_strict_response_validation``), so a shape that drifts from ``anthropic/types/beta`` fails here;
stream events are validated the same way (:func:`strict_events`).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import anthropic
import httpx
import pytest
from anthropic import Anthropic, AsyncAnthropic
from anthropic.types.beta import sessions as session_types
from pydantic import TypeAdapter

if TYPE_CHECKING:
    from collections.abc import Callable

TOOL_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
HANDLER_OUTPUT = "forty-two from the client"
STREAM_EVENTS: TypeAdapter[Any] = TypeAdapter(session_types.BetaManagedAgentsStreamSessionEvents)
HISTORY_EVENTS: TypeAdapter[Any] = TypeAdapter(session_types.BetaManagedAgentsSessionEvent)


@dataclass
class Target:
    base_url: str  # the deployment's endpoint (skyloop's own API under /v1)
    token: str = "unused"  # a skyloop bearer token (the SDK's api_key)
    # the control API (``/mock/configure``) of the model a bare model id runs on (the default executor)
    mock_control: str | None = None
    # moves a session's lifecycle events to the webhook endpoints where nothing runs by itself (moto has
    # no table stream or queue triggers: the Lambda-shape suite hands them to the functions)
    pump: Callable[[str], None] | None = None

    def script_model(self, match: str, responses: list[dict[str, Any]]) -> None:
        """Queue the default executor's model's answers to a user text containing ``match``."""
        assert self.mock_control, "this target has no mock model for agents made through the Claude API"
        r = httpx.post(
            f"{self.mock_control}/mock/configure",
            json={"key": f"match-{match}", "match": match, "responses": responses},
            timeout=10,
        )
        assert r.status_code == 200, r.text

    def client(self, **kwargs: Any) -> Anthropic:
        return Anthropic(
            base_url=f"{self.base_url}/anthropic",
            api_key=self.token,
            max_retries=0,
            timeout=30,
            _strict_response_validation=True,
            **kwargs,
        )

    def async_client(self, **kwargs: Any) -> AsyncAnthropic:
        return AsyncAnthropic(
            base_url=f"{self.base_url}/anthropic",
            api_key=self.token,
            max_retries=0,
            timeout=30,
            _strict_response_validation=True,
            **kwargs,
        )

    def register(self, spec: dict[str, Any]) -> str:
        """Register a skyloop agent through skyloop's own ``/v1/agents``; its id."""
        r = httpx.post(
            f"{self.base_url}/v1/agents",
            json=spec,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
        )
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def raw(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(
            method,
            f"{self.base_url}{path}",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
            **kwargs,
        )


def scripted_agent(
    target: Target, script: list[dict[str, Any]], *, tools: dict[str, Any] | None = None, **executor: Any
) -> str:
    """A skyloop agent answering from ``script`` (harness ``scripted``), with a client tool ``lookup``."""
    spec = {
        "name": f"ca-{uuid.uuid4().hex[:10]}",
        "prompt": "Use your tools.",
        "executor": {"harness": "scripted", "model": "scripted", "script": script, **executor},
        "tools": tools
        if tools is not None
        else {
            "lookup": {
                "type": "function",
                "runtime": "client",
                "description": "Look it up",
                "parameters": TOOL_SCHEMA,
            }
        },
    }
    return target.register(spec)


TOOL_SCRIPT = [
    {"tool_calls": [{"name": "lookup", "arguments": {"q": "answer"}}]},
    {"text": "The tool said: {{output}}"},
]


def strict_events(events: list[Any]) -> None:
    """Every event validates against the SDK's union (the stream's parsing is lenient by default)."""
    for event in events:
        STREAM_EVENTS.validate_python(event.model_dump(mode="json", exclude_unset=True))


def read_until(stream: Any, done: Any, *, limit: int = 500) -> list[Any]:
    out = []
    for event in stream:
        out.append(event)
        if done(event) or len(out) >= limit:
            break
    return out


def idle(reason: str) -> Any:
    return lambda e: e.type == "session.status_idle" and e.stop_reason.type == reason


def environment(client: Anthropic, kind: str = "self_hosted", **config: Any) -> str:
    return client.beta.environments.create(name=f"env-{kind}", config={"type": kind, **config}).id


def send_text(client: Anthropic, session_id: str, text: str) -> Any:
    return client.beta.sessions.events.send(
        session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}]
    )


def history(client: Anthropic, session_id: str, **kwargs: Any) -> list[Any]:
    events = list(client.beta.sessions.events.list(session_id, limit=100, **kwargs))
    for event in events:
        HISTORY_EVENTS.validate_python(event.model_dump(mode="json", exclude_unset=True))
    return events


def wait_for(client: Anthropic, session_id: str, done: Any, *, timeout: float = 30) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        events = history(client, session_id)
        if any(done(e) for e in events):
            return events
        assert time.monotonic() < deadline, [e.type for e in events]
        time.sleep(0.1)


# --------------------------------------------------------------------------- scenarios
def agents_and_versions(target: Target) -> None:
    client = target.client()
    agents = client.beta.agents
    created = agents.create(
        name="Support bot",
        model="claude-sonnet-4-6",
        system="Be brief.",
        description="answers questions",
        metadata={"team": "support"},
        tools=[
            {
                "type": "agent_toolset_20260401",
                "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}],
            },
            {"type": "custom", "name": "lookup", "description": "Look it up", "input_schema": TOOL_SCHEMA},
        ],
    )
    assert (created.type, created.name, created.system, created.version) == (
        "agent",
        "Support bot",
        "Be brief.",
        1,
    )
    assert created.model.id == "claude-sonnet-4-6"
    toolset, custom = created.tools
    assert toolset.type == "agent_toolset_20260401"
    configs = {c.name: c for c in toolset.configs}
    assert configs["bash"].enabled
    assert configs["bash"].permission_policy.type == "always_ask"
    assert configs["read"].enabled
    assert configs["read"].permission_policy.type == "always_allow"
    assert not configs["web_fetch"].enabled
    assert not configs["web_search"].enabled
    assert custom.type == "custom"
    assert custom.name == "lookup"
    assert agents.retrieve(created.id).metadata == {"team": "support"}

    updated = agents.update(
        created.id, system="Be thorough.", metadata={"team": "ops", "tier": "1"}, version=1
    )
    assert (updated.id, updated.version, updated.system) == (created.id, 2, "Be thorough.")
    assert updated.metadata == {"team": "ops", "tier": "1"}
    assert [t.type for t in updated.tools] == ["agent_toolset_20260401", "custom"]  # omitted: kept
    unchanged = agents.update(created.id, system="Be thorough.")
    assert unchanged.version == 2  # nothing changed: no new version
    with pytest.raises(anthropic.ConflictError):
        agents.update(created.id, system="stale", version=1)
    assert agents.retrieve(created.id, version=1).system == "Be brief."
    assert [v.version for v in agents.versions.list(created.id, limit=1)] == [2, 1]  # paged one by one

    second = agents.create(name="Second", model={"id": "claude-haiku-4-5", "effort": "low"})
    assert second.model.effort is not None
    assert second.model.effort.type == "low"
    listed = [a.id for a in agents.list(limit=1)]
    assert created.id in listed
    assert second.id in listed
    assert listed.count(created.id) == 1

    archived = agents.archive(second.id)
    assert archived.archived_at is not None
    assert second.id not in [a.id for a in agents.list()]
    assert second.id in [a.id for a in agents.list(include_archived=True)]

    # an agent registered through skyloop's own /v1/agents is usable here by its id, and the reverse
    v1_id = scripted_agent(target, TOOL_SCRIPT)
    v1 = agents.retrieve(v1_id)
    assert (v1.id, v1.tools[0].type, v1.tools[0].name) == (v1_id, "custom", "lookup")  # type: ignore[union-attr]
    r = target.raw("GET", f"/v1/agents/{created.id}")
    assert r.status_code == 200
    assert r.json()["id"] == created.id

    with pytest.raises(anthropic.NotFoundError) as err:
        agents.retrieve("0" * 32)
    assert err.value.body["type"] == "error"  # type: ignore[index]
    assert err.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]


def environments_crud(target: Target) -> None:
    client = target.client()
    envs = client.beta.environments
    cloud = envs.create(
        name="sandbox",
        config={"type": "cloud", "networking": {"type": "unrestricted"}, "packages": {"pip": ["rich"]}},
        metadata={"a": "1"},
    )
    assert cloud.config.type == "cloud"
    assert cloud.config.networking.type == "unrestricted"  # type: ignore[union-attr]
    assert cloud.config.packages.pip == ["rich"]  # type: ignore[union-attr]
    limited = envs.update(
        cloud.id,
        config={"type": "cloud", "networking": {"type": "limited"}, "packages": {}},
        metadata={"a": None, "b": "2"},
    )
    assert limited.config.networking.type == "limited"  # type: ignore[union-attr]
    assert limited.metadata == {"b": "2"}
    # packages are installed by setup commands, which need the network
    with pytest.raises(anthropic.BadRequestError) as err:
        environment(client, "cloud", networking={"type": "limited"}, packages={"pip": ["rich"]})
    assert err.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "config.packages.pip" in err.value.body["error"]["message"]  # type: ignore[index]
    local = envs.create(name="laptop", config={"type": "self_hosted"})
    assert local.config.type == "self_hosted"
    ids = [e.id for e in envs.list(limit=1)]
    assert cloud.id in ids
    assert local.id in ids
    assert envs.archive(local.id).archived_at is not None
    assert local.id not in [e.id for e in envs.list()]
    with pytest.raises(anthropic.BadRequestError) as err:
        client.beta.sessions.create(agent=scripted_agent(target, TOOL_SCRIPT), environment_id=local.id)
    assert err.value.body["error"]["details"]["error_code"] == "environment_archived"  # type: ignore[index]
    deleted = envs.delete(cloud.id)
    assert (deleted.id, deleted.type) == (cloud.id, "environment_deleted")
    with pytest.raises(anthropic.NotFoundError):
        envs.retrieve(cloud.id)


def custom_tool_turn(target: Target) -> None:
    """A custom tool stops the session with requires_action; the answer reaches the model."""
    client = target.client()
    agent_id = scripted_agent(target, TOOL_SCRIPT)
    session = client.beta.sessions.create(
        agent=agent_id, environment_id=environment(client), title="custom tools", metadata={"k": "v"}
    )
    assert (session.status, session.title, session.metadata) == ("idle", "custom tools", {"k": "v"})
    with client.beta.sessions.events.stream(session.id) as stream:
        sent = send_text(client, session.id, "look it up")
        assert sent.data is not None
        assert sent.data[0].type == "user.message"
        events = read_until(stream, idle("requires_action"))
        strict_events(events)
        types = [e.type for e in events]
        assert types[:2] == ["user.message", "session.status_running"], types
        (use,) = [e for e in events if e.type == "agent.custom_tool_use"]
        assert (use.name, use.input) == ("lookup", {"q": "answer"})
        assert events[-1].stop_reason.event_ids == [use.id]
        assert events[0].id == sent.data[0].id  # the echo's id is the history's
        assert client.beta.sessions.retrieve(session.id).status == "idle"
        echo = client.beta.sessions.events.send(
            session.id,
            events=[
                {
                    "type": "user.custom_tool_result",
                    "custom_tool_use_id": use.id,
                    "content": [{"type": "text", "text": HANDLER_OUTPUT}],
                }
            ],
        )
        assert echo.data is not None
        assert echo.data[0].type == "user.custom_tool_result"
        rest = read_until(stream, idle("end_turn"))
    strict_events(rest)
    (message,) = [e for e in rest if e.type == "agent.message"]
    assert message.content[0].text == f"The tool said: {HANDLER_OUTPUT}"
    (result,) = [e for e in rest if e.type == "user.custom_tool_result"]
    assert result.id == echo.data[0].id
    assert result.custom_tool_use_id == use.id
    assert any(e.type == "span.model_request_end" for e in rest)
    assert any(e.type == "session.usage" for e in rest)
    listed = history(client, session.id)
    assert [e.id for e in listed] == [
        e.id for e in events + rest if e.type not in ("event_start", "event_delta")
    ]


def claude_created_agent_turn(target: Target, mcp_url: str) -> None:
    """An agent made by ``beta.agents.create`` (toolset, a custom tool, an MCP server) runs a turn that
    calls its MCP tool and its custom tool; and the same agent runs a turn through skyloop's own /v1."""
    client = target.client()
    token = f"#claude-made-{uuid.uuid4().hex[:8]}"
    agent = client.beta.agents.create(
        name="Made here",
        model="claude-sonnet-4-6",
        system="Use your tools.",
        mcp_servers=[{"type": "url", "name": "glossary", "url": mcp_url}],
        tools=[
            {"type": "agent_toolset_20260401"},
            {"type": "custom", "name": "lookup", "description": "Look it up", "input_schema": TOOL_SCHEMA},
            {
                "type": "mcp_toolset",
                "mcp_server_name": "glossary",
                "default_config": {"permission_policy": {"type": "always_allow"}},
            },
        ],
    )
    assert sorted(t.type for t in agent.tools) == ["agent_toolset_20260401", "custom", "mcp_toolset"]
    assert [(m.name, m.url) for m in agent.mcp_servers] == [("glossary", mcp_url)]
    target.script_model(
        token,
        [
            {"tool_calls": [{"call_id": "c-define", "name": "define", "arguments": {"term": "turn"}}]},
            {"tool_calls": [{"call_id": "c-lookup", "name": "lookup", "arguments": {"q": "answer"}}]},
            {"text": "made here and done"},
        ],
    )
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment(client))
    assert (session.agent.id, session.agent.version) == (agent.id, 1)
    with client.beta.sessions.events.stream(session.id) as stream:
        send_text(client, session.id, f"define it {token}")
        events = read_until(stream, lambda e: e.type == "session.status_idle")
        strict_events(events)
        assert events[-1].stop_reason.type == "requires_action", dump(events)
        assert any(e.type == "agent.mcp_tool_use" for e in events), dump(events)
        (mcp_use,) = [e for e in events if e.type == "agent.mcp_tool_use"]
        assert (mcp_use.name, mcp_use.mcp_server_name, mcp_use.input) == (
            "define",
            "glossary",
            {"term": "turn"},
        )
        (mcp_result,) = [e for e in events if e.type == "agent.mcp_tool_result"]
        assert mcp_result.mcp_tool_use_id == mcp_use.id
        assert "one Step Functions execution" in mcp_result.content[0].text  # type: ignore[index,union-attr]
        (use,) = [e for e in events if e.type == "agent.custom_tool_use"]
        assert (use.name, use.input) == ("lookup", {"q": "answer"})
        client.beta.sessions.events.send(
            session.id,
            events=[
                {
                    "type": "user.custom_tool_result",
                    "custom_tool_use_id": use.id,
                    "content": [{"type": "text", "text": HANDLER_OUTPUT}],
                }
            ],
        )
        rest = read_until(stream, idle("end_turn"))
    strict_events(rest)
    (message,) = [e for e in rest if e.type == "agent.message"]
    assert message.content[0].text == "made here and done"
    assert HANDLER_OUTPUT in _model_input(target, token)  # the custom tool's answer reached the model

    # the reverse: the same agent through skyloop's own /v1 sessions (its id is skyloop's agent id)
    target.script_model(f"{token}-v1", [{"text": "answered through /v1"}])
    r = target.raw("POST", "/v1/sessions", json={"agent_id": agent.id})
    assert r.status_code in (200, 201), r.text
    v1_session = r.json()["id"]
    message_event = {
        "type": "message",
        "data": {"role": "user", "content": [{"type": "input_text", "text": f"hello {token}-v1"}]},
    }
    r = target.raw("POST", f"/v1/sessions/{v1_session}/events", json=message_event)
    assert r.status_code in (200, 201, 202), r.text
    deadline = time.monotonic() + 30
    while target.raw("GET", f"/v1/sessions/{v1_session}").json()["status"] != "idle":
        assert time.monotonic() < deadline, "the /v1 turn did not end"
        time.sleep(0.1)
    seen = history(client, v1_session)  # and the Claude API shows that session's events
    (v1_message,) = [e for e in seen if e.type == "agent.message"]
    assert v1_message.content[0].text == "answered through /v1"  # type: ignore[union-attr]
    assert seen[-1].type == "session.status_idle"
    assert seen[-1].stop_reason.type == "end_turn"


def pinned_version_and_session_update(target: Target) -> None:
    """A session pinned to ``{type: agent, id, version}`` runs that version after the agent is updated
    (one by id runs the newest); ``sessions.update`` changes title and metadata (null deletes a key)."""
    client = target.client()
    agent = client.beta.agents.create(name="Pinned", model="claude-haiku-4-5", system="You are version one.")
    updated = client.beta.agents.update(agent.id, system="You are version two.", version=1)
    assert updated.version == 2
    env_id = environment(client)
    pinned = client.beta.sessions.create(
        agent={"type": "agent", "id": agent.id, "version": 1},
        environment_id=env_id,
        title="first",
        metadata={"keep": "1", "drop": "2"},
    )
    newest = client.beta.sessions.create(agent=agent.id, environment_id=env_id)
    assert (pinned.agent.version, pinned.agent.system) == (1, "You are version one.")
    assert (newest.agent.version, newest.agent.system) == (2, "You are version two.")
    for session, token in (
        (pinned, f"#pin-{uuid.uuid4().hex[:8]}"),
        (newest, f"#new-{uuid.uuid4().hex[:8]}"),
    ):
        target.script_model(token, [{"text": "ok"}])
        send_text(client, session.id, f"which version? {token}")
        wait_for(client, session.id, idle("end_turn"))
        seen = _model_input(target, token)
        wanted, other = ("one", "two") if session is pinned else ("two", "one")
        assert f"You are version {wanted}." in seen, seen[:2000]
        assert f"You are version {other}." not in seen
    assert client.beta.sessions.retrieve(pinned.id).agent.version == 1  # still pinned after its turn

    changed = client.beta.sessions.update(pinned.id, title="renamed", metadata={"drop": None, "new": "3"})
    assert (changed.title, changed.metadata) == ("renamed", {"keep": "1", "new": "3"})
    again = client.beta.sessions.retrieve(pinned.id)
    assert (again.title, again.metadata) == ("renamed", {"keep": "1", "new": "3"})
    untouched = client.beta.sessions.update(pinned.id, metadata={"keep": "x"})
    assert (untouched.title, untouched.metadata) == ("renamed", {"keep": "x", "new": "3"})  # title kept


def _model_input(target: Target, token: str) -> str:
    """The model requests the mock captured for a conversation carrying ``token`` (as JSON text)."""
    assert target.mock_control
    r = httpx.get(f"{target.mock_control}/mock/requests", timeout=10)
    assert r.status_code == 200, r.text
    return "\n".join(json.dumps(b) for b in r.json()["requests"] if token in json.dumps(b))


class Given:
    """What an unsupported-feature case calls with: a client, and an agent, environment and session
    (no budget) made on first use."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.client = target.client()

    @cached_property
    def agent_id(self) -> str:
        return scripted_agent(self.target, TOOL_SCRIPT)

    @cached_property
    def env_id(self) -> str:
        return environment(self.client)

    @cached_property
    def session_id(self) -> str:
        return self.client.beta.sessions.create(agent=self.agent_id, environment_id=self.env_id).id

    @cached_property
    def waiting_use_id(self) -> str:
        """A custom tool use the session waits on (a turn that stopped with requires_action)."""
        send_text(self.client, self.session_id, "go")
        events = wait_for(self.client, self.session_id, idle("requires_action"))
        return next(e.id for e in events if e.type == "agent.custom_tool_use")

    def agent(self, **body: Any) -> Any:
        return self.client.beta.agents.create(name="x", **{"model": "m", **body})

    def cloud(self, **config: Any) -> Any:
        return self.client.beta.environments.create(name="x", config={"type": "cloud", **config})

    def session(self, **body: Any) -> Any:
        return self.client.beta.sessions.create(
            **{"agent": self.agent_id, "environment_id": self.env_id, **body}
        )

    def send(self, *events: Any) -> Any:
        return self.client.beta.sessions.events.send(self.session_id, events=list(events))

    def mcp(self, toolset: dict[str, Any]) -> Any:
        return self.agent(
            mcp_servers=[{"type": "url", "name": "g", "url": "https://mcp.example.com/mcp"}],
            tools=[{"type": "mcp_toolset", "mcp_server_name": "g", **toolset}],
        )


def _text_message(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "user.message", "content": [{"type": "text", "text": "hi"}, *blocks]}


OUTCOME = {"type": "user.define_outcome", "description": "d", "rubric": {"type": "text", "content": "r"}}
BUDGET = {"type": "limit", "max_list_cost": {"amount": "1.00", "currency": "USD"}}
# every row of docs/anthropic.md's "Not supported" table: (what the 400's message names, the call)
UNSUPPORTED: dict[str, tuple[str, Any]] = {
    "skills": ("skills", lambda g: g.agent(skills=[{"type": "anthropic", "skill_id": "pdf"}])),
    "multiagent": ("multiagent", lambda g: g.agent(multiagent={"type": "coordinator", "agents": []})),
    "session threads": ("session threads", lambda g: g.client.beta.sessions.threads.list(g.session_id)),
    "execution_identity": (
        "execution_identity aws_role",
        lambda g: g.agent(
            execution_identity={"type": "aws_role", "role_arn": "arn:aws:iam::123456789012:role/r"}
        ),
    ),
    "model.speed": ("fast mode", lambda g: g.agent(model={"id": "m", "speed": "fast"})),
    "model.inference_geo": ("inference_geo", lambda g: g.agent(model={"id": "m", "inference_geo": "us"})),
    "web_fetch": (
        "web_fetch",
        lambda g: g.agent(
            tools=[{"type": "agent_toolset_20260401", "configs": [{"name": "web_fetch", "enabled": True}]}]
        ),
    ),
    "web_search": (
        "web_search",
        lambda g: g.agent(
            tools=[{"type": "agent_toolset_20260401", "configs": [{"name": "web_search", "enabled": True}]}]
        ),
    ),
    "single MCP tools disabled": (
        "disabling single MCP tools",
        lambda g: g.mcp({"configs": [{"name": "define", "enabled": False}]}),
    ),
    "policies within one MCP server": (
        "different permission policies",
        lambda g: g.mcp(
            {
                "configs": [
                    {"name": "define", "permission_policy": {"type": "always_ask"}},
                    {"name": "search", "permission_policy": {"type": "always_allow"}},
                ]
            }
        ),
    ),
    "allowed_hosts": (
        "networking.allowed_hosts",
        lambda g: g.cloud(networking={"type": "limited", "allowed_hosts": ["example.com"]}),
    ),
    "allow_package_managers": (
        "networking.allow_package_managers",
        lambda g: g.cloud(networking={"type": "limited", "allow_package_managers": True}),
    ),
    **{
        f"{manager} packages": (f"{manager} packages", lambda g, m=manager: g.cloud(packages={m: ["x"]}))
        for manager in ("apt", "cargo", "gem", "go")
    },
    "vaults": ("vaults", lambda g: g.session(vault_ids=["v"])),
    "session resources": (
        "session resources",
        lambda g: g.session(resources=[{"type": "file", "file_id": "f"}]),
    ),
    "agent_with_overrides": (
        "agent_with_overrides",
        lambda g: g.session(agent={"type": "agent_with_overrides", "id": g.agent_id, "system": "other"}),
    ),
    "outcomes at create": ("outcomes", lambda g: g.session(initial_events=[OUTCOME])),
    "outcomes sent": ("outcomes", lambda g: g.send(OUTCOME)),
    "system.message": (
        "system messages",
        lambda g: g.send(
            _text_message(), {"type": "system.message", "content": [{"type": "text", "text": "s"}]}
        ),
    ),
    "images by file_id": (
        "images by file_id",
        lambda g: g.send(_text_message({"type": "image", "source": {"type": "file", "file_id": "file_1"}})),
    ),
    "non-text tool results": (
        "blocks in tool results",
        lambda g: g.send(
            {
                "type": "user.custom_tool_result",
                "custom_tool_use_id": g.waiting_use_id,
                "content": [{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}],
            }
        ),
    ),
    "changing a session's tools": (
        "changing a session's tools",
        lambda g: g.client.beta.sessions.update(g.session_id, agent={"tools": []}),
    ),
    "/vaults": ("vaults", lambda g: g.client.beta.vaults.list()),
    "/memory_stores": ("memory stores", lambda g: g.client.get("/v1/memory_stores", cast_to=object)),
    "/deployments": ("deployments", lambda g: g.client.get("/v1/deployments", cast_to=object)),
    "/messages": (
        "the Messages API",
        lambda g: g.client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ),
    ),
    "/files": ("the Files API", lambda g: g.client.beta.files.list()),
    "/models": ("the Models API", lambda g: g.client.models.list()),
    "/skills": ("skills", lambda g: g.client.beta.skills.list()),
    "a budget added to a session without one": (
        "a session opened without a budget cannot get one",
        lambda g: g.client.beta.sessions.update(g.session_id, budget=BUDGET),
    ),
}


def unsupported_feature(target: Target, case: str) -> None:
    """One unsupported feature: a 400 in Anthropic's shape whose message names it."""
    feature, call = UNSUPPORTED[case]
    with pytest.raises(anthropic.BadRequestError) as err:
        call(Given(target))
    body = err.value.body
    assert body["type"] == "error", body  # type: ignore[index]
    assert body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert feature in body["error"]["message"], (feature, body)  # type: ignore[index]


def unknown_route_is_404(target: Target) -> None:
    """An unknown route under the prefix is a 404 in Anthropic's shape, never the console's page."""
    r = target.raw("GET", "/anthropic/v1/nothing-here")
    assert r.status_code == 404, r.text
    assert r.json()["type"] == "error", r.text
    assert r.json()["error"]["type"] == "not_found_error", r.text


def dump(events: list[Any]) -> str:
    return json.dumps([e.model_dump(mode="json") for e in events])[:3000]


async def tool_runner_self_hosted(target: Target, workdir: Any) -> None:
    """The SDK's own ``events.tool_runner`` answers a self-hosted session: built-ins and a custom tool."""
    from anthropic.lib.tools import beta_async_tool
    from anthropic.lib.tools.agent_toolset import AgentToolContext, beta_agent_toolset_20260401

    client = target.async_client()
    script = [
        {
            "tool_calls": [
                {"name": "write", "arguments": {"file_path": "note.txt", "content": "hello from the model"}}
            ]
        },
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]},
        {"text": "done: {{output}}"},
    ]
    tools = {
        "Write": {"type": "hosted"},
        "lookup": {
            "type": "function",
            "runtime": "client",
            "description": "Look it up",
            "parameters": TOOL_SCHEMA,
        },
    }
    agent_id = scripted_agent(target, script, tools=tools)
    env = await client.beta.environments.create(name="laptop", config={"type": "self_hosted"})
    session = await client.beta.sessions.create(agent=agent_id, environment_id=env.id)
    shown = {t.type: t for t in session.agent.tools}
    assert set(shown) == {"agent_toolset_20260401", "custom"}, session.agent.tools

    @beta_async_tool
    async def lookup(q: str) -> str:
        """Look it up."""
        return HANDLER_OUTPUT

    local = [*beta_agent_toolset_20260401(AgentToolContext(workdir=workdir)), lookup]
    runner = client.beta.sessions.events.tool_runner(session.id, tools=local, max_idle=1.0)
    await client.beta.sessions.events.send(
        session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "write it"}]}]
    )
    dispatched = [call async for call in runner]
    assert [(c.name, c.posted) for c in dispatched] == [("write", True), ("lookup", True)], dispatched
    assert (workdir / "note.txt").read_text() == "hello from the model"
    events = [e async for e in client.beta.sessions.events.list(session.id, limit=100)]
    types = [e.type for e in events]
    for kind in ("agent.tool_use", "user.tool_result", "agent.custom_tool_use", "user.custom_tool_result"):
        assert types.count(kind) == 1, types
    (message,) = [e for e in events if e.type == "agent.message"]
    assert message.content[0].text == f"done: {HANDLER_OUTPUT}"
    assert events[-1].type == "session.status_idle"
    assert events[-1].stop_reason.type == "end_turn"
    await client.close()


def cloud_bash_with_nobody_connected(target: Target) -> None:
    """A cloud environment's session runs the hosted bash tool while no client is connected."""
    client = target.client()
    script = [
        {
            "tool_calls": [
                {"name": "Bash", "arguments": {"command": "echo made-by-bash > out.txt && cat out.txt"}}
            ]
        },
        {"text": "bash said: {{output}}"},
    ]
    agent_id = scripted_agent(target, script, tools={"Bash": {"type": "hosted"}})
    env_id = environment(client, "cloud", networking={"type": "limited"})
    session = client.beta.sessions.create(agent=agent_id, environment_id=env_id)
    send_text(client, session.id, "run it")  # and nobody listens
    events = wait_for(client, session.id, idle("end_turn"), timeout=60)
    (use,) = [e for e in events if e.type == "agent.tool_use"]
    assert (use.name, use.evaluated_permission) == ("bash", "allow")
    (result,) = [e for e in events if e.type == "agent.tool_result"]
    assert result.tool_use_id == use.id
    assert "made-by-bash" in result.content[0].text
    (message,) = [e for e in events if e.type == "agent.message"]
    assert "made-by-bash" in message.content[0].text  # type: ignore[union-attr]


def tool_confirmation(target: Target) -> None:
    """An always_ask tool stops for user.tool_confirmation: denied once (the model hears why), then allowed."""
    client = target.client()
    script = [  # one script per turn (#deny, #allow)
        {"match": "#deny", "tool_calls": [{"name": "Bash", "arguments": {"command": "echo first"}}]},
        {"match": "#deny", "text": "after the denial: {{output}}"},
        {"match": "#allow", "tool_calls": [{"name": "Bash", "arguments": {"command": "echo second"}}]},
        {"match": "#allow", "text": "after the allow: {{output}}"},
    ]
    agent_id = scripted_agent(target, script, tools={"Bash": {"type": "hosted", "approval": "required"}})
    session = client.beta.sessions.create(agent=agent_id, environment_id=environment(client, "cloud"))
    for answer, expect in (("deny", "not this time"), ("allow", "second")):
        with client.beta.sessions.events.stream(session.id) as stream:
            send_text(client, session.id, f"try #{answer}")
            events = read_until(stream, idle("requires_action"))
            strict_events(events)
            (use,) = [e for e in events if e.type == "agent.tool_use"]
            assert (use.name, use.evaluated_permission) == ("bash", "ask")
            assert use.evaluation is not None
            assert use.evaluation.type == "always_ask"
            assert events[-1].stop_reason.event_ids == [use.id]
            confirmation: dict[str, Any] = {
                "type": "user.tool_confirmation",
                "tool_use_id": use.id,
                "result": answer,
            }
            if answer == "deny":
                confirmation["deny_message"] = "not this time"
            echo = client.beta.sessions.events.send(session.id, events=[confirmation])  # type: ignore[list-item]
            assert echo.data is not None
            assert echo.data[0].type == "user.tool_confirmation"
            rest = read_until(stream, idle("end_turn"))
        strict_events(rest)
        (confirmed,) = [e for e in rest if e.type == "user.tool_confirmation"]
        assert (confirmed.id, confirmed.result) == (echo.data[0].id, answer)
        (message,) = [e for e in rest if e.type == "agent.message"]
        assert expect in message.content[0].text, message  # type: ignore[union-attr]


def dropped_stream_resumes(target: Target) -> None:
    """A stream dropped mid-turn: re-opened with Last-Event-ID it gives every later event once; and the
    SDK's own way (history de-duplicated by id) agrees."""
    client = target.client()
    session = client.beta.sessions.create(
        agent=scripted_agent(target, TOOL_SCRIPT), environment_id=environment(client)
    )
    with client.beta.sessions.events.stream(session.id) as stream:
        send_text(client, session.id, "go")
        before = read_until(stream, lambda e: e.type == "agent.custom_tool_use")
    use = before[-1]
    # dropped: the turn goes on while nobody reads
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.custom_tool_result",
                "custom_tool_use_id": use.id,
                "content": [{"type": "text", "text": "x"}],
            }
        ],
    )
    wait_for(client, session.id, idle("end_turn"))
    with client.beta.sessions.events.stream(session.id, extra_headers={"Last-Event-ID": use.id}) as stream:
        after = read_until(stream, idle("end_turn"))
    strict_events(after)
    everything = history(client, session.id)
    ids = [e.id for e in before + after]
    assert ids == [e.id for e in everything], (ids, [e.id for e in everything])
    assert len(set(ids)) == len(ids)


def stream_resumed_while_running(target: Target) -> None:
    """A stream dropped while the turn goes on, re-opened with Last-Event-ID while it still runs: the
    missed events are replayed, then the live ones follow, each once, no gap."""
    client = target.client()
    script = [
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "answer"}}]},
        {"text": "slow answer after {{output}}", "delay_ms": 2500},  # still running when we reconnect
    ]
    session = client.beta.sessions.create(
        agent=scripted_agent(target, script), environment_id=environment(client)
    )
    with client.beta.sessions.events.stream(session.id) as stream:
        send_text(client, session.id, "go")
        before = read_until(stream, lambda e: e.type == "agent.custom_tool_use")
    use = before[-1]
    # dropped: the answer goes in and the turn runs on while nobody reads
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.custom_tool_result",
                "custom_tool_use_id": use.id,
                "content": [{"type": "text", "text": "x"}],
            }
        ],
    )
    missed = wait_for(client, session.id, lambda e: e.type == "user.custom_tool_result")
    with client.beta.sessions.events.stream(session.id, extra_headers={"Last-Event-ID": use.id}) as stream:
        assert client.beta.sessions.retrieve(session.id).status == "running"  # reconnected mid-turn
        after = read_until(stream, idle("end_turn"))
    strict_events(after)
    missed_ids = [e.id for e in missed]
    replayed = missed_ids[missed_ids.index(use.id) + 1 :]
    assert [e.id for e in after[: len(replayed)]] == replayed  # what happened while dropped, first
    live = [e.type for e in after[len(replayed) :]]
    assert "agent.message" in live, live  # then what happened after reconnecting
    assert "span.model_request_end" in live, live
    everything = history(client, session.id)
    ids = [e.id for e in before + after]
    assert ids == [e.id for e in everything], (ids, [e.id for e in everything])
    assert len(set(ids)) == len(ids)


def budget_reached(target: Target) -> None:
    """A budget stops the turn before the model call past it; the session says why."""
    client = target.client()
    usage = {"input_tokens": 1000, "output_tokens": 0}
    script = [
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "1"}}], "usage": usage},
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "2"}}], "usage": usage},
        {"text": "a third model call must not happen", "usage": usage},
    ]
    agent_id = scripted_agent(target, script, pricing={"input": 10, "output": 0})  # 1 cent a call
    session = client.beta.sessions.create(
        agent=agent_id,
        environment_id=environment(client),
        budget={"type": "limit", "max_list_cost": {"amount": "0.02", "currency": "USD"}},
    )
    assert session.budget is not None
    assert session.budget.max_list_cost.amount == "0.02"
    with client.beta.sessions.events.stream(session.id) as stream:
        send_text(client, session.id, "spend")
        events: list[Any] = []
        while (
            not events
            or events[-1].type != "session.status_idle"
            or events[-1].stop_reason.type != "budget_reached"
        ):
            batch = read_until(stream, lambda e: e.type == "session.status_idle")
            events += batch
            last = batch[-1]
            if last.stop_reason.type == "requires_action":
                client.beta.sessions.events.send(
                    session.id,
                    events=[
                        {
                            "type": "user.custom_tool_result",
                            "custom_tool_use_id": i,
                            "content": [{"type": "text", "text": "ok"}],
                        }
                        for i in last.stop_reason.event_ids
                    ],
                )
            else:
                assert last.stop_reason.type == "budget_reached", dump(events)
    strict_events(events)
    assert not any(e.type == "agent.message" for e in events)
    usages = [e for e in events if e.type == "session.usage"]
    assert usages[-1].usage.input_tokens == 2000
    after = client.beta.sessions.retrieve(session.id)
    assert after.usage.input_tokens == 2000
    assert after.usage.list_cost is not None
    assert float(after.usage.list_cost.amount) == 0.02
    with pytest.raises(anthropic.BadRequestError):
        send_text(client, session.id, "more")
    raised = client.beta.sessions.update(
        session.id, budget={"type": "limit", "max_list_cost": {"amount": "1.00", "currency": "USD"}}
    )
    assert raised.budget is not None
    assert raised.budget.max_list_cost.amount == "1.00"


def events_listed_and_paged(target: Target) -> None:
    client = target.client()
    session = client.beta.sessions.create(
        agent=scripted_agent(target, TOOL_SCRIPT), environment_id=environment(client)
    )
    send_text(client, session.id, "go")
    events = wait_for(client, session.id, idle("requires_action"))
    use = next(e for e in events if e.type == "agent.custom_tool_use")
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.custom_tool_result",
                "custom_tool_use_id": use.id,
                "content": [{"type": "text", "text": "x"}],
            }
        ],
    )
    everything = wait_for(client, session.id, idle("end_turn"))
    first = client.beta.sessions.events.list(session.id, limit=2)
    assert len(first.data) == 2
    assert first.next_page
    paged = [e.id for e in client.beta.sessions.events.list(session.id, limit=2)]  # the SDK follows next_page
    assert paged == [e.id for e in everything]
    newest_first = [e.id for e in client.beta.sessions.events.list(session.id, limit=3, order="desc")]
    assert newest_first == [e.id for e in reversed(everything)]
    only = list(
        client.beta.sessions.events.list(
            session.id, types=["agent.custom_tool_use", "user.custom_tool_result"]
        )
    )
    assert [e.type for e in only] == ["agent.custom_tool_use", "user.custom_tool_result"]
    sessions = [s.id for s in client.beta.sessions.list(limit=1)]
    assert session.id in sessions
    assert client.beta.sessions.archive(session.id).archived_at is not None
    assert session.id not in [s.id for s in client.beta.sessions.list()]
    assert session.id in [s.id for s in client.beta.sessions.list(include_archived=True)]
    deleted = client.beta.sessions.delete(session.id)
    assert (deleted.id, deleted.type) == (session.id, "session_deleted")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.retrieve(session.id)


async def async_client(target: Target) -> None:
    """The async client: agents, sessions, a custom tool answered, history."""
    client = target.async_client()
    agent = await client.beta.agents.create(name="async", model="claude-haiku-4-5", system="Be quick.")
    assert (await client.beta.agents.retrieve(agent.id)).id == agent.id
    updated = await client.beta.agents.update(agent.id, system="Be async.", version=1)
    assert (updated.version, updated.system) == (2, "Be async.")
    assert (await client.beta.agents.retrieve(agent.id, version=1)).system == "Be quick."
    assert [v.version async for v in client.beta.agents.versions.list(agent.id, limit=1)] == [2, 1]
    with pytest.raises(anthropic.ConflictError):
        await client.beta.agents.update(agent.id, system="stale", version=1)
    archived = await client.beta.agents.archive(agent.id)
    assert archived.archived_at is not None
    assert agent.id not in [a.id async for a in client.beta.agents.list()]
    env = await client.beta.environments.create(name="async", config={"type": "self_hosted"})
    session = await client.beta.sessions.create(
        agent=scripted_agent(target, TOOL_SCRIPT), environment_id=env.id
    )
    async with await client.beta.sessions.events.stream(session.id) as stream:
        await client.beta.sessions.events.send(
            session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "go"}]}]
        )
        seen: list[Any] = []
        async for event in stream:
            seen.append(event)
            if event.type == "agent.custom_tool_use":
                await client.beta.sessions.events.send(
                    session.id,
                    events=[
                        {
                            "type": "user.custom_tool_result",
                            "custom_tool_use_id": event.id,
                            "content": [{"type": "text", "text": HANDLER_OUTPUT}],
                        }
                    ],
                )
            if event.type == "agent.message":
                assert event.content[0].text == f"The tool said: {HANDLER_OUTPUT}"  # type: ignore[union-attr]
            if event.type == "session.status_idle" and event.stop_reason.type == "end_turn":
                break
    strict_events(seen)
    types = [e.type for e in seen]
    for kind in ("agent.custom_tool_use", "user.custom_tool_result", "agent.message"):
        assert types.count(kind) == 1, types
    listed = [s.id async for s in client.beta.sessions.list()]
    assert session.id in listed
    await client.close()


def _blocks(response: httpx.Response, stop: str, limit: int = 400) -> list[str]:
    """The SSE blocks of a streamed response until one containing ``stop``."""
    out: list[str] = []
    block: list[str] = []
    for line in response.iter_lines():
        if line:
            block.append(line)
            continue
        if block:
            out.append("\n".join(block))
            if stop in out[-1] or len(out) >= limit:
                return out
        block = []
    return out


def every_frame_names_its_type(target: Target) -> None:
    """Every server-sent event with data on skyloop's three streams has an ``event:`` line (the SDKs
    drop one without it)."""
    client = target.client()
    session = client.beta.sessions.create(
        agent=scripted_agent(target, TOOL_SCRIPT), environment_id=environment(client)
    )
    headers = {"Authorization": f"Bearer {target.token}"}
    streams = {
        "claude": f"/anthropic/v1/sessions/{session.id}/events/stream",
        "skyloop": f"/v1/sessions/{session.id}/stream",
        "openai": f"/openai/v1/agents/sessions/{session.id}/events",
    }
    send_text(client, session.id, "go")
    use = next(
        e for e in wait_for(client, session.id, idle("requires_action")) if e.type == "agent.custom_tool_use"
    )
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.custom_tool_result",
                "custom_tool_use_id": use.id,
                "content": [{"type": "text", "text": "x"}],
            }
        ],
    )
    wait_for(client, session.id, idle("end_turn"))
    stops = {"claude": '"end_turn"', "skyloop": '"status":"idle"', "openai": "agent.session.idle"}
    replay = {
        "claude": {"Last-Event-ID": "0"},
        "skyloop": {"Last-Event-ID": "0"},
        "openai": {"Last-Event-ID": "0"},
    }
    for name, path in streams.items():
        with httpx.stream(
            "GET", f"{target.base_url}{path}", headers={**headers, **replay[name]}, timeout=30
        ) as r:
            assert r.status_code == 200, (name, r.read())
            blocks = _blocks(r, stops[name])
        data = [b for b in blocks if any(line.startswith("data:") for line in b.splitlines())]
        assert data, (name, blocks)
        for block in data:
            assert any(line.startswith("event: ") for line in block.splitlines()), (name, block)


def webhook_verified_with_unwrap(target: Target) -> None:
    """An endpoint in Claude's format gets a session's events; each verifies with ``beta.webhooks.unwrap``."""
    from tests.webhook_receiver import WebhookReceiver

    client = target.client()
    with WebhookReceiver() as receiver:
        r = target.raw(
            "POST",
            "/v1/webhooks",
            json={
                "url": receiver.url,
                "format": "anthropic",
                "events": ["session.status_run_started", "session.status_idled"],
            },
        )
        assert r.status_code == 201, r.text
        secret = r.json()["secret"]
        session = client.beta.sessions.create(
            agent=scripted_agent(target, [{"text": "hi"}]), environment_id=environment(client)
        )
        send_text(client, session.id, "hello")
        wait_for(client, session.id, idle("end_turn"))
        deadline = time.monotonic() + 30
        while True:
            if target.pump is not None:
                target.pump(session.id)
            mine = [x for x in receiver.received if x.event["data"].get("id") == session.id]
            if len(mine) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        types = []
        for received in mine:
            event = client.beta.webhooks.unwrap(received.body.decode(), headers=received.headers, key=secret)
            assert event.type == "event"
            assert event.id == received.webhook_id
            types.append(event.data.type)
        assert types == ["session.status_run_started", "session.status_idled"], types
        with pytest.raises(Exception):  # noqa: B017, PT011 - standardwebhooks' verification error
            client.beta.webhooks.unwrap(mine[0].body.decode() + " ", headers=mine[0].headers, key=secret)
        target.raw("DELETE", f"/v1/webhooks/{r.json()['id']}")


def glossary_mcp() -> Any:
    """A real MCP server (the ``mcp`` SDK's) with one tool, ``define``, served by uvicorn."""
    from mcp.server.mcpserver import MCPServer

    from tests.servers import UvicornThread

    server = MCPServer("glossary")

    @server.tool()
    def define(term: str) -> str:
        """Define a term of the glossary."""
        return {"turn": "one Step Functions execution"}.get(term, f"no entry for {term}")

    return UvicornThread(server.streamable_http_app(), lifespan="on")


def mcp_tool_turn(target: Target, mcp_url: str) -> None:
    """An MCP toolset's call is agent.mcp_tool_use / agent.mcp_tool_result; the agent shows the server."""
    client = target.client()
    script = [
        {"tool_calls": [{"name": "define", "arguments": {"term": "turn"}}]},
        {"text": "glossary: {{output}}"},
    ]
    agent_id = scripted_agent(
        target, script, tools={"glossary": {"type": "mcp", "url": mcp_url, "timeout_s": 10}}
    )
    agent = client.beta.agents.retrieve(agent_id)
    assert [(s.name, s.url) for s in agent.mcp_servers] == [("glossary", mcp_url)]
    (toolset,) = agent.tools
    assert toolset.type == "mcp_toolset"
    assert toolset.mcp_server_name == "glossary"
    session = client.beta.sessions.create(agent=agent_id, environment_id=environment(client))
    send_text(client, session.id, "what is a turn?")
    events = wait_for(client, session.id, idle("end_turn"))
    (use,) = [e for e in events if e.type == "agent.mcp_tool_use"]
    assert (use.name, use.mcp_server_name, use.input) == ("define", "glossary", {"term": "turn"})
    (result,) = [e for e in events if e.type == "agent.mcp_tool_result"]
    assert result.mcp_tool_use_id == use.id
    (message,) = [e for e in events if e.type == "agent.message"]
    assert message.content[0].text == "glossary: one Step Functions execution"  # type: ignore[union-attr]


def initial_events_and_interrupt(target: Target) -> None:
    """``initial_events`` start the first turn; ``user.interrupt`` stops one waiting on the client."""
    client = target.client()
    session = client.beta.sessions.create(
        agent=scripted_agent(target, TOOL_SCRIPT),
        environment_id=environment(client),
        initial_events=[{"type": "user.message", "content": [{"type": "text", "text": "first"}]}],
    )
    events = wait_for(client, session.id, idle("requires_action"))
    assert events[0].type == "user.message"
    assert events[0].content[0].text == "first"  # type: ignore[union-attr]
    sent = client.beta.sessions.events.send(session.id, events=[{"type": "user.interrupt"}])
    assert sent.data is not None
    assert sent.data[0].type == "user.interrupt"
    after = wait_for(client, session.id, lambda e: e.type == "user.interrupt")
    (interrupt,) = [e for e in after if e.type == "user.interrupt"]
    assert interrupt.id == sent.data[0].id
    final = wait_for(
        client,
        session.id,
        lambda e: e.type == "session.status_idle" and e.stop_reason.type != "requires_action",
    )
    assert final[-1].stop_reason.type == "end_turn"
    assert client.beta.sessions.retrieve(session.id).status == "idle"


WORK_STATES = ["queued", "starting", "active", "stopping", "stopped"]


async def environment_worker(target: Target, workdir: Any) -> None:
    """The SDK's environment worker serves a self-hosted session: poll, ack, heartbeat, run its tools, stop."""
    import asyncio
    import contextlib

    from anthropic.lib.tools import beta_async_tool
    from anthropic.lib.tools.agent_toolset import beta_agent_toolset_20260401

    client = target.async_client()
    script = [
        {
            "tool_calls": [
                {"name": "write", "arguments": {"file_path": "made.txt", "content": "by the worker"}}
            ]
        },
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]},
        {"text": "done: {{output}}"},
    ]
    tools = {
        "Write": {"type": "hosted"},
        "lookup": {
            "type": "function",
            "runtime": "client",
            "description": "Look it up",
            "parameters": TOOL_SCHEMA,
        },
    }
    agent_id = scripted_agent(target, script, tools=tools)
    env = await client.beta.environments.create(name="worker", config={"type": "self_hosted"})
    session = await client.beta.sessions.create(agent=agent_id, environment_id=env.id)
    work = client.beta.environments.work
    assert [w async for w in work.list(env.id)] == []  # a session alone queues nothing
    await client.beta.sessions.events.send(
        session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "write it"}]}]
    )
    (item,) = [w async for w in work.list(env.id)]
    assert (item.state, item.data.id, item.environment_id) == ("queued", session.id, env.id)
    assert (await work.stats(env.id)).depth == 1

    @beta_async_tool
    async def lookup(q: str) -> str:
        """Look it up."""
        return HANDLER_OUTPUT

    worker = work.worker(
        environment_id=env.id,
        environment_key=target.token,
        workdir=workdir,
        max_idle=1.0,
        tools=lambda context: [*beta_agent_toolset_20260401(context), lookup],  # bound to each session
    )

    async def watch() -> list[Any]:
        """The session's stream while the worker serves it (from its first event: Last-Event-ID 0)."""
        out: list[Any] = []
        async with await client.beta.sessions.events.stream(
            session.id, extra_headers={"Last-Event-ID": "0"}
        ) as stream:
            async for event in stream:
                out.append(event)
                if event.type == "session.status_idle" and event.stop_reason.type == "end_turn":
                    return out
        return out

    watching = asyncio.create_task(watch())
    running = asyncio.create_task(worker.run())
    seen = ["queued"]
    try:
        deadline = time.monotonic() + 120
        while seen[-1] != "stopped":
            assert not running.done(), running.exception() if not running.cancelled() else "cancelled"
            assert time.monotonic() < deadline, f"the work item stayed {seen}"
            await asyncio.sleep(0.2)
            state = (await work.retrieve(item.id, environment_id=env.id)).state
            if state != seen[-1]:
                seen.append(state)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running

    streamed = await asyncio.wait_for(watching, timeout=30)
    strict_events(streamed)
    assert [e.type for e in streamed].count("agent.tool_use") == 1, [e.type for e in streamed]
    assert seen == sorted(seen, key=WORK_STATES.index), seen  # only forward
    assert (workdir / "made.txt").read_text() == "by the worker"
    events = [e async for e in client.beta.sessions.events.list(session.id, limit=100)]
    for event in events:
        HISTORY_EVENTS.validate_python(event.model_dump(mode="json", exclude_unset=True))
    types = [e.type for e in events]
    for kind in ("agent.tool_use", "user.tool_result", "agent.custom_tool_use", "user.custom_tool_result"):
        assert types.count(kind) == 1, types
    (message,) = [e for e in events if e.type == "agent.message"]
    assert message.content[0].text == f"done: {HANDLER_OUTPUT}"  # the model got the custom tool's output
    assert events[-1].type == "session.status_idle"
    assert events[-1].stop_reason.type == "end_turn"

    (done,) = [w async for w in work.list(env.id)]  # served once: no second item
    assert done.id == item.id
    assert done.state == "stopped"
    times = [
        done.created_at,
        done.acknowledged_at,
        done.started_at,
        done.latest_heartbeat_at,
        done.stopped_at,
    ]
    assert None not in times, done
    assert times == sorted(times), done  # queued, acknowledged, started (first heartbeat), stopped
    assert done.stop_requested_at is not None
    stats = await work.stats(env.id)
    assert (stats.type, stats.depth, stats.pending, stats.oldest_queued_at) == (
        "work_queue_stats",
        0,
        0,
        None,
    )
    assert stats.workers_polling is not None
    assert stats.workers_polling >= 1
    await client.close()
