"""The mock LLM behind a real uvicorn server, driven with httpx and the official openai SDK."""

from __future__ import annotations

import json
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)
from starlette.applications import Starlette
from starlette.routing import Mount

from skyloop.mockllm import MockState, create_app
from skyloop.mockllm import _state as mock_state
from skyloop.mockllm._sse import split_words
from skyloop.mockllm._state import user_input_text
from tests.servers import UvicornThread

if TYPE_CHECKING:
    from collections.abc import Iterator

# -- fixtures -------------------------------------------------------------------


@pytest.fixture(scope="module")
def state() -> MockState:
    return MockState()


@pytest.fixture(scope="module")
def base_url(state: MockState) -> Iterator[str]:
    with UvicornThread(create_app(state)) as server:
        yield server.url


@pytest.fixture
def http(base_url: str) -> Iterator[httpx.Client]:
    """Resets the mock before each test so tests stay independent on the shared server."""
    with httpx.Client(base_url=base_url, timeout=10) as client:
        client.post("/mock/reset").raise_for_status()
        yield client


@pytest.fixture
def sdk(base_url: str, http: httpx.Client) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key="mock-key", max_retries=0, timeout=10) as client:
        yield client


def configure(http: httpx.Client, responses: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    reply = http.post("/mock/configure", json={"responses": responses, **extra})
    reply.raise_for_status()
    return reply.json()


def reply_text(http: httpx.Client, text: str, model: str = "some-model", **extra: Any) -> str:
    """Ask ``/v1/responses`` (non-streaming) and return the answered text."""
    reply = http.post("/v1/responses", json={"model": model, "input": text, **extra})
    reply.raise_for_status()
    return reply.json()["output"][0]["content"][0]["text"]


def reply_text_via(base_url: str, text: str) -> str:
    """``reply_text`` on a client of its own, for requests sent from a worker thread."""
    with httpx.Client(base_url=base_url, timeout=10) as client:
        return reply_text(client, text)


def captured_count(http: httpx.Client) -> int:
    """Requests that reached the server; a blocking one is captured (and gated) before it waits."""
    return len(http.get("/mock/requests").json()["requests"])


def wait_for_pending(http: httpx.Client, expected: bool = True) -> None:
    deadline = time.monotonic() + 5
    while http.get("/gate/pending").json()["pending"] is not expected:
        assert time.monotonic() < deadline, f"gate pending never became {expected}"
        time.sleep(0.01)


# -- Responses API through the openai SDK --------------------------------------------


def test_sdk_stream_yields_typed_events_in_sequence(http: httpx.Client, sdk: openai.OpenAI) -> None:
    configure(http, [{"text": "Hello from the mock"}])

    events = list(sdk.responses.create(model="gpt-mock", input="hi", stream=True))

    assert [type(e) for e in events] == [
        ResponseCreatedEvent,
        ResponseInProgressEvent,
        ResponseOutputItemAddedEvent,
        ResponseContentPartAddedEvent,
        ResponseTextDeltaEvent,
        ResponseTextDoneEvent,
        ResponseContentPartDoneEvent,
        ResponseOutputItemDoneEvent,
        ResponseCompletedEvent,
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    delta = events[4]
    assert isinstance(delta, ResponseTextDeltaEvent)
    assert delta.delta == "Hello from the mock"
    assert delta.item_id == events[2].item.id
    assert delta.logprobs == []
    completed = events[-1]
    assert isinstance(completed, ResponseCompletedEvent)
    assert completed.response.status == "completed"
    assert completed.response.model == "gpt-mock"
    assert completed.response.output_text == "Hello from the mock"
    assert completed.response.id == events[0].response.id
    usage = completed.response.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (10, 5, 15)
    assert usage.input_tokens_details.cached_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == 0


def test_sdk_stream_helper_accumulates_text(http: httpx.Client, sdk: openai.OpenAI) -> None:
    text = "one two three four five six seven"
    configure(http, [{"text": text, "stream": True}])

    with sdk.responses.stream(model="gpt-mock", input="hi") as stream:
        snapshots = [e.snapshot for e in stream if isinstance(e, ResponseTextDeltaEvent)]
        final = stream.get_final_response()

    assert final.output_text == text
    assert snapshots[-1] == text
    assert len(snapshots) == 7
    assert final.usage is not None
    assert final.usage.output_tokens == 7


def test_sdk_stream_helper_returns_tool_calls(http: httpx.Client, sdk: openai.OpenAI) -> None:
    calls = [
        {"call_id": "c1", "name": "Glob", "arguments": '{"pattern": "*.py"}'},
        {"call_id": "c2", "name": "Read", "arguments": '{"file_path": "a.py"}'},
    ]
    configure(http, [{"tool_calls": calls}])

    with sdk.responses.stream(model="gpt-mock", input="list files") as stream:
        events = list(stream)
        final = stream.get_final_response()

    assert [e.sequence_number for e in events] == list(range(len(events)))
    arg_deltas = [e for e in events if isinstance(e, ResponseFunctionCallArgumentsDeltaEvent)]
    assert [e.snapshot for e in arg_deltas] == [c["arguments"] for c in calls]
    assert sum(isinstance(e, ResponseFunctionCallArgumentsDoneEvent) for e in events) == 2
    assert all(isinstance(item, ResponseFunctionToolCall) for item in final.output)
    got = [(item.call_id, item.name, item.arguments, item.status) for item in final.output]  # type: ignore[union-attr]
    assert got == [(c["call_id"], c["name"], c["arguments"], "completed") for c in calls]
    assert all(item.id and item.id.startswith("fc_") for item in final.output)  # type: ignore[union-attr]
    assert final.output_text == ""


def test_tool_call_defaults(http: httpx.Client, sdk: openai.OpenAI) -> None:
    configure(http, [{"tool_calls": [{"name": "Bash"}]}])

    final = sdk.responses.create(model="gpt-mock", input="go")

    (item,) = final.output
    assert isinstance(item, ResponseFunctionToolCall)
    assert (item.call_id, item.name, item.arguments) == ("call-mock", "Bash", "{}")


def test_word_by_word_stream_really_streams(http: httpx.Client, sdk: openai.OpenAI) -> None:
    text = "  The quick  brown fox\njumps over. "
    words = len(text.split())
    configure(http, [{"text": text, "stream": True}, {"text": text, "stream": True}])

    events = list(sdk.responses.create(model="gpt-mock", input="hi", stream=True))
    deltas = [e.delta for e in events if isinstance(e, ResponseTextDeltaEvent)]
    assert len(deltas) == words
    assert "".join(deltas) == text
    assert deltas[1] == "quick  "

    # Each delta is flushed on its own, with a pause, rather than one big body.
    started = time.monotonic()
    with http.stream("POST", "/v1/responses", json={"model": "m", "input": "hi", "stream": True}) as raw:
        assert raw.headers["content-type"].startswith("text/event-stream")
        chunks = list(raw.iter_raw())
    assert len(chunks) >= words
    assert time.monotonic() - started >= words * 0.01


def test_plain_text_entry_streams_as_one_delta(http: httpx.Client, sdk: openai.OpenAI) -> None:
    configure(http, [{"text": "many words in one go"}])

    events = list(sdk.responses.create(model="gpt-mock", input="hi", stream=True))

    assert [e.delta for e in events if isinstance(e, ResponseTextDeltaEvent)] == ["many words in one go"]


def test_non_streaming_create_parses(http: httpx.Client, sdk: openai.OpenAI) -> None:
    configure(http, [{"text": "plain answer"}, {"tool_calls": [{"call_id": "c9", "name": "Glob"}]}])

    first = sdk.responses.create(model="gpt-mock", input="hi")
    assert first.object == "response"
    assert first.status == "completed"
    assert first.model == "gpt-mock"
    assert first.output_text == "plain answer"
    assert isinstance(first.output[0], ResponseOutputMessage)
    assert first.usage is not None
    assert first.usage.total_tokens == 15

    second = sdk.responses.create(model="gpt-mock", input="hi")
    (call,) = second.output
    assert isinstance(call, ResponseFunctionToolCall)
    assert (call.call_id, call.name, call.type) == ("c9", "Glob", "function_call")


def test_raw_sse_framing(http: httpx.Client) -> None:
    configure(http, [{"text": "x"}])

    reply = http.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})

    frames = [f for f in reply.text.split("\n\n") if f]
    for frame in frames:
        event_line, data_line = frame.split("\n")
        data = json.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {data['type']}"
    assert "[DONE]" not in reply.text
    completed = json.loads(frames[-1].split("\n")[1].removeprefix("data: "))["response"]
    assert type(completed["created_at"]) is int
    assert completed["model"] == "m"
    plain = http.post("/v1/responses", json={"model": "m", "input": "hi"}).json()
    assert type(plain["created_at"]) is int


