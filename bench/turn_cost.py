"""Count what one turn costs in AWS terms, on the local stack, and price it.

Runs ``skyloop dev``'s stack in this process (moto, the real handlers, the
real ASL) with its embedded scripted model, drives one text turn and one
client-tool turn and one server-tool turn (the example Lambda tool
``word_count``, run by the Map state) over real HTTP/SSE, and counts per turn:

* Step Functions state transitions (``*StateEntered`` history events, what
  Standard workflows bill),
* Lambda invocations per function (the stream connection counts as one),
* DynamoDB read and write request units, computed from every request moto
  served (strongly consistent reads: 1 RRU per 4 KB read, at least 1;
  writes: 1 WRU per KB per item, transactions twice that).

Prices are public on-demand list prices, us-east-1, as of the date in
``PRICES``; Lambda duration is priced from the manifest's memory and the
measured local wall time, which overstates a warm cloud function.

    .venv/bin/python bench/turn_cost.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]

PRICES = {
    "as_of": "2026-12-02",
    "sfn_per_transition": 0.025 / 1000,
    "lambda_per_request": 0.20 / 1_000_000,
    "lambda_arm_per_gb_s": 0.0000133334,
    "ddb_per_wru": 0.625 / 1_000_000,
    "ddb_per_rru": 0.125 / 1_000_000,
    "http_api_per_request": 1.00 / 1_000_000,
}


TOOL_MEMORY_MB = 128  # a user's Lambda tool is theirs to size; priced at the smallest memory


class Meter:
    """Counts DynamoDB request units and Lambda invocations while the stack runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rru = 0.0
        self.wru = 0.0
        self.ddb_ops: Counter[str] = Counter()
        self.invocations: Counter[str] = Counter()
        self.lambda_seconds: Counter[str] = Counter()

    def reset(self) -> None:
        with self.lock:
            self.rru = self.wru = 0.0
            self.ddb_ops.clear()
            self.invocations.clear()
            self.lambda_seconds.clear()

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "rru": round(self.rru, 1),
                "wru": round(self.wru, 1),
                "ddb_ops": dict(self.ddb_ops),
                "invocations": dict(self.invocations),
                "lambda_seconds": {k: round(v, 3) for k, v in self.lambda_seconds.items()},
            }


def _kb(item: dict[str, Any]) -> float:
    return len(json.dumps(item)) / 1024


def _count(meter: Meter, handler: Any, call: Any) -> Any:
    """Serve one DynamoDB request through ``call`` and add its request units to ``meter``."""
    op = (handler.headers.get("X-Amz-Target") or "").split(".")[-1]
    body = json.loads(handler.body or "{}")
    result = call()
    try:
        out = json.loads(result[2] if isinstance(result, tuple) else result)
    except (TypeError, ValueError, IndexError):
        out = {}
    rru = wru = 0.0
    if op in ("GetItem",):
        rru = max(1, math.ceil(_kb(out.get("Item", {})) / 4))
    elif op in ("Query", "Scan"):
        rru = max(1, math.ceil(sum(_kb(i) for i in out.get("Items", [])) / 4))
    elif op in ("PutItem", "DeleteItem", "UpdateItem"):
        wru = max(1, math.ceil(_kb(body.get("Item", body.get("Key", {})))))
    elif op == "TransactWriteItems":
        wru = sum(
            2 * max(1, math.ceil(_kb(next(iter(t.values())).get("Item", {})))) for t in body["TransactItems"]
        )
    elif op == "BatchWriteItem":
        wru = sum(len(reqs) for reqs in body["RequestItems"].values())
    with meter.lock:
        meter.ddb_ops[op] += 1
        meter.rru += rru
        meter.wru += wru
    return result


