"""Scenarios of the OpenAI Agents API suite; each takes a :class:`Target` and runs the SDK against it.

Every client validates every response strictly against the pinned SDK's
types (``_strict_response_validation``), so a shape that drifts from
``openai/types/beta/agents`` fails here.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from openai.types.beta import (
    AgentSessionEnvironmentFailedEvent,
    AgentSessionEnvironmentPendingEvent,
    AgentSessionEnvironmentReadyEvent,
    AgentSessionEnvironmentSuspendedEvent,
)

TOOL_PARAMS = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
HANDLER_OUTPUT = "forty-two from the client's handler"


@dataclass
class Target:
    base_url: str  # the deployment's endpoint (skyloop's own API under /v1)
    token: str = "unused"  # a skyloop bearer token (the SDK's api_key)

    def client(self, **kwargs: Any) -> OpenAI:
        return OpenAI(
            base_url=f"{self.base_url}/openai/v1",
            api_key=self.token,
            max_retries=0,
            timeout=30,
            _strict_response_validation=True,
            **kwargs,
        )

    def async_client(self) -> AsyncOpenAI:
        return AsyncOpenAI(
            base_url=f"{self.base_url}/openai/v1",
            api_key=self.token,
            max_retries=0,
            timeout=30,
            _strict_response_validation=True,
        )

    def newest_agent(self) -> str:
        """The id of the newest agent version of ``/v1/agents`` (inline agents included)."""
        r = httpx.get(
            f"{self.base_url}/v1/agents",
            params={"limit": 1, "order": "desc"},
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        return str(r.json()["data"][0]["id"])

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


def scripted_agent(target: Target, script: list[dict[str, Any]], **executor: Any) -> str:
    """A skyloop agent answering from ``script`` (harness ``scripted``); its id."""
    name = f"oa-{uuid.uuid4().hex[:10]}"
    spec = {
        "name": name,
        "prompt": "Use your tools.",
        "executor": {"harness": "scripted", "model": "scripted", "script": script, **executor},
        "tools": {
            "lookup": {
                "type": "function",
                "runtime": "client",
                "description": "Look it up",
                "parameters": TOOL_PARAMS,
            }
        },
    }
    return target.register(spec)


TOOL_SCRIPT = [
    {"tool_calls": [{"name": "lookup", "arguments": {"q": "answer"}}]},
    {"text": "The tool said: {{output}}"},
]


def new_session(client: OpenAI, agent_id: str, **kwargs: Any) -> Any:
    return client.beta.agents.sessions.create(
        environment={"type": "self_hosted", "workspace_directory": "/work"}, agent_id=agent_id, **kwargs
    )


def read_until(stream: Any, stop: str, *, limit: int = 500) -> list[Any]:
    out = []
    for event in stream:
        out.append(event)
        if event.type == stop or len(out) >= limit:
            break
    return out


# --------------------------------------------------------------------------- scenarios
def agents_crud(target: Target) -> None:
    client = target.client()
    agents = client.beta.agents
    created = agents.create(
        model="gpt-4.1-mini",
        name="Support bot",
        instructions="Be brief.",
        metadata={"team": "support"},
        tools=[
            {"type": "function", "name": "lookup", "description": "Look it up", "parameters": TOOL_PARAMS}
        ],
    )
    assert created.object == "agent"
    assert (created.model, created.name, created.instructions) == ("gpt-4.1-mini", "Support bot", "Be brief.")
    assert [t.type for t in created.tools] == ["function"]
    assert created.tools[0].name == "lookup"
    assert agents.retrieve(created.id).metadata == {"team": "support"}

    updated = agents.update(created.id, instructions="Be thorough.", metadata={"team": "ops"})
    assert updated.id == created.id  # same id, newer version
    again = agents.retrieve(created.id)
    assert (again.instructions, again.metadata, again.name) == (
        "Be thorough.",
        {"team": "ops"},
        "Support bot",
    )
    assert again.tools[0].name == "lookup"

    second = agents.create(model="gpt-4.1-mini", name="Second")
    listed = [a.id for a in agents.list(limit=1)]  # auto-paging, one per page
    assert created.id in listed
    assert second.id in listed
    assert listed.count(created.id) == 1  # one row per agent, not per version

    # an agent registered through skyloop's own /v1/agents is usable here by its id
    v1_id = scripted_agent(target, TOOL_SCRIPT)
    v1 = agents.retrieve(v1_id)
    assert v1.id == v1_id
    assert v1.instructions == "Use your tools."
    assert v1.tools[0].name == "lookup"

    deleted = agents.delete(created.id)
    assert deleted.deleted is True
    assert deleted.id == created.id
    with pytest.raises(openai.NotFoundError) as err:
        agents.retrieve(created.id)
    assert err.value.body["type"] == "not_found_error"  # type: ignore[index]
    agents.delete(second.id)


def client_tool_turn(target: Target) -> str:
    """``sessions.stream(..., tool_handlers=...)``: the handler's output reaches the model."""
    client = target.client()
    agent_id = scripted_agent(target, TOOL_SCRIPT)
    session = new_session(client, agent_id, metadata={"suite": "tool"})
    assert session.status == "idle"
    assert session.environment.type == "self_hosted"
    seen: list[dict[str, Any]] = []

    def lookup(arguments: dict[str, Any]) -> str:
        seen.append(arguments)
        return HANDLER_OUTPUT

    with client.beta.agents.sessions.stream(
        session.id, input="look it up", tool_handlers={"lookup": lookup}
    ) as s:
        result = s.get_final_result()
    assert seen == [{"q": "answer"}]
    assert result.output_text == f"The tool said: {HANDLER_OUTPUT}"
    assert result.turn.status == "completed"
    after = client.beta.agents.sessions.retrieve(session.id)
    assert after.status == "idle"
    assert after.required_actions == []
    return session.id