# -- routing -----------------------------------------------------------------


def test_routing_match_then_model_then_default(http: httpx.Client) -> None:
    configure(http, [{"text": "from default"}])
    configure(http, [{"text": "from model queue"}], key="model-a")
    configure(http, [{"text": "from match queue"}], key="tok-queue", match="tok-123")

    assert reply_text(http, "please use tok-123 now", model="model-a") == "from match queue"
    assert reply_text(http, "no token here", model="model-a") == "from model queue"
    assert reply_text(http, "no token here", model="unknown") == "from default"
    # The matched queue wins even when exhausted: it never falls through to the model queue.
    configure(http, [{"text": "model again"}], key="model-a")
    assert reply_text(http, "tok-123", model="model-a") == "Mock LLM response"
    assert reply_text(http, "hi", model="model-a") == "model again"


def test_routing_longest_then_rightmost_token_wins(http: httpx.Client) -> None:
    configure(http, [{"text": "short"}] * 2, key="k-short", match="abc")
    configure(http, [{"text": "long"}], key="k-long", match="abcdef")
    configure(http, [{"text": "left"}], key="k-left", match="xx-1")
    configure(http, [{"text": "right"}], key="k-right", match="yy-2")

    assert reply_text(http, "abcdef then abc") == "long"
    assert reply_text(http, "abc only") == "short"
    assert reply_text(http, "yy-2 first, xx-1 later") == "left"
    assert reply_text(http, "xx-1 first, yy-2 later") == "right"


