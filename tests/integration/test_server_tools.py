"""Server tools on the real turn state machine (moto): Lambda tools, an MCP server, approvals, mixed turns.

The Lambda tools are the functions of ``tool_functions.py``, created as moto
Lambda functions and run by the local Lambda hook like every step; the MCP
server is the ``mcp`` SDK's own server under uvicorn. Each test drives its
turn to the end.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps
from skyloop.models.agent import AgentSpec
from skyloop.turns import lifecycle, server_tools
from skyloop.turns.state import TurnState
from tests.integration import tool_functions
from tests.integration.conftest import wait_until
from tests.servers import UvicornThread

if TYPE_CHECKING:
    from collections.abc import Iterator

    from skyloop.models.session import Session
    from skyloop.store import StoredEvent
    from tests.integration.conftest import Api, MockLLM, Stack

pytestmark = pytest.mark.usefixtures("fresh_table")

TOOLS_FILE = Path(tool_functions.__file__)
ECHO = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}


def lambda_tool(function: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "lambda",
        "function": function,
        "description": f"the {function} tool",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        **extra,
    }


@pytest.fixture(scope="module")
def tools(aws: Stack) -> Iterator[None]:
    """The test tool functions as moto Lambda functions, run from their file by the local hook."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SKYLOOP_LAMBDA_TOOLS", str(TOOLS_FILE))
        lam = deps.client("lambda")
        role = deps.client("iam").get_role(RoleName="skyloop-local")["Role"]["Arn"]
        for name in ("shout", "measure", "explode", "dawdle", "verbose"):
            lam.create_function(
                FunctionName=name,
                Runtime="python3.12",
                Role=role,
                Handler=f"{name}.handler",
                Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
                Timeout=60,
            )
        yield


class Mcp:
    """A real MCP server (the SDK's own) with a tool that looks words up, counting what it is asked."""

    def __init__(self) -> None:
        from mcp.server.mcpserver import MCPServer

        self.calls: list[dict[str, Any]] = []
        self.headers: list[str | None] = []
        server = MCPServer("glossary")

        @server.tool()
        def define(term: str) -> str:
            """Define a term of the glossary."""
            self.calls.append({"term": term})
            return {"turn": "one Step Functions execution"}.get(term, f"no entry for {term}")

        self.app = server.streamable_http_app()

    def asgi(self) -> Any:
        """The SDK's app, noting each request's key header."""

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                headers = dict(scope.get("headers") or [])
                self.headers.append((headers.get(b"x-glossary-key") or b"").decode() or None)

            await self.app(scope, receive, send)

        return app


@pytest.fixture(scope="module")
def mcp() -> Iterator[tuple[Mcp, str]]:
    server = Mcp()
    with UvicornThread(
        server.asgi(), lifespan="on"
    ) as running:  # the SDK's session manager runs in the lifespan
        yield server, f"{running.url}/mcp"


def agent_session(aws: Stack, model: str, tools: dict[str, Any], **limits: int) -> Session:
    from skyloop import sessions

    spec = AgentSpec.model_validate(
        {
            "name": f"tools-{uuid.uuid4().hex[:8]}",
            "prompt": "Use tools.",
            "executor": {
                "harness": "openai-agents",
                "model": model,
                "auth": {"api_key": "mock-key", "base_url": aws.mock_llm.base_url},
            },
            "tools": tools,
            "limits": limits,
        }
    )
    agent = sessions.register(spec)
    return sessions.create_session(aws.store, agent, sessions.Runners(deps.get_settings().default_runner_id))


def invocations(call_id: str) -> int:
    """How often the local Lambda ran ``shout`` for a call (the hook loads the file as its own module)."""
    from skyloop.local import lambda_tools

    counter = lambda_tools.tools_in(TOOLS_FILE)["shout"].__globals__["INVOCATIONS"]
    return int(counter[call_id])


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"call_id": call_id, "name": name, "arguments": arguments}


def response_id(aws: Stack, session_id: str) -> str:
    event = aws.wait_for_event(
        session_id, lambda e: e.type == "session.status" and e.data["status"] == "running", what="running"
    )
    return str(event.data["response_id"])


def outputs_seen(request: dict[str, Any]) -> dict[str, str]:
    return {i["call_id"]: i["output"] for i in request["input"] if i.get("type") == "function_call_output"}


