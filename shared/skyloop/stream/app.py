"""The SSE stream: an ASGI app that tails a session's event log.

It runs under the AWS Lambda Web Adapter in the cloud (function URL in
RESPONSE_STREAM mode) and inside ``skyloop dev`` locally. The first frame, a
``session.heartbeat``, is sent before anything is read, so a client can post
its message as soon as it sees it. Stored events carry ``id: <seq>``; a
reconnect with ``Last-Event-ID`` (or ``?after=N``) replays everything after
that seq, then continues live. Without a cursor the stream is a live tail
from the session's current seq. The stream closes itself before Lambda's
15-minute limit with a ``retry:`` hint so clients reconnect with their cursor.

All open streams of a session in one process share one reader
(:mod:`skyloop.stream.feed`): it polls with backoff in the cloud and, in the
local stack, reads only when an append wakes it.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from skyloop import events as ev
from skyloop import principals
from skyloop.errors import InvalidInputError, NotFoundError, SkyloopError
from skyloop.ids import is_hex32
from skyloop.stream import feed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

    from skyloop.settings import Settings
    from skyloop.store import StoredEvent
    from skyloop.stream.feed import FeedCursor

RETRY_MS = 1000
MAX_CURSOR = 10**12 - 1  # sequence numbers are stored 12 digits wide


def frame(payload: dict[str, Any], *, seq: int | None = None) -> str:
    lines = []
    if seq is not None:
        lines.append(f"id: {seq}")
    lines.append(f"event: {payload['type']}")
    lines.append("data: " + json.dumps(payload, separators=(",", ":"), ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


def event_frame(event: StoredEvent) -> str:
    return frame(ev.stream_payload(event.seq, event.type, event.data), seq=event.seq)


def parse_cursor(last_event_id: str | None, after: str | None) -> int | None:
    raw = last_event_id if last_event_id not in (None, "") else after
    if raw in (None, ""):
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidInputError(f"stream cursor must be a non-negative integer, got {raw!r}") from None
    if not 0 <= value < MAX_CURSOR:
        raise InvalidInputError(f"stream cursor must be an integer from 0 to {MAX_CURSOR - 1}, got {raw!r}")
    return value


async def _frames(cursor: FeedCursor, settings: Settings) -> AsyncIterator[str | bytes]:
    deadline = time.monotonic() + settings.stream_max_s
    try:
        yield f"retry: {RETRY_MS}\n" + frame(ev.heartbeat())
        last_frame = time.monotonic()
        while True:
            page, more = await cursor.next_page()
            if page:  # one write per page: every viewer of a busy session costs one send per read
                yield cursor.chunk(page, event_frame)
                last_frame = time.monotonic()
            if more:
                continue  # a long replay: keep reading without waiting
            now = time.monotonic()
            if now >= deadline:
                yield f"retry: {RETRY_MS}\n\n"  # planned close: reconnect with Last-Event-ID
                return
            if now - last_frame >= settings.heartbeat_s:
                yield frame(ev.heartbeat())
                last_frame = now
            wait = min(deadline - now, max(0.0, settings.heartbeat_s - (now - last_frame)))
            await cursor.wait(max(wait, 0.001))
    finally:
        cursor.close()


async def stream_session(request: Request) -> Any:
    from skyloop import deps
    from skyloop.settings import get_settings

    session_id = request.path_params["session_id"]
    try:
        settings = get_settings()
        principal = principals.OPEN
        if settings.require_token:
            from skyloop.auth import authenticate

            # Behind CloudFront, Origin Access Control signs the request in ``Authorization``; the
            # edge function moves the client's bearer token to this header first (only CloudFront
            # can reach the function URL, so the header cannot be forged past it).
            header = request.headers.get("x-skyloop-authorization") or request.headers.get("authorization")
            principal = await anyio.to_thread.run_sync(authenticate, deps.store(), header, settings)
        cursor = parse_cursor(request.headers.get("last-event-id"), request.query_params.get("after"))
        if not is_hex32(session_id):
            raise NotFoundError(f"Session not found: '{session_id}'")
        store = deps.store()
        session = await anyio.to_thread.run_sync(store.get_session, session_id)
        if not principal.owns(session.owner):  # another principal's session is "not found" too
            raise NotFoundError(f"Session not found: '{session_id}'")
    except SkyloopError as exc:
        return JSONResponse(exc.to_body(), status_code=exc.status)
    start = session.last_seq if cursor is None else cursor
    tail = feed.registry().cursor(store, settings, session_id, start, session.status == "running")
    return StreamingResponse(
        _frames(tail, settings),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def healthz(_: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


# OpenAI's Agents API stream (skyloop.stream.openai), on a path that also takes posts: the edge sends
# the stream function only the methods without a body (STREAM_METHODS; CloudFront's viewer-request
# function, and the local gateway, send the rest to the API). Any other that arrives is handed on.
OPENAI_EVENTS_PATH = "/openai/v1/agents/sessions/{session_id}/events"
STREAM_METHODS = ("GET", "HEAD", "OPTIONS")
PROXY_METHODS = ["GET", "POST", "DELETE", "PATCH", "PUT"]


def openai_routes() -> list[Route]:
    async def events(request: Request) -> Any:
        from skyloop.stream import openai

        return await openai.events(request)

    return [Route(OPENAI_EVENTS_PATH, events, methods=PROXY_METHODS)]


# Claude Managed Agents' stream (skyloop.stream.anthropic): a path of its own, only ever a GET.
ANTHROPIC_STREAM_PATH = "/anthropic/v1/sessions/{session_id}/events/stream"


def anthropic_routes() -> list[Route]:
    async def events_stream(request: Request) -> Any:
        from skyloop.stream import anthropic

        return await anthropic.stream(request)

    return [Route(ANTHROPIC_STREAM_PATH, events_stream, methods=list(STREAM_METHODS))]


def create_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/v1/sessions/{session_id}/stream", stream_session),
            *openai_routes(),
            *anthropic_routes(),
        ],
        lifespan=_lifespan,
    )


@contextlib.asynccontextmanager
async def _lifespan(_: Starlette) -> AsyncIterator[None]:
    """The function's cold start: warm the API and turn functions the client will reach next."""
    from skyloop import prewarm

    prewarm.start()
    yield


app = create_app()
