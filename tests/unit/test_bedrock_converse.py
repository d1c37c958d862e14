"""Harness ``bedrock-converse``: the conversation mapping, and whole calls through boto3 against the real mock."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from skyloop.errors import ModelCallError
from skyloop.harnesses import bedrock_converse as bc
from skyloop.harnesses import caller_for
from skyloop.mockllm import MockState, create_app
from skyloop.models.agent import AgentSpec
from skyloop.models.session import ClientTool, ConversationItem
from skyloop.turns.lifecycle import CANCELLED_OUTPUT, INTERRUPT_MARKER
from tests.servers import UvicornThread

if TYPE_CHECKING:
    from collections.abc import Iterator

READ = ClientTool(name="Read", description="read a file", parameters={"type": "object", "properties": {}})
GLOB = ClientTool(name="Glob")
PNG = b"\x89PNG\r\n\x1a\n-fake-"


def item(kind: str, position: int, **data: Any) -> ConversationItem:
    return ConversationItem(
        id=f"i{position}", type=kind, created_at=0, data=data, position=position, response_id="resp_1"
    )


def user(position: int, text: str) -> ConversationItem:
    return item("message", position, role="user", content=[{"type": "input_text", "text": text}])


def assistant(position: int, text: str) -> ConversationItem:
    return item("message", position, role="assistant", content=[{"type": "output_text", "text": text}])


def call(
    position: int, call_id: str, name: str = "Read", arguments: str = '{"path": "a"}'
) -> ConversationItem:
    return item("function_call", position, call_id=call_id, name=name, arguments=arguments)


def output(position: int, call_id: str, text: str) -> ConversationItem:
    return item("function_call_output", position, call_id=call_id, output=text)


def use(call_id: str, name: str = "Read", **arguments: Any) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": arguments or {"path": "a"}}}


def result(call_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": call_id, "content": [{"text": text}], **extra}}


# -- conversation mapping ------------------------------------------------------------------


def test_a_responses_text_and_calls_are_one_assistant_message_and_results_follow() -> None:
    """Two calls in one response, a steering message recorded before their outputs, then an answer."""
    messages = bc.to_messages(
        [
            user(1, "look at a and b"),
            assistant(2, "Reading both."),
            call(3, "c1"),
            call(4, "c2", "Glob", '{"pattern": "*"}'),
            user(5, "and be quick"),
            output(6, "c1", "contents of a"),
            output(7, "c2", "a\nb"),
            assistant(8, "Done."),
        ]
    )
    assert messages == [
        {"role": "user", "content": [{"text": "look at a and b"}]},
        {
            "role": "assistant",
            "content": [{"text": "Reading both."}, use("c1"), use("c2", "Glob", pattern="*")],
        },
        {
            "role": "user",
            "content": [result("c1", "contents of a"), result("c2", "a\nb"), {"text": "and be quick"}],
        },
        {"role": "assistant", "content": [{"text": "Done."}]},
    ]


def test_calls_of_successive_responses_stay_in_their_own_messages() -> None:
    messages = bc.to_messages(
        [user(1, "go"), call(2, "c1"), output(3, "c1", "one"), call(4, "c2"), output(5, "c2", "two")]
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == [use("c1")]
    assert messages[2]["content"] == [result("c1", "one")]
    assert messages[4]["content"] == [result("c2", "two")]


def test_an_interrupted_turn_answers_every_call_with_an_error_result() -> None:
    """A cancelled call carries skyloop's cancelled output, one with none gets a placeholder: both status error."""
    messages = bc.to_messages(
        [
            user(1, "run it"),
            call(2, "c1"),
            call(3, "c2"),
            output(4, "c1", CANCELLED_OUTPUT),
            user(5, INTERRUPT_MARKER),
            user(6, "do something else"),
        ]
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]  # alternation kept by merging
    assert messages[2]["content"] == [
        result("c1", CANCELLED_OUTPUT, status="error"),
        result("c2", bc.NO_OUTPUT, status="error"),
        {"text": INTERRUPT_MARKER},
        {"text": "do something else"},
    ]


