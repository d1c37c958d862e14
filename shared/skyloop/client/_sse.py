"""A pure, incremental Server-Sent Events decoder (no I/O), following the WHATWG rules.

Kept apart from the transport so every framing corner (CRLF, a CR at a chunk
boundary, comments, multi-line data, ``retry:``) can be tested byte by byte.
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["SSEDecoder", "ServerSentEvent"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event.

    ``id`` is the ``id:`` field of this block only (``None`` when the block had
    none), so events without their own id — skyloop's heartbeats — never look
    like a repeat of the previous one. ``last_event_id`` is the spec's cursor,
    which persists across blocks.
    """

    event: str = "message"
    data: str = ""
    id: str | None = None
    last_event_id: str = ""
    retry: int | None = None

    def json(self) -> Any:
        return json.loads(self.data)


class SSEDecoder:
    """Feed bytes, text or single lines; get back the events completed so far.

    Blocks without any ``data:`` line dispatch nothing (as in browsers) but
    still update :attr:`last_event_id` and :attr:`retry`; :attr:`closing_hint`
    records a bare ``retry:`` block, which skyloop's stream sends right before
    its planned close.
    """

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._skip_lf = False  # the previous chunk ended with CR; a leading LF belongs to it
        self._at_start = True
        self._event = ""
        self._data: list[str] = []
        self._has_data = False
        self._block_id: str | None = None
        self._block_retry: int | None = None
        self._block_fields = False
        self.last_event_id = ""
        self.retry: int | None = None
        self.closing_hint = False

    @property
    def pending(self) -> bool:
        """True while a partial line or an unterminated block is buffered."""
        return bool(self._buffer) or self._block_fields

    def feed(self, chunk: bytes | str) -> list[ServerSentEvent]:
        """Decode a chunk of the stream; a line or a UTF-8 sequence may span chunks."""
        text = self._text.decode(chunk) if isinstance(chunk, bytes | bytearray) else chunk
        if self._at_start and text:
            text = text.removeprefix("\ufeff")
            self._at_start = False
        if self._skip_lf and text:
            if text.startswith("\n"):
                text = text[1:]
            self._skip_lf = False
        self._buffer += text
        events: list[ServerSentEvent] = []
        while True:
            cut = _line_end(self._buffer)
            if cut < 0:
                break
            line = self._buffer[:cut]
            end = cut + 1
            if self._buffer[cut] == "\r":
                if end < len(self._buffer):
                    if self._buffer[end] == "\n":
                        end += 1
                else:
                    self._skip_lf = True
            self._buffer = self._buffer[end:]
            event = self.feed_line(line)
            if event is not None:
                events.append(event)
        return events

    def feed_line(self, line: str) -> ServerSentEvent | None:
        """Process one line without its terminator; an empty line ends the block."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment, often a keep-alive
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" in value:
                return None  # the spec ignores ids containing NUL
            self._block_id = value
            self.last_event_id = value
        elif name == "retry":
            if not value.isdigit():
                return None
            self._block_retry = int(value)
            self.retry = self._block_retry
        else:
            return None  # unknown fields are ignored
        self._block_fields = True
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        event: ServerSentEvent | None = None
        if self._has_data:
            event = ServerSentEvent(
                event=self._event or "message",
                data="\n".join(self._data),
                id=self._block_id,
                last_event_id=self.last_event_id,
                retry=self._block_retry,
            )
            self.closing_hint = False
        elif self._block_retry is not None:
            self.closing_hint = True
        self._event = ""
        self._data = []
        self._has_data = False
        self._block_id = None
        self._block_retry = None
        self._block_fields = False
        return event


def _line_end(text: str) -> int:
    """Index of the first CR or LF in ``text``, or -1."""
    lf = text.find("\n")
    cr = text.find("\r")
    if cr < 0:
        return lf
    if lf < 0:
        return cr
    return min(cr, lf)
