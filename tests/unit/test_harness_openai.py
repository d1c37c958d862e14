"""The two OpenAI-SDK harnesses: the conversation mapping, and whole calls against the real mock server."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from openai.types.chat import ChatCompletionChunk

from skyloop.errors import ModelCallError
from skyloop.harnesses import _openai_common, caller_for, chat_completions, openai_responses
from skyloop.mockllm import MockState, create_app
from skyloop.models.agent import AgentSpec
from skyloop.models.session import ClientTool, ConversationItem
from tests.servers import UvicornThread

if TYPE_CHECKING:
    from collections.abc import Iterator

READ = ClientTool(name="Read", description="read a file", parameters={"type": "object", "properties": {}})
GLOB = ClientTool(name="Glob")


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


# A response that said something and called two tools, a steering message that arrived
# while they ran, their outputs (recorded after it), then a final answer.
CONVERSATION = [
    user(1, "look at a and b"),
    assistant(2, "Reading both."),
    call(3, "c1"),
    call(4, "c2", "Glob", '{"pattern": "*"}'),
    user(5, "and be quick"),
    output(6, "c1", "contents of a"),
    output(7, "c2", "a\nb"),
    assistant(8, "Done."),
]


# -- chat-completions mapping -----------------------------------------------------


def test_chat_groups_a_responses_text_and_calls_and_puts_outputs_right_after() -> None:
    messages = chat_completions.to_messages("be helpful", CONVERSATION)
    assert messages == [
        {"role": "system", "content": "be helpful"},
        {"role": "user", "content": "look at a and b"},
        {
            "role": "assistant",
            "content": "Reading both.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"path": "a"}'}},
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "Glob", "arguments": '{"pattern": "*"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "contents of a"},
        {"role": "tool", "tool_call_id": "c2", "content": "a\nb"},
        {"role": "user", "content": "and be quick"},
        {"role": "assistant", "content": "Done."},
    ]


def test_chat_calls_without_text_get_their_own_assistant_message() -> None:
    messages = chat_completions.to_messages("", [user(1, "go"), call(2, "c1"), output(3, "c1", "ok")])
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"path": "a"}'}}
        ],
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}


def test_chat_interrupted_turn_keeps_every_call_answered() -> None:
    """A cancelled call carries skyloop's cancelled output; one with none at all still gets a tool message."""
    items = [
        user(1, "run it"),
        call(2, "c1"),
        call(3, "c2"),
        output(4, "c1", "cancelled by the user"),
        user(5, "[interrupted]"),
        user(6, "do something else"),
    ]
    messages = chat_completions.to_messages("", items)
    tools = [m for m in messages if m["role"] == "tool"]
    assert tools == [
        {"role": "tool", "tool_call_id": "c1", "content": "cancelled by the user"},
        {"role": "tool", "tool_call_id": "c2", "content": chat_completions.NO_OUTPUT},
    ]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user", "user"]


def test_chat_image_blocks_become_image_url_parts() -> None:
    image = item(
        "message",
        1,
        role="user",
        content=[
            {"type": "input_text", "text": "what is this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
        ],
    )
    (message,) = chat_completions.to_messages("", [image])
    assert message["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}},
    ]


def test_chat_tools_use_the_nested_function_form() -> None:
    assert chat_completions.to_tools([READ, GLOB]) == [
        {
            "type": "function",
            "function": {"name": "Read", "description": "read a file", "parameters": READ.parameters},
        },
        {
            "type": "function",
            "function": {
                "name": "Glob",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


def _chunk(**fields: Any) -> ChatCompletionChunk:
    body = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [], **fields}
    return ChatCompletionChunk.model_validate(body)


def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "finish_reason": finish_reason}


def test_chat_stream_assembles_interleaved_call_deltas_by_index() -> None:
    """Servers may interleave the pieces of parallel calls; each index is its own call."""
    chunks = [
        _chunk(choices=[_choice({"role": "assistant", "content": "Hi"})]),
        _chunk(
            choices=[
                _choice(
                    {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "Read", "arguments": ""}}]}
                )
            ]
        ),
        _chunk(choices=[_choice({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "Glob"}}]})]),
        _chunk(choices=[_choice({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]})]),
        _chunk(
            choices=[_choice({"tool_calls": [{"index": 1, "function": {"arguments": '{"pattern":"*"}'}}]})]
        ),
        _chunk(choices=[_choice({"tool_calls": [{"index": 0, "function": {"arguments": 'th":"x"}'}}]})]),
        _chunk(choices=[_choice({}, "tool_calls")]),
        _chunk(usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}),
    ]
    deltas: list[str] = []
    result = chat_completions.read_stream(chunks, deltas.append)
    assert deltas == ["Hi"]
    assert result.text == "Hi"
    assert [(c.call_id, c.name, c.arguments) for c in result.calls] == [
        ("a", "Read", '{"path":"x"}'),
        ("b", "Glob", '{"pattern":"*"}'),
    ]
    assert result.usage == {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}


