"""OpenAI's Agents API stream (``sessions.events.stream``, ``sessions.create(stream=True)``) on the stream function.

The same session log as skyloop's stream, read by the same shared feed, each
stored event translated by :func:`skyloop.openai_compat.translate.translate`
into the SDK's ``agent.session.*`` events. Frames carry ``id: evt_<seq>_<k>``,
the event's ``event_id``; ``Last-Event-ID`` (or ``?after=``) resumes after
any of them with no gap and no repeat, and ``Last-Event-ID: 0`` replays the
retained log. Without one the stream is a live tail from now. Keep-alives are
SSE comments (the SDK ignores them; a ``data:`` frame of another type would
not parse). A create with ``stream: true`` is the API's, which answers 303 to
this stream with ``?created=`` (:func:`events`). Requests on this path that are
not streams go to the API (CloudFront sends them there; a stray one is handed
on by :mod:`skyloop.stream.proxy`).
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

    from skyloop.models.session import Session
    from skyloop.openai_compat.translate import Context
    from skyloop.settings import Settings
    from skyloop.store import Store, StoredEvent
    from skyloop.stream.feed import FeedCursor

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
SESSION_ENDS = frozenset({"agent.session.idle", "agent.session.failed", "agent.session.budget_reached"})


def error_json(exc: SkyloopError) -> JSONResponse:
    from skyloop.openai_compat.errors import error_body, error_headers

    return JSONResponse(error_body(exc), status_code=exc.status, headers=error_headers(exc))


def frame(payload: dict[str, Any]) -> str:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"id: {payload['event_id']}\nevent: {payload['type']}\ndata: {data}\n\n"


async def proxied(request: Request, body: bytes | None = None) -> Response:
    """Hand a non-stream request to the API function and relay its answer."""
    raw = await request.body() if body is None else body
    event = proxy.viewer_event(request, raw)
    out = await anyio.to_thread.run_sync(proxy.invoke_api, event)
    status, headers, data = proxy.response_parts(out)
    headers = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "transfer-encoding")}
    return Response(data, status_code=status, headers=headers)


def parse_cursor(raw: str | None) -> tuple[int, int] | None:
    """``Last-Event-ID``: ``evt_<seq>_<k>`` or skyloop's plain seq; None without one."""
    from skyloop.openai_compat.translate import parse_event_id

    if raw in (None, ""):
        return None
    try:
        seq, k = parse_event_id(str(raw))
    except ValueError:
        raise InvalidInputError(
            f"Last-Event-ID must be an event_id (evt_<n>_<k>) or an integer, got {raw!r}"
        ) from None
    if seq < 0 or k < 0:
        raise InvalidInputError(f"Last-Event-ID out of range: {raw!r}")
    return seq, k


async def _principal(request: Request, settings: Settings, store: Store) -> principals.Principal:
    if not settings.require_token:
        return principals.OPEN
    from skyloop.auth import authenticate

    header = request.headers.get(proxy.STREAM_AUTH_HEADER) or request.headers.get("authorization")
    return await anyio.to_thread.run_sync(authenticate, store, header, settings)


async def _context(store: Store, session: Session) -> Context:
    from skyloop.openai_compat.translate import Context

    agent = await anyio.to_thread.run_sync(store.get_agent, session.agent_id)
    return Context(session=session, agent=agent)


