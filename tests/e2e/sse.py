"""Raw SSE reading for e2e tests, deliberately independent of skyloop's own client code."""

from __future__ import annotations

import codecs
import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import httpx

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


@dataclass
class Frame:
    id: int | None
    event: str | None
    data: dict[str, Any]


def iter_frames(response: httpx.Response) -> Iterator[Frame]:
    """Frames of a text/event-stream response; stops at ``[DONE]``."""
    buffer = ""
    for chunk in response.iter_text():
        buffer += chunk.replace("\r\n", "\n")
        while "\n\n" in buffer:
            raw, _, buffer = buffer.partition("\n\n")
            fid: int | None = None
            event: str | None = None
            data_lines: list[str] = []
            for line in raw.split("\n"):
                if line.startswith("id:"):
                    fid = int(line[3:].strip())
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data_lines.append(line[5:].lstrip())
            if not data_lines:
                continue
            payload = "\n".join(data_lines)
            if payload == "[DONE]":
                return
            yield Frame(fid, event, json.loads(payload))


@dataclass
class TurnResult:
    status: str
    frames: list[Frame] = field(default_factory=list)
    function_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool_outputs: dict[str, str] = field(default_factory=dict)
    text: str = ""

    def output(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = list(self.function_calls.values())
        out += [
            {"type": "function_call_output", "call_id": c, "output": o} for c, o in self.tool_outputs.items()
        ]
        if self.text:
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": self.text}],
                }
            )
        return out


TERMINAL = {"response.completed": "completed", "response.failed": "failed", "response.cancelled": "cancelled"}


def run_turn(
    http_client: httpx.Client,
    *,
    base_url: str,
    session_id: str,
    post: Callable[[], None],
    execute_tool: Callable[[str, dict[str, Any]], str] | None = None,
    client_tool_names: set[str] | None = None,
    timeout_s: float = 120.0,
) -> TurnResult:
    """Subscribe, post once the first frame arrives, answer action_required calls, stop at the terminal event."""
    result = TurnResult(status="failed")
    posters: list[threading.Thread] = []

    def post_output(call_id: str, output: str) -> None:
        with httpx.Client(base_url=base_url, timeout=30) as poster:
            resp = poster.post(
                f"/v1/sessions/{session_id}/events",
                json={"type": "function_call_output", "data": {"call_id": call_id, "output": output}},
            )
            assert resp.status_code in (200, 202), f"{resp.status_code} {resp.text[:300]}"

    with http_client.stream("GET", f"/v1/sessions/{session_id}/stream", timeout=timeout_s) as response:
        response.raise_for_status()
        assert response.headers["content-type"].startswith("text/event-stream")
        posted = False
        for frame in iter_frames(response):
            result.frames.append(frame)
            if not posted:
                t = threading.Thread(target=post, daemon=True)
                t.start()
                posters.append(t)
                posted = True
            etype = frame.data.get("type")
            if etype == "response.output_item.done":
                item = frame.data.get("item") or {}
                if item.get("type") == "function_call":
                    call_id, name = item.get("call_id"), item.get("name")
                    result.function_calls[call_id] = {
                        "type": "function_call",
                        "name": name,
                        "call_id": call_id,
                    }
                    if (
                        item.get("status") == "action_required"
                        and execute_tool is not None
                        and name in (client_tool_names or set())
                        and call_id not in result.tool_outputs
                    ):
                        out = execute_tool(name, json.loads(item.get("arguments") or "{}"))
                        result.tool_outputs[call_id] = out
                        t = threading.Thread(target=post_output, args=(call_id, out), daemon=True)
                        t.start()
                        posters.append(t)
            elif etype == "response.output_text.delta":
                result.text += frame.data.get("delta") or ""
            elif etype in TERMINAL:
                result.status = TERMINAL[etype]
                break
    for t in posters:
        t.join(timeout=30)
    return result


# ------------------------------------------------------------------ raw socket stream reader
@dataclass
class TimedFrame(Frame):
    """A frame with the time it arrived (``time.monotonic()``) and the ``retry:`` it carried, if any."""

    at: float = 0.0
    retry: int | None = None