def replay_finished_turn(target: Target) -> None:
    """``events.stream`` with ``Last-Event-ID: 0`` replays a finished turn in order."""
    client = target.client()
    session_id = client_tool_turn(target)
    with client.beta.agents.sessions.events.stream(
        session_id, extra_headers={"Last-Event-ID": "0"}
    ) as stream:
        events = read_until(stream, "agent.session.idle")
    types = [e.type for e in events]
    order = [
        "agent.session.turn.created",
        "agent.session.requires_action",
        "agent.session.turn.completed",
        "agent.session.idle",
    ]
    positions = [types.index(t) for t in order]
    assert positions == sorted(positions), types
    calls = [
        e for e in events if e.type == "agent.session.turn.item.added" and e.item.type == "function_call"
    ]
    assert [c.item.name for c in calls] == ["lookup"]
    outputs = [
        e.item
        for e in events
        if e.type == "agent.session.turn.item.added" and e.item.type == "function_call_output"
    ]
    assert [o.output for o in outputs] == [HANDLER_OUTPUT]
    assert len({e.event_id for e in events}) == len(events)


def listings(target: Target) -> None:
    client = target.client()
    sessions = client.beta.agents.sessions
    session_id = client_tool_turn(target)
    items = list(sessions.items.list(session_id, limit=2, order="asc"))  # auto-paged, two a page
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
    assert items[0].role == "user"
    assert items[-1].role == "assistant"
    turn_id = items[-1].turn_id
    assert {i.turn_id for i in items} == {turn_id}
    newest_first = list(sessions.items.list(session_id, limit=3))
    assert [i.id for i in newest_first] == [i.id for i in reversed(items)]

    turns = list(sessions.turns.list(session_id))
    assert [t.id for t in turns] == [turn_id]
    assert turns[0].status == "completed"
    assert turns[0].agent_id
    assert turns[0].completed_at is not None
    turn = sessions.turns.retrieve(turn_id, session_id=session_id)
    assert turn.status == "completed"
    assert turn.session_id == session_id
    turn_items = list(sessions.turns.items.list(turn_id, session_id=session_id, limit=1, order="asc"))
    assert [i.id for i in turn_items] == [i.id for i in items]
    with pytest.raises(openai.NotFoundError):
        sessions.turns.retrieve("resp_unknown", session_id=session_id)

    tag = uuid.uuid4().hex
    made = [client_tool_turn_session(client, target, tag) for _ in range(3)]
    paged = [s.id for s in sessions.list(limit=1, metadata={"tag": tag})]
    assert sorted(paged) == sorted(made)
    assert len(paged) == 3
    first_page = sessions.list(limit=2, metadata={"tag": tag})
    assert len(first_page.data) == 2
    assert first_page.has_more is True


def client_tool_turn_session(client: OpenAI, target: Target, tag: str) -> str:
    agent_id = scripted_agent(target, TOOL_SCRIPT)
    return str(new_session(client, agent_id, metadata={"tag": tag}).id)


def dropped_stream_resumes(target: Target) -> None:
    """A stream dropped mid-turn and resumed with ``Last-Event-ID``: no gap, no repeat."""
    client = target.client()
    words = " ".join(f"w{n}" for n in range(30))
    agent_id = scripted_agent(target, [{"text": words, "word_delay_ms": 30}])
    session = new_session(client, agent_id)
    sessions = client.beta.agents.sessions
    first = sessions.events.stream(session.id)
    sessions.events.create(
        session.id,
        events=[
            {
                "type": "agent.session.input.message",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "talk"}]}],
            }
        ],
    )
    part = read_until(first, "agent.session.turn.output_text.delta")
    first.close()  # dropped mid-turn
    assert part[-1].type == "agent.session.turn.output_text.delta"
    with sessions.events.stream(session.id, extra_headers={"Last-Event-ID": part[-1].event_id}) as second:
        rest = read_until(second, "agent.session.idle")
    ids = [e.event_id for e in part + rest]
    assert len(set(ids)) == len(ids)
    with sessions.events.stream(session.id, extra_headers={"Last-Event-ID": "0"}) as whole:
        everything = read_until(whole, "agent.session.idle")
    assert [e.event_id for e in everything] == ids  # the resumed pair saw exactly the whole
    text = "".join(e.delta for e in part + rest if e.type == "agent.session.turn.output_text.delta")
    assert text == words


