"""Scripted queues, request routing and blocking gates for the mock LLM.

All state is in memory. A ``threading.Lock`` (never held across an ``await``)
guards it, so tests may also drive a ``MockState`` directly from another
thread while the server's event loop is answering requests.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from collections.abc import Callable

DEFAULT_KEY = "default"
DEFAULT_TEXT = "Mock LLM response"
MAX_DELAY_MS = 60_000
# /mock/requests keeps the newest request bodies, at most this many and this much of their JSON
CAPTURED_REQUESTS = 1000
CAPTURED_BYTES = 8 * 2**20


class ToolCall(BaseModel):
    """One function call the model "decides" to make."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    call_id: str = "call-mock"
    name: str = Field(min_length=1)
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _json_string(cls, value: Any) -> Any:
        """Arguments travel as a JSON string; accept an object too and encode it for convenience."""
        if isinstance(value, dict | list):
            return json.dumps(value)
        return value


class QueuedResponse(BaseModel):
    """One scripted answer; unknown keys are ignored for compatibility with omnigent's mock."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    text: str = DEFAULT_TEXT
    tool_calls: list[ToolCall] | None = None
    block: bool = False
    stream: bool = False
    error: str | None = None
    status_code: int = Field(default=500, ge=400, le=599)
    # Milliseconds to wait before the first byte, as a real model's time to first token (errors too).
    delay_ms: int = Field(default=0, ge=0, le=MAX_DELAY_MS)


class ConfigureBody(BaseModel):
    """``POST /mock/configure``: load a keyed queue, optionally routed by a match token."""

    key: str = DEFAULT_KEY
    responses: list[QueuedResponse] = Field(default_factory=list)
    match: str | None = None


class SetFallbackBody(BaseModel):
    """``POST /mock/set_fallback``: what an exhausted queue answers instead of the default text."""

    key: str = DEFAULT_KEY
    text: str = DEFAULT_TEXT
    stream: bool = False


class _ResponseQueue:
    """Entries are consumed by advancing ``index`` so a reconfigure can start over cleanly."""

    def __init__(self) -> None:
        self.responses: list[QueuedResponse] = []
        self.index = 0
        self.fallback: QueuedResponse | None = None
        self.responder: Callable[[dict[str, Any]], QueuedResponse] | None = None
        self.match: str | None = None

    def reset(self) -> None:
        """Forget the script and match token; the fallback deliberately survives."""
        self.responses = []
        self.index = 0
        self.match = None

    def next(self, body: dict[str, Any] | None = None) -> QueuedResponse:
        """Never fails: an exhausted queue asks its responder, else answers its fallback or the default text."""
        if self.index < len(self.responses):
            entry = self.responses[self.index]
            self.index += 1
            return entry
        if self.responder is not None:
            return self.responder(body or {})
        return self.fallback if self.fallback is not None else QueuedResponse()


class Gate:
    """Holds one blocked request until a test releases it.

    The waiter's loop is remembered so a release from another thread is
    handed over with ``call_soon_threadsafe`` instead of racing the loop.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self.open = False

    @property
    def pending(self) -> bool:
        return not self.open

    def release(self) -> None:
        """Idempotent; the caller holds the state lock so ``open`` flips exactly once."""
        if self.open:
            return
        self.open = True
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._event.set()
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self) -> None:
        await self._event.wait()


