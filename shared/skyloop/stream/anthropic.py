"""Claude Managed Agents' event stream (``sessions.events.stream``) on the stream function.

The same session log as skyloop's stream, read by the same shared feed, each stored event
translated by :func:`skyloop.anthropic_compat.translate.translate`. Every frame names its type
(``event: <type>``: the SDK drops a frame without one) and carries the event's own id as its SSE
``id:``. The SDK never resumes by itself (its tool runner re-reads ``events.list`` and
de-duplicates by event id, which history and stream share), but a client that sends
``Last-Event-ID: <an event's id>`` (``extra_headers`` in the SDK) gets every event after that one,
no gap and no repeat. Without one the stream is a live tail from now, as Claude's is.
``event_deltas[]=agent.message`` adds ``event_start``/``event_delta`` previews of the model's text.
Keep-alives are SSE comments; the stream closes itself before the function's time limit (the SDK's
iteration then ends; the tool runner reconnects).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import anyio
from starlette.responses import JSONResponse, Response, StreamingResponse

from skyloop import principals
from skyloop.errors import InvalidInputError, NotFoundError, SkyloopError
from skyloop.ids import is_hex32
from skyloop.stream import feed, proxy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

    from skyloop.anthropic_compat.translate import Context
    from skyloop.settings import Settings
    from skyloop.store import Store
    from skyloop.stream.feed import FeedCursor

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
DELTA_BASE = 1000  # a stored event's delta frames are numbered from here (its translated events below)


def error_json(exc: SkyloopError) -> JSONResponse:
    from skyloop.anthropic_compat.errors import error_body, error_headers

    return JSONResponse(error_body(exc), status_code=exc.status, headers=error_headers(exc))


def frame(payload: dict[str, Any]) -> str:
    """One SSE frame; a preview (``event_start``/``event_delta``) has no id of its own: none is sent."""
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    head = f"id: {payload['id']}\n" if "id" in payload else ""
    return f"{head}event: {payload['type']}\ndata: {data}\n\n"


def find_cursor(store: Store, ctx: Context, raw: str | None) -> tuple[int, int] | None:
    """``Last-Event-ID``: an event's id, or a plain seq; where it is in the log (None without one)."""
    from skyloop.anthropic_compat.translate import position_of

    if raw in (None, ""):
        return None
    text = str(raw).strip()
    if text.isdigit():
        return int(text), 10**6
    found = position_of(store, ctx, text)
    if found is None:
        raise InvalidInputError(f"Last-Event-ID: no event {text!r} in this session's retained history")
    return found


async def _principal(request: Request, settings: Settings, store: Store) -> principals.Principal:
    if not settings.require_token:
        return principals.OPEN
    from skyloop.auth import authenticate, claude_authorization

    header = claude_authorization(
        request.headers.get(proxy.STREAM_AUTH_HEADER) or request.headers.get("authorization"),
        request.headers.get("x-api-key"),
    )
    return await anyio.to_thread.run_sync(authenticate, store, header, settings)


def _deltas_wanted(request: Request) -> bool:
    wanted = request.query_params.getlist("event_deltas[]")
    unknown = [w for w in wanted if w not in ("agent.message", "agent.thinking")]
    if unknown:
        raise InvalidInputError(
            f"event_deltas[]: {unknown[0]!r} is not agent.message or agent.thinking", param="event_deltas"
        )
    return "agent.message" in wanted


async def stream(request: Request) -> Response:
    """``GET /anthropic/v1/sessions/{id}/events/stream``."""
    from skyloop import deps
    from skyloop.settings import get_settings

    session_id = request.path_params["session_id"]
    try:
        settings = get_settings()
        store = deps.store()
        principal = await _principal(request, settings, store)
        deltas = _deltas_wanted(request)
        if not is_hex32(session_id):
            raise NotFoundError(f"Session not found: '{session_id}'")
        session = await anyio.to_thread.run_sync(store.get_session, session_id)
        if not principal.owns(session.owner):
            raise NotFoundError(f"Session not found: '{session_id}'")
        ctx = await anyio.to_thread.run_sync(_context, store, session)
        cursor = await anyio.to_thread.run_sync(find_cursor, store, ctx, request.headers.get("last-event-id"))
    except SkyloopError as exc:
        return error_json(exc)
    if cursor is None:
        start, skip = session.last_seq, (-1, -1)
    else:
        start, skip = max(cursor[0] - 1, 0), cursor
    tail = feed.registry().cursor(store, settings, session_id, start, session.status == "running")
    return StreamingResponse(
        _frames(tail, settings, store, ctx, skip=skip, deltas=deltas),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )


def _context(store: Store, session: Any) -> Context:
    from skyloop.anthropic_compat.translate import Context

    return Context.of(store, session)


class _Translator:
    """Frames of stored pages as one stream translates them (its resume point, its open previews)."""

    def __init__(self, ctx: Context, skip: tuple[int, int], deltas: bool) -> None:
        self.ctx = ctx
        self.skip = skip
        self.deltas = deltas
        self.started: set[str] = set()

    def frames(self, page: list[Any]) -> str:
        from skyloop.anthropic_compat.translate import deltas, translate

        chunk = []
        for stored in page:
            out = [(k, p) for k, p in enumerate(translate(stored, self.ctx))]
            if self.deltas:
                out += [(DELTA_BASE + k, p) for k, p in enumerate(deltas(stored, self.started))]
            for k, payload in out:
                if stored.seq == self.skip[0] and k <= self.skip[1]:
                    continue
                chunk.append(frame(payload))
        return "".join(chunk)


async def _frames(
    cursor: FeedCursor, settings: Settings, store: Store, ctx: Context, *, skip: tuple[int, int], deltas: bool
) -> AsyncIterator[str]:
    deadline = time.monotonic() + settings.stream_max_s
    translator = _Translator(ctx, skip, deltas)
    try:
        yield ": connected\n\n"  # the headers and a first byte now: the tool runner waits for them
        last_frame = time.monotonic()
        while True:
            page, more = await cursor.next_page()
            if page:
                if any(e.type == "session.status" for e in page):  # budgets and usage as they are now
                    ctx.session = await anyio.to_thread.run_sync(store.get_session, ctx.session.id)
                chunk = await anyio.to_thread.run_sync(translator.frames, page)
                if chunk:
                    yield chunk
                    last_frame = time.monotonic()
            if more:
                continue
            now = time.monotonic()
            if now >= deadline:
                return  # planned close: the client opens the stream again
            if now - last_frame >= settings.heartbeat_s:
                yield ": keep-alive\n\n"
                last_frame = now
            wait = min(deadline - now, max(0.0, settings.heartbeat_s - (now - last_frame)))
            await cursor.wait(max(wait, 0.001))
    finally:
        cursor.close()