def spend_control(target: Target) -> None:
    """A budget stops the turn before the model call past it: ``budget_reached``, usage on the session."""
    client = target.client()
    usage = {"input_tokens": 1000, "output_tokens": 0}
    script = [
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "1"}}], "usage": usage},
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "2"}}], "usage": usage},
        {"text": "a third model call must not happen", "usage": usage},
    ]
    # 10 USD per million input tokens: each call of 1,000 tokens costs 1 cent
    agent_id = scripted_agent(target, script, pricing={"input": 10, "output": 0})
    session = new_session(client, agent_id, spend_control={"limit": 2})
    assert session.spend_control.limit == 2
    assert session.spend_control.consumed == 0
    with client.beta.agents.sessions.stream(
        session.id, input="spend", tool_handlers={"lookup": lambda a: "ok"}
    ) as s:
        events = list(s)
    types = [e.type for e in events]
    assert types[-1] == "agent.session.budget_reached", types
    failed = [e for e in events if e.type == "agent.session.turn.failed"]
    assert len(failed) == 1
    assert failed[0].turn.error is not None
    assert failed[0].turn.error.code == "session_budget_exceeded"
    assert not any(e.type == "agent.session.turn.item.done" and e.item.type == "message" for e in events)
    after = client.beta.agents.sessions.retrieve(session.id)
    assert after.status == "budget_reached"
    assert (after.spend_control.limit, after.spend_control.consumed) == (2, 2), after.spend_control
    assert after.usage is not None
    assert after.usage.input_tokens == 2000
    with pytest.raises(openai.BadRequestError):
        client.beta.agents.sessions.events.create(
            session.id,
            events=[
                {
                    "type": "agent.session.input.message",
                    "input": [{"role": "user", "content": [{"type": "input_text", "text": "more"}]}],
                }
            ],
        )
    # a raised limit lets the session go on
    raised = client.beta.agents.sessions.update(session.id, spend_control={"limit": 100})
    assert raised.status != "budget_reached"


def unsupported_features(target: Target) -> None:
    client = target.client()
    agents = client.beta.agents
    agent_id = scripted_agent(target, TOOL_SCRIPT)
    cases: list[tuple[str, Any]] = [
        (
            "installing packages",
            lambda: agents.sessions.create(
                environment={"type": "openai_hosted", "packages": {"python": ["requests"]}},
                agent_id=agent_id,
                input="x",
            ),
        ),
        (
            "network restrictions by domain",
            lambda: agents.sessions.create(
                environment={
                    "type": "openai_hosted",
                    "network": {"access": "restricted", "allowed_domains": ["a.b"]},
                },
                agent_id=agent_id,
                input="x",
            ),
        ),
        (
            "files by OpenAI file id",
            lambda: agents.sessions.create(
                environment={
                    "type": "openai_hosted",
                    "files": [{"type": "file_id", "file_id": "f", "path": "/workspace/a"}],
                },
                agent_id=agent_id,
                input="x",
            ),
        ),
        ("web search", lambda: agents.create(model="gpt-4.1-mini", tools=[{"type": "web_search"}])),
        ("computer use", lambda: agents.create(model="gpt-4.1-mini", tools=[{"type": "computer_use"}])),
        ("subagents", lambda: agents.create(model="gpt-4.1-mini", multi_agent={"enabled": True})),
        ("vaults", lambda: new_session(client, agent_id, vault_ids=["vault_1"])),
        ("vaults", lambda: agents.vaults.list()),
        ("environments", lambda: agents.environments.list()),
        ("subagents", lambda: agents.sessions.subagents.list("0" * 32)),
        ("artifacts", lambda: agents.sessions.artifacts.list("0" * 32)),
    ]
    for feature, call in cases:
        with pytest.raises(openai.BadRequestError) as err:
            call()
        body = err.value.body
        assert isinstance(body, dict), (feature, body)
        assert body["code"] == "unsupported_feature", (feature, body)
        assert body["type"] == "invalid_request_error", (feature, body)
        assert feature in body["message"], (feature, body)
    with pytest.raises(openai.NotFoundError):
        agents.sessions.retrieve("0" * 32)


def streamed_create(target: Target) -> None:
    """``sessions.create(stream=True, tool_handlers=...)``: the created session's first turn, streamed."""
    client = target.client()
    agent_id = scripted_agent(target, TOOL_SCRIPT)
    stream = client.beta.agents.sessions.create(
        environment={"type": "none"},
        agent_id=agent_id,
        input="look it up",
        stream=True,
        tool_handlers={"lookup": lambda arguments: HANDLER_OUTPUT},
    )
    result = stream.get_final_result()
    assert result.output_text == f"The tool said: {HANDLER_OUTPUT}"


def _sse_frames(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data: "))
        for block in text.split("\n\n")
        for line in block.splitlines()
        if line.startswith("data: ")
    ]