def install_meter(meter: Meter) -> None:
    from moto.awslambda.models import LambdaFunction
    from moto.dynamodb.responses import DynamoHandler

    from skyloop.local import moto_dynamodb

    call_action = DynamoHandler.call_action

    def metered(self: Any) -> Any:
        return _count(meter, self, lambda: call_action(self))

    DynamoHandler.call_action = metered  # type: ignore[method-assign]
    serve = moto_dynamodb.serve

    def metered_fast(handler: Any, action: str) -> Any:  # the local stack's direct path (same counting)
        return _count(meter, handler, lambda: serve(handler, action))

    moto_dynamodb.serve = metered_fast  # type: ignore[assignment]
    invoke = LambdaFunction.invoke

    def counted(self: LambdaFunction, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return invoke(self, *args, **kwargs)
        finally:
            with meter.lock:
                meter.invocations[self.function_name.removeprefix("skyloop-")] += 1
                meter.lambda_seconds[self.function_name.removeprefix("skyloop-")] += (
                    time.perf_counter() - started
                )

    LambdaFunction.invoke = counted  # type: ignore[method-assign]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_turn(base: str, session_id: str, body: dict[str, Any], answer: bool) -> list[dict[str, Any]]:
    """Subscribe, post, answer action_required calls, stop at the terminal event; returns the frames."""
    frames: list[dict[str, Any]] = []
    with (
        httpx.Client(base_url=base, timeout=60) as client,
        client.stream("GET", f"/v1/sessions/{session_id}/stream") as resp,
    ):
        posted = False
        buffer = ""
        for chunk in resp.iter_text():
            buffer += chunk
            while "\n\n" in buffer:
                raw, _, buffer = buffer.partition("\n\n")
                data = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")]
                if not data:
                    continue
                event = json.loads(data[0])
                frames.append(event)
                if not posted:
                    httpx.post(
                        f"{base}/v1/sessions/{session_id}/events", json=body, timeout=30
                    ).raise_for_status()
                    posted = True
                item = event.get("item") or {}
                if answer and item.get("status") == "action_required":
                    httpx.post(
                        f"{base}/v1/sessions/{session_id}/events",
                        json={
                            "type": "function_call_output",
                            "data": {"call_id": item["call_id"], "output": "a.py"},
                        },
                        timeout=30,
                    ).raise_for_status()
                if event["type"] in ("response.completed", "response.failed", "response.cancelled"):
                    return frames
    return frames


def main() -> int:
    parser = argparse.ArgumentParser(
        description="count and price a text turn, a client-tool turn and a server-tool turn"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "turn_cost.json")
    args = parser.parse_args()

    import uvicorn

    from skyloop import deps, manifest
    from skyloop.local import dev

    port = _free_port()
    os.environ["SKYLOOP_LOCAL_DYNAMODB"] = "inline"  # the meter counts moto's handler in this process
    stack = dev.start(
        "127.0.0.1",
        port,
        example_agent=False,
        lambda_tools=[str(ROOT / "examples" / "lambda_tools.py")],
        # a turn's own requests only: lifecycle events are priced apart (docs/architecture.md), and the
        # local publisher's log reads stand for the cloud's free stream reads
        lifecycle_events=False,
    )
    meter = Meter()
    install_meter(meter)
    server = uvicorn.Server(uvicorn.Config(stack.app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    base = stack.url
    for _ in range(100):
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)

    sfn = deps.client("stepfunctions")
    model = "cost-model"
    spec = {
        "name": "cost-agent",
        "executor": {"model": model, "auth": {"api_key": "k", "base_url": f"{base}/_mock/v1"}},
    }
    agent = httpx.post(f"{base}/v1/agents", json=spec, timeout=30).json()
    word_count = {
        "type": "lambda",
        "function": "word_count",
        "description": "count words",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
    tool_agent = httpx.post(
        f"{base}/v1/agents",
        json={**spec, "name": "cost-tool-agent", "tools": {"word_count": word_count}},
        timeout=30,
    ).json()
    tools = [
        {
            "type": "function",
            "function": {
                "name": "Glob",
                "description": "find files",
                "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
            },
        }
    ]
    scenarios = {
        "text_turn": (
            [{"text": "A short answer of about ten words, streamed.", "stream": True}],
            None,
            False,
        ),
        "client_tool_turn": (
            [
                {"tool_calls": [{"call_id": "c1", "name": "Glob", "arguments": '{"pattern": "*.py"}'}]},
                {"text": "Found a.py.", "stream": True},
            ],
            tools,
            True,
        ),
        "server_tool_turn": (
            [
                {"tool_calls": [{"call_id": "s1", "name": "word_count", "arguments": '{"text": "a b c"}'}]},
                {"text": "Three words.", "stream": True},
            ],
            None,
            False,
        ),
    }
    memory = {f.name: f.memory_mb for f in manifest.FUNCTIONS}
    results: dict[str, Any] = {"prices": PRICES, "turns": {}}
    for name, (script, turn_tools, answer) in scenarios.items():
        httpx.post(f"{base}/_mock/mock/configure", json={"key": model, "responses": script}, timeout=10)
        owner = tool_agent if name == "server_tool_turn" else agent
        session = httpx.post(f"{base}/v1/sessions", json={"agent_id": owner["id"]}, timeout=30).json()
        body: dict[str, Any] = {
            "type": "message",
            "data": {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        }
        if turn_tools:
            body["tools"] = turn_tools
        meter.reset()
        frames = run_turn(base, session["id"], body, answer)
        time.sleep(1.0)  # let the execution reach its final state
        response_id = next(f["response"]["id"] for f in frames if f["type"] == "response.in_progress")
        arn = stack.state_machine_arn.replace(":stateMachine:", ":execution:") + ":" + response_id
        history = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        transitions = sum(1 for e in history if e["type"].endswith("StateEntered"))
        counted = meter.snapshot()
        invocations = dict(counted["invocations"])
        invocations["stream"] = 1
        api_requests = invocations.get("api", 0)
        gb_s = sum(
            memory.get(fn, TOOL_MEMORY_MB) / 1024 * secs for fn, secs in counted["lambda_seconds"].items()
        )
        cost = {
            "step_functions": transitions * PRICES["sfn_per_transition"],
            "lambda_requests": sum(invocations.values()) * PRICES["lambda_per_request"],
            "lambda_duration_local_wall": gb_s * PRICES["lambda_arm_per_gb_s"],
            "dynamodb_writes": counted["wru"] * PRICES["ddb_per_wru"],
            "dynamodb_reads": counted["rru"] * PRICES["ddb_per_rru"],
            "http_api": api_requests * PRICES["http_api_per_request"],
        }
        results["turns"][name] = {
            "events_streamed": len(frames),
            "state_transitions": transitions,
            "lambda_invocations": invocations,
            "dynamodb": {"rru": counted["rru"], "wru": counted["wru"], "requests": counted["ddb_ops"]},
            "lambda_gb_s_local": round(gb_s, 3),
            "usd": {k: round(v, 8) for k, v in cost.items()},
            "usd_total": round(sum(cost.values()), 8),
            "usd_per_1000_turns": round(sum(cost.values()) * 1000, 4),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results["turns"], indent=2))
    server.should_exit = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
