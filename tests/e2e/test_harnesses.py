"""The scenarios that matter, run once per harness: each speaks its own protocol to the scripted model.

The same ``skyloop mock-llm`` serves the Responses API, Chat Completions and
Bedrock Converse; each agent here is registered with one harness, so the turn
goes through that harness's SDK and wire format end to end (real processes,
real sockets). What the model was sent is read back from the mock's captured
requests through :class:`Wire`, which knows each protocol's shape.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from skyloop.client_tools import get_tool_set
from tests.e2e.conftest import (
    ECHO_TOOL,
    StreamWatcher,
    configure_mock_llm,
    create_runner_bound_session,
    get_mock_requests,
    get_session_snapshot,
    is_call_frame,
    message_event,
    output_event,
    send_user_message_to_session,
    upload_agent,
    wait_status,
)
from tests.e2e.sse import run_turn

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.e2e

CODING = get_tool_set("coding")
HARNESSES = ["openai-agents", "chat-completions", "bedrock-converse"]
MARKER = "[System: interrupted]"
ANSWER = " ".join(["calculator.py has divide and average, and utils.py has clamp."] * 4)  # streams for ~0.5 s


class Wire:
    """What one harness sent the model, read from a captured request body."""

    def __init__(self, harness: str) -> None:
        self.harness = harness

    def tool_names(self, body: dict[str, Any]) -> set[str]:
        if self.harness == "openai-agents":
            return {t["name"] for t in body.get("tools") or []}
        if self.harness == "bedrock-converse":
            return {t["toolSpec"]["name"] for t in (body.get("toolConfig") or {}).get("tools") or []}
        return {t["function"]["name"] for t in body.get("tools") or []}

    def outputs(self, body: dict[str, Any]) -> dict[str, str]:
        """Call id -> the output the model was given for it."""
        if self.harness == "openai-agents":
            return {
                i["call_id"]: i["output"] for i in body["input"] if i.get("type") == "function_call_output"
            }
        if self.harness == "bedrock-converse":
            results = [b["toolResult"] for m in body["messages"] for b in m["content"] if "toolResult" in b]
            return {r["toolUseId"]: r["content"][0]["text"] for r in results}
        return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}

    def user_texts(self, body: dict[str, Any]) -> list[str]:
        if self.harness == "openai-agents":
            messages = [i for i in body["input"] if i.get("role") == "user"]
        else:
            messages = [m for m in body["messages"] if m["role"] == "user"]
        texts = []
        for message in messages:
            content = message["content"]
            if isinstance(content, str):
                texts.append(content)
            else:  # Bedrock's toolResult blocks share the user message: only text blocks are what was said
                texts += [
                    b["text"]
                    for b in content
                    if "text" in b and b.get("type") in (None, "input_text", "text")
                ]
        return texts


def harness_agent(
    http_client: httpx.Client, mock_url: str, harness: str, responses: list[dict[str, Any]], **extra: Any
) -> tuple[str, str]:
    """A uniquely named agent on ``harness`` whose model is scripted; returns ``(agent name, model key)``."""
    uid = uuid.uuid4().hex[:8]
    name, model = f"h-{harness}-{uid}", f"mock-{harness}-{uid}"
    # Bedrock's endpoint is the mock's root (boto3 adds /model/{id}/converse-stream); OpenAI's ends in /v1
    base_url = mock_url if harness == "bedrock-converse" else f"{mock_url}/v1"
    executor: dict[str, Any] = {"harness": harness, "model": model, "auth": {"base_url": base_url}}
    if harness == "openai-agents":
        executor["auth"]["api_key"] = "mock-key"  # chat-completions goes without: many servers need none
    configure_mock_llm(mock_url, responses, key=model)
    spec = {"name": name, "prompt": "You are a test agent.", "executor": executor, **extra}
    upload_agent(http_client, {f"{name}.yaml": json.dumps(spec)})
    return name, model


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"call_id": call_id, "name": name, "arguments": json.dumps(arguments)}


@pytest.mark.parametrize("harness", HARNESSES)
def test_seed_scenario_lists_and_reads_files_through_client_tools(
    harness: str,
    live_server: str,
    http_client: httpx.Client,
    live_runner_id: str,
    mock_llm_server_url: str,
    sample_code_dir: Path,
) -> None:
    # Given an agent on this harness whose model calls Glob, then Read, then answers in streamed words
    wire = Wire(harness)
    name, model = harness_agent(
        http_client,
        mock_llm_server_url,
        harness,
        [
            {"tool_calls": [call("call_glob", "Glob", pattern="**/*.py", path=str(sample_code_dir))]},
            {"tool_calls": [call("call_read", "Read", file_path=str(sample_code_dir / "calculator.py"))]},
            {"text": ANSWER, "stream": True},
        ],
    )
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)

    def post() -> None:
        with httpx.Client(base_url=live_server, timeout=30) as poster:
            send_user_message_to_session(poster, session_id=session_id, content="read it", tools=CODING.TOOLS)

    # When the client runs the turn, executing each parked call on its own files
    result = run_turn(
        http_client,
        base_url=live_server,
        session_id=session_id,
        post=post,
        execute_tool=CODING.execute_tool,
        client_tool_names={t["function"]["name"] for t in CODING.TOOLS},
    )

    # Then the turn completes with the streamed text, and the model saw each output after its call
    assert result.status == "completed", [f.data.get("type") for f in result.frames]
    assert result.text == ANSWER
    deltas = [f for f in result.frames if f.data.get("type") == "response.output_text.delta"]
    assert len(deltas) > 1  # flushed several times as the words arrived
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 3
    assert wire.tool_names(requests[0]) >= {"Glob", "Read", "Write", "Bash"}
    assert "calculator.py" in wire.outputs(requests[1])["call_glob"]
    assert "def divide" in wire.outputs(requests[2])["call_read"]
    # And the tokens the harness reported are the turn's usage
    completed = [f for f in result.frames if f.data.get("type") == "response.completed"][-1]
    usage = completed.data["response"]["usage"]
    assert usage["input_tokens"] == 30  # the mock counts 10 per request
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert get_session_snapshot(http_client, session_id)["usage"] == usage


@pytest.mark.parametrize("harness", HARNESSES)
def test_several_calls_in_one_response_park_together_and_resume_once(
    harness: str, live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    wire = Wire(harness)
    name, model = harness_agent(
        http_client,
        mock_llm_server_url,
        harness,
        [
            {"tool_calls": [call("c1", "Echo", text="one"), call("c2", "Echo", text="two")]},
            {"text": "both done"},
        ],
    )
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)
    events = f"/v1/sessions/{session_id}/events"
    with StreamWatcher(live_server, session_id) as stream:
        assert http_client.post(events, json=message_event("echo twice", [ECHO_TOOL])).status_code == 202
        stream.wait_for(lambda f: is_call_frame(f, "action_required"), count=2, what="both parked calls")
        calls = stream.matching(lambda f: is_call_frame(f, "action_required"))
        assert [json.loads(f.data["item"]["arguments"]) for f in calls] == [{"text": "one"}, {"text": "two"}]
        # When both outputs arrive, in reverse order
        assert http_client.post(events, json=output_event("c2", "TWO")).status_code == 202
        assert http_client.post(events, json=output_event("c1", "ONE")).status_code == 202
        terminal = stream.wait_terminal()
    # Then the turn resumed once, with both outputs in one model request
    assert terminal.data["type"] == "response.completed", stream.types()
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2
    assert wire.outputs(requests[1]) == {"c1": "ONE", "c2": "TWO"}


@pytest.mark.parametrize("harness", HARNESSES)
def test_interrupt_while_parked_cancels_and_the_next_turn_sees_a_consistent_history(
    harness: str, live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    wire = Wire(harness)
    name, model = harness_agent(
        http_client,
        mock_llm_server_url,
        harness,
        [{"tool_calls": [call("c1", "Echo", text="never")]}, {"text": "fresh start"}],
    )
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)
    events = f"/v1/sessions/{session_id}/events"
    with StreamWatcher(live_server, session_id) as stream:
        assert http_client.post(events, json=message_event("run it", [ECHO_TOOL])).status_code == 202
        stream.wait_for(lambda f: is_call_frame(f, "action_required"), what="the parked call")
        # When the user interrupts the parked turn
        assert http_client.post(events, json={"type": "interrupt"}).status_code == 202
        assert stream.wait_terminal().data["type"] == "response.cancelled"
        mark = stream.count()
        # And sends another message
        assert http_client.post(events, json=message_event("something else")).status_code == 202
        assert stream.wait_terminal(start=mark).data["type"] == "response.completed"
    # Then the provider got a history it accepts: the call answered as cancelled, then the marker
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2
    assert list(wire.outputs(requests[1])) == ["c1"]
    texts = wire.user_texts(requests[1])
    assert texts[0] == "run it"
    assert texts[-1] == "something else"
    assert any(t.startswith(MARKER) for t in texts)


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_model_error_fails_the_turn_with_its_code(
    harness: str, live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    name, _model = harness_agent(
        http_client, mock_llm_server_url, harness, [{"error": "bad request", "status_code": 400}]
    )
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)
    with StreamWatcher(live_server, session_id) as stream:
        assert (
            http_client.post(f"/v1/sessions/{session_id}/events", json=message_event("hi")).status_code == 202
        )
        terminal = stream.wait_terminal()
    assert terminal.data["type"] == "response.failed", stream.types()
    assert terminal.data["response"]["error"]["code"] == "model_http_error"
    assert "400" in terminal.data["response"]["error"]["message"]
    assert wait_status(http_client, session_id, "failed")["last_task_error"]["code"] == "model_http_error"


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_message_posted_while_parked_steers_the_next_model_call(
    harness: str, live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    wire = Wire(harness)
    name, model = harness_agent(
        http_client,
        mock_llm_server_url,
        harness,
        [{"tool_calls": [call("c1", "Echo", text="x")]}, {"text": "steered"}],
    )
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)
    events = f"/v1/sessions/{session_id}/events"
    with StreamWatcher(live_server, session_id) as stream:
        assert http_client.post(events, json=message_event("start", [ECHO_TOOL])).status_code == 202
        stream.wait_for(lambda f: is_call_frame(f, "action_required"), what="the parked call")
        assert http_client.post(events, json=message_event("also: be brief")).status_code == 202
        assert http_client.post(events, json=output_event("c1", "X")).status_code == 202
        assert stream.wait_terminal().data["type"] == "response.completed"
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2
    assert wire.user_texts(requests[1]) == ["start", "also: be brief"]
    assert wire.outputs(requests[1]) == {"c1": "X"}


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_throttled_model_call_is_retried_and_the_turn_completes(
    harness: str, live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    name, model = harness_agent(
        http_client,
        mock_llm_server_url,
        harness,
        [{"error": "slow down", "status_code": 429}, {"text": "after the wait"}],
    )
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)
    with StreamWatcher(live_server, session_id) as stream:
        assert (
            http_client.post(f"/v1/sessions/{session_id}/events", json=message_event("hi")).status_code == 202
        )
        terminal = stream.wait_terminal()
    assert terminal.data["type"] == "response.completed", stream.types()
    assert len(get_mock_requests(mock_llm_server_url, key=model)) == 2


@pytest.mark.parametrize("harness", HARNESSES)
def test_throttling_until_the_retries_run_out_fails_the_turn_as_rate_limited(
    harness: str, live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    name, _model = harness_agent(
        http_client, mock_llm_server_url, harness, [{"error": "slow down", "status_code": 429}] * 6
    )
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)
    with StreamWatcher(live_server, session_id) as stream:
        assert (
            http_client.post(f"/v1/sessions/{session_id}/events", json=message_event("hi")).status_code == 202
        )
        terminal = stream.wait_terminal()
    assert terminal.data["type"] == "response.failed", stream.types()
    assert terminal.data["response"]["error"]["code"] == "model_rate_limited"
    assert "429" in terminal.data["response"]["error"]["message"]


PNG_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="


def image_message(url: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": "what is this?"}, {"type": "input_image", "image_url": url}]
    return {"type": "message", "data": {"role": "user", "content": content}}


def sent_image(harness: str, body: dict[str, Any]) -> Any:
    """The image block the model was sent, in its harness's wire form."""
    if harness == "openai-agents":
        return next(
            b for i in body["input"] if i.get("role") == "user" for b in i["content"] if "image_url" in b
        )
    blocks = [b for m in body["messages"] if m["role"] == "user" for b in m["content"]]
    if harness == "chat-completions":
        return next(b for b in blocks if b.get("type") == "image_url")
    return next(b for b in blocks if "image" in b)