class MockState:
    """Everything the mock remembers: queues, captured requests and pending gates."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.queues: dict[str, _ResponseQueue] = {}
        # The newest requests only (see record_and_next): each holds its whole conversation, and a
        # `skyloop dev` chat runs on this mock for hours.
        self.captured_requests: deque[Any] = deque()
        self._captured_sizes: deque[int] = deque()  # each captured body's size as received
        self._captured_bytes = 0
        self.request_count = 0  # every request, also those no longer captured
        self.pending_gates: list[Gate] = []

    # -- control -----------------------------------------------------------

    def configure(self, key: str, responses: list[QueuedResponse], match: str | None = None) -> int:
        """Replace a queue's script (keeping its fallback); returns the new entry count."""
        with self._lock:
            queue = self.queues.setdefault(key, _ResponseQueue())
            queue.reset()
            queue.responses.extend(responses)
            queue.match = match or None
            return len(queue.responses)

    def set_fallback(self, key: str, text: str = DEFAULT_TEXT, stream: bool = False) -> None:
        """Fallbacks are text-only and survive reset, e.g. an always-allow policy classifier."""
        with self._lock:
            self.queues.setdefault(key, _ResponseQueue()).fallback = QueuedResponse(text=text, stream=stream)

    def set_responder(self, key: str, responder: Callable[[dict[str, Any]], QueuedResponse]) -> None:
        """Answer an exhausted queue by computing a reply from the request (the offline model does this).

        Like a fallback, a responder survives ``reset``.
        """
        with self._lock:
            self.queues.setdefault(key, _ResponseQueue()).responder = responder

    def reset(self) -> None:
        """Unstick every blocked handler and forget everything except fallbacks and responders."""
        with self._lock:
            gates, self.pending_gates = self.pending_gates, []
            for gate in gates:
                gate.release()
            for key in [k for k, q in self.queues.items() if q.fallback is None and q.responder is None]:
                del self.queues[key]
            for queue in self.queues.values():
                queue.reset()
            self.captured_requests.clear()
            self._captured_sizes.clear()
            self._captured_bytes = 0
            self.request_count = 0

    def requests(self, model: str | None = None) -> list[Any]:
        """The newest captured bodies, optionally only those whose request ``model`` equals ``model``."""
        with self._lock:
            if model is None:
                return list(self.captured_requests)
            return [r for r in self.captured_requests if isinstance(r, dict) and r.get("model") == model]

    # -- gates -------------------------------------------------------------

    def open_gate(self) -> Gate:
        """Register a gate for a blocking entry; must be called on the serving loop."""
        gate = Gate()
        with self._lock:
            self.pending_gates.append(gate)
        return gate

    def release_gate(self) -> bool:
        """Release the oldest gate still pending."""
        with self._lock:
            for gate in self.pending_gates:
                if gate.pending:
                    gate.release()
                    return True
            return False

    def has_pending_gate(self) -> bool:
        with self._lock:
            return any(gate.pending for gate in self.pending_gates)

    def abandon_gate(self, gate: Gate) -> None:
        """A waiter that went away (cancelled) must not look pending to tests polling for it."""
        with self._lock:
            gate.release()

    # -- model requests ----------------------------------------------------

    def record_and_next(self, body: Any, *, size: int = 0) -> QueuedResponse:
        """Count and capture the request before routing, so even error replies are visible.

        ``size`` is the body's length as received: the capture keeps the newest
        bodies within :data:`CAPTURED_REQUESTS` and :data:`CAPTURED_BYTES`, so a
        long chat on this mock holds a bounded amount, not every request's whole
        conversation (the newest body is always kept, however large).
        """
        with self._lock:
            self.request_count += 1
            self.captured_requests.append(body)
            self._captured_sizes.append(size)
            self._captured_bytes += size
            while len(self.captured_requests) > 1 and (
                len(self.captured_requests) > CAPTURED_REQUESTS or self._captured_bytes > CAPTURED_BYTES
            ):
                self.captured_requests.popleft()
                self._captured_bytes -= self._captured_sizes.popleft()
            request = body if isinstance(body, dict) else {}
            return self._resolve_queue(request).next(request)

    def _resolve_queue(self, body: dict[str, Any]) -> _ResponseQueue:
        """Match token in the user text, else the queue named by ``model``, else ``default``."""
        text = user_input_text(body)
        if text:
            best: tuple[int, int] | None = None
            chosen: _ResponseQueue | None = None
            for queue in self.queues.values():
                if not queue.match:
                    continue
                position = text.rfind(queue.match)
                if position < 0:
                    continue
                rank = (len(queue.match), position)
                if best is None or rank > best:
                    best, chosen = rank, queue
            if chosen is not None:
                return chosen
        model = body.get("model")
        if isinstance(model, str) and model in self.queues:
            return self.queues[model]
        return self.queues.setdefault(DEFAULT_KEY, _ResponseQueue())


def user_input_text(body: dict[str, Any]) -> str:
    """Only what the user said counts for matching: system prompts and tool outputs are ignored."""
    parts: list[str] = []
    for field in ("input", "messages"):
        value = body.get(field)
        if field == "input" and isinstance(value, str):
            parts.append(value)
            continue
        items = [value] if isinstance(value, dict) else value if isinstance(value, list) else []
        for item in items:
            if isinstance(item, dict) and item.get("role") == "user":
                _collect_text(item.get("content"), parts)
    return " ".join(parts)


def _collect_text(content: Any, parts: list[str]) -> None:
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, dict):
        if isinstance(content.get("text"), str):
            parts.append(content["text"])
        _collect_text(content.get("content"), parts)
    elif isinstance(content, list):
        for part in content:
            _collect_text(part, parts)
