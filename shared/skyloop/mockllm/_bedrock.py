"""Payload builders for Amazon Bedrock's Converse and ConverseStream, the way boto3 reads them.

Pure functions like :mod:`skyloop.mockllm._sse`. The stream is what Bedrock
sends: ``messageStart``, text as ``contentBlockDelta`` events (no start event
for text blocks), each tool call as ``contentBlockStart`` (id and name) then
its input JSON in string pieces and ``contentBlockStop``, ``messageStop`` with
the stop reason, and ``metadata`` with the usage. Token counts match the
OpenAI routes (10 in per request), so usage reads the same over every harness.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from skyloop.mockllm import _eventstream as es
from skyloop.mockllm._sse import INPUT_TOKENS, _output_tokens, _pieces, split_words

if TYPE_CHECKING:
    from skyloop.mockllm._state import QueuedResponse

# An ``error`` entry's status as Bedrock's exception: (HTTP error code, in-stream event member or None).
EXCEPTIONS: dict[int, tuple[str, str | None]] = {
    400: ("ValidationException", "validationException"),
    403: ("AccessDeniedException", None),
    404: ("ResourceNotFoundException", None),
    408: ("ModelTimeoutException", None),
    424: ("ModelErrorException", "modelStreamErrorException"),
    429: ("ThrottlingException", "throttlingException"),
    500: ("InternalServerException", "internalServerException"),
    503: ("ServiceUnavailableException", "serviceUnavailableException"),
}


def exception_for(status: int) -> tuple[str, str | None]:
    """The exception a status stands for; unknown 4xx are validation errors, unknown 5xx internal ones."""
    if status in EXCEPTIONS:
        return EXCEPTIONS[status]
    return EXCEPTIONS[400] if status < 500 else EXCEPTIONS[500]


def error_headers(status: int) -> dict[str, str]:
    """rest-json errors name their type in ``x-amzn-ErrorType``, which botocore reads first."""
    return {"x-amzn-ErrorType": exception_for(status)[0]}


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"__type": exception_for(status)[0], "message": message}


def _usage(entry: QueuedResponse) -> dict[str, int]:
    output_tokens = _output_tokens(entry)
    return {
        "inputTokens": INPUT_TOKENS,
        "outputTokens": output_tokens,
        "totalTokens": INPUT_TOKENS + output_tokens,
    }


def _tool_input(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}


def converse_json(entry: QueuedResponse) -> dict[str, Any]:
    """The ``Converse`` body: one assistant message (text, or the calls), stop reason, usage."""
    if entry.tool_calls:
        content: list[dict[str, Any]] = [
            {"toolUse": {"toolUseId": c.call_id, "name": c.name, "input": _tool_input(c.arguments)}}
            for c in entry.tool_calls
        ]
        stop = "tool_use"
    else:
        content, stop = [{"text": entry.text}], "end_turn"
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": _usage(entry),
        "metrics": {"latencyMs": 1},
    }


def converse_stream_frames(entry: QueuedResponse) -> list[tuple[bytes, bool]]:
    """The ``ConverseStream`` messages, each with whether it is a word delta (the server paces those)."""
    frames: list[tuple[bytes, bool]] = [(es.event("messageStart", {"role": "assistant"}), False)]
    if entry.tool_calls:
        for index, call in enumerate(entry.tool_calls):
            start = {"toolUse": {"toolUseId": call.call_id, "name": call.name}}
            frames.append(
                (es.event("contentBlockStart", {"contentBlockIndex": index, "start": start}), False)
            )
            frames.extend(
                (
                    es.event(
                        "contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": p}}}
                    ),
                    False,
                )
                for p in _pieces(call.arguments)
            )
            frames.append((es.event("contentBlockStop", {"contentBlockIndex": index}), False))
        stop = "tool_use"
    else:
        words = split_words(entry.text) if entry.stream else ([entry.text] if entry.text else [])
        frames.extend(
            (es.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": w}}), entry.stream)
            for w in words
        )
        frames.append((es.event("contentBlockStop", {"contentBlockIndex": 0}), False))
        stop = "end_turn"
    frames.append((es.event("messageStop", {"stopReason": stop}), False))
    metadata = {"usage": _usage(entry), "metrics": {"latencyMs": 1}}
    frames.append((es.event("metadata", metadata), False))
    return frames


def stream_exception(status: int, message: str) -> bytes | None:
    """An ``error`` entry sent inside a started stream (``stream: true``), if Bedrock can send it there."""
    member = exception_for(status)[1]
    return es.exception(member, message) if member else None