def test_match_only_looks_at_user_text(http: httpx.Client) -> None:
    configure(http, [{"text": "matched"}], key="k", match="secret-tok")
    configure(http, [{"text": "default one"}, {"text": "default two"}])

    body = {
        "model": "m",
        "instructions": "secret-tok",
        "input": [
            {"role": "system", "content": "secret-tok"},
            {"type": "function_call_output", "call_id": "c", "output": "secret-tok"},
            {"role": "user", "content": [{"type": "input_text", "text": "hello"}]},
        ],
    }
    assert http.post("/v1/responses", json=body).json()["output"][0]["content"][0]["text"] == "default one"
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x secret-tok"}]}],
    }
    reply = http.post("/v1/chat/completions", json=chat).json()
    assert reply["choices"][0]["message"]["content"] == "matched"


def test_user_input_text_walks_nested_content() -> None:
    body = {
        "input": {"role": "user", "content": [{"text": "a", "content": [{"text": "b"}, "c"]}]},
        "messages": [{"role": "assistant", "content": "no"}, {"role": "user", "content": "d"}],
    }
    assert user_input_text(body) == "a b c d"
    assert user_input_text({"input": "plain"}) == "plain"
    assert user_input_text({"model": "m"}) == ""


def test_exhausted_queue_and_fallback(http: httpx.Client) -> None:
    configure(http, [{"text": "only once"}], key="m1")
    assert reply_text(http, "hi", model="m1") == "only once"
    assert reply_text(http, "hi", model="m1") == "Mock LLM response"

    assert http.post("/mock/set_fallback", json={"key": "m1", "text": "fallback!"}).json() == {
        "fallback_set": True,
        "key": "m1",
    }
    assert reply_text(http, "hi", model="m1") == "fallback!"
    assert reply_text(http, "hi", model="m1") == "fallback!"

    # Reconfiguring resets the script but keeps the fallback; reset keeps fallback queues only.
    assert configure(http, [{"text": "new"}], key="m1") == {"configured": True, "key": "m1", "count": 1}
    assert reply_text(http, "hi", model="m1") == "new"
    assert reply_text(http, "hi", model="m1") == "fallback!"
    configure(http, [{"text": "gone after reset"}], key="m2")
    http.post("/mock/reset").raise_for_status()
    assert reply_text(http, "hi", model="m1") == "fallback!"
    assert reply_text(http, "hi", model="m2") == "Mock LLM response"


