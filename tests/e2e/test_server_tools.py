"""Server tools on ``skyloop dev``: the example Lambda tools and a real MCP server, alone and mixed with client tools.

The stack is its own ``skyloop dev --lambda-tools examples/lambda_tools.py``
process (the documented way to run Lambda tools locally); the MCP server is
the ``mcp`` SDK's own server under uvicorn in this process; the client reads
the live SSE stream over a real socket and answers approvals and client calls
the moment they arrive, as a chat client would.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.e2e.conftest import (
    ECHO_TOOL,
    StreamWatcher,
    configure_mock_llm,
    get_mock_requests,
    is_call_frame,
    is_type,
    message_event,
    output_event,
    unique,
    upload_agent,
    wait_status,
)
from tests.servers import UvicornThread

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.e2e.conftest import DevProcess

EXAMPLE_TOOLS = Path(__file__).resolve().parents[2] / "examples" / "lambda_tools.py"
GLOSSARY = {"turn": "one Step Functions execution", "park": "wait for a client for free"}


@pytest.fixture(scope="module")
def tools_stack(skyloop_dev_factory: Callable[..., DevProcess]) -> str:
    return skyloop_dev_factory(args=["--lambda-tools", str(EXAMPLE_TOOLS)]).ready()


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("glossary")

    @server.tool()
    def define(term: str) -> str:
        """Define a term of the glossary."""
        return GLOSSARY.get(term, f"no entry for {term}")

    with UvicornThread(server.streamable_http_app(), lifespan="on") as running:
        yield f"{running.url}/mcp"


@pytest.fixture
def client(tools_stack: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=tools_stack, timeout=30) as http:
        yield http


def agent_session(
    client: httpx.Client, mock_url: str, mcp_url: str, responses: list[dict[str, Any]]
) -> tuple[str, str]:
    """An agent with the example's two Lambda tools (``utc_now`` needs approval) and the MCP glossary."""
    name = unique("server-tools")
    model = f"mock-{name}"
    configure_mock_llm(mock_url, responses, key=model)
    spec = {
        "name": name,
        "prompt": "Use your tools.",
        "executor": {
            "harness": "openai-agents",
            "model": model,
            "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{mock_url}/v1"},
        },
        "tools": {
            "word_count": {
                "type": "lambda",
                "function": "word_count",
                "description": "Count words",
                "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
            },
            "utc_now": {
                "type": "lambda",
                "function": "utc_now",
                "description": "The time",
                "parameters": {"type": "object"},
                "approval": "required",
            },
            "glossary": {"type": "mcp", "url": mcp_url, "timeout_s": 10},
        },
    }
    created = upload_agent(client, {f"{name}.yaml": json.dumps(spec)})
    return str(created["session_id"]), model


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"call_id": call_id, "name": name, "arguments": arguments}


def outputs_seen(request: dict[str, Any]) -> dict[str, str]:
    return {i["call_id"]: i["output"] for i in request["input"] if i.get("type") == "function_call_output"}


def approve(client: httpx.Client, session_id: str, call_id: str, action: str) -> None:
    answer = {"type": "approval", "data": {"elicitation_id": f"approve_{call_id}", "action": action}}
    resp = client.post(f"/v1/sessions/{session_id}/events", json=answer)
    assert resp.status_code == 202, resp.text


@pytest.mark.parametrize(
    ("calls", "expect"),
    [
        pytest.param(
            [call("w", "word_count", text="four words right here")],
            {"w": {"words": 4, "characters": 21}},
            id="lambda",
        ),
        pytest.param([call("g", "define", term="turn")], {"g": GLOSSARY["turn"]}, id="mcp"),
        pytest.param(
            [
                call("w", "word_count", text="a b"),
                call("g1", "define", term="park"),
                call("g2", "define", term="x"),
            ],
            {"w": {"words": 2, "characters": 3}, "g1": GLOSSARY["park"], "g2": "no entry for x"},
            id="lambda-and-mcp",
        ),
    ],
)
def test_server_tools_alone_run_without_the_client_and_reach_the_next_model_call(
    client: httpx.Client,
    mock_llm_server_url: str,
    mcp_url: str,
    calls: list[dict[str, Any]],
    expect: dict[str, Any],
) -> None:
    session_id, model = agent_session(
        client, mock_llm_server_url, mcp_url, [{"tool_calls": calls}, {"text": "done"}]
    )
    with StreamWatcher(client.base_url.__str__().rstrip("/"), session_id) as stream:
        assert client.post(f"/v1/sessions/{session_id}/events", json=message_event("go")).status_code == 202
        terminal = stream.wait_terminal(timeout=60)
        assert terminal.data["type"] == "response.completed", terminal.data
        assert not stream.matching(
            lambda f: is_call_frame(f, "action_required")
        )  # nothing asked of the client
        published = {
            f.data["item"]["call_id"]: f.data["item"]["output"]
            for f in stream.matching(
                lambda f: (
                    f.data.get("type") == "response.output_item.done"
                    and f.data["item"]["type"] == "function_call_output"
                )
            )
        }
    first, second = get_mock_requests(mock_llm_server_url, key=model)
    assert {t["name"] for t in first["tools"]} == {"word_count", "utc_now", "define"}
    seen = outputs_seen(second)
    decoded = {k: (json.loads(v) if isinstance(expect[k], dict) else v) for k, v in seen.items()}
    assert decoded == expect
    assert published == seen  # streamed to the client as output items, the same texts the model read