def finished(aws: Stack, session_id: str, rid: str) -> None:
    assert aws.wait_for_execution(rid)["status"] == "SUCCEEDED"
    aws.wait_for_status(session_id, "idle", after_seq=1)


def of_type(events: list[StoredEvent], kind: str) -> list[StoredEvent]:
    return [e for e in events if e.type == kind]


def call_items(events: list[StoredEvent], call_id: str) -> list[tuple[str, str]]:
    """(item type, status) of every published item of one call, in order."""
    return [
        (e.data["item"]["type"], e.data["item"]["status"])
        for e in events
        if e.type == "response.output_item.done" and e.data["item"].get("call_id") == call_id
    ]


# ------------------------------------------------------------------------------------ Lambda
@pytest.mark.usefixtures("tools")
def test_a_lambda_tool_runs_in_the_map_and_its_output_reaches_the_next_model_call(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    key = mock_llm.script(
        {"tool_calls": [call("c1", "shout", text="hello"), call("c2", "measure", text="a b c")]},
        {"text": "done"},
    )
    session = agent_session(aws, key, {"shout": lambda_tool("shout"), "measure": lambda_tool("measure")})
    assert api.post_message(session.id, "go").status == 202
    rid = response_id(aws, session.id)
    finished(aws, session.id, rid)

    first, second = mock_llm.requests(key)
    assert {t["name"] for t in first["tools"]} == {"shout", "measure"}  # the server tools were offered
    seen = outputs_seen(second)
    assert seen["c1"] == "HELLO"
    assert json.loads(seen["c2"]) == {"words": 3, "session": session.id, "call": "c2"}
    events = aws.events(session.id)
    # announced as running on the server, published with its output at the next model step, never parked
    assert call_items(events, "c1") == [
        ("function_call", "in_progress"),
        ("function_call", "completed"),
        ("function_call_output", "completed"),
    ]
    assert not [e for e in events if e.data.get("item", {}).get("status") == "action_required"]
    # and the state machine ran both calls through the Map, invoking the tools itself
    history = aws.history(rid)
    scheduled = {
        h["taskScheduledEventDetails"]["resource"]
        for h in history
        if h["type"] == "TaskScheduled" and "shout" in h["taskScheduledEventDetails"]["parameters"]
    }
    assert scheduled == {"invoke"}
    assert [i.type for i in aws.store.list_items(session.id)] == [
        "message",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "message",
    ]


@pytest.mark.usefixtures("tools")
def test_a_failing_slow_or_oversized_tool_becomes_an_error_output_not_a_failed_turn(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    key = mock_llm.script(
        {
            "tool_calls": [
                call("boom", "explode", why="testing"),
                call("slow", "dawdle", seconds=5),
                call("big", "verbose", n=5000),
                call("bad", "shout"),  # no text: the tool raises KeyError
            ]
        },
        {"text": "coped"},
    )
    session = agent_session(
        aws,
        key,
        {
            "explode": lambda_tool("explode"),
            "dawdle": lambda_tool("dawdle", timeout_s=1),
            "verbose": lambda_tool("verbose", max_output_chars=100),
            "shout": lambda_tool("shout"),
        },
    )
    assert api.post_message(session.id, "go").status == 202
    rid = response_id(aws, session.id)
    finished(aws, session.id, rid)
    seen = outputs_seen(mock_llm.requests(key)[1])
    assert seen["boom"].startswith("Error: tool 'explode' failed: RuntimeError: kaput: testing")
    assert seen["slow"] == "Error: tool 'dawdle' did not answer within 1s"
    assert seen["big"].startswith("y" * 100 + "\n…[truncated: the output was 4900 characters over")
    assert seen["bad"].startswith("Error: tool 'shout' failed: KeyError")


@pytest.mark.usefixtures("tools")
def test_server_tools_run_while_the_client_call_parks_and_the_turn_waits_for_both(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    key = mock_llm.script(
        {"tool_calls": [call("srv", "shout", text="server"), call("cli", "read_file", path="a")]},
        {"text": "both in"},
    )
    session = agent_session(aws, key, {"shout": lambda_tool("shout")})
    assert api.post_message(session.id, "go", tools=[ECHO]).status == 202
    rid = response_id(aws, session.id)
    aws.wait_for_event(
        session.id,
        lambda e: e.type == "response.output_item.done" and e.data["item"]["status"] == "action_required",
        what="the parked client call",
    )

    # the server call finishes while the client's call is still open
    def server_answered() -> bool:
        stored = aws.store.get_call(session.id, rid, "srv")
        return stored is not None and stored.output == "SERVER"

    wait_until(server_answered, what="the server call's output")
    assert aws.store.get_session(session.id).status == "running"
    assert len(mock_llm.requests(key)) == 1
    # a client may not answer the server's call
    forged = api.post_output(session.id, "srv", "forged")
    assert forged.status == 409
    assert "runs on the server" in forged.error()["message"]
    assert api.post_output(session.id, "cli", "file a").status == 202
    finished(aws, session.id, rid)
    assert outputs_seen(mock_llm.requests(key)[1]) == {"srv": "SERVER", "cli": "file a"}


# --------------------------------------------------------------------------------------- MCP
def test_an_mcp_tool_is_listed_once_per_agent_version_and_called_with_its_headers(
    aws: Stack, api: Api, mock_llm: MockLLM, mcp: tuple[Mcp, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyloop.tools import mcp_client

    server, url = mcp
    listed: list[str] = []
    real_list_tools = mcp_client.list_tools

    def counted(*args: Any, **kwargs: Any) -> Any:  # the real listing, counted (steps run in this process)
        listed.append(url)
        return real_list_tools(*args, **kwargs)

    monkeypatch.setattr(mcp_client, "list_tools", counted)
    key = mock_llm.script(
        {"tool_calls": [call("m1", "define", term="turn")]},
        {"text": "defined"},
        {"tool_calls": [call("m2", "define", term="nope")]},
        {"text": "again"},
    )
    secret = (
        f"skyloop/tools/mcp/{uuid.uuid4().hex[:8]}"  # under the tool secrets' prefix, as the stack requires
    )
    deps.secrets().put(secret, "s3cret")
    glossary = {"type": "mcp", "url": url, "headers": {"X-Glossary-Key": {"secret": secret}}}
    session = agent_session(aws, key, {"glossary": glossary})
    for _ in range(2):
        mark = len(aws.events(session.id))
        assert api.post_message(session.id, "define").status == 202
        rid = str(
            next(
                e.data["response_id"]
                for e in aws.events(session.id, mark)
                if e.type == "session.status" and e.data["status"] == "running"
            )
        )
        finished(aws, session.id, rid)
    requests = mock_llm.requests(key)
    assert [t["name"] for t in requests[0]["tools"]] == ["define"]
    assert requests[0]["tools"][0]["description"] == "Define a term of the glossary."
    assert outputs_seen(requests[1]) == {"m1": "one Step Functions execution"}
    assert outputs_seen(requests[3])["m2"] == "no entry for nope"
    assert listed == [url]  # two turns, two model calls each: listed once
    assert set(server.headers[-3:]) == {"s3cret"}  # the secret header reached the server


def test_an_unreachable_mcp_server_fails_the_turn_with_a_clear_code(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    key = mock_llm.script({"text": "never"})
    with UvicornThread(lambda *_: None) as gone:
        url = gone.url
    session = agent_session(aws, key, {"glossary": {"type": "mcp", "url": f"{url}/mcp", "timeout_s": 2}})
    assert api.post_message(session.id, "define").status == 202
    failed = aws.wait_for_status(session.id, "failed", after_seq=1)
    assert failed.last_task_error is not None
    assert failed.last_task_error.code == "tool_server_unavailable"
    assert mock_llm.requests(key) == []


# ---------------------------------------------------------------------------------- approval
@pytest.mark.usefixtures("tools")
def test_approval_parks_before_the_tool_runs_accept_runs_it_decline_answers_for_it(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    key = mock_llm.script(
        {
            "tool_calls": [
                call("yes", "shout", text="ok"),
                call("no", "measure", text="x"),
                call("c", "read_file"),
            ]
        },
        {"text": "settled"},
    )
    session = agent_session(
        aws,
        key,
        {
            "shout": lambda_tool("shout", approval="required"),
            "measure": lambda_tool("measure", approval="required"),
        },
    )
    assert api.post_message(session.id, "go", tools=[ECHO]).status == 202
    rid = response_id(aws, session.id)
    aws.wait_for_event(
        session.id, lambda e: e.type == "response.elicitation_request", what="approval requests"
    )
    requests = of_type(aws.events(session.id), "response.elicitation_request")
    assert sorted(e.data["elicitation_id"] for e in requests) == ["approve_no", "approve_yes"]
    assert requests[0].data["params"]["mode"] == "form"
    assert invocations("yes") == 0  # nothing ran before the approval
    assert (
        api.post_event(
            session.id, {"type": "approval", "data": {"elicitation_id": "approve_yes", "action": "accept"}}
        ).status
        == 202
    )
    again = api.post_event(
        session.id, {"type": "approval", "data": {"elicitation_id": "approve_yes", "action": "accept"}}
    )
    assert again.status == 202  # the same answer again: a no-op
    other = api.post_event(
        session.id, {"type": "approval", "data": {"elicitation_id": "approve_yes", "action": "decline"}}
    )
    assert other.status == 409
    assert (
        api.post_event(
            session.id, {"type": "approval", "data": {"elicitation_id": "approve_nope", "action": "accept"}}
        ).status
        == 404
    )
    assert (
        api.post_event(
            session.id, {"type": "approval", "data": {"elicitation_id": "approve_no", "action": "decline"}}
        ).status
        == 202
    )
    assert len(mock_llm.requests(key)) == 1  # still waiting for the client call
    assert api.post_output(session.id, "c", "client part").status == 202
    finished(aws, session.id, rid)
    seen = outputs_seen(mock_llm.requests(key)[1])
    assert seen == {"yes": "OK", "no": lifecycle.DENIED_OUTPUT, "c": "client part"}
    assert invocations("yes") == 1
    resolved = of_type(aws.events(session.id), "response.elicitation_resolved")
    assert [(e.data["elicitation_id"], e.data["action"]) for e in resolved] == [
        ("approve_yes", "accept"),
        ("approve_no", "decline"),
    ]


@pytest.mark.usefixtures("tools")
def test_interrupt_while_awaiting_approval_cancels_every_call_and_stops_the_execution(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    key = mock_llm.script(
        {"tool_calls": [call("ask", "shout", text="x"), call("run", "measure", text="y")]}, {"text": "after"}
    )
    session = agent_session(
        aws, key, {"shout": lambda_tool("shout", approval="required"), "measure": lambda_tool("measure")}
    )
    assert api.post_message(session.id, "go").status == 202
    rid = response_id(aws, session.id)
    aws.wait_for_event(
        session.id, lambda e: e.type == "response.elicitation_request", what="the approval request"
    )
    assert api.post_event(session.id, {"type": "interrupt"}).status == 202
    # Stopped (ABORTED in AWS; moto reports a Map aborted mid-iteration as FAILED), and writes nothing after
    assert aws.wait_for_execution(rid)["status"] in ("ABORTED", "FAILED")
    aws.wait_for_status(session.id, "idle", after_seq=1)
    ask = aws.store.get_call(session.id, rid, "ask")
    assert ask is not None
    assert ask.output == lifecycle.CANCELLED_OUTPUT
    assert (
        api.post_event(
            session.id, {"type": "approval", "data": {"elicitation_id": "approve_ask", "action": "accept"}}
        ).status
        == 404
    )
    assert invocations("ask") == 0


# ------------------------------------------------------------------------------ exactly once
@pytest.mark.usefixtures("tools")
def test_a_repeated_record_step_writes_nothing_twice(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    key = mock_llm.script(
        {"tool_calls": [call("once", "shout", text="a"), call("c", "read_file")]}, {"text": "x"}
    )
    session = agent_session(aws, key, {"shout": lambda_tool("shout")})
    assert api.post_message(session.id, "go", tools=[ECHO]).status == 202
    rid = response_id(aws, session.id)

    def recorded() -> bool:
        stored = aws.store.get_call(session.id, rid, "once")
        return stored is not None and stored.output == "A"

    wait_until(recorded, what="the tool's output")
    state = TurnState(session_id=session.id, response_id=rid, iteration=1)
    before = aws.rows(session.id)
    server_tools.record_tool(aws.store, state, "once", {"payload": "B"}, None)  # a retried branch
    assert server_tools.prepare_tool(aws.store, state, "once", None) == {"invoke": None, "poll": None}
    assert aws.rows(session.id) == before
    assert api.post_output(session.id, "c", "done").status == 202
    finished(aws, session.id, rid)


def test_a_message_tool_may_not_take_a_server_tools_name(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    key = mock_llm.script({"text": "x"})
    session = agent_session(aws, key, {"read_file": lambda_tool("shout")})
    before = aws.rows(session.id)
    r = api.post_message(session.id, "go", tools=[ECHO])
    assert r.status == 400
    assert "read_file" in r.error()["message"]
    assert aws.rows(session.id) == before
