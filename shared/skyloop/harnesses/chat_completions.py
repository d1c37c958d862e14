"""Harness ``chat-completions``: any OpenAI-compatible Chat Completions server, streaming, through the openai SDK.

For servers that speak Chat Completions but not the Responses API (vLLM,
Ollama, LiteLLM, Azure OpenAI, most local servers): ``executor.auth.base_url``
points at them, and a key is optional because many of them take none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyloop.errors import ModelCallError
from skyloop.harnesses import _openai_common as common
from skyloop.harnesses.base import FunctionCall, ModelResult, Usage
from skyloop.ids import new_id

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from skyloop.models.agent import AgentSpec
    from skyloop.models.session import ClientTool, ConversationItem

NO_OUTPUT = "(no output: the call was cancelled before it answered)"


def to_messages(prompt: str | None, items: list[ConversationItem]) -> list[dict[str, Any]]:
    """Conversation items as chat messages.

    Chat Completions wants every assistant ``tool_calls`` message followed at
    once by one ``tool`` message per call, and the calls of one response in
    one assistant message. skyloop's items are in arrival order, where a
    steering message can sit between a call and its output, so outputs are
    placed right after their calls rather than where they were recorded.
    """
    outputs = {
        item.data["call_id"]: str(item.data.get("output", ""))
        for item in items
        if item.type == "function_call_output"
    }
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt}] if prompt else []
    pending: list[dict[str, Any]] = []  # the calls of the assistant message being assembled

    def flush_calls() -> None:
        if not pending:
            return
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant" and "tool_calls" not in last:
            last["tool_calls"] = list(pending)  # the text and the calls of one response
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": list(pending)})
        messages.extend(
            {"role": "tool", "tool_call_id": c["id"], "content": outputs.get(c["id"], NO_OUTPUT)}
            for c in pending
        )
        pending.clear()

    for item in items:
        d = item.data
        if item.type == "function_call":
            pending.append(
                {
                    "id": d["call_id"],
                    "type": "function",
                    "function": {"name": d["name"], "arguments": d.get("arguments") or "{}"},
                }
            )
            continue
        if item.type != "message":
            continue  # outputs were placed with their calls
        flush_calls()
        role = d.get("role", "user")
        if role == "assistant":
            messages.append({"role": "assistant", "content": _text(d.get("content"))})
        else:
            messages.append({"role": role, "content": _user_content(d.get("content"))})
    flush_calls()
    return messages


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def _user_content(content: Any) -> str | list[dict[str, Any]]:
    """Plain text stays a string (what every server accepts); images make it a list of parts."""
    if isinstance(content, str):
        return content
    blocks = [b for b in content or [] if isinstance(b, dict)]
    if not any(b.get("type") == "input_image" for b in blocks):
        return _text(blocks)
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if b.get("type") == "input_image":
            image: dict[str, Any] = {"url": b["image_url"]}
            if b.get("detail"):
                image["detail"] = b["detail"]
            parts.append({"type": "image_url", "image_url": image})
        elif "text" in b:
            parts.append({"type": "text", "text": b["text"]})
    return parts


def to_tools(tools: list[ClientTool]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description or "",
                "parameters": t.parameters or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]


def call_model(
    spec: AgentSpec,
    items: list[ConversationItem],
    tools: list[ClientTool],
    on_delta: Callable[[str], None],
    *,
    timeout_s: float = 600.0,
) -> ModelResult:
    """Stream one completion; text deltas go to ``on_delta``, tool calls are assembled from their deltas."""
    client = common.client_for(spec, common.api_key(spec, required=False), timeout_s)
    kwargs: dict[str, Any] = {
        "model": spec.executor.model,
        "messages": to_messages(spec.prompt, items),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        kwargs["tools"] = to_tools(tools)
    if spec.executor.max_tokens is not None:
        kwargs["max_tokens"] = spec.executor.max_tokens  # the name every compatible server knows
    if spec.executor.temperature is not None:
        kwargs["temperature"] = spec.executor.temperature
    if spec.executor.reasoning_effort is not None:
        kwargs["reasoning_effort"] = spec.executor.reasoning_effort
    with common.mapped_errors():
        stream = client.chat.completions.create(**kwargs)
        return read_stream(stream, on_delta)


class _CallParts:
    """One tool call as its deltas arrive: the id and name come first, the arguments in pieces."""

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []

    def add(self, part: Any) -> None:
        if part.id:
            self.id = part.id
        if part.function is not None:
            if part.function.name:
                self.name += part.function.name
            if part.function.arguments:
                self.arguments.append(part.function.arguments)


class _Assembly:
    """A streamed completion being put together from the SDK's chunk objects."""

    def __init__(self, on_delta: Callable[[str], None]) -> None:
        self.on_delta = on_delta
        self.texts: list[str] = []
        self.calls: dict[int, _CallParts] = {}
        self.usage: Usage | None = None
        self.model: str | None = None
        self.finished = False

    def add(self, chunk: Any) -> None:
        self.model = getattr(chunk, "model", None) or self.model
        if getattr(chunk, "usage", None) is not None:  # the last chunk, with include_usage
            self.usage = Usage(
                input_tokens=chunk.usage.prompt_tokens or 0, output_tokens=chunk.usage.completion_tokens or 0
            )
        for choice in chunk.choices or []:
            if choice.index == 0:  # n=1: any other choice is not ours
                self._choice(choice)

    def _choice(self, choice: Any) -> None:
        delta = choice.delta
        if delta is not None:
            if delta.content:
                self.texts.append(delta.content)
                self.on_delta(delta.content)
            for part in delta.tool_calls or []:
                index = part.index if part.index is not None else len(self.calls)
                self.calls.setdefault(index, _CallParts()).add(part)
        if choice.finish_reason is not None:
            self.finished = True
            if choice.finish_reason == "content_filter":
                raise ModelCallError("the model's content filter stopped the response", code="model_error")

    def result(self) -> ModelResult:
        if not self.finished:
            raise ModelCallError("model stream ended without a finish_reason", retryable=True)
        calls = []
        for index in sorted(self.calls):
            parts = self.calls[index]
            if not parts.name:
                raise ModelCallError(
                    f"tool call {index} streamed without a function name", code="model_error"
                )
            calls.append(
                FunctionCall(
                    call_id=parts.id or "call_" + new_id(),
                    name=parts.name,
                    arguments="".join(parts.arguments) or "{}",
                )
            )
        usage = self.usage.to_api() if self.usage else None
        return ModelResult(text="".join(self.texts), calls=calls, usage=usage, model=self.model)


def read_stream(chunks: Iterable[Any], on_delta: Callable[[str], None]) -> ModelResult:
    """Assemble a streamed completion into one result; text deltas go on as they arrive."""
    assembly = _Assembly(on_delta)
    for chunk in chunks:
        assembly.add(chunk)
    return assembly.result()