def test_fallback_defaults_and_stream(http: httpx.Client, sdk: openai.OpenAI) -> None:
    http.post("/mock/set_fallback", json={"key": "fb", "text": "a b c", "stream": True}).raise_for_status()
    events = list(sdk.responses.create(model="fb", input="hi", stream=True))
    assert [e.delta for e in events if isinstance(e, ResponseTextDeltaEvent)] == ["a ", "b ", "c"]

    assert http.post("/mock/set_fallback").json() == {"fallback_set": True, "key": "default"}
    assert reply_text(http, "hi") == "Mock LLM response"


def test_reconfigure_without_match_clears_match(http: httpx.Client) -> None:
    configure(http, [{"text": "by match"}], key="k", match="tok-9")
    configure(http, [{"text": "by key"}], key="k")

    assert reply_text(http, "tok-9", model="other") == "Mock LLM response"
    assert reply_text(http, "x", model="k") == "by key"


# -- errors ---------------------------------------------------------------------


def test_error_entry_raises_typed_sdk_error(http: httpx.Client, sdk: openai.OpenAI) -> None:
    configure(http, [{"error": "rate limit exceeded", "status_code": 429, "block": True}, {"error": "boom"}])

    with pytest.raises(openai.RateLimitError) as rate_limited:
        sdk.responses.create(model="gpt-mock", input="hi", stream=True)
    assert rate_limited.value.status_code == 429
    assert rate_limited.value.body == {"message": "rate limit exceeded", "type": "mock_error"}
    assert http.get("/gate/pending").json() == {"pending": False}

    reply = http.post("/v1/chat/completions", json={"model": "gpt-mock", "messages": []})
    assert reply.status_code == 500
    assert reply.json() == {"error": {"message": "boom", "type": "mock_error"}}
    assert http.get("/stats").json() == {"request_count": 2}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/mock/configure", b"{not json"),
        ("/mock/configure", b"[1, 2]"),
        ("/mock/configure", json.dumps({"responses": "nope"}).encode()),
        ("/mock/configure", json.dumps({"responses": [{"tool_calls": [{"call_id": "x"}]}]}).encode()),
        ("/mock/configure", json.dumps({"responses": [{"error": "e", "status_code": 200}]}).encode()),
        ("/mock/configure", json.dumps({"responses": [{"delay_ms": -1}]}).encode()),
        ("/mock/configure", json.dumps({"responses": [{"delay_ms": 60_001}]}).encode()),
        ("/mock/set_fallback", json.dumps({"stream": "maybe"}).encode()),
    ],
)
def test_bad_control_bodies_are_400(http: httpx.Client, path: str, body: bytes) -> None:
    reply = http.post(path, content=body, headers={"content-type": "application/json"})

    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"]


def test_unknown_entry_keys_are_ignored(http: httpx.Client) -> None:
    reply = configure(http, [{"text": "ok", "native_items": [{"type": "web_search_call"}], "delay": 3}])

    assert reply == {"configured": True, "key": "default", "count": 1}
    assert reply_text(http, "hi") == "ok"


# -- gates ----------------------------------------------------------------------