async def events(request: Request) -> Response:
    """``/openai/v1/agents/sessions/{id}/events``: GET streams, anything else is the API's.

    With ``?created=turn|session`` (where the API's ``303`` sends a create with ``stream: true``)
    it is that create's stream: ``agent.session.created`` (``evt_0_0``), then the session's events
    from the start to the end of its first turn, or nothing more without one.
    """
    if request.method != "GET":
        return await proxied(request)
    from skyloop import deps
    from skyloop.openai_compat.translate import CREATED_STREAM_PARAM, CREATED_STREAM_UNTIL
    from skyloop.settings import get_settings

    session_id = request.path_params["session_id"]
    created = request.query_params.get(CREATED_STREAM_PARAM)
    try:
        settings = get_settings()
        store = deps.store()
        principal = await _principal(request, settings, store)
        cursor = parse_cursor(request.headers.get("last-event-id") or request.query_params.get("after"))
        if created is not None and created not in CREATED_STREAM_UNTIL:
            raise InvalidInputError(
                f"{CREATED_STREAM_PARAM} must be one of {', '.join(CREATED_STREAM_UNTIL)}, got {created!r}"
            )
        if not is_hex32(session_id):
            raise NotFoundError(f"Session not found: '{session_id}'")
        session = await anyio.to_thread.run_sync(store.get_session, session_id)
        if not principal.owns(session.owner):
            raise NotFoundError(f"Session not found: '{session_id}'")
        ctx = await _context(store, session)
    except SkyloopError as exc:
        return error_json(exc)
    first: list[dict[str, Any]] = []
    if cursor is None and created is not None:  # a create's stream: from the session's first event
        cursor = (0, 10**6)
        first = [await _created_event(store, ctx)]
    if cursor is None:
        start, skip = session.last_seq, -1
    else:
        start, skip = (cursor[0], 10**6) if cursor[1] >= 10**6 else (cursor[0] - 1, cursor[1])
        start = max(start, 0)
    seq_of_skip = cursor[0] if cursor is not None else -1
    running = session.status == "running" or created is not None
    tail = feed.registry().cursor(store, settings, session_id, start, running)
    frames = _frames(
        tail, settings, store, ctx, skip=(seq_of_skip, skip), first=first, until_turn_end=created == "turn"
    )
    if created == "session":
        frames = _only_first(frames, len(first))
    return StreamingResponse(frames, media_type="text/event-stream", headers=SSE_HEADERS)


async def _created_event(store: Store, ctx: Context) -> dict[str, Any]:
    """``agent.session.created`` with the session object as retrieving it answers now."""
    from skyloop.openai_compat import views

    session = await anyio.to_thread.run_sync(views.read_session, store, ctx.session, ctx.agent)
    return {"type": "agent.session.created", "session": session, "event_id": "evt_0_0"}


class _Translator:
    """Frames of stored pages, as one stream translates them (its turn hint, its resume point)."""

    def __init__(self, ctx: Context, skip: tuple[int, int], until_turn_end: bool) -> None:
        self.ctx = ctx
        self.skip = skip
        self.until_turn_end = until_turn_end
        self.turn_hint: str | None = None
        self.seen_turn = False
        self.done = False

    def frames(self, page: list[StoredEvent]) -> str:
        from skyloop.openai_compat.translate import translate

        chunk = []
        for stored in page:
            if stored.type == "session.status" and stored.data.get("status") == "running":
                self.turn_hint = str(stored.data.get("response_id") or "") or self.turn_hint
                self.seen_turn = True
            for payload in translate(stored, self.ctx, turn_hint=self.turn_hint):
                if stored.seq == self.skip[0] and int(payload["event_id"].rsplit("_", 1)[1]) <= self.skip[1]:
                    continue
                chunk.append(frame(payload))
                ends = self.until_turn_end and self.seen_turn and payload["type"] in SESSION_ENDS
                self.done = self.done or ends
        return "".join(chunk)


async def _frames(
    cursor: FeedCursor,
    settings: Settings,
    store: Store,
    ctx: Context,
    *,
    skip: tuple[int, int] = (-1, -1),
    first: list[dict[str, Any]] | None = None,
    until_turn_end: bool = False,
) -> AsyncIterator[str]:
    """Translated frames of the log after ``cursor``; ``skip`` drops events up to (seq, k)."""
    deadline = time.monotonic() + settings.stream_max_s
    translator = _Translator(ctx, skip, until_turn_end)
    try:
        yield ": connected\n\n"
        for payload in first or []:
            yield frame(payload)
        last_frame = time.monotonic()
        while True:
            page, more = await cursor.next_page()
            if page:
                if any(e.type == "session.status" for e in page):  # session objects show the new state
                    ctx.session = await anyio.to_thread.run_sync(store.get_session, ctx.session.id)
                chunk = translator.frames(page)
                if chunk:
                    yield chunk
                    last_frame = time.monotonic()
                if translator.done:
                    return
            if more:
                continue
            now = time.monotonic()
            if now >= deadline:
                return  # planned close: reconnect with Last-Event-ID
            if now - last_frame >= settings.heartbeat_s:
                yield ": keep-alive\n\n"
                last_frame = now
            wait = min(deadline - now, max(0.0, settings.heartbeat_s - (now - last_frame)))
            await cursor.wait(max(wait, 0.001))
    finally:
        cursor.close()


async def _only_first(frames: AsyncIterator[str], n: int) -> AsyncIterator[str]:
    """A streamed create without input: the created event, then the stream ends (there is no turn)."""
    sent = 0
    async for chunk in frames:
        yield chunk
        if chunk.startswith("id: "):
            sent += 1
        if sent >= n:
            await frames.aclose()  # type: ignore[attr-defined]
            return