def test_lambda_mcp_approval_and_client_tools_in_one_response(
    client: httpx.Client, mock_llm_server_url: str, mcp_url: str
) -> None:
    """One response calls all four kinds; the client approves one, denies another, and answers its own call."""
    calls = [
        call("w", "word_count", text="one two three"),
        call("g", "define", term="turn"),
        call("now", "utc_now"),
        call("later", "utc_now", timespec="milliseconds"),
        call("echo", "Echo", text="from the client"),
    ]
    session_id, model = agent_session(
        client, mock_llm_server_url, mcp_url, [{"tool_calls": calls}, {"text": "all in"}]
    )
    base = str(client.base_url).rstrip("/")
    with StreamWatcher(base, session_id) as stream:
        assert (
            client.post(
                f"/v1/sessions/{session_id}/events", json=message_event("go", [ECHO_TOOL])
            ).status_code
            == 202
        )
        # answered the instant each request arrives, as a client would
        stream.wait_for(is_type("response.elicitation_request"), count=2, what="two approval requests")
        asked = sorted(
            f.data["elicitation_id"] for f in stream.matching(is_type("response.elicitation_request"))
        )
        assert asked == ["approve_later", "approve_now"]
        approve(client, session_id, "now", "accept")
        approve(client, session_id, "later", "decline")
        stream.wait_for(lambda f: is_call_frame(f, "action_required", "echo"), what="the client's call")
        assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1  # the turn waits for every call
        resp = client.post(f"/v1/sessions/{session_id}/events", json=output_event("echo", "from the client"))
        assert resp.status_code == 202, resp.text
        terminal = stream.wait_terminal(timeout=60)
        assert terminal.data["type"] == "response.completed", terminal.data
        resolved = [
            (f.data["elicitation_id"], f.data["action"])
            for f in stream.matching(is_type("response.elicitation_resolved"))
        ]
        assert sorted(resolved) == [("approve_later", "decline"), ("approve_now", "accept")]
        # only the client's own call was ever action_required
        assert [
            f.data["item"]["call_id"] for f in stream.matching(lambda f: is_call_frame(f, "action_required"))
        ] == ["echo"]
    seen = outputs_seen(get_mock_requests(mock_llm_server_url, key=model)[1])
    assert set(seen) == {"w", "g", "now", "later", "echo"}
    assert json.loads(seen["w"]) == {"words": 3, "characters": 13}
    assert seen["g"] == GLOSSARY["turn"]
    assert datetime.datetime.fromisoformat(seen["now"]).tzinfo is not None  # the approved tool ran
    assert "denied" in seen["later"].lower()  # the denial is the declined tool's output
    assert seen["echo"] == "from the client"
    wait_status(client, session_id, "idle")


def test_interrupt_while_an_approval_and_a_client_call_wait_cancels_both(
    client: httpx.Client, mock_llm_server_url: str, mcp_url: str
) -> None:
    calls = [call("now", "utc_now"), call("echo", "Echo", text="x"), call("w", "word_count", text="y")]
    session_id, model = agent_session(
        client, mock_llm_server_url, mcp_url, [{"tool_calls": calls}, {"text": "never"}]
    )
    base = str(client.base_url).rstrip("/")
    with StreamWatcher(base, session_id) as stream:
        post = client.post(f"/v1/sessions/{session_id}/events", json=message_event("go", [ECHO_TOOL]))
        assert post.status_code == 202
        stream.wait_for(is_type("response.elicitation_request"), what="the approval request")
        stream.wait_for(lambda f: is_call_frame(f, "action_required", "echo"), what="the client's call")
        assert client.post(f"/v1/sessions/{session_id}/events", json={"type": "interrupt"}).status_code == 202
        terminal = stream.wait_terminal(timeout=60)
        assert terminal.data["type"] == "response.cancelled", terminal.data
    wait_status(client, session_id, "idle")
    late = client.post(
        f"/v1/sessions/{session_id}/events",
        json={"type": "approval", "data": {"elicitation_id": "approve_now", "action": "accept"}},
    )
    assert late.status_code in (404, 409), late.text  # nothing left to approve
    assert (
        client.post(f"/v1/sessions/{session_id}/events", json=output_event("echo", "late")).status_code == 409
    )
    assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1  # the model was never called again