def test_blank_text_is_dropped_and_empty_outputs_are_not_blank() -> None:
    messages = bc.to_messages(
        [user(1, "hi"), assistant(2, ""), call(3, "c1", arguments="not json"), output(4, "c1", "")]
    )
    assert messages == [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "c1", "name": "Read", "input": {}}}]},
        {"role": "user", "content": [result("c1", bc.EMPTY_OUTPUT)]},
    ]


def test_inline_images_become_image_blocks_with_raw_bytes() -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    image = item(
        "message",
        1,
        role="user",
        content=[{"type": "input_text", "text": "what is this?"}, {"type": "input_image", "image_url": url}],
    )
    (message,) = bc.to_messages([image])
    assert message["content"] == [
        {"text": "what is this?"},
        {"image": {"format": "png", "source": {"bytes": PNG}}},
    ]


@pytest.mark.parametrize(
    "url", ["https://example.com/cat.png", "data:image/bmp;base64,AAAA", "data:image/png;base64,%%%"]
)
def test_images_bedrock_cannot_take_become_a_note(url: str) -> None:
    block = bc.image_block(url)
    assert set(block) == {"text"}


def test_tools_become_tool_specs_and_history_tools_get_stubs() -> None:
    """A request whose history holds toolUse blocks must declare those tools, even when none is offered now."""
    specs = bc.to_tools([READ], [user(1, "go"), call(2, "c1", "Read"), call(3, "c2", "Bash")])
    assert specs == [
        {
            "toolSpec": {
                "name": "Read",
                "description": "read a file",
                "inputSchema": {"json": READ.parameters},
            }
        },
        {
            "toolSpec": {
                "name": "Bash",
                "description": "(no longer offered)",
                "inputSchema": {"json": {"type": "object", "properties": {}}},
            }
        },
    ]
    assert bc.to_tools([GLOB], [])[0] == {
        "toolSpec": {"name": "Glob", "inputSchema": {"json": {"type": "object", "properties": {}}}}
    }