def streamed_create_answers_303_to_its_stream(target: Target) -> None:
    """A create with ``stream: true`` is answered ``303 See Other`` to the session's events stream (the
    deployment's function URL cannot take a body); the SDK follows it, and so does any HTTP client."""
    agent_id = scripted_agent(target, TEXT_SCRIPT)
    headers = {"Authorization": f"Bearer {target.token}"}
    url = f"{target.base_url}/openai/v1/agents/sessions"
    body = {"environment": {"type": "none"}, "agent_id": agent_id, "input": "report", "stream": True}
    with httpx.Client(timeout=30, headers=headers) as http:
        first = http.post(url, json=body)
        # Then the session is created and its stream named, with the session in the body
        assert first.status_code == 303, first.text
        session_id = first.json()["id"]
        assert first.headers["location"] == (f"/openai/v1/agents/sessions/{session_id}/events?created=turn")
        # Following it (a GET) streams the created session, then its first turn to its end
        followed = http.post(url, json=body, follow_redirects=True)
        assert followed.status_code == 200
        assert followed.headers["content-type"].startswith("text/event-stream")
        frames = _sse_frames(followed.text)
        assert frames[0]["type"] == "agent.session.created"
        assert frames[0]["event_id"] == "evt_0_0"
        (redirect,) = followed.history  # the 303 it followed, to that new session's stream
        assert frames[0]["session"]["id"] == redirect.json()["id"] != session_id
        assert frames[-1]["type"] == "agent.session.idle"
        assert "Report: all quiet." in followed.text
        # Without input there is no turn: the created event alone
        quiet = http.post(
            url,
            json={
                "environment": {"type": "self_hosted", "workspace_directory": "/w"},
                "agent_id": agent_id,
                "stream": True,
            },
        )
        assert quiet.status_code == 303
        assert quiet.headers["location"].endswith("?created=session")
        alone = http.get(f"{target.base_url}{quiet.headers['location']}")
        assert [f["type"] for f in _sse_frames(alone.text)] == ["agent.session.created"]
        # A stream asked for with an unknown created= is a 400 naming what it takes
        bad = http.get(f"{target.base_url}/openai/v1/agents/sessions/{session_id}/events?created=later")
        assert bad.status_code == 400
        assert "turn, session" in bad.json()["error"]["message"]


HOSTED_SCRIPT = [
    {
        "tool_calls": [
            {"name": "Bash", "arguments": {"command": "cat notes.txt; echo $GREETING; cat made.txt"}}
        ]
    },
    {"text": "The command said: {{output}}"},
]


ENVIRONMENT_EVENTS: dict[str, type[Any]] = {
    "agent.session.environment.pending": AgentSessionEnvironmentPendingEvent,
    "agent.session.environment.ready": AgentSessionEnvironmentReadyEvent,
    "agent.session.environment.failed": AgentSessionEnvironmentFailedEvent,
    "agent.session.environment.suspended": AgentSessionEnvironmentSuspendedEvent,
}


def openai_hosted_environment_runs_command_executions(target: Target) -> None:
    """``environment: openai_hosted`` is skyloop's hosted environment: the turn's Bash calls run in the
    session's workspace with no client, as ``command_execution`` items (files, env and setup applied)."""
    import base64

    client = target.client()
    agent_id = scripted_agent(target, HOSTED_SCRIPT)
    environment = {
        "type": "openai_hosted",
        "network": {"access": "disabled"},
        "files": [
            {
                "type": "inline",
                "path": "/workspace/notes.txt",
                "data": base64.b64encode(b"from a file\n").decode(),
            }
        ],
        "env": {"GREETING": "from env"},
        "setup_commands": [{"command": "echo from setup > made.txt"}],
    }
    stream = client.beta.agents.sessions.create(
        environment=environment, agent_id=agent_id, input="go", stream=True
    )
    events = list(stream)
    session_id = events[0].session.id
    # the workspace is made at the first hosted call: pending, then ready, before the command starts
    assert _environment_steps(events) == ["pending", "ready", "command_execution"]
    added = [
        e.item
        for e in events
        if e.type == "agent.session.turn.item.added" and e.item.type == "command_execution"
    ]
    done = [
        e.item
        for e in events
        if e.type == "agent.session.turn.item.done" and e.item.type == "command_execution"
    ]
    assert [a.status for a in added] == ["in_progress"]
    assert len(done) == 1
    assert done[0].id == added[0].id
    assert done[0].command == "cat notes.txt; echo $GREETING; cat made.txt"
    assert done[0].exit_code == 0
    assert done[0].status == "completed"
    assert done[0].output == "from a file\nfrom env\nfrom setup"
    assert done[0].cwd == "/workspace"
    assert isinstance(done[0].duration_ms, int)
    deltas = [e for e in events if e.type == "agent.output.command_execution_output.delta"]
    assert "".join(d.delta for d in deltas).startswith("from a file")
    assert all(d.item_id == added[0].id for d in deltas)
    assert events[-1].type == "agent.session.idle"
    # the session says what environment it has, and its items list the command as one item
    session = client.beta.agents.sessions.retrieve(session_id)
    assert session.environment.type == "openai_hosted"
    assert session.environment.network.access == "disabled"
    assert [f.path for f in session.environment.files] == ["/workspace/notes.txt"]
    kinds = [i.type for i in client.beta.agents.sessions.items.list(session_id)]
    assert kinds == ["message", "command_execution", "message"]
    # events.stream replays the same lifecycle (it is in the session's log), each event the SDK's type
    with client.beta.agents.sessions.events.stream(
        session_id, extra_headers={"Last-Event-ID": "0"}
    ) as replay:
        replayed = read_until(replay, "agent.session.idle")
    assert _environment_steps(replayed) == ["pending", "ready", "command_execution"]
    for event in replayed:
        if event.type.startswith("agent.session.environment."):
            assert isinstance(event, ENVIRONMENT_EVENTS[event.type])
            assert event.environment.id == session.environment.id
            assert (event.environment.type, event.environment.error) == ("openai_hosted", None)
            assert event.environment.status == event.type.rsplit(".", 1)[1]
            assert event.turn_id == done[0].turn_id


