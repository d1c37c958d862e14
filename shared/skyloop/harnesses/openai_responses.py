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
    """A copy of the block (the items are shared with later calls); an ``input_image`` always names
    its ``detail`` (the API requires one)."""
    if block.get("type") == "input_image" and not block.get("detail"):
        return {**block, "detail": "auto"}
    return dict(block)


def call_model(
    spec: AgentSpec,
    items: list[ConversationItem],
    tools: list[ClientTool],
    on_delta: Callable[[str], None],
    *,
    timeout_s: float = 600.0,
) -> ModelResult:
    """Stream one response; text deltas go to ``on_delta`` as they arrive.

    Sent through the SDK's generic ``post`` with ``cast_to=object``: the SDK still builds the
    request, retries, decodes the SSE and raises its errors, but hands each event over as the
    JSON it is. ``responses.create`` validated every event against the SDK's union of ~50 event
    models, a fifth of a turn function's CPU for the few fields read here.
    """
    import openai

    # OpenAI itself needs a key; an endpoint of the agent's own (base_url) may take none, as the example
    # offline model does for agents made through the compatible APIs (executor without a key)
    own_endpoint = spec.executor.auth is not None and spec.executor.auth.base_url is not None
    client = common.client_for(spec, common.api_key(spec, required=not own_endpoint), timeout_s)
    # The conversation and tools are already in wire form: passed as-is they skip the SDK's
    # recursive TypedDict transform, which costs more CPU than the rest of the call once it is long.
    body: dict[str, Any] = {
        "model": spec.executor.model,
        "stream": True,
        "store": False,
        "input": to_input_items(items),
    }
    if spec.prompt:
        body["instructions"] = spec.prompt
    if tools:
        body["tools"] = [t.to_responses_tool() for t in tools]
    if spec.executor.max_tokens is not None:
        body["max_output_tokens"] = spec.executor.max_tokens
    if spec.executor.temperature is not None:
        body["temperature"] = spec.executor.temperature
    if spec.executor.reasoning_effort is not None:
        body["reasoning"] = {"effort": spec.executor.reasoning_effort}
    streamed: list[str] = []
    with (
        common.mapped_errors(),
        client.post(
            "/responses", cast_to=object, body=body, stream=True, stream_cls=openai.Stream[object]
        ) as stream,
    ):
        final = _read_stream(stream, streamed, on_delta)
    if final is None:
        raise ModelCallError("model stream ended without response.completed", retryable=True)
    return _result(final, "".join(streamed))


def _read_stream(stream: Any, streamed: list[str], on_delta: Callable[[str], None]) -> dict[str, Any] | None:
    """Feed text deltas on; return the completed response (None if the stream ended early)."""
    for event in stream:
        if not isinstance(event, dict):
            continue
        etype = event.get("type")
        if etype == "response.output_text.delta":
            delta = event.get("delta") or ""
            streamed.append(delta)
            on_delta(delta)
        elif etype == "response.completed":
            response = event.get("response")
            return response if isinstance(response, dict) else {}
        elif etype in ("response.failed", "response.incomplete"):
            err = _mapping((event.get("response") or {}).get("error"))
            detail = err.get("message") or "no detail"
            raise ModelCallError(f"model response {etype.split('.')[-1]}: {detail}", code="model_error")
        elif etype == "error":
            raise ModelCallError(f"model stream error: {event.get('message', '')}")
    return None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _result(response: dict[str, Any], streamed_text: str) -> ModelResult:
    texts: list[str] = []
    calls: list[FunctionCall] = []
    for out in response.get("output") or []:
        out = _mapping(out)
        if out.get("type") == "message":
            texts.extend(
                str(part.get("text") or "")
                for part in out.get("content") or []
                if _mapping(part).get("type") == "output_text"
            )
        elif out.get("type") == "function_call":
            if not out.get("call_id") or not out.get("name"):
                raise ModelCallError(
                    "model called a function without a call_id or a name", code="model_error"
                )
            calls.append(
                FunctionCall(call_id=out["call_id"], name=out["name"], arguments=out.get("arguments") or "{}")
            )
    usage = response.get("usage")
    model = response.get("model")
    return ModelResult(
        text="".join(texts) or streamed_text,
        calls=calls,
        usage=usage if isinstance(usage, dict) else None,
        model=model if isinstance(model, str) else None,
    )
