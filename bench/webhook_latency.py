"""State change -> webhook delivery latency on the local stack (p50/p95).

Starts its own ``skyloop dev`` and ``skyloop mock-llm`` (as ``turn_latency.py``),
registers a webhook endpoint pointing at a receiver in this process, and runs
client-tool turns with the session's SSE stream open. Each lifecycle event is
timed against the log event it derives from, as the SSE stream shows it
(both are woken by the same append, so the stream frame is the moment the
state change became visible):

| metric | from (SSE frame) | to (webhook received) |
| --- | --- | --- |
| ``in_progress_ms`` | ``session.status`` running | ``agent.session.in_progress`` |
| ``action_required_ms`` | the ``action_required`` call | ``agent.session.action_required`` |
| ``idle_ms`` | ``response.completed`` | ``agent.session.idle`` |

plus ``parked_to_webhook_ms`` (the model's answer released at the mock ->
``action_required`` received: the "within 1 s of parking" figure, SSE-free).

    .venv/bin/python bench/webhook_latency.py            # -> bench/results/webhook_latency.json
    .venv/bin/python bench/webhook_latency.py --runs 10
"""

from __future__ import annotations

import argparse
import http.server
import json
import math
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import turn_latency as tl

DEFAULT_OUT = tl.RESULTS_DIR / "webhook_latency.json"
ECHO = {
    "type": "function",
    "function": {
        "name": "Echo",
        "description": "Echo the text.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
}
TRIGGERS = {  # lifecycle type -> the SSE frame it derives from
    "agent.session.in_progress": lambda f: f.get("type") == "session.status" and f.get("status") == "running",
    "agent.session.action_required": lambda f: tl.action_required_call(f) is not None,
    "agent.session.idle": lambda f: f.get("type") == "response.completed",
}
METRIC = {
    "agent.session.in_progress": "in_progress_ms",
    "agent.session.action_required": "action_required_ms",
    "agent.session.idle": "idle_ms",
}


class Receiver:
    """A loopback webhook receiver: (perf_counter at receipt, event) per POST."""

    def __init__(self) -> None:
        self.got: list[tuple[float, dict[str, Any]]] = []
        self.cond = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                at = time.perf_counter()
                with receiver.cond:
                    receiver.got.append((at, json.loads(body)))
                    receiver.cond.notify_all()
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:  # noqa: ARG002 (quiet)
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait(self, session_id: str, type_: str, timeout: float = 30) -> float:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for at, event in self.got:
                    if event["type"] == type_ and event["data"]["id"] == session_id:
                        return at
                left = deadline - time.monotonic()
                if left <= 0:
                    raise tl.BenchError(f"no {type_} for {session_id} within {timeout}s")
                self.cond.wait(left)


def one_turn(api: httpx.Client, mock: httpx.Client, stack: tl.Stack, receiver: Receiver) -> dict[str, float]:
    """A client-tool turn: the stream is read on its own thread (frame times unbiased by the posts);
    the model's tool call is held at the mock's gate, so its release is the moment the turn parks."""
    tl.configure_mock(
        mock,
        stack.model,
        [
            {
                "block": True,
                "tool_calls": [{"call_id": "call_b", "name": "Echo", "arguments": '{"text": "hi"}'}],
            },
            {"text": "done"},
        ],
    )
    session_id = tl.create_session(api, stack)
    seen: dict[str, float] = {}
    opened, ended = threading.Event(), threading.Event()
    calls: list[str] = []

    def read() -> None:
        with (
            httpx.Client(base_url=stack.api_url, timeout=httpx.Timeout(30, read=60)) as reader,
            reader.stream("GET", f"/v1/sessions/{session_id}/stream") as resp,
        ):
            for frame in tl.iter_frames(resp):
                at = time.perf_counter()
                opened.set()
                for type_, matches in TRIGGERS.items():
                    if type_ not in seen and matches(frame):
                        seen[type_] = at
                call = tl.action_required_call(frame)
                if call is not None:
                    calls.append(call["call_id"])
                if frame.get("type") in tl.TERMINAL:
                    break
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    if not opened.wait(30):
        raise tl.BenchError("the stream did not open")
    tl.check(api.post(f"/v1/sessions/{session_id}/events", json=tl.message_event("echo", [ECHO])), 202)
    while not tl.check(mock.get("/gate/pending"), 200).get("pending"):
        time.sleep(0.005)
    released = time.perf_counter()
    tl.check(mock.post("/gate/release"), 200)
    receiver.wait(session_id, "agent.session.action_required")
    out = {"type": "function_call_output", "data": {"call_id": "call_b", "output": "hi"}}
    tl.check(api.post(f"/v1/sessions/{session_id}/events", json=out), 202)
    if not ended.wait(30):
        raise tl.BenchError("the turn did not end")
    sample = {METRIC[t]: (receiver.wait(session_id, t) - seen[t]) * 1000 for t in TRIGGERS}
    sample["parked_to_webhook_ms"] = (
        receiver.wait(session_id, "agent.session.action_required") - released
    ) * 1000
    tl.wait_idle(api, session_id)
    return sample


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return round(ordered[max(0, math.ceil(p * len(ordered)) - 1)], 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    receiver = Receiver()
    samples: dict[str, list[float]] = {m: [] for m in [*METRIC.values(), "parked_to_webhook_ms"]}
    with (
        tl.running_stack(tl.RESULTS_DIR, "webhook_latency") as stack,
        httpx.Client(base_url=stack.api_url, timeout=30) as api,
        httpx.Client(base_url=stack.mock_url, timeout=30) as mock,
    ):
        stack.runner_id = tl.wait_runner_online(api)
        tl.register_agent(api, stack)
        tl.check(api.post("/v1/webhooks", json={"url": receiver.url}), 201)
        for n in range(args.warmup + args.runs):
            sample = one_turn(api, mock, stack, receiver)
            if n >= args.warmup:
                for key, value in sample.items():
                    samples[key].append(value)
    report = {
        "runs": args.runs,
        "machine": tl.machine_info(),
        "revision": tl.code_revision(),
        "metrics": {
            k: {
                "n": len(v),
                "p50": pct(v, 0.5),
                "p95": pct(v, 0.95),
                "max": round(max(v), 1),
                "mean": round(statistics.mean(v), 1),
            }
            for k, v in samples.items()
        },
        "samples": samples,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"{'metric':<24} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for key, m in report["metrics"].items():
        print(f"{key:<24} {m['n']:>4} {m['p50']:>8} {m['p95']:>8} {m['max']:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