def test_block_waits_for_release_without_blocking_others(http: httpx.Client, base_url: str) -> None:
    configure(http, [{"text": "released!", "block": True}, {"text": "not blocked"}])
    assert http.get("/gate/pending").json() == {"pending": False}
    assert http.post("/gate/release").json() == {"released": False}

    with ThreadPoolExecutor(1) as pool:
        blocked: Future[str] = pool.submit(reply_text_via, base_url, "first")
        wait_for_pending(http)
        assert not blocked.done()
        # The event loop stays free while the gate is closed.
        assert reply_text(http, "second") == "not blocked"
        assert http.post("/gate/release").json() == {"released": True}
        assert blocked.result(timeout=5) == "released!"

    assert http.get("/gate/pending").json() == {"pending": False}
    assert http.post("/gate/release").json() == {"released": False}


def test_gates_release_oldest_first(http: httpx.Client, base_url: str) -> None:
    configure(http, [{"text": "one", "block": True}, {"text": "two", "block": True, "stream": True}])

    with ThreadPoolExecutor(2) as pool, httpx.Client(base_url=base_url, timeout=10) as other:
        first = pool.submit(reply_text_via, base_url, "a")
        wait_for_pending(http)
        second = pool.submit(
            lambda: other.post("/v1/responses", json={"model": "m", "input": "b", "stream": True}).text
        )
        deadline = time.monotonic() + 5
        while captured_count(http) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        http.post("/gate/release").raise_for_status()
        assert first.result(timeout=5) == "one"
        assert not second.done()
        http.post("/gate/release").raise_for_status()
        assert "response.completed" in second.result(timeout=5)


def test_reset_releases_pending_gates(http: httpx.Client, base_url: str) -> None:
    configure(http, [{"text": "unstuck", "block": True}])

    with ThreadPoolExecutor(1) as pool:
        blocked = pool.submit(reply_text_via, base_url, "hi")
        wait_for_pending(http)
        assert http.post("/mock/reset").json() == {"reset": True}
        assert blocked.result(timeout=5) == "unstuck"
    assert http.get("/gate/pending").json() == {"pending": False}


def test_state_can_release_from_another_thread(http: httpx.Client, base_url: str, state: MockState) -> None:
    configure(http, [{"text": "thread-safe", "block": True}])

    with ThreadPoolExecutor(1) as pool:
        blocked = pool.submit(reply_text_via, base_url, "hi")
        wait_for_pending(http)
        assert state.has_pending_gate()
        assert state.release_gate() is True
        assert blocked.result(timeout=5) == "thread-safe"


# -- delays ---------------------------------------------------------------------

DELAY_MS = 400
CHAT = [{"role": "user", "content": "hi"}]


def first_byte_s(base_url: str, path: str, body: dict[str, Any]) -> tuple[float, int]:
    """Seconds from sending ``body`` to the answer's first body byte, and the status."""
    with httpx.Client(base_url=base_url, timeout=10) as client:
        started = time.monotonic()
        with client.stream("POST", path, json=body) as reply:
            next(reply.iter_raw())
            return time.monotonic() - started, reply.status_code


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/responses", {"model": "m", "input": "hi"}),
        ("/v1/responses", {"model": "m", "input": "hi", "stream": True}),
        ("/v1/chat/completions", {"model": "m", "messages": CHAT}),
        ("/v1/chat/completions", {"model": "m", "messages": CHAT, "stream": True}),
    ],
)
def test_delay_holds_the_first_byte(
    http: httpx.Client, base_url: str, path: str, body: dict[str, Any]
) -> None:
    configure(http, [{"text": "slow", "stream": True, "delay_ms": DELAY_MS}, {"text": "prompt"}])

    delayed, status = first_byte_s(base_url, path, body)
    assert status == 200
    assert delayed >= DELAY_MS / 1000
    prompt, status = first_byte_s(base_url, path, body)
    assert status == 200
    assert prompt < DELAY_MS / 1000


def test_an_error_entry_is_delayed_too(http: httpx.Client, base_url: str) -> None:
    configure(http, [{"error": "slow to refuse", "status_code": 429, "delay_ms": DELAY_MS}])

    elapsed, status = first_byte_s(base_url, "/v1/responses", {"model": "m", "input": "hi"})

    assert status == 429
    assert elapsed >= DELAY_MS / 1000


