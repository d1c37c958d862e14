"""Raw SSE reading for e2e tests, deliberately independent of skyloop's own client code."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
