"""Harness ``openai-agents``: the OpenAI Responses API through the official SDK, streaming.

The SDK is imported inside :func:`call_model` because ``openai`` costs most of a
second to import; only the model-calling function ever needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyloop.errors import ModelCallError
from skyloop.harnesses import _openai_common as common
from skyloop.harnesses.base import FunctionCall, ModelResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.agent import AgentSpec
    from skyloop.models.session import ClientTool, ConversationItem


def to_input_items(items: list[ConversationItem]) -> list[dict[str, Any]]:
    """Conversation items as Responses-API input, in order."""
    out: list[dict[str, Any]] = []
    for item in items:
        d = item.data
        if item.type == "message":
            if d.get("role") == "assistant":
                text = "".join(b.get("text", "") for b in d.get("content") or [] if isinstance(b, dict))
                out.append({"role": "assistant", "content": text})
            else:
                content = [_input_block(b) for b in d.get("content") or [] if isinstance(b, dict)]
                out.append({"type": "message", "role": d.get("role", "user"), "content": content})
        elif item.type == "function_call":
            out.append(
                {
                    "type": "function_call",
                    "call_id": d["call_id"],
                    "name": d["name"],
                    "arguments": d.get("arguments") or "{}",
                }
            )
        elif item.type == "function_call_output":
            out.append(
                {"type": "function_call_output", "call_id": d["call_id"], "output": d.get("output", "")}
            )
    return out


def _input_block(block: dict[str, Any]) -> dict[str, Any]:
    """Blocks pass through; an ``input_image`` always names its ``detail`` (the API requires one)."""
    if block.get("type") == "input_image" and not block.get("detail"):
        return {**block, "detail": "auto"}
    return block


def call_model(
    spec: AgentSpec,
    items: list[ConversationItem],
    tools: list[ClientTool],
    on_delta: Callable[[str], None],
    *,
    timeout_s: float = 600.0,
) -> ModelResult:
    """Stream one response; text deltas go to ``on_delta`` as they arrive."""
    client = common.client_for(spec, common.api_key(spec, required=True), timeout_s)
    kwargs: dict[str, Any] = {
        "model": spec.executor.model,
        "stream": True,
        "store": False,
        # The conversation is already in wire form; passed as-is it skips the SDK's recursive
        # TypedDict transform, which costs more CPU than the rest of the call once it is long.
        "extra_body": {"input": to_input_items(items)},
    }
    if spec.prompt:
        kwargs["instructions"] = spec.prompt
    if tools:
        kwargs["tools"] = [t.to_responses_tool() for t in tools]
    if spec.executor.max_tokens is not None:
        kwargs["max_output_tokens"] = spec.executor.max_tokens
    if spec.executor.temperature is not None:
        kwargs["temperature"] = spec.executor.temperature
    if spec.executor.reasoning_effort is not None:
        kwargs["reasoning"] = {"effort": spec.executor.reasoning_effort}
    streamed: list[str] = []
    with common.mapped_errors(), client.responses.create(**kwargs) as stream:
        final = _read_stream(stream, streamed, on_delta)
    if final is None:
        raise ModelCallError("model stream ended without response.completed", retryable=True)
    return _result(final, "".join(streamed))


def _read_stream(stream: Any, streamed: list[str], on_delta: Callable[[str], None]) -> Any:
    """Feed text deltas on; return the completed response (None if the stream ended early)."""
    for event in stream:
        etype = getattr(event, "type", None)
        if etype == "response.output_text.delta":
            streamed.append(event.delta)
            on_delta(event.delta)
        elif etype == "response.completed":
            return event.response
        elif etype in ("response.failed", "response.incomplete"):
            err = getattr(event.response, "error", None)
            detail = getattr(err, "message", None) or "no detail"
            raise ModelCallError(f"model response {etype.split('.')[-1]}: {detail}", code="model_error")
        elif etype == "error":
            raise ModelCallError(f"model stream error: {getattr(event, 'message', '')}")
    return None


def _result(response: Any, streamed_text: str) -> ModelResult:
    texts: list[str] = []
    calls: list[FunctionCall] = []
    for out in response.output or []:
        if out.type == "message":
            texts.extend(
                part.text for part in out.content or [] if getattr(part, "type", None) == "output_text"
            )
        elif out.type == "function_call":
            calls.append(FunctionCall(call_id=out.call_id, name=out.name, arguments=out.arguments or "{}"))
    usage = response.usage.model_dump(mode="json") if getattr(response, "usage", None) else None
    return ModelResult(text="".join(texts) or streamed_text, calls=calls, usage=usage, model=response.model)
