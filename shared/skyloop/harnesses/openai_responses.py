"""Harness ``openai-agents``: the OpenAI Responses API through the official SDK, streaming.

The SDK is imported inside :func:`call_model` because ``openai`` costs most of a
second to import; only the model-calling function ever needs it.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from skyloop.errors import ModelCallError
from skyloop.harnesses.base import FunctionCall, ModelResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.agent import AgentSpec
    from skyloop.models.session import ClientTool, ConversationItem

MAX_RETRIES = 3
MIN_ATTEMPT_TIMEOUT_S = 5.0


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
                out.append(
                    {"type": "message", "role": d.get("role", "user"), "content": d.get("content") or []}
                )
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


def call_model(  # noqa: C901  (one loop over the SDK's stream events and error classes)
    spec: AgentSpec,
    items: list[ConversationItem],
    tools: list[ClientTool],
    on_delta: Callable[[str], None],
    *,
    timeout_s: float = 600.0,
) -> ModelResult:
    """Stream one response; text deltas go to ``on_delta`` as they arrive."""
    import openai  # deferred: heavy import, only this step needs it

    auth = spec.executor.auth
    api_key = (auth.api_key.get_secret_value() if auth and auth.api_key else None) or os.environ.get(
        "OPENAI_API_KEY"
    )
    if not api_key:
        raise ModelCallError(
            "no API key: set executor.auth.api_key or OPENAI_API_KEY", code="model_auth_error"
        )
    # timeout_s bounds the whole call, retries included, so it ends inside the function's own timeout
    per_attempt = max(MIN_ATTEMPT_TIMEOUT_S, timeout_s / (MAX_RETRIES + 1))
    client = _client(api_key, auth.base_url if auth and auth.base_url else None).with_options(
        timeout=per_attempt
    )
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
    final = None
    streamed: list[str] = []
    try:
        with client.responses.create(**kwargs) as stream:
            for event in stream:
                etype = getattr(event, "type", None)
                if etype == "response.output_text.delta":
                    streamed.append(event.delta)
                    on_delta(event.delta)
                elif etype == "response.completed":
                    final = event.response
                elif etype in ("response.failed", "response.incomplete"):
                    err = getattr(event.response, "error", None)
                    raise ModelCallError(
                        f"model response {etype.split('.')[-1]}: {getattr(err, 'message', None) or 'no detail'}",
                        code="model_error",
                    )
                elif etype == "error":
                    raise ModelCallError(f"model stream error: {getattr(event, 'message', '')}")
    except openai.APIStatusError as exc:
        raise ModelCallError(
            f"model endpoint answered {exc.status_code}: {_short(exc.message)}",
            code="model_rate_limited" if exc.status_code == 429 else "model_http_error",
            retryable=exc.status_code in (408, 409, 429) or exc.status_code >= 500,
        ) from exc
    except openai.APITimeoutError as exc:
        raise ModelCallError("model call timed out", code="model_timeout", retryable=True) from exc
    except openai.APIConnectionError as exc:
        raise ModelCallError(
            f"model endpoint unreachable: {exc}", code="model_unreachable", retryable=True
        ) from exc
    if final is None:
        raise ModelCallError("model stream ended without response.completed", retryable=True)
    return _result(final, "".join(streamed))


@functools.lru_cache(maxsize=32)
def _client(api_key: str, base_url: str | None) -> Any:
    """One SDK client per endpoint and key, reused by a warm container.

    Building a client builds an HTTP connection pool and a TLS context (tens of
    milliseconds of CPU); the SDK's clients are thread-safe.
    """
    import openai

    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=MAX_RETRIES)


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


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