def openai_hosted_environment_setup_failure(target: Target) -> None:
    """A setup command that fails is ``agent.session.environment.failed`` (its error says why), and the
    command it held back ends as a failed ``command_execution``; the next call tries the setup again."""
    client = target.client()
    script = [
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo first"}}]},
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo second"}}]},
        {"text": "done"},
    ]
    agent_id = scripted_agent(target, script)
    environment = {
        "type": "openai_hosted",
        "network": {"access": "disabled"},
        "setup_commands": [{"command": "test -f ready || (touch ready; echo not yet; exit 3)"}],
    }
    session = client.beta.agents.sessions.create(environment=environment, agent_id=agent_id, input="go")
    wait_idle(client, session.id)
    with client.beta.agents.sessions.events.stream(
        session.id, extra_headers={"Last-Event-ID": "0"}
    ) as stream:
        events = read_until(stream, "agent.session.idle")
    steps = _environment_steps(events)
    assert steps == ["pending", "failed", "command_execution", "pending", "ready", "command_execution"]
    (failed,) = [e for e in events if e.type == "agent.session.environment.failed"]
    assert isinstance(failed, ENVIRONMENT_EVENTS["agent.session.environment.failed"])
    assert failed.environment.status == "failed"
    assert failed.environment.error is not None
    assert failed.environment.error.code == "environment_setup_failed"
    assert "exited 3" in failed.environment.error.message
    done = [
        e.item
        for e in events
        if e.type == "agent.session.turn.item.done" and e.item.type == "command_execution"
    ]
    assert [(d.command, d.status, d.exit_code) for d in done] == [
        ("echo first", "failed", None),
        ("echo second", "completed", 0),
    ]
    assert done[0].output is not None
    assert done[0].output.startswith("Error: the environment's setup command")


def _environment_steps(events: list[Any]) -> list[str]:
    """The environment's lifecycle and each command's start, in stream order."""
    steps = []
    for event in events:
        if event.type.startswith("agent.session.environment."):
            steps.append(event.type.rsplit(".", 1)[1])
        elif event.type == "agent.session.turn.item.added" and event.item.type == "command_execution":
            steps.append("command_execution")
    return steps


def cancel_while_parked(target: Target) -> None:
    client = target.client()
    agent_id = scripted_agent(target, TOOL_SCRIPT)
    session = new_session(client, agent_id)
    sessions = client.beta.agents.sessions
    with sessions.events.stream(session.id) as stream:
        sessions.events.create(
            session.id,
            events=[
                {
                    "type": "agent.session.input.message",
                    "input": [{"role": "user", "content": [{"type": "input_text", "text": "go"}]}],
                }
            ],
        )
        read_until(stream, "agent.session.requires_action")
        parked = sessions.retrieve(session.id)
        assert parked.status == "requires_action"
        assert [a.type for a in parked.required_actions] == ["function_call"]
        sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
        rest = read_until(stream, "agent.session.idle")
    assert "agent.session.turn.cancelled" in [e.type for e in rest]
    turns = list(sessions.turns.list(session.id))
    assert [t.status for t in turns] == ["cancelled"]


async def async_client(target: Target) -> None:
    client = target.async_client()
    agents = client.beta.agents
    agent = await agents.create(model="gpt-4.1-mini", name="async")
    assert (await agents.retrieve(agent.id)).name == "async"
    agent_id = scripted_agent(target, TOOL_SCRIPT)
    session = await agents.sessions.create(
        environment={"type": "self_hosted", "workspace_directory": "/w"}, agent_id=agent_id
    )

    async def lookup(arguments: dict[str, Any]) -> str:
        return HANDLER_OUTPUT

    async with agents.sessions.stream(session.id, input="look it up", tool_handlers={"lookup": lookup}) as s:
        result = await s.get_final_result()
    assert result.output_text == f"The tool said: {HANDLER_OUTPUT}"
    items = [i async for i in agents.sessions.items.list(session.id, limit=1)]
    assert len(items) == 4
    await agents.delete(agent.id)
    await client.close()


def wait_idle(client: OpenAI, session_id: str, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        session = client.beta.agents.sessions.retrieve(session_id)
        if session.status != "in_progress":
            return session
        time.sleep(0.05)
    raise AssertionError(json.dumps({"session": session_id, "status": "in_progress"}))


# --------------------------------------------------------------------------- automations
TEXT_SCRIPT = [{"text": "Report: all quiet."}]


def _input(text: str) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]


