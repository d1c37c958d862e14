"""The mock's Bedrock routes: its event-stream framing read by botocore, and whole calls through boto3."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from botocore.exceptions import ClientError, EventStreamError

from skyloop.mockllm import MockState, create_app
from skyloop.mockllm import _eventstream as es
from tests.servers import UvicornThread

if TYPE_CHECKING:
    from collections.abc import Iterator

PROFILE = (
    "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0"
)
HI = [{"role": "user", "content": [{"text": "hi"}]}]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[MockState, str]]:
    state = MockState()
    with UvicornThread(create_app(state)) as running:
        yield state, running.url


@pytest.fixture
def mock(server: tuple[MockState, str]) -> tuple[MockState, str]:
    state, _url = server
    state.reset()
    return server


@pytest.fixture
def bedrock(server: tuple[MockState, str]) -> Any:
    """A real boto3 client (signing with dummy keys, no retries) aimed at the mock."""
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=server[1],
        aws_access_key_id="dummy",
        aws_secret_access_key="dummy",
        config=Config(retries={"total_max_attempts": 1}),
    )


def configure(url: str, responses: list[dict[str, Any]], key: str = "default") -> None:
    httpx.post(url + "/mock/configure", json={"key": key, "responses": responses}).raise_for_status()


# -- framing -------------------------------------------------------------------------


def test_encoded_messages_decode_with_botocore() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(
        es.event("messageStart", {"role": "assistant"}) + es.exception("throttlingException", "slow")
    )
    first, second = list(buffer)
    assert first.headers == {
        ":event-type": "messageStart",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    assert json.loads(first.payload) == {"role": "assistant"}
    assert second.headers[":message-type"] == "exception"
    assert second.headers[":exception-type"] == "throttlingException"
    assert json.loads(second.payload) == {"message": "slow"}


def test_a_corrupted_message_fails_its_checksum() -> None:
    frame = bytearray(es.event("messageStop", {"stopReason": "end_turn"}))
    frame[-6] ^= 0xFF  # a payload byte
    buffer = EventStreamBuffer()
    buffer.add_data(bytes(frame))
    with pytest.raises(ChecksumMismatch):
        list(buffer)


# -- whole calls through boto3 ----------------------------------------------------------


def test_stream_of_text_parses_into_boto3_events(mock: tuple[MockState, str], bedrock: Any) -> None:
    _state, url = mock
    configure(url, [{"text": "one two three", "stream": True}])
    events = list(bedrock.converse_stream(modelId="m", messages=HI)["stream"])
    assert events[0] == {"messageStart": {"role": "assistant"}}
    texts = [e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e]
    assert texts == ["one ", "two ", "three"]
    assert events[-2] == {"messageStop": {"stopReason": "end_turn"}}
    assert events[-1]["metadata"]["usage"] == {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}


def test_stream_of_several_tool_calls(mock: tuple[MockState, str], bedrock: Any) -> None:
    _state, url = mock
    args = {"path": "src/a.py", "limit": 20}
    configure(url, [{"tool_calls": [{"call_id": "t1", "name": "Read", "arguments": args}, {"name": "Glob"}]}])
    events = list(bedrock.converse_stream(modelId="m", messages=HI)["stream"])
    starts = [e["contentBlockStart"] for e in events if "contentBlockStart" in e]
    assert [(s["contentBlockIndex"], s["start"]["toolUse"]) for s in starts] == [
        (0, {"toolUseId": "t1", "name": "Read"}),
        (1, {"toolUseId": "call-mock", "name": "Glob"}),
    ]
    pieces = [
        e["contentBlockDelta"]["delta"]["toolUse"]["input"]
        for e in events
        if "contentBlockDelta" in e and e["contentBlockDelta"]["contentBlockIndex"] == 0
    ]
    assert len(pieces) > 1  # the input arrives in pieces, as Bedrock streams it
    assert json.loads("".join(pieces)) == args
    assert {"messageStop": {"stopReason": "tool_use"}} in events


def test_word_deltas_really_stream(mock: tuple[MockState, str], bedrock: Any) -> None:
    _state, url = mock
    configure(url, [{"text": " ".join(["word"] * 20), "stream": True}])
    arrivals = []
    for event in bedrock.converse_stream(modelId="m", messages=HI)["stream"]:
        if "contentBlockDelta" in event:
            arrivals.append(time.monotonic())
    assert arrivals[-1] - arrivals[0] > 0.1


def test_an_inference_profile_arn_routes_and_is_captured_as_the_model(
    mock: tuple[MockState, str], bedrock: Any
) -> None:
    state, url = mock
    configure(url, [{"text": "profile queue"}], key=PROFILE)
    response = bedrock.converse(modelId=PROFILE, messages=HI, system=[{"text": "be brief"}])
    assert response["output"]["message"] == {"role": "assistant", "content": [{"text": "profile queue"}]}
    assert response["stopReason"] == "end_turn"
    (body,) = state.requests(PROFILE)
    assert body["messages"] == HI
    assert body["system"] == [{"text": "be brief"}]


def test_converse_json_returns_tool_use_blocks(mock: tuple[MockState, str], bedrock: Any) -> None:
    _state, url = mock
    configure(url, [{"tool_calls": [{"call_id": "t1", "name": "Read", "arguments": {"path": "a"}}]}])
    response = bedrock.converse(modelId="m", messages=HI)
    assert response["output"]["message"]["content"] == [
        {"toolUse": {"toolUseId": "t1", "name": "Read", "input": {"path": "a"}}}
    ]
    assert response["stopReason"] == "tool_use"


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (429, "ThrottlingException"),
        (503, "ServiceUnavailableException"),
        (500, "InternalServerException"),
        (400, "ValidationException"),
        (403, "AccessDeniedException"),
    ],
)
def test_error_entries_are_bedrock_exceptions(
    mock: tuple[MockState, str], bedrock: Any, status: int, code: str
) -> None:
    _state, url = mock
    configure(url, [{"error": "nope", "status_code": status}])
    with pytest.raises(ClientError) as caught:
        bedrock.converse_stream(modelId="m", messages=HI)
    error = caught.value.response
    assert (error["Error"]["Code"], error["Error"]["Message"]) == (code, "nope")
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    assert type(caught.value).__name__ == code  # boto3's modeled exception class


@pytest.mark.parametrize(
    ("status", "member"), [(424, "modelStreamErrorException"), (429, "throttlingException")]
)
def test_a_streaming_error_entry_fails_inside_the_stream(
    mock: tuple[MockState, str], bedrock: Any, status: int, member: str
) -> None:
    _state, url = mock
    configure(url, [{"error": "broke", "status_code": status, "stream": True}])
    stream = bedrock.converse_stream(modelId="m", messages=HI)["stream"]
    seen = []
    with pytest.raises(EventStreamError) as caught:
        seen.extend(stream)
    assert seen == [{"messageStart": {"role": "assistant"}}]
    assert caught.value.response["Error"] == {"Code": member, "Message": "broke"}


def test_a_blocking_entry_waits_at_its_gate(mock: tuple[MockState, str], bedrock: Any) -> None:
    state, url = mock
    configure(url, [{"text": "released", "block": True}])
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(lambda: bedrock.converse(modelId="m", messages=HI))
        deadline = time.monotonic() + 5
        while not state.has_pending_gate():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not future.done()
        assert httpx.post(url + "/gate/release").json() == {"released": True}
        assert future.result(timeout=5)["output"]["message"]["content"] == [{"text": "released"}]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_delayed_entry_answers_after_its_delay(
    mock: tuple[MockState, str], bedrock: Any, streamed: bool
) -> None:
    """``converse_stream`` returns once the answer's headers arrive: they wait for the delay too."""
    _state, url = mock
    delay_ms = 400
    configure(url, [{"text": "slow", "delay_ms": delay_ms}, {"text": "prompt"}])
    call = bedrock.converse_stream if streamed else bedrock.converse

    started = time.monotonic()
    call(modelId="m", messages=HI)
    assert time.monotonic() - started >= delay_ms / 1000
    started = time.monotonic()
    call(modelId="m", messages=HI)
    assert time.monotonic() - started < delay_ms / 1000


def test_routing_by_match_reads_bedrock_user_text_only(mock: tuple[MockState, str], bedrock: Any) -> None:
    """A tool result mentioning the token does not route; the user's own text does."""
    _state, url = mock
    httpx.post(
        url + "/mock/configure", json={"key": "m-tok", "match": "TOKEN", "responses": [{"text": "matched"}]}
    ).raise_for_status()
    result_only = [
        {"role": "user", "content": [{"text": "go"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "X", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [{"text": "TOKEN"}]}}]},
    ]
    assert bedrock.converse(modelId="m", messages=result_only)["output"]["message"]["content"] == [
        {"text": "Mock LLM response"}
    ]
    said = [{"role": "user", "content": [{"text": "please TOKEN"}]}]
    assert bedrock.converse(modelId="m", messages=said)["output"]["message"]["content"] == [
        {"text": "matched"}
    ]