def test_a_delayed_answer_does_not_hold_up_others(http: httpx.Client, base_url: str) -> None:
    configure(http, [{"text": "slow", "delay_ms": DELAY_MS}, {"text": "prompt"}])

    def timed(text: str) -> tuple[str, float]:
        return reply_text_via(base_url, text), time.monotonic()

    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        slow = pool.submit(timed, "first")
        deadline = time.monotonic() + 5
        while captured_count(http) < 1:  # the delayed request has drawn its entry
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert reply_text(http, "second") == "prompt"
        prompt_done = time.monotonic()
        slow_text, slow_done = slow.result(timeout=5)

    assert slow_text == "slow"
    assert slow_done - started >= DELAY_MS / 1000
    assert prompt_done < slow_done


# -- capture --------------------------------------------------------------------


def test_requests_are_captured_and_filtered_by_model(http: httpx.Client) -> None:
    configure(http, [{"text": "a"}], key="queue-key", match="tok-1")
    reply_text(http, "tok-1", model="model-x")
    reply_text(http, "hi", model="model-y")
    http.post("/v1/chat/completions", content=b"not json at all")

    everything = http.get("/mock/requests").json()["requests"]
    assert [r.get("model") for r in everything] == ["model-x", "model-y", None]
    assert everything[0]["input"] == "tok-1"
    assert everything[2] == {"raw": "not json at all"}
    assert http.get("/mock/requests", params={"key": "model-x"}).json() == {"requests": [everything[0]]}
    # Filtering is by request model, not by the queue key the request was routed to.
    assert http.get("/mock/requests", params={"key": "queue-key"}).json() == {"requests": []}
    assert http.get("/stats").json() == {"request_count": 3}

    http.post("/mock/reset").raise_for_status()
    assert http.get("/mock/requests").json() == {"requests": []}
    assert http.get("/stats").json() == {"request_count": 0}


# -- chat completions and models ------------------------------------------------------


def test_chat_completions_json(http: httpx.Client, sdk: openai.OpenAI) -> None:
    configure(http, [{"text": "chat says hi"}, {"text": "ignored", "tool_calls": [{"name": "Glob"}]}])
    messages: list[Any] = [{"role": "user", "content": "hello"}]

    first = sdk.chat.completions.create(model="gpt-mock", messages=messages)
    assert first.model == "gpt-mock"
    assert first.choices[0].message.content == "chat says hi"
    assert first.choices[0].finish_reason == "stop"
    assert first.usage is not None
    assert (first.usage.prompt_tokens, first.usage.completion_tokens, first.usage.total_tokens) == (10, 5, 15)

    second = sdk.chat.completions.create(model="gpt-mock", messages=messages)
    choice = second.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert call.type == "function"
    assert (call.id, call.function.name, call.function.arguments) == ("call-mock", "Glob", "{}")