@pytest.mark.parametrize("harness", HARNESSES)
def test_an_inline_image_reaches_the_model_in_its_wire_form(
    harness: str, live_server: str, http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    name, model = harness_agent(http_client, mock_llm_server_url, harness, [{"text": "a single pixel"}])
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)
    with StreamWatcher(live_server, session_id) as stream:
        resp = http_client.post(f"/v1/sessions/{session_id}/events", json=image_message(PNG_URL))
        assert resp.status_code == 202, resp.text
        assert stream.wait_terminal().data["type"] == "response.completed", stream.types()
    (body,) = get_mock_requests(mock_llm_server_url, key=model)
    expected = {
        "openai-agents": {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        "chat-completions": {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "auto"}},
        # boto3 sends the raw bytes base64-encoded in the JSON body
        "bedrock-converse": {"image": {"format": "png", "source": {"bytes": PNG_URL.split(",", 1)[1]}}},
    }
    assert sent_image(harness, body) == expected[harness]


def test_an_image_url_bedrock_cannot_fetch_is_refused_before_anything_is_written(
    http_client: httpx.Client, live_runner_id: str, mock_llm_server_url: str
) -> None:
    name, model = harness_agent(http_client, mock_llm_server_url, "bedrock-converse", [{"text": "unused"}])
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)
    before = get_session_snapshot(http_client, session_id)
    resp = http_client.post(
        f"/v1/sessions/{session_id}/events", json=image_message("https://example.com/cat.png")
    )
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["code"] == "image_not_supported"
    after = get_session_snapshot(http_client, session_id)
    assert (after["items"], after["last_event_id"], after["status"]) == (
        before["items"],
        before["last_event_id"],
        before["status"],
    )
    assert get_mock_requests(mock_llm_server_url, key=model) == []
