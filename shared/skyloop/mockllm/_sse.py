"""Payload builders for the OpenAI Responses and Chat Completions wire formats.

Pure functions (no I/O) so the shapes can be checked without a server. The
Responses stream follows the real API closely enough for the official SDK's
typed events and ``responses.stream()`` accumulator: every event carries a
``type`` and a per-response ``sequence_number`` starting at 0, items are
announced empty and filled by deltas, and ``response.completed`` carries the
full output.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    from skyloop.mockllm._state import QueuedResponse, ToolCall

INPUT_TOKENS = 10
MIN_OUTPUT_TOKENS = 5
DEFAULT_MODEL = "mock-model"

_WORD_CHUNK = re.compile(r"\s*\S+\s*")


def _hex() -> str:
    return uuid.uuid4().hex[:24]


def split_words(text: str) -> list[str]:
    """Word-sized deltas whose concatenation is exactly ``text`` (whitespace kept on the words)."""
    chunks = _WORD_CHUNK.findall(text)
    return chunks if chunks else ([text] if text else [])


def _output_tokens(entry: QueuedResponse) -> int:
    words = 0 if entry.tool_calls else len(entry.text.split())
    return max(MIN_OUTPUT_TOKENS, words)


def responses_usage(entry: QueuedResponse) -> dict[str, Any]:
    output_tokens = _output_tokens(entry)
    return {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + output_tokens,
    }


def error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "mock_error"}}


def sse_frame(event: dict[str, Any]) -> str:
    """One Responses SSE frame: ``event:`` names the type, ``data:`` repeats it in the JSON."""
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"


def sse_data(data: dict[str, Any] | str) -> str:
    """A Chat Completions frame has no ``event:`` line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {payload}\n\n"


# -- Responses API --------------------------------------------------------------


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message_item(item_id: str, text: str | None) -> dict[str, Any]:
    """``text=None`` gives the empty in-progress item that opens a stream."""
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "in_progress" if text is None else "completed",
        "content": [] if text is None else [_text_part(text)],
    }


def _function_item(call: ToolCall, *, done: bool) -> dict[str, Any]:
    return {
        "id": "fc_" + call.call_id,
        "type": "function_call",
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments if done else "",
        "status": "completed" if done else "in_progress",
    }


def _output_items(entry: QueuedResponse, message_id: str) -> list[dict[str, Any]]:
    if entry.tool_calls:
        return [_function_item(call, done=True) for call in entry.tool_calls]
    return [_message_item(message_id, entry.text)]


def _response_object(
    *,
    response_id: str,
    model: str,
    created_at: int,
    entry: QueuedResponse,
    output: list[dict[str, Any]],
    completed: bool,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "completed_at": int(time.time()) if completed else None,
        "status": "completed" if completed else "in_progress",
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
        "usage": responses_usage(entry) if completed else None,
    }


def response_json(entry: QueuedResponse, model: str) -> dict[str, Any]:
    """The non-streaming body: a completed Response whose ``output`` holds the message or calls."""
    response_id = "resp_" + _hex()
    return _response_object(
        response_id=response_id,
        model=model,
        created_at=int(time.time()),
        entry=entry,
        output=_output_items(entry, "msg_" + _hex()),
        completed=True,
    )