def test_chat_stream_cut_short_is_a_retryable_error() -> None:
    with pytest.raises(ModelCallError) as caught:
        chat_completions.read_stream([_chunk(choices=[_choice({"content": "par"})])], lambda _d: None)
    assert caught.value.retryable


def test_chat_call_without_a_name_is_an_error() -> None:
    chunks = [
        _chunk(choices=[_choice({"tool_calls": [{"index": 0, "id": "a", "function": {"arguments": "{}"}}]})]),
        _chunk(choices=[_choice({}, "tool_calls")]),
    ]
    with pytest.raises(ModelCallError, match="without a function name"):
        chat_completions.read_stream(chunks, lambda _d: None)


# -- responses mapping -------------------------------------------------------------


def test_responses_input_keeps_items_in_order() -> None:
    mapped = openai_responses.to_input_items(CONVERSATION)
    assert [m.get("type", "message") if "role" not in m or m.get("type") else "message" for m in mapped] == [
        "message",
        "message",
        "function_call",
        "function_call",
        "message",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    assert mapped[2] == {
        "type": "function_call",
        "call_id": "c1",
        "name": "Read",
        "arguments": '{"path": "a"}',
    }
    assert mapped[5] == {"type": "function_call_output", "call_id": "c1", "output": "contents of a"}
    assert mapped[1] == {"role": "assistant", "content": "Reading both."}


# -- whole calls against the real mock server ---------------------------------------------


@pytest.fixture(scope="module")
def mock() -> Iterator[tuple[MockState, str]]:
    state = MockState()
    with UvicornThread(create_app(state)) as server:
        yield state, server.url


@pytest.fixture
def llm(mock: tuple[MockState, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MockState, str]]:
    state, _url = mock
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("openai._base_client.INITIAL_RETRY_DELAY", 0.01)  # the SDK's backoff, not its count
    monkeypatch.setattr("openai._base_client.MAX_RETRY_DELAY", 0.02)
    state.reset()
    _openai_common._client.cache_clear()
    yield mock
    state.reset()


def spec(url: str, harness: str, **executor: Any) -> AgentSpec:
    auth: dict[str, Any] = {"base_url": url + "/v1"}
    if harness == "openai-agents":
        auth["api_key"] = "sk-test"
    return AgentSpec.model_validate(
        {
            "name": "a",
            "prompt": "be brief",
            "executor": {"harness": harness, "model": "gpt-mock", "auth": auth, **executor},
        }
    )


def configure(url: str, responses: list[dict[str, Any]]) -> None:
    httpx.post(url + "/mock/configure", json={"responses": responses}).raise_for_status()


HARNESSES = ["openai-agents", "chat-completions"]


@pytest.mark.parametrize("harness", HARNESSES)
def test_text_streams_word_by_word(llm: tuple[MockState, str], harness: str) -> None:
    _state, url = llm
    configure(url, [{"text": "one two three", "stream": True}])
    deltas: list[str] = []
    result = caller_for(harness)(spec(url, harness), [user(1, "hi")], [], deltas.append, timeout_s=30)
    assert deltas == ["one ", "two ", "three"]
    assert result.text == "one two three"
    assert result.calls == []
    assert result.usage is not None
    assert result.usage["input_tokens"] == 10


@pytest.mark.parametrize("harness", HARNESSES)
def test_several_calls_in_one_response(llm: tuple[MockState, str], harness: str) -> None:
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
    result = caller_for(harness)(
        spec(url, harness), [user(1, "hi")], [READ, GLOB], lambda _d: None, timeout_s=30
    )
    assert [(c.call_id, c.name, c.arguments) for c in result.calls] == [
        ("a", "Read", args),
        ("b", "Glob", "{}"),
    ]


def test_chat_request_carries_tools_prompt_and_inference_config(llm: tuple[MockState, str]) -> None:
    state, url = llm
    configure(url, [{"text": "ok"}])
    agent = spec(url, "chat-completions", max_tokens=99, temperature=0.5)
    chat_completions.call_model(agent, CONVERSATION, [READ], lambda _d: None, timeout_s=30)
    (body,) = state.requests()
    assert body["messages"] == chat_completions.to_messages("be brief", CONVERSATION)
    assert body["tools"] == chat_completions.to_tools([READ])
    assert body["stream_options"] == {"include_usage": True}
    assert (body["max_tokens"], body["temperature"]) == (99, 0.5)


def test_chat_needs_no_key(llm: tuple[MockState, str]) -> None:
    """Servers like Ollama or vLLM take no key: the call goes out anyway."""
    _state, url = llm
    configure(url, [{"text": "ok"}])
    result = chat_completions.call_model(
        spec(url, "chat-completions"), [user(1, "hi")], [], lambda _d: None, timeout_s=30
    )
    assert result.text == "ok"


def test_responses_to_openai_without_a_key_fails_before_calling(
    llm: tuple[MockState, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = llm
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = spec(url, "openai-agents").model_copy(deep=True)
    agent.executor.auth = None  # OpenAI's own endpoint
    with pytest.raises(ModelCallError) as caught:
        openai_responses.call_model(agent, [user(1, "hi")], [], lambda _d: None, timeout_s=30)
    assert caught.value.error_code == "model_auth_error"
    assert state.request_count == 0


def test_responses_to_an_own_endpoint_needs_no_key(
    llm: tuple[MockState, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint of the agent's own (``base_url``: skyloop dev's offline model, vLLM) may take no key:
    the default executor of agents made through the Claude and OpenAI APIs carries none."""
    _state, url = llm
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    configure(url, [{"text": "ok"}])
    agent = spec(url, "openai-agents").model_copy(deep=True)
    assert agent.executor.auth is not None
    agent.executor.auth.api_key = None
    result = openai_responses.call_model(agent, [user(1, "hi")], [], lambda _d: None, timeout_s=30)
    assert result.text == "ok"


@pytest.mark.parametrize("harness", HARNESSES)
@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [(429, "model_rate_limited", True), (503, "model_http_error", True), (400, "model_http_error", False)],
)
def test_http_errors_map_to_codes_after_the_sdk_retries(
    llm: tuple[MockState, str], harness: str, status: int, code: str, retryable: bool
) -> None:
    state, url = llm
    configure(url, [{"error": "nope", "status_code": status}] * 4)
    with pytest.raises(ModelCallError) as caught:
        caller_for(harness)(spec(url, harness), [user(1, "hi")], [], lambda _d: None, timeout_s=30)
    assert (caught.value.error_code, caught.value.retryable) == (code, retryable)
    assert state.request_count == (1 + _openai_common.MAX_RETRIES if retryable else 1)


@pytest.mark.parametrize("harness", HARNESSES)
def test_unreachable_endpoint(llm: tuple[MockState, str], harness: str) -> None:
    with UvicornThread(create_app()) as other:
        dead = other.url
    with pytest.raises(ModelCallError) as caught:
        caller_for(harness)(spec(dead, harness), [user(1, "hi")], [], lambda _d: None, timeout_s=30)
    assert caught.value.error_code == "model_unreachable"