def test_chat_completions_stream(http: httpx.Client, sdk: openai.OpenAI) -> None:
    configure(
        http,
        [{"text": "streamed chat", "stream": True}, {"tool_calls": [{"call_id": "c1", "name": "Read"}]}],
    )
    messages: list[Any] = [{"role": "user", "content": "hello"}]

    chunks = list(
        sdk.chat.completions.create(
            model="gpt-mock", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0].choices[0].delta.role == "assistant"
    content = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert content == ["streamed ", "chat"]  # word by word
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == 10

    raw = http.post("/v1/chat/completions", json={"model": "m", "messages": messages, "stream": True})
    frames = [f for f in raw.text.split("\n\n") if f]
    assert frames[-1] == "data: [DONE]"
    bodies = [json.loads(f.removeprefix("data: ")) for f in frames[:-1]]
    assert all(b["choices"] for b in bodies)  # no usage chunk unless asked for
    parts = [p for b in bodies for p in b["choices"][0]["delta"].get("tool_calls") or []]
    assert parts[0] == {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "Read", "arguments": ""},
    }
    assert "".join(p["function"]["arguments"] for p in parts) == "{}"
    assert bodies[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_chat_stream_splits_tool_arguments(http: httpx.Client) -> None:
    args = json.dumps({"path": "src/app.py", "limit": 200})
    configure(
        http,
        [
            {
                "tool_calls": [
                    {"call_id": "a", "name": "Read", "arguments": args},
                    {"call_id": "b", "name": "Glob"},
                ]
            }
        ],
    )
    raw = http.post("/v1/chat/completions", json={"model": "m", "messages": [], "stream": True})
    bodies = [
        json.loads(f.removeprefix("data: ")) for f in raw.text.split("\n\n") if f and f != "data: [DONE]"
    ]
    parts = [p for b in bodies for p in b["choices"][0]["delta"].get("tool_calls") or []]
    first = [p["function"]["arguments"] for p in parts if p["index"] == 0]
    assert len([a for a in first if a]) > 1  # the arguments arrive in pieces
    assert "".join(first) == args
    assert [p["id"] for p in parts if "id" in p] == ["a", "b"]


def test_models_list(http: httpx.Client, sdk: openai.OpenAI) -> None:
    assert http.get("/v1/models").json() == {"object": "list", "data": []}
    assert list(sdk.models.list()) == []


# -- mounting -------------------------------------------------------------------


def test_works_mounted_under_a_prefix() -> None:
    outer = Starlette(routes=[Mount("/_mock", app=create_app())])

    with UvicornThread(outer) as server, httpx.Client(base_url=f"{server.url}/_mock", timeout=10) as client:
        configure(client, [{"text": "mounted", "stream": True}])
        sdk = openai.OpenAI(base_url=f"{server.url}/_mock/v1", api_key="k", max_retries=0)
        with sdk, sdk.responses.stream(model="m", input="hi") as stream:
            assert stream.get_final_response().output_text == "mounted"
        assert client.get("/stats").json() == {"request_count": 1}


def test_split_words_round_trips() -> None:
    for text in ["", "   ", "one", " a  b\tc\n", "trailing "]:
        assert "".join(split_words(text)) == text
    assert split_words("a b") == ["a ", "b"]


def test_only_the_newest_requests_are_kept_and_every_one_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    # A dev stack's chat runs on the mock for hours; each request carries its whole conversation.
    monkeypatch.setattr(mock_state, "CAPTURED_REQUESTS", 5)
    mock = MockState()
    for n in range(8):
        mock.record_and_next({"model": "m", "input": f"turn {n}"})
    assert [r["input"] for r in mock.requests()] == [f"turn {n}" for n in range(3, 8)]
    assert [r["input"] for r in mock.requests("m")] == [f"turn {n}" for n in range(3, 8)]
    assert mock.request_count == 8
    mock.reset()
    assert (mock.requests(), mock.request_count) == ([], 0)
    mock.record_and_next({"model": "m", "input": "after"})
    assert [r["input"] for r in mock.requests()] == ["after"]


def test_the_capture_keeps_a_bounded_amount_of_request_json(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a capture budget of about two of these bodies (as received over HTTP)
    body = {"model": "bytes-model", "input": "x" * 1000}
    monkeypatch.setattr(mock_state, "CAPTURED_BYTES", 2 * len(json.dumps(body)) + 50)
    for n in range(5):
        http.post("/v1/responses", json={**body, "metadata": {"n": str(n)}}).raise_for_status()
    # Then the newest two are kept, every one is counted
    kept = http.get("/mock/requests", params={"key": "bytes-model"}).json()["requests"]
    assert [r["metadata"]["n"] for r in kept] == ["3", "4"]
    assert http.get("/stats").json()["request_count"] == 5
    # and a body larger than the whole budget is still kept, alone
    http.post("/v1/responses", json={**body, "input": "y" * 10_000}).raise_for_status()
    kept = http.get("/mock/requests").json()["requests"]
    assert [r["input"][:1] for r in kept] == ["y"]