def response_events(entry: QueuedResponse, model: str) -> Iterator[dict[str, Any]]:
    """The full streamed lifecycle of one response, numbered from 0.

    A ``stream: true`` text entry yields one ``output_text.delta`` per word;
    any other text entry yields one delta with the whole text.
    """
    response_id = "resp_" + _hex()
    message_id = "msg_" + _hex()
    created_at = int(time.time())
    sequence = 0

    def event(kind: str, **fields: Any) -> dict[str, Any]:
        nonlocal sequence
        payload = {"type": kind, "sequence_number": sequence, **fields}
        sequence += 1
        return payload

    def lifecycle(kind: str, output: list[dict[str, Any]], completed: bool) -> dict[str, Any]:
        response = _response_object(
            response_id=response_id,
            model=model,
            created_at=created_at,
            entry=entry,
            output=output,
            completed=completed,
        )
        return event(kind, response=response)

    yield lifecycle("response.created", [], completed=False)
    yield lifecycle("response.in_progress", [], completed=False)

    if entry.tool_calls:
        for index, call in enumerate(entry.tool_calls):
            item_id = "fc_" + call.call_id
            yield event(
                "response.output_item.added", output_index=index, item=_function_item(call, done=False)
            )
            yield event(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=call.arguments,
            )
            yield event(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                name=call.name,
                arguments=call.arguments,
            )
            yield event("response.output_item.done", output_index=index, item=_function_item(call, done=True))
    else:
        text = entry.text
        where: dict[str, Any] = {"item_id": message_id, "output_index": 0, "content_index": 0}
        yield event("response.output_item.added", output_index=0, item=_message_item(message_id, None))
        yield event("response.content_part.added", **where, part=_text_part(""))
        for delta in split_words(text) if entry.stream else ([text] if text else []):
            yield event("response.output_text.delta", **where, delta=delta, logprobs=[])
        yield event("response.output_text.done", **where, text=text, logprobs=[])
        yield event("response.content_part.done", **where, part=_text_part(text))
        yield event("response.output_item.done", output_index=0, item=_message_item(message_id, text))

    yield lifecycle("response.completed", _output_items(entry, message_id), completed=True)


# -- Chat Completions -----------------------------------------------------------


def _chat_tool_calls(entry: QueuedResponse, *, indexed: bool) -> list[dict[str, Any]]:
    calls = []
    for index, call in enumerate(entry.tool_calls or []):
        rendered: dict[str, Any] = {
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        if indexed:
            rendered = {"index": index, **rendered}
        calls.append(rendered)
    return calls


def _chat_message(entry: QueuedResponse, *, indexed: bool) -> tuple[dict[str, Any], str]:
    """Tool calls replace the text (``content: null``), as a real model's tool turn does."""
    if entry.tool_calls:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": _chat_tool_calls(entry, indexed=indexed),
        }
        return message, "tool_calls"
    return {"role": "assistant", "content": entry.text}, "stop"


def chat_completion_json(entry: QueuedResponse, model: str) -> dict[str, Any]:
    message, finish_reason = _chat_message(entry, indexed=False)
    completion_tokens = _output_tokens(entry)
    return {
        "id": "chatcmpl-resp_" + _hex(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {
            "prompt_tokens": INPUT_TOKENS,
            "completion_tokens": completion_tokens,
            "total_tokens": INPUT_TOKENS + completion_tokens,
        },
    }


def _pieces(text: str, count: int = 3) -> list[str]:
    """``text`` cut into up to ``count`` pieces, as a real server streams tool-call arguments."""
    if len(text) <= 1:
        return [text]
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def chat_completion_chunks(entry: QueuedResponse, model: str, *, include_usage: bool = False) -> list[str]:
    """The stream a real server sends: a role chunk, content deltas (word by word for ``stream`` entries),
    or each tool call announced with its id and name and its arguments in pieces, a finish chunk,
    the usage chunk when ``stream_options.include_usage`` asked for it, then ``[DONE]``.
    """
    chunk_id = "chatcmpl-resp_" + _hex()
    created = int(time.time())

    def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> str:
        choices = (
            []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
        )
        body = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model}
        return sse_data({**body, "choices": choices, **extra})

    frames = [chunk({"role": "assistant", "content": ""})]
    if entry.tool_calls:
        for index, call in enumerate(entry.tool_calls):
            head = {"index": index, "id": call.call_id, "type": "function"}
            frames.append(chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}))
            frames.extend(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _pieces(call.arguments)
            )
        frames.append(chunk({}, "tool_calls"))
    else:
        pieces = split_words(entry.text) if entry.stream else ([entry.text] if entry.text else [])
        frames.extend(chunk({"content": piece}) for piece in pieces)
        frames.append(chunk({}, "stop"))
    if include_usage:
        completion_tokens = _output_tokens(entry)
        usage = {
            "prompt_tokens": INPUT_TOKENS,
            "completion_tokens": completion_tokens,
            "total_tokens": INPUT_TOKENS + completion_tokens,
        }
        frames.append(chunk(None, usage=usage))
    frames.append(sse_data("[DONE]"))
    return frames