def _new_session_target(agent_id: str, text: str = "write the report") -> dict[str, Any]:
    return {
        "type": "new_session",
        "agent_id": agent_id,
        "environment": {"type": "self_hosted", "workspace_directory": "/reports"},
        "input": _input(text),
        "metadata": {"from": "automation"},
    }


def automations_crud(target: Target) -> None:
    """Create, retrieve, update, list (paged), pause, resume and delete; bad input is a 400 naming the field."""
    client = target.client()
    automations = client.beta.agents.automations
    agent_id = scripted_agent(target, TEXT_SCRIPT)
    tag = uuid.uuid4().hex[:12]
    created = automations.create(
        type="periodic",
        name="Weekday report",
        expression="0 9 * * MON-FRI",
        timezone="Europe/Berlin",
        target=_new_session_target(agent_id),  # type: ignore[arg-type]
        metadata={"tag": tag},
    )
    assert created.object == "agent.automation"
    assert created.type == "periodic"
    assert (created.expression, created.timezone, created.status) == (
        "0 9 * * MON-FRI",
        "Europe/Berlin",
        "active",
    )
    assert created.target.type == "new_session"
    assert created.target.agent_id == agent_id
    assert created.target.environment.type == "self_hosted"
    assert created.created_by.type == "developer"
    assert automations.retrieve(created.id).model_dump() == created.model_dump()

    updated = automations.update(
        created.id, expression="*/30 8-18 * * *", name="Half-hourly", metadata={"t": tag}
    )
    assert (updated.type, updated.name, updated.metadata) == ("periodic", "Half-hourly", {"t": tag})
    assert updated.type == "periodic"
    assert updated.expression == "*/30 8-18 * * *"
    assert updated.timezone == "Europe/Berlin"

    once = automations.create(
        type="once",
        name="Reminder",
        run_at=int(time.time()) + 3600,
        target=_new_session_target(agent_id, "remind me"),  # type: ignore[arg-type]
    )
    assert once.type == "once"
    assert once.status == "active"

    everything = list(automations.list(limit=1))  # auto-paging, one per page
    listed = [a.id for a in everything]
    assert created.id in listed
    assert once.id in listed
    assert len(set(listed)) == len(listed)
    stamps = [a.created_at for a in everything]
    assert stamps == sorted(stamps, reverse=True)  # newest first
    oldest_first = [a.id for a in automations.list(limit=2, order="asc")]
    assert oldest_first == list(reversed(listed))

    paused = automations.pause(created.id)
    assert paused.status == "paused"
    assert automations.retrieve(created.id).status == "paused"
    resumed = automations.resume(created.id)
    assert resumed.status == "active"

    before = len(list(automations.list(limit=100)))
    bad: list[tuple[str, dict[str, Any]]] = [
        ("expression", {"expression": "61 * * * *"}),
        ("expression", {"expression": "0 9 1 * MON"}),
        ("timezone", {"timezone": "Mars/Olympus"}),
        ("run_at", {"type": "once", "run_at": 1, "expression": None, "timezone": None}),
        ("target.agent_id", {"target": _new_session_target("0" * 32)}),
    ]
    for param, change in bad:
        args: dict[str, Any] = {
            "type": "periodic",
            "name": "bad",
            "expression": "0 9 * * *",
            "timezone": "UTC",
            "target": _new_session_target(agent_id),
            **change,
        }
        with pytest.raises(openai.BadRequestError) as err:
            automations.create(**{k: v for k, v in args.items() if v is not None})
        body = err.value.body
        assert isinstance(body, dict)
        assert body["param"] == param, body
        assert body["message"].startswith(param.split(".")[0]), body
    with pytest.raises(openai.BadRequestError) as err:
        automations.update(created.id, expression="* * * * * *")
    assert err.value.body["param"] == "expression"  # type: ignore[index]
    assert len(list(automations.list(limit=100))) == before  # nothing written
    assert automations.retrieve(created.id).expression == "*/30 8-18 * * *"

    # an inline agent: registered with the automation (not an agent of agents.list), shown in its target
    newest_before = target.newest_agent()
    with pytest.raises(openai.BadRequestError):  # a refused automation registers no inline agent
        automations.create(
            type="periodic",
            name="bad inline",
            expression="0 9 1 * MON",
            timezone="UTC",
            target={**_new_session_target(agent_id), "agent_id": None, "agent": {"model": "gpt-4.1-mini"}},  # type: ignore[typeddict-item]
        )
    assert target.newest_agent() == newest_before
    inline_target = {k: v for k, v in _new_session_target(agent_id).items() if k != "agent_id"}
    inline = automations.create(
        type="periodic",
        name="Inline",
        expression="0 7 * * *",
        timezone="UTC",
        target={**inline_target, "agent": {"model": "gpt-4.1-mini", "instructions": "Be brief."}},  # type: ignore[typeddict-item]
    )
    assert inline.target.type == "new_session"
    assert inline.target.agent_id is None
    assert inline.target.agent is not None
    assert (inline.target.agent.model, inline.target.agent.instructions) == ("gpt-4.1-mini", "Be brief.")
    assert inline.id not in [a.id for a in client.beta.agents.list(limit=100)]
    automations.delete(inline.id)

    session = new_session(client, agent_id)
    follow_up = automations.create(
        type="periodic",
        name="Follow up",
        expression="@daily",
        timezone="UTC",
        target={"type": "existing_session", "session_id": session.id, "instructions": "any news?"},
    )
    assert follow_up.target.type == "existing_session"
    assert [a.id for a in automations.list(session_id=session.id)] == [follow_up.id]

    for automation in (created, once, follow_up):
        deleted = automations.delete(automation.id)
        assert (deleted.id, deleted.deleted, deleted.object) == (
            automation.id,
            True,
            "agent.automation.deleted",
        )
        with pytest.raises(openai.NotFoundError):
            automations.retrieve(automation.id)