def test_the_stream_assembles_interleaved_tool_inputs_by_block_index() -> None:
    events = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Let me look."}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {
            "contentBlockStart": {
                "contentBlockIndex": 1,
                "start": {"toolUse": {"toolUseId": "a", "name": "Read"}},
            }
        },
        {
            "contentBlockStart": {
                "contentBlockIndex": 2,
                "start": {"toolUse": {"toolUseId": "b", "name": "Glob"}},
            }
        },
        {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"pa'}}}},
        {"contentBlockDelta": {"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{}"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": 'th":"x"}'}}}},
        {"messageStop": {"stopReason": "tool_use"}},
        {"metadata": {"usage": {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}, "metrics": {}}},
    ]
    deltas: list[str] = []
    out = bc.read_stream(events, deltas.append)
    assert deltas == ["Let me look."]
    assert [(c.call_id, c.name, c.arguments) for c in out.calls] == [
        ("a", "Read", '{"path":"x"}'),
        ("b", "Glob", "{}"),
    ]
    assert out.usage == {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}


def test_a_stream_cut_short_is_a_retryable_error() -> None:
    with pytest.raises(ModelCallError) as caught:
        bc.read_stream(
            [{"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "par"}}}], lambda _d: None
        )
    assert caught.value.retryable


def test_region_comes_from_the_executor_then_the_arn_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SKYLOOP_BEDROCK_REGION", "eu-west-1")
    arn = "arn:aws:bedrock:ap-south-1:123456789012:inference-profile/apac.anthropic.claude-3-5-sonnet"
    assert bc.region_for(spec("", model=arn, region="us-west-2")) == "us-west-2"
    assert bc.region_for(spec("", model=arn)) == "ap-south-1"
    assert bc.region_for(spec("")) == "eu-west-1"


def test_credentials_come_from_skyloop_bedrock_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ACCESS_KEY_ID", "SECRET_ACCESS_KEY", "SESSION_TOKEN", "PROFILE"):
        monkeypatch.delenv(f"SKYLOOP_BEDROCK_{name}", raising=False)
    assert bc.credentials() == (None, None, None, None)  # boto3's chain: the function's role
    monkeypatch.setenv("SKYLOOP_BEDROCK_PROFILE", "dev")
    assert bc.credentials() == (None, None, None, "dev")
    monkeypatch.setenv("SKYLOOP_BEDROCK_ACCESS_KEY_ID", "AKIA")
    monkeypatch.setenv("SKYLOOP_BEDROCK_SECRET_ACCESS_KEY", "secret")
    assert bc.credentials() == ("AKIA", "secret", None, None)


# -- whole calls through boto3 against the mock -------------------------------------------------


@pytest.fixture(scope="module")
def mock() -> Iterator[tuple[MockState, str]]:
    state = MockState()
    with UvicornThread(create_app(state)) as server:
        yield state, server.url


@pytest.fixture
def llm(mock: tuple[MockState, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MockState, str]]:
    state, _url = mock
    monkeypatch.setattr(bc, "BACKOFF_S", 0.01)
    for name in ("ACCESS_KEY_ID", "SECRET_ACCESS_KEY", "SESSION_TOKEN", "PROFILE"):
        monkeypatch.delenv(f"SKYLOOP_BEDROCK_{name}", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "dummy")  # signed, never checked
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dummy")
    state.reset()
    bc._client.cache_clear()
    yield mock
    state.reset()


def spec(url: str, **executor: Any) -> AgentSpec:
    fields: dict[str, Any] = {"harness": "bedrock-converse", "model": "anthropic.claude-mock", **executor}
    if url:
        fields["auth"] = {"base_url": url}
    return AgentSpec.model_validate({"name": "a", "prompt": "be brief", "executor": fields})


def configure(url: str, responses: list[dict[str, Any]]) -> None:
    httpx.post(url + "/mock/configure", json={"responses": responses}).raise_for_status()


def run(url: str, items: list[ConversationItem] | None = None, **executor: Any) -> tuple[Any, list[str]]:
    deltas: list[str] = []
    out = caller_for("bedrock-converse")(
        spec(url, **executor), items or [user(1, "hi")], [READ, GLOB], deltas.append, timeout_s=30
    )
    return out, deltas


def test_text_streams_word_by_word_with_usage(llm: tuple[MockState, str]) -> None:
    _state, url = llm
    configure(url, [{"text": "one two three", "stream": True}])
    out, deltas = run(url)
    assert deltas == ["one ", "two ", "three"]
    assert (out.text, out.calls, out.model) == ("one two three", [], "anthropic.claude-mock")
    assert out.usage == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def test_several_calls_in_one_response(llm: tuple[MockState, str]) -> None:
    _state, url = llm
    args = json.dumps({"path": "src/some/longer/path.py", "offset": 10, "limit": 200})
    configure(
        url,
        [
            {
                "tool_calls": [
                    {"call_id": "a", "name": "Read", "arguments": args},
                    {"call_id": "b", "name": "Glob"},
                ]
            }
        ],
    )
    out, _ = run(url)
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in out.calls] == [
        ("a", "Read", json.loads(args)),
        ("b", "Glob", {}),
    ]


def test_the_request_carries_system_tools_and_inference_config(llm: tuple[MockState, str]) -> None:
    state, url = llm
    configure(url, [{"text": "ok"}])
    items = [user(1, "go"), call(2, "c1"), output(3, "c1", "done")]
    run(url, items, max_tokens=99, temperature=0.5)
    (body,) = state.requests("anthropic.claude-mock")
    assert body["system"] == [{"text": "be brief"}]
    assert body["inferenceConfig"] == {"maxTokens": 99, "temperature": 0.5}
    assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]] == ["Read", "Glob"]
    assert body["messages"][2] == {"role": "user", "content": [result("c1", "done")]}


def test_images_go_out_base64_encoded(llm: tuple[MockState, str]) -> None:
    state, url = llm
    configure(url, [{"text": "a cat"}])
    data = base64.b64encode(PNG).decode()
    image = item(
        "message",
        1,
        role="user",
        content=[{"type": "input_image", "image_url": f"data:image/png;base64,{data}"}],
    )
    run(url, [image])
    (body,) = state.requests()
    assert body["messages"][0]["content"] == [{"image": {"format": "png", "source": {"bytes": data}}}]