class SseSocket:
    """One ``GET .../stream`` over a plain socket, read with deadlines.

    Unlike an httpx response iterator, a read that times out leaves the
    connection usable, so a test can wait "up to N seconds" for a frame, watch
    a quiet window, or drop the connection at an exact point (``close()``), as
    a real client losing its network would. Handles chunked transfer encoding
    and records ``retry:`` fields and the server ending the response.
    """

    def __init__(
        self,
        base_url: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        parts = urlsplit(base_url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        target = path + ("?" + urlencode(params) if params else "")
        lines = [
            f"GET {target} HTTP/1.1",
            f"Host: {host}:{port}",
            "Accept: text/event-stream",
            "Cache-Control: no-cache",
            *(f"{k}: {v}" for k, v in (headers or {}).items()),
        ]
        self.opened_at = time.monotonic()
        self._sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self._raw = b""  # bytes received but not yet de-chunked
        self._text = ""  # decoded body not yet split into frames
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._body_done = False
        self.ended_at: float | None = None  # when the server finished the response
        self.frames: list[TimedFrame] = []  # every data frame, in arrival order
        self.retries: list[tuple[float, int]] = []  # every ``retry:`` field, with its arrival time
        self.trailing_retry = False  # the last block before the end was a bare ``retry:``
        self.status, self.headers = self._read_head(time.monotonic() + connect_timeout_s)
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()

    # -- transport ---------------------------------------------------------
    def _recv(self, deadline: float) -> bool:
        """Read once; False on timeout. A closed connection ends the body."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self._sock.settimeout(remaining)
        try:
            data = self._sock.recv(65536)
        except TimeoutError:
            return False
        except OSError:
            data = b""
        if not data:
            self._finish()
            return True
        self._raw += data
        return True

    def _finish(self) -> None:
        if not self._body_done:
            self._body_done = True
            self.ended_at = time.monotonic()

    def _read_head(self, deadline: float) -> tuple[int, dict[str, str]]:
        while b"\r\n\r\n" not in self._raw:
            if self._body_done or not self._recv(deadline):
                raise AssertionError(f"no response head; got {self._raw[:200]!r}")
        head, _, self._raw = self._raw.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in header_lines:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        return int(status_line.split()[1]), headers

    def _dechunk(self) -> None:
        if not self._chunked:
            self._text += self._decoder.decode(self._raw)
            self._raw = b""
            return
        while not self._body_done and b"\r\n" in self._raw:
            size_line, _, rest = self._raw.partition(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self._raw = b""
                self._finish()
                return
            if len(rest) < size + 2:
                return
            self._text += self._decoder.decode(rest[:size])
            self._raw = rest[size + 2 :]

    # -- frames ------------------------------------------------------------
    def _next_block(self) -> str | None:
        self._text = self._text.replace("\r\n", "\n")
        if "\n\n" not in self._text:
            return None
        block, _, self._text = self._text.partition("\n\n")
        return block

    def _parse(self, block: str, at: float) -> TimedFrame | None:
        fid: int | None = None
        event: str | None = None
        retry: int | None = None
        data_lines: list[str] = []
        for line in block.split("\n"):
            if line.startswith("id:"):
                fid = int(line[3:].strip())
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data_lines.append(line[5:].lstrip())
            elif line.startswith("retry:"):
                retry = int(line[6:].strip())
        if retry is not None:
            self.retries.append((at, retry))
        if not data_lines:
            self.trailing_retry = retry is not None
            return None
        self.trailing_retry = False
        return TimedFrame(fid, event, json.loads("\n".join(data_lines)), at=at, retry=retry)

    def next_frame(self, timeout_s: float) -> TimedFrame | None:
        """The next data frame, or None if none arrives in time or the response ended."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._dechunk()
            block = self._next_block()
            if block is not None:
                parsed = self._parse(block, time.monotonic())
                if parsed is not None:
                    self.frames.append(parsed)
                    return parsed
                continue
            if self._body_done:
                return None
            if not self._recv(deadline):
                return None

    def read_until(self, predicate: Callable[[TimedFrame], bool], timeout_s: float = 30.0) -> TimedFrame:
        """Read frames until one matches; fails with the types seen so far."""
        deadline = time.monotonic() + timeout_s
        while True:
            frame = self.next_frame(max(0.0, deadline - time.monotonic()))
            if frame is None:
                seen = [f.data.get("type") for f in self.frames]
                raise AssertionError(
                    f"no matching frame within {timeout_s}s (ended={self.ended}); saw {seen}"
                )
            if predicate(frame):
                return frame

    def read_for(self, duration_s: float) -> list[TimedFrame]:
        """Every frame that arrives within ``duration_s`` (stops early if the response ends)."""
        deadline = time.monotonic() + duration_s
        got: list[TimedFrame] = []
        while (remaining := deadline - time.monotonic()) > 0:
            frame = self.next_frame(remaining)
            if frame is None:
                if self._body_done:
                    break
                continue
            got.append(frame)
        return got

    def read_to_end(self, timeout_s: float) -> list[TimedFrame]:
        """Frames until the server ends the response; fails if it does not end in time."""
        got = self.read_for(timeout_s)
        assert self.ended, f"the stream did not end within {timeout_s}s"
        return got

    @property
    def ended(self) -> bool:
        return self._body_done

    def stored(self) -> list[TimedFrame]:
        """The frames that carry an ``id:`` (stored events), in arrival order."""
        return [f for f in self.frames if f.id is not None]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()

    def __enter__(self) -> SseSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def of_type(*types: str) -> Callable[[Frame], bool]:
    return lambda f: f.data.get("type") in types


def is_status(status: str) -> Callable[[Frame], bool]:
    return lambda f: f.data.get("type") == "session.status" and f.data.get("status") == status