def automation_invocation(target: Target) -> None:
    """``invocations.create`` runs the automation once: a new session whose turn completes."""
    client = target.client()
    automations = client.beta.agents.automations
    agent_id = scripted_agent(target, TEXT_SCRIPT)
    automation = automations.create(
        type="periodic",
        name="Yearly",
        expression="@yearly",
        timezone="UTC",
        target=_new_session_target(agent_id),  # type: ignore[arg-type]
    )
    invocation = automations.invocations.create(automation.id)
    assert invocation.object == "agent.automation.invocation"
    assert invocation.automation_id == automation.id
    assert invocation.source.type == "manual"
    assert invocation.scheduled_at is None
    assert invocation.status == "completed"
    assert invocation.session_id is not None
    session = wait_idle(client, invocation.session_id)
    assert session.status == "idle"
    assert session.metadata["from"] == "automation"
    assert session.environment.type == "self_hosted"
    items = list(client.beta.agents.sessions.items.list(invocation.session_id, order="asc"))
    assert [(i.type, i.role) for i in items] == [("message", "user"), ("message", "assistant")]
    assert items[0].content[0].text == "write the report"
    assert items[1].content[0].text == "Report: all quiet."
    turns = list(client.beta.agents.sessions.turns.list(invocation.session_id))
    assert [t.status for t in turns] == ["completed"]

    again = automations.invocations.retrieve(invocation.id, automation_id=automation.id)
    assert (again.id, again.session_id, again.status) == (invocation.id, invocation.session_id, "completed")
    assert [i.id for i in automations.invocations.list(automation.id)] == [invocation.id]
    with pytest.raises(openai.NotFoundError):
        automations.invocations.retrieve("0" * 32, automation_id=automation.id)

    # an existing session's target: the instructions start a turn in that session
    session_id = invocation.session_id
    follow = automations.create(
        type="periodic",
        name="Nudge",
        expression="@yearly",
        timezone="UTC",
        target={"type": "existing_session", "session_id": session_id, "instructions": "anything new?"},
    )
    nudge = automations.invocations.create(follow.id)
    assert nudge.session_id == session_id
    wait_idle(client, session_id)
    texts = [i.content[0].text for i in client.beta.agents.sessions.items.list(session_id, order="asc")]
    assert texts[2] == "anything new?"
    automations.delete(follow.id)
    automations.delete(automation.id)


async def async_automations(target: Target) -> None:
    client = target.async_client()
    automations = client.beta.agents.automations
    agent_id = scripted_agent(target, TEXT_SCRIPT)
    created = await automations.create(
        type="periodic",
        name="async",
        expression="15 */6 * * *",
        timezone="America/New_York",
        target=_new_session_target(agent_id),  # type: ignore[arg-type]
    )
    assert (await automations.retrieve(created.id)).name == "async"
    assert (await automations.pause(created.id)).status == "paused"
    assert (await automations.resume(created.id)).status == "active"
    invocation = await automations.invocations.create(created.id)
    assert invocation.status == "completed"
    listed = [i.id async for i in automations.invocations.list(created.id, limit=1)]
    assert listed == [invocation.id]
    assert created.id in [a.id async for a in automations.list(limit=1)]
    assert (await automations.delete(created.id)).deleted is True
    await client.close()