def test_throttling_then_success_is_retried_inside_the_call(llm: tuple[MockState, str]) -> None:
    state, url = llm
    configure(
        url,
        [{"error": "slow down", "status_code": 429}, {"error": "busy", "status_code": 503}, {"text": "ok"}],
    )
    out, _ = run(url)
    assert out.text == "ok"
    assert state.request_count == 3


def test_throttling_until_the_attempts_run_out_is_model_rate_limited(llm: tuple[MockState, str]) -> None:
    state, url = llm
    configure(url, [{"error": "slow down", "status_code": 429}] * (bc.MAX_ATTEMPTS + 1))
    with pytest.raises(ModelCallError) as caught:
        run(url)
    assert (caught.value.error_code, caught.value.retryable) == ("model_rate_limited", True)
    assert "429 ThrottlingException: slow down" in caught.value.message
    assert state.request_count == bc.MAX_ATTEMPTS


def test_retries_stop_at_the_deadline(llm: tuple[MockState, str], monkeypatch: pytest.MonkeyPatch) -> None:
    state, url = llm
    monkeypatch.setattr(bc, "BACKOFF_S", 5.0)  # the first wait alone would pass the deadline
    configure(url, [{"error": "slow down", "status_code": 429}] * 3)
    with pytest.raises(ModelCallError):
        caller_for("bedrock-converse")(spec(url), [user(1, "hi")], [], lambda _d: None, timeout_s=2)
    assert state.request_count == 1


def test_a_stream_error_before_any_text_is_retried(llm: tuple[MockState, str]) -> None:
    state, url = llm
    configure(url, [{"error": "hiccup", "status_code": 424, "stream": True}, {"text": "recovered"}])
    out, _ = run(url)
    assert out.text == "recovered"
    assert state.request_count == 2


@pytest.mark.parametrize(
    ("status", "code"), [(400, "model_http_error"), (403, "model_auth_error"), (404, "model_http_error")]
)
def test_client_errors_are_not_retried(llm: tuple[MockState, str], status: int, code: str) -> None:
    state, url = llm
    configure(url, [{"error": "no", "status_code": status}] * 2)
    with pytest.raises(ModelCallError) as caught:
        run(url)
    assert (caught.value.error_code, caught.value.retryable) == (code, False)
    assert str(status) in caught.value.message
    assert state.request_count == 1


def test_an_unreachable_endpoint(llm: tuple[MockState, str]) -> None:
    with UvicornThread(create_app()) as other:
        dead = other.url
    with pytest.raises(ModelCallError) as caught:
        run(dead)
    assert caught.value.error_code == "model_unreachable"


def test_clients_are_cached_per_region_and_endpoint(llm: tuple[MockState, str]) -> None:
    _state, url = llm
    first = bc.client_for(spec(url))
    assert bc.client_for(spec(url)) is first
    assert bc.client_for(spec(url, region="eu-west-1")) is not first
    assert first.meta.endpoint_url == url


def test_a_stream_error_after_text_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A retry would stream a second answer after the first one's words: the error ends the call instead."""
    from botocore.exceptions import EventStreamError

    attempts: list[int] = []

    def stream() -> Iterator[dict[str, Any]]:
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "half an"}}}
        raise EventStreamError(
            {"Error": {"Code": "modelStreamErrorException", "Message": "boom"}}, "ConverseStream"
        )

    class Client:
        def converse_stream(self, **_: Any) -> dict[str, Any]:
            attempts.append(1)
            return {"stream": stream()}

    monkeypatch.setattr(bc, "client_for", lambda _spec: Client())
    deltas: list[str] = []
    with pytest.raises(ModelCallError) as caught:
        bc.call_model(spec(""), [user(1, "hi")], [], deltas.append, timeout_s=30)
    assert deltas == ["half an"]
    assert len(attempts) == 1
    assert caught.value.retryable  # another whole call may succeed; this one must not splice two
    assert "ModelStreamErrorException: boom" in caught.value.message
