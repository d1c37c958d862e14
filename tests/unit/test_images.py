"""Image input: the ``input_image`` content block at the API boundary, and who may be sent one."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import pytest

from skyloop.api.requests import MAX_IMAGE_CHARS, MessageData, SessionEventRequest
from skyloop.errors import ImageNotSupportedError, InvalidInputError, PayloadTooLargeError
from skyloop.harnesses import image_refusal, openai_responses
from skyloop.models.agent import Agent, AgentSpec
from skyloop.models.session import ConversationItem, Session
from skyloop.store import MemoryStore
from skyloop.turns import lifecycle
from tests.fakes import RecordingEngine

PNG_URL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
HTTPS_URL = "https://example.com/cat.png"


def message(*blocks: dict[str, Any]) -> SessionEventRequest:
    content = [{"type": "input_text", "text": "what is this?"}, *blocks]
    return SessionEventRequest.model_validate(
        {"type": "message", "data": {"role": "user", "content": content}}
    )


def image(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "input_image", "image_url": url, **extra}


def executor(harness: str, **fields: Any) -> Any:
    return AgentSpec.model_validate(
        {"name": "a", "executor": {"harness": harness, "model": "m", **fields}}
    ).executor


# -- the content block ---------------------------------------------------------------------


@pytest.mark.parametrize("url", [PNG_URL, HTTPS_URL, "data:image/webp;base64,UklGRg=="])
def test_inline_and_https_images_are_accepted(url: str) -> None:
    data = message(image(url, detail="low")).message()
    assert data.model_dump(mode="json")["content"][1] == {
        "type": "input_image",
        "image_url": url,
        "detail": "low",
    }


def test_detail_defaults_to_auto() -> None:
    assert message(image(PNG_URL)).message().model_dump(mode="json")["content"][1]["detail"] == "auto"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://example.com/cat.png", "data:image"),
        ("data:image/bmp;base64,Qk0=", "not supported"),
        ("data:text/plain;base64,aGk=", "not supported"),
        ("data:image/png;base64,not base64!", "base64"),
        ("file:///etc/passwd", "data:image"),
    ],
)
def test_malformed_or_unsupported_images_are_400(url: str, why: str) -> None:
    with pytest.raises(InvalidInputError, match=why):
        message(image(url)).message()


def test_unknown_block_types_and_fields_are_400() -> None:
    with pytest.raises(InvalidInputError):
        message({"type": "input_audio", "data": "x"}).message()
    with pytest.raises(InvalidInputError):
        message(image(PNG_URL, caption="a cat")).message()


def test_images_over_the_limit_are_413() -> None:
    big = "data:image/png;base64," + "A" * (MAX_IMAGE_CHARS // 2)
    with pytest.raises(PayloadTooLargeError):
        message(image(big), image(big)).message()


def test_the_message_model_still_takes_text_only() -> None:
    data = MessageData.model_validate({"role": "user", "content": [{"type": "input_text", "text": "hi"}]})
    assert data.content[0].type == "input_text"


# -- per agent ----------------------------------------------------------------------------------


@pytest.mark.parametrize("harness", ["openai-agents", "chat-completions", "bedrock-converse"])
def test_every_harness_takes_inline_images(harness: str) -> None:
    assert image_refusal(executor(harness), [image(PNG_URL)]) is None


def test_bedrock_refuses_image_urls_it_cannot_fetch() -> None:
    assert image_refusal(executor("openai-agents"), [image(HTTPS_URL)]) is None
    reason = image_refusal(executor("bedrock-converse"), [image(HTTPS_URL)])
    assert reason is not None
    assert "inline" in reason


def test_a_text_only_agent_refuses_every_image_but_takes_text() -> None:
    text_only = executor("chat-completions", accepts_images=False)
    assert image_refusal(text_only, [image(PNG_URL)]) is not None
    assert image_refusal(text_only, [{"type": "input_text", "text": "hi"}]) is None


def test_a_refused_image_is_image_not_supported_and_writes_nothing() -> None:
    store, engine = MemoryStore(), RecordingEngine()
    spec = AgentSpec.model_validate(
        {"name": "u", "executor": {"harness": "bedrock-converse", "model": "anthropic.claude"}}
    )
    agent = Agent(id=uuid.uuid4().hex, name="u", created_at=1, spec=spec)
    store.put_agent(agent)
    now = int(time.time())
    session = Session(id=uuid.uuid4().hex, agent_id=agent.id, agent_name="u", created_at=now, updated_at=now)
    store.create_session(session)
    data = message(image(HTTPS_URL)).message().model_dump(mode="json")
    with pytest.raises(ImageNotSupportedError) as caught:
        lifecycle.start_or_join(store, engine, agent, session.id, data, None)
    assert caught.value.status == 400
    assert caught.value.to_body()["error"]["code"] == "image_not_supported"
    assert store.get_session(session.id).last_seq == 0
    assert store.list_items(session.id) == []
    assert engine.started == []


def test_responses_input_keeps_images_with_a_detail() -> None:
    item = ConversationItem(
        id="i1",
        type="message",
        created_at=0,
        data={"role": "user", "content": [{"type": "input_image", "image_url": PNG_URL}]},
    )
    (mapped,) = openai_responses.to_input_items([item])
    assert mapped["content"] == [{"type": "input_image", "image_url": PNG_URL, "detail": "auto"}]