# --------------------------------------------------------------------------- webhook endpoints
def webhook_endpoints(target: Target) -> None:
    """``client.webhooks``: create (the secret once), retrieve, update, list, rotate, test, delete, event types."""
    from tests.webhook_receiver import WebhookReceiver

    client = target.client()
    hooks = client.webhooks
    types = hooks.event_types.list()
    assert types.object == "list"
    assert types.data == [
        "agent.session.created",
        "agent.session.in_progress",
        "agent.session.action_required",
        "agent.session.idle",
        "agent.session.failed",
    ]
    with WebhookReceiver() as receiver:
        created = hooks.create(name="sessions", url=receiver.url, event_types=["agent.session.idle"])
        assert created.object == "webhook_endpoint"
        assert created.signing_secret.startswith("whsec_")
        assert created.signing_secret_hint
        assert created.event_types == ["agent.session.idle"]
        got = hooks.retrieve(created.id)
        assert (got.name, got.url, got.event_types) == ("sessions", receiver.url, ["agent.session.idle"])
        assert "signing_secret" not in got.model_dump()
        updated = hooks.update(
            created.id, name="renamed", event_types=["agent.session.idle", "agent.session.failed"]
        )
        assert (updated.name, updated.event_types) == (
            "renamed",
            ["agent.session.idle", "agent.session.failed"],
        )
        assert created.id in [e.id for e in hooks.list(limit=1)]

        tested = hooks.test(created.id, event_type="agent.session.idle")
        assert (tested.object, tested.success, tested.status_code) == ("webhook_endpoint.test", True, 200)
        assert tested.webhook_endpoint_id == created.id
        sample = receiver.wait_for("agent.session.idle")
        event = client.webhooks.unwrap(sample.body, sample.headers, secret=created.signing_secret)
        assert event.type == "agent.session.idle"
        with pytest.raises(openai.InvalidWebhookSignatureError):
            client.webhooks.unwrap(sample.body, sample.headers, secret="whsec_" + "A" * 44)

        rotated = hooks.rotate_secret(created.id)
        assert rotated.signing_secret != created.signing_secret
        hooks.test(created.id, event_type="agent.session.failed")
        again = receiver.wait_for("agent.session.failed")
        assert client.webhooks.unwrap(again.body, again.headers, secret=rotated.signing_secret).type == (
            "agent.session.failed"
        )

        for bad, param in (
            (
                lambda: hooks.create(name="x", url=receiver.url, event_types=["batch.completed"]),
                "event_types",
            ),
            (lambda: hooks.create(name="x", url=receiver.url, event_types=["no.such"]), "event_types"),  # type: ignore[list-item]
            (
                lambda: hooks.create(name="x", url="ftp://example.com", event_types=["agent.session.idle"]),
                None,
            ),
        ):
            with pytest.raises(openai.BadRequestError) as err:
                bad()
            if param:
                assert err.value.body["param"] == param  # type: ignore[index]
        deleted = hooks.delete(created.id)
        assert (deleted.id, deleted.deleted, deleted.object) == (created.id, True, "webhook_endpoint.deleted")
        with pytest.raises(openai.NotFoundError):
            hooks.retrieve(created.id)


def webhook_delivered_on_turn(target: Target) -> None:
    """A turn's ``agent.session.idle`` reaches the endpoint and verifies with ``client.webhooks.unwrap``."""
    from tests.webhook_receiver import WebhookReceiver

    client = target.client()
    with WebhookReceiver() as receiver:
        endpoint = client.webhooks.create(
            name="turns", url=receiver.url, event_types=["agent.session.created", "agent.session.idle"]
        )
        session = new_session(client, scripted_agent(target, TEXT_SCRIPT), input="report")
        wait_idle(client, session.id)
        events: dict[str, Any] = {}
        for kind in ("agent.session.created", "agent.session.idle"):
            received = receiver.wait_for(kind, session_id=session.id)
            events[kind] = client.webhooks.unwrap(
                received.body, received.headers, secret=endpoint.signing_secret
            )
            assert events[kind].type == kind
            assert events[kind].id == received.webhook_id
        idle = events["agent.session.idle"]
        assert idle.data.environment_type == "self_hosted"  # the session has a workspace
        assert events["agent.session.created"].data.environment_type == "self_hosted"
        client.webhooks.delete(endpoint.id)


def webhook_reports_openai_hosted(target: Target) -> None:
    """A session with an ``openai_hosted`` environment is ``environment_type: openai_hosted`` in its
    webhooks, with the environment's id, as ``sessions.retrieve`` shows it."""
    from tests.webhook_receiver import WebhookReceiver

    client = target.client()
    with WebhookReceiver() as receiver:
        endpoint = client.webhooks.create(
            name="hosted", url=receiver.url, event_types=["agent.session.created", "agent.session.idle"]
        )
        session = client.beta.agents.sessions.create(
            environment={"type": "openai_hosted", "network": {"access": "disabled"}},
            agent_id=scripted_agent(target, TEXT_SCRIPT),
            input="report",
        )
        wait_idle(client, session.id)
        for kind in ("agent.session.created", "agent.session.idle"):
            received = receiver.wait_for(kind, session_id=session.id)
            event = client.webhooks.unwrap(received.body, received.headers, secret=endpoint.signing_secret)
            assert (event.data.environment_type, event.data.environment_id) == (  # type: ignore[union-attr]
                "openai_hosted",
                session.environment.id,
            )
        client.webhooks.delete(endpoint.id)


async def async_webhook_endpoints(target: Target) -> None:
    from tests.webhook_receiver import WebhookReceiver

    client = target.async_client()
    with WebhookReceiver() as receiver:
        created = await client.webhooks.create(
            name="async", url=receiver.url, event_types=["agent.session.failed"]
        )
        assert (await client.webhooks.retrieve(created.id)).name == "async"
        assert created.id in [e.id async for e in client.webhooks.list()]
        assert (await client.webhooks.event_types.list()).data[0] == "agent.session.created"
        tested = await client.webhooks.test(created.id, event_type="agent.session.failed")
        assert tested.status_code == 200
        received = receiver.wait_for("agent.session.failed")
        event = client.webhooks.unwrap(received.body, received.headers, secret=created.signing_secret)
        assert (event.type, event.id) == ("agent.session.failed", received.webhook_id)
        assert (await client.webhooks.delete(created.id)).deleted is True
    await client.close()
