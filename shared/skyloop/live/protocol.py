"""The live channel's wire protocol: JSON text frames, validated at the boundary.

Client to server (``action`` picks the frame)::

    {"action": "auth", "token": "..."}                      -> {"type": "authenticated", "principal"}
    {"action": "subscribe", "session_id": "...", "after": N | null}
        -> {"type": "event", ...} for every event after the cursor, then
           {"type": "subscribed", "session_id", "after", "last_event_id", "complete"}, then live events
    {"action": "unsubscribe", "session_id": "..."}          -> {"type": "unsubscribed", "session_id"}
    {"action": "ping"}                                      -> {"type": "pong"}

Server to client, besides the answers above::

    {"type": "event", "session_id", "id": seq, "event": <the SSE frame's data, sequence_number included>}
    {"type": "event_too_large", "session_id", "id": seq, "bytes": n}   (fetch it over SSE)
    {"type": "error", "code", "message", "session_id"?}

The token travels in a frame, never in the URL (browsers cannot set headers
on a WebSocket, and URLs end up in logs). API Gateway may run two frames of
one connection at the same time, so a client waits for ``authenticated``
before it subscribes. ``after`` means what SSE's ``Last-Event-ID`` means:
replay every retained event after it, then go on live; ``null`` is a live
tail from the session's current cursor. ``subscribed.after`` is the cursor
the subscription started from and ``last_event_id`` the last event the
replay covered; ``complete: false`` means the replay stopped early (time
budget) and the client subscribes again with ``after = last_event_id``.

Delivery is at least once and may be out of order (a replayed and a live
copy of one event, posts from different invocations): sequence numbers are
contiguous per session, so the client dedupes by ``id`` and holds later ids
until the gap fills (the SDK re-subscribes from its last contiguous id when
a gap lasts a second). A bad frame gets an ``error`` with code
``invalid_input`` and changes nothing.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from skyloop import events as ev

if TYPE_CHECKING:
    from skyloop.store import StoredEvent

MAX_CURSOR = 10**12 - 1  # sequence numbers are stored 12 digits wide
# API Gateway refuses a message over 128 KB; past this, an event is announced and fetched over SSE.
MAX_MESSAGE_BYTES = 128 * 1024 - 512
MAX_CLIENT_FRAME_BYTES = 32 * 1024  # API Gateway's frame size; ours are tiny
MAX_SUBSCRIPTIONS = 100  # per connection: bounds what one connection costs to fan out and clean up
MAX_CONNECTION_S = 2 * 3600  # API Gateway ends every WebSocket connection after two hours

ERROR_INVALID_INPUT = "invalid_input"
ERROR_UNAUTHORIZED = "unauthorized"
ERROR_NOT_FOUND = "not_found"
ERROR_QUOTA = "quota_exceeded"
ERROR_INTERNAL = "internal_error"


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Auth(_Frame):
    action: Literal["auth"]
    token: str = Field(min_length=1, max_length=8192)


class Subscribe(_Frame):
    action: Literal["subscribe"]
    session_id: str = Field(min_length=1, max_length=128)
    after: int | None = Field(default=None, ge=0, le=MAX_CURSOR - 1, strict=True)  # "7" is not a cursor


class Unsubscribe(_Frame):
    action: Literal["unsubscribe"]
    session_id: str = Field(min_length=1, max_length=128)


class Ping(_Frame):
    action: Literal["ping"]


ClientFrame = Annotated[Auth | Subscribe | Unsubscribe | Ping, Field(discriminator="action")]
_client_frame: TypeAdapter[Auth | Subscribe | Unsubscribe | Ping] = TypeAdapter(ClientFrame)


class ProtocolError(Exception):
    """A frame the server answers with an ``error`` frame (and nothing else)."""

    def __init__(self, code: str, message: str, *, session_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.session_id = session_id

    def frame(self, about: object = None) -> dict[str, Any]:
        """The ``error`` frame; it names the session of the frame it answers (``about``), if any,
        so a client watching several sessions knows which subscription was refused."""
        session_id = self.session_id or getattr(about, "session_id", None)
        return error(self.code, self.message, session_id=session_id)


def parse(raw: str | bytes | None) -> Auth | Subscribe | Unsubscribe | Ping:
    """The client's frame; ``ProtocolError(invalid_input)`` for anything else."""
    if raw is None or len(raw) == 0:
        raise ProtocolError(ERROR_INVALID_INPUT, "empty frame: send a JSON object with an 'action'")
    if len(raw) > MAX_CLIENT_FRAME_BYTES:
        raise ProtocolError(ERROR_INVALID_INPUT, f"frame over {MAX_CLIENT_FRAME_BYTES} bytes")
    try:
        return _client_frame.validate_json(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "frame"
        raise ProtocolError(ERROR_INVALID_INPUT, f"{where}: {first['msg']}") from None


# --------------------------------------------------------------------------- server frames
def error(code: str, message: str, *, session_id: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "error", "code": code, "message": message}
    if session_id is not None:
        out["session_id"] = session_id
    return out


def authenticated(principal: str) -> dict[str, Any]:
    return {"type": "authenticated", "principal": principal}


def subscribed(session_id: str, after: int, last_event_id: int, *, complete: bool = True) -> dict[str, Any]:
    return {
        "type": "subscribed",
        "session_id": session_id,
        "after": after,
        "last_event_id": last_event_id,
        "complete": complete,
    }


def unsubscribed(session_id: str) -> dict[str, Any]:
    return {"type": "unsubscribed", "session_id": session_id}


def pong() -> dict[str, Any]:
    return {"type": "pong"}


def encode(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame, separators=(",", ":"), ensure_ascii=False).encode()


def event_message(session_id: str, event: StoredEvent) -> bytes:
    """The bytes posted for a stored event: its SSE payload, or a pointer to it when too large."""
    payload = ev.stream_payload(event.seq, event.type, event.data)
    data = encode({"type": "event", "session_id": session_id, "id": event.seq, "event": payload})
    if len(data) <= MAX_MESSAGE_BYTES:
        return data
    return encode({"type": "event_too_large", "session_id": session_id, "id": event.seq, "bytes": len(data)})
