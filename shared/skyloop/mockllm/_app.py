"""Starlette routes for the mock LLM: the control API, the OpenAI-compatible routes and Bedrock's.

Paths are relative so the app can be mounted under a prefix in another app.
Bedrock's routes (``/model/{modelId}/converse`` and ``/converse-stream``) are
where boto3 sends them when ``endpoint_url`` is the mock's root URL; the
request's SigV4 signature is not checked.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from skyloop.mockllm import _bedrock, _eventstream, _sse
from skyloop.mockllm._state import ConfigureBody, MockState, QueuedResponse, SetFallbackBody

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from starlette.requests import Request

# Pause between word deltas of a ``stream: true`` entry, so clients really see it stream.
WORD_DELAY_S = 0.01

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

BodyT = TypeVar("BodyT", bound=BaseModel)


class _BadRequest(Exception):
    """A control body that does not parse or validate; rendered as an OpenAI-style 400."""


def _invalid(message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=400)


async def _control_body(request: Request, model: type[BodyT]) -> BodyT:
    raw = await request.body()
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _BadRequest(f"body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise _BadRequest("body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _BadRequest(str(exc)) from exc


async def _model_body(request: Request) -> Any:
    """Non-JSON bodies are still captured, as ``{"raw": text}``, so tests can see them."""
    raw = await request.body()
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {"raw": text}


def _request_model(body: Any) -> str:
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) and model else _sse.DEFAULT_MODEL


def _wants_stream(body: Any) -> bool:
    return isinstance(body, dict) and bool(body.get("stream"))


def create_app(state: MockState | None = None) -> Starlette:  # noqa: C901  (the routes are closures over one state)
    """Build the app around ``state`` (a fresh one by default); ``app.state.mock`` exposes it."""
    mock = state if state is not None else MockState()

    async def pick(body: Any, size: int) -> QueuedResponse:
        """Capture, route and pick an entry; hold a blocking entry (not an error) at its gate, then
        wait out its ``delay_ms``. Every route answers through here, so nothing is sent before both."""
        entry = mock.record_and_next(body, size=size)
        if entry.error is None and entry.block:
            gate = mock.open_gate()
            try:
                await gate.wait()
            except asyncio.CancelledError:
                mock.abandon_gate(gate)
                raise
        if entry.delay_ms:
            await asyncio.sleep(entry.delay_ms / 1000)  # on the loop: other requests go on meanwhile
        return entry

    async def draw(request: Request) -> tuple[Any, QueuedResponse, JSONResponse | None]:
        """An OpenAI route's entry, with its error already rendered the OpenAI way."""
        body = await _model_body(request)
        entry = await pick(body, len(await request.body()))  # the body is read once (Starlette keeps it)
        if entry.error is not None:
            return body, entry, JSONResponse(_sse.error_body(entry.error), status_code=entry.status_code)
        return body, entry, None

    async def bedrock_entry(request: Request) -> QueuedResponse:
        """Bedrock names the model in the path: it is captured as the body's ``model`` so routing by
        model and ``/mock/requests?key=`` work as on the OpenAI routes."""
        body = await _model_body(request)
        if isinstance(body, dict):
            body = {**body, "model": request.path_params["model_id"]}
        return await pick(body, len(await request.body()))

    def bedrock_error(entry: QueuedResponse) -> JSONResponse:
        status, message = entry.status_code, entry.error or ""
        return JSONResponse(
            _bedrock.error_body(status, message), status_code=status, headers=_bedrock.error_headers(status)
        )

    async def converse(request: Request) -> JSONResponse:
        entry = await bedrock_entry(request)
        if entry.error is not None:
            return bedrock_error(entry)
        return JSONResponse(_bedrock.converse_json(entry))

    async def converse_stream(request: Request) -> JSONResponse | StreamingResponse:
        """A ``stream: true`` error entry fails inside a started stream, as Bedrock's stream errors do."""
        entry = await bedrock_entry(request)
        if entry.error is not None:
            in_stream = _bedrock.stream_exception(entry.status_code, entry.error) if entry.stream else None
            if in_stream is None:
                return bedrock_error(entry)
            started = _eventstream.event("messageStart", {"role": "assistant"})
            frames = [(started, False), (in_stream, False)]
        else:
            frames = _bedrock.converse_stream_frames(entry)
        return StreamingResponse(_paced_frames(frames), media_type=_eventstream.CONTENT_TYPE)

    async def responses(request: Request) -> JSONResponse | StreamingResponse:
        body, entry, error = await draw(request)
        if error is not None:
            return error
        model = _request_model(body)
        if not _wants_stream(body):
            return JSONResponse(_sse.response_json(entry, model))
        events = _sse.response_events(entry, model)
        return StreamingResponse(
            _paced(events, entry.stream), media_type="text/event-stream", headers=_SSE_HEADERS
        )

    async def chat_completions(request: Request) -> JSONResponse | StreamingResponse:
        body, entry, error = await draw(request)
        if error is not None:
            return error
        model = _request_model(body)
        if not _wants_stream(body):
            return JSONResponse(_sse.chat_completion_json(entry, model))
        options = body.get("stream_options") if isinstance(body, dict) else None
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        return StreamingResponse(
            _iterate_chat(
                _sse.chat_completion_chunks(entry, model, include_usage=include_usage), entry.stream
            ),
            media_type="text/event-stream",
            headers=_SSE_HEADERS,
        )

    async def list_models(_request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": []})

    async def configure(request: Request) -> JSONResponse:
        try:
            parsed = await _control_body(request, ConfigureBody)
        except _BadRequest as exc:
            return _invalid(str(exc))
        count = mock.configure(parsed.key, parsed.responses, parsed.match)
        return JSONResponse({"configured": True, "key": parsed.key, "count": count})

    async def set_fallback(request: Request) -> JSONResponse:
        try:
            parsed = await _control_body(request, SetFallbackBody)
        except _BadRequest as exc:
            return _invalid(str(exc))
        mock.set_fallback(parsed.key, parsed.text, parsed.stream)
        return JSONResponse({"fallback_set": True, "key": parsed.key})

    async def reset(_request: Request) -> JSONResponse:
        mock.reset()
        return JSONResponse({"reset": True})

    async def captured(request: Request) -> JSONResponse:
        return JSONResponse({"requests": mock.requests(request.query_params.get("key"))})

    async def gate_release(_request: Request) -> JSONResponse:
        return JSONResponse({"released": mock.release_gate()})

    async def gate_pending(_request: Request) -> JSONResponse:
        return JSONResponse({"pending": mock.has_pending_gate()})

    async def stats(_request: Request) -> JSONResponse:
        return JSONResponse({"request_count": mock.request_count})

    app = Starlette(
        routes=[
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/model/{model_id:path}/converse", converse, methods=["POST"]),
            Route("/model/{model_id:path}/converse-stream", converse_stream, methods=["POST"]),
            Route("/mock/configure", configure, methods=["POST"]),
            Route("/mock/set_fallback", set_fallback, methods=["POST"]),
            Route("/mock/reset", reset, methods=["POST"]),
            Route("/mock/requests", captured, methods=["GET"]),
            Route("/gate/release", gate_release, methods=["POST"]),
            Route("/gate/pending", gate_pending, methods=["GET"]),
            Route("/stats", stats, methods=["GET"]),
        ]
    )
    app.state.mock = mock
    return app


async def _paced(events: Iterable[dict[str, Any]], word_by_word: bool) -> AsyncIterator[str]:
    """Each event is its own chunk; word deltas get a short pause so the stream is observable."""
    for event in events:
        yield _sse.sse_frame(event)
        if word_by_word and event["type"] == "response.output_text.delta":
            await asyncio.sleep(WORD_DELAY_S)


async def _paced_frames(frames: Iterable[tuple[bytes, bool]]) -> AsyncIterator[bytes]:
    """Each event-stream message is its own write; word deltas are paced like the SSE routes'."""
    for frame, word in frames:
        yield frame
        if word:
            await asyncio.sleep(WORD_DELAY_S)


async def _iterate_chat(chunks: Iterable[str], word_by_word: bool) -> AsyncIterator[str]:
    """Each chunk is its own write; content chunks of a ``stream`` entry are paced like Responses deltas."""
    for chunk in chunks:
        yield chunk
        if word_by_word and '"content":' in chunk and '"role"' not in chunk:
            await asyncio.sleep(WORD_DELAY_S)
