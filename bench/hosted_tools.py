"""What a hosted tool call adds, locally: a real ``skyloop dev`` against each tool's own work.

Starts its own ``skyloop dev --ephemeral`` and ``skyloop mock-llm`` (as ``turn_latency.py``
does), with ``SKYLOOP_LOCAL_TRACE`` on, registers one agent whose six built-ins are
``{type: hosted}`` and whose model is the mock, and, in rounds, for each tool:

* **direct**: the tool's own work, ``skyloop.environments.tools.run_tool`` on a
  ``LocalSandbox`` in this process (bubblewrap for Bash), with the same arguments
  and the same workspace files;
* **hosted**: one turn of a session of the agent whose scripted model calls the
  tool ``--calls-per-round`` times (one call per model answer). Per call, from the
  trace of the ``run_tool`` invocation that ran it: the call announced
  (``in_progress`` committed) to its output recorded (the answer's write
  committed). That interval minus the direct median is what the hosted path adds.
  Also shown: what a client sees (the ``in_progress`` frame to the output's frame
  on the SSE stream, which includes the step back into the turn) and, for Bash,
  the interval minus the command's own ``duration_ms`` (bubblewrap included).

And the raw cost of one bubblewrap start: ``/bin/sh -c true`` against the
sandbox's own bwrap command line (``LocalSandbox._argv``) and a minimal
``bwrap --ro-bind / /``. The first round is a warm-up and is discarded.

    .venv/bin/python bench/hosted_tools.py                 # 4 rounds x 6 calls per tool (24 measured)
    .venv/bin/python bench/hosted_tools.py --rounds 6 --calls-per-round 5

See bench/README.md, "hosted_tools.py".
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import turn_latency as tl

DEFAULT_OUT = tl.RESULTS_DIR / "hosted_tools.json"
TOOLS = ("Read", "Write", "Edit", "Glob", "Grep", "Bash")
BARS_MS = {"Read": 30.0, "Write": 30.0, "Edit": 30.0, "Bash": 60.0}  # the issue's: added, warm

NOTES = "".join(f"line {n}: the quick brown fox jumps over the lazy dog\n" for n in range(1, 50))
FILES = {
    "notes.txt": "alpha\n" + NOTES,
    **{
        f"src/pkg{n // 5}/mod{n}.py": f'"""Module {n}."""\n\n\ndef f{n}(x):\n    return x + {n}\n'
        for n in range(20)
    },
}
WRITTEN = "written by the benchmark\n" * 40  # ~1 KB


def arguments(tool: str, n: int) -> dict[str, Any]:
    """The ``n``-th call's arguments (Edit alternates, so every call finds its string)."""
    if tool == "Read":
        return {"file_path": "notes.txt"}
    if tool == "Write":
        return {"file_path": "out.txt", "content": WRITTEN}
    if tool == "Edit":
        old, new = ("alpha", "omega") if n % 2 == 0 else ("omega", "alpha")
        return {"file_path": "/workspace/notes.txt", "old_string": old, "new_string": new}
    if tool == "Glob":
        return {"pattern": "**/*.py"}
    if tool == "Grep":
        return {"pattern": "return x", "output_mode": "content"}
    return {"command": "true"}


def expected_output(tool: str, output: str) -> bool:
    if tool == "Read":
        return output.startswith("1\t")
    if tool == "Write":
        return output == "Successfully wrote /workspace/out.txt"
    if tool == "Edit":
        return output == "Replaced 1 occurrence(s) in /workspace/notes.txt"
    if tool == "Glob":
        return output.count(".py") == 20
    if tool == "Grep":
        return output.count("return x") == 20
    return output == "(no output)"


# ------------------------------------------------------------------------------ statistics
def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summary(samples: list[float]) -> dict[str, float | int]:
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "p50": round(statistics.median(samples), 2),
        "p90": round(pct(samples, 0.9), 2),
        "min": round(min(samples), 2),
        "max": round(max(samples), 2),
    }


# ---------------------------------------------------------------------------------- direct
class Direct:
    """The tools' own work: ``run_tool`` on a sandbox of this process (bubblewrap, network none)."""

    def __init__(self, root: Path) -> None:
        from skyloop.environments.local import LocalEngine

        self.engine = LocalEngine(root, max_bytes=1 << 30)
        self.sandbox = self.engine.sandbox("direct", network="none")
        for path, content in FILES.items():
            self.sandbox.write(path, content.encode())
        self.count: dict[str, int] = dict.fromkeys(TOOLS, 0)

    def once(self, tool: str) -> float:
        from skyloop.environments.tools import run_tool

        args = arguments(tool, self.count[tool])
        self.count[tool] += 1
        started = time.perf_counter()
        ran = run_tool(tool, args, self.sandbox, timeout_s=120, env={})
        took = (time.perf_counter() - started) * 1000
        if not expected_output(tool, ran.output):
            raise tl.BenchError(f"direct {tool}: unexpected output {ran.output[:200]!r}")
        return took


def bwrap_starts(count: int) -> dict[str, list[float]]:
    """One process start, ``count`` times each, interleaved: plain sh, a minimal bwrap, the sandbox's."""
    from skyloop.environments.local import LocalEngine

    root = Path(tempfile.mkdtemp(prefix="bench-bwrap-"))
    try:
        sandbox = LocalEngine(root, max_bytes=1 << 30).sandbox("s", network="none")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/workspace", "LANG": "C.UTF-8"}
        bwrap = shutil.which("bwrap") or "bwrap"
        argvs = {
            "sh -c true": ["/bin/sh", "-c", "true"],
            "bwrap --ro-bind / / sh -c true": [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                               "/bin/sh", "-c", "true"],
            "sandbox bwrap (network none) sh -c true": sandbox._argv("true", env),
        }  # fmt: skip
        out: dict[str, list[float]] = {name: [] for name in argvs}
        for n in range(count + 2):
            for name, argv in argvs.items():
                started = time.perf_counter()
                subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=True, env=env)
                if n >= 2:  # two warm-ups each
                    out[name].append((time.perf_counter() - started) * 1000)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------- hosted
class Trace:
    """The stack's ``SKYLOOP_LOCAL_TRACE`` file, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.records: list[dict[str, Any]] = []

    def read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        self.records += [json.loads(line) for line in complete.splitlines() if line.strip()]

    def run_tool_calls(self, since: float, until: float) -> list[dict[str, float]]:
        """Per ``run_tool`` invocation that started in the window, in order: its announce and record
        writes (the first and last TransactWriteItems it made) and the invocation itself."""
        self.read()
        invocations = sorted(
            (r for r in self.records
             if r["kind"] == "invoke" and r["function"].endswith("run_tool") and since <= r["t0"] <= until),
            key=lambda r: r["t0"],
        )  # fmt: skip
        out = []
        for inv in invocations:
            writes = sorted(
                (r for r in self.records
                 if r["kind"] == "sdk" and r.get("inv") == inv["request_id"] and r["op"] == "TransactWriteItems"),
                key=lambda r: r["t0"],
            )  # fmt: skip
            if len(writes) < 2:
                raise tl.BenchError(f"run_tool invocation {inv['request_id']}: {len(writes)} writes traced")
            announce, record = writes[0], writes[-1]
            out.append(
                {
                    "announced_to_recorded_ms": (record["t1"] - announce["t1"]) * 1000,
                    "record_write_ms": (record["t1"] - record["t0"]) * 1000,
                    "invocation_ms": (inv["t1"] - inv["t0"]) * 1000,
                }
            )
        return out


class Hosted:
    """One agent with the six hosted tools on the stack; one session per tool."""

    def __init__(self, stack: tl.Stack, trace: Trace, turn_timeout_s: float) -> None:
        self.stack = stack
        self.trace = trace
        self.api = httpx.Client(base_url=stack.api_url, timeout=30, headers={"Origin": tl.ORIGIN})
        self.mock = httpx.Client(base_url=stack.mock_url, timeout=10)
        self.driver = tl.TurnDriver(stack.api_url, turn_timeout_s)
        self.sessions: dict[str, str] = {}
        self.count: dict[str, int] = dict.fromkeys(TOOLS, 0)

    def close(self) -> None:
        self.driver.close()
        self.api.close()
        self.mock.close()

    def prepare(self) -> None:
        self.stack.runner_id = tl.wait_runner_online(self.api)
        uid = uuid.uuid4().hex[:8]
        self.stack.model = name = f"bench-hosted-{uid}"
        spec: dict[str, Any] = {
            "name": name,
            "prompt": "You are a benchmark agent.",
            "executor": {
                "harness": "openai-agents",
                "model": self.stack.model,
                "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{self.stack.mock_url}/v1"},
            },
            "tools": {name: {"type": "hosted"} for name in TOOLS},
            "environment": {
                "type": "hosted",
                "network": "none",
                "files": [{"path": p, "content": c} for p, c in FILES.items()],
            },
            "limits": {"max_iterations": 1000},
        }
        resp = self.api.post(
            "/v1/sessions",
            data={"metadata": "{}"},
            files={"bundle": ("agent.tar.gz", tl.agent_bundle(name, spec), "application/gzip")},
        )
        self.stack.agent_id = str(tl.check(resp, 200, 201)["agent_id"])
        for tool in TOOLS:
            self.sessions[tool] = tl.create_session(self.api, self.stack)

    def turn(self, tool: str, calls: int) -> list[dict[str, float]]:
        """One turn of ``calls`` calls of ``tool``; per call what the trace and the stream saw."""
        ids = []
        script: list[dict[str, Any]] = []
        for _ in range(calls):
            call_id = f"call_{tool.lower()}_{self.count[tool]}"
            ids.append(call_id)
            args = arguments(tool, self.count[tool])
            self.count[tool] += 1
            script.append({"tool_calls": [{"call_id": call_id, "name": tool, "arguments": args}]})
        tl.configure_mock(self.mock, self.stack.model, [*script, {"text": "done"}])
        session_id = self.sessions[tool]
        since = time.time()
        trace = self.driver.run(session_id, tl.message_event(f"call {tool} {calls} times"))
        tl.wait_idle(self.api, session_id)
        until = time.time()
        announced: dict[str, float] = {}
        seen: dict[str, tuple[float, dict[str, Any]]] = {}
        for at, payload in trace.frames:
            item = payload.get("item") or {}
            if payload.get("type") != "response.output_item.done":
                continue
            if item.get("type") == "function_call" and item.get("status") == "in_progress":
                announced.setdefault(item["call_id"], at)
            elif item.get("type") == "function_call_output":
                seen.setdefault(item["call_id"], (at, item))
        traced = self.trace.run_tool_calls(since, until)
        if len(traced) != calls or set(seen) != set(ids):
            raise tl.BenchError(
                f"{tool}: {len(traced)} run_tool invocations, outputs {sorted(seen)}, calls {ids}"
            )
        details = self.details(session_id)
        out = []
        for call_id, server in zip(ids, traced, strict=True):
            at, item = seen[call_id]
            if not expected_output(tool, str(item.get("output"))):
                raise tl.BenchError(f"hosted {tool}: unexpected output {str(item.get('output'))[:200]!r}")
            sample = {**server, "client_seen_ms": (at - announced[call_id]) * 1000}
            if "duration_ms" in details.get(call_id, {}):
                sample["command_ms"] = float(details[call_id]["duration_ms"])
            out.append(sample)
        return out

    def details(self, session_id: str) -> dict[str, dict[str, Any]]:
        """The ``details`` of the session's outputs, by call id (a command's ``duration_ms``)."""
        resp = self.api.get(f"/v1/sessions/{session_id}/items", params={"limit": 1000})
        data = tl.check(resp, 200)["data"]
        return {
            (i.get("data") or i).get("call_id"): (i.get("data") or i).get("details") or {}
            for i in data
            if i["type"] == "function_call_output"
        }


# --------------------------------------------------------------------------------- the run
def measure(args: argparse.Namespace, report: dict[str, Any]) -> None:
    direct_root = Path(tempfile.mkdtemp(prefix="bench-hosted-direct-"))
    trace_path = tl.RESULTS_DIR / "hosted_tools.trace.jsonl"
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    trace_path.unlink(missing_ok=True)
    os.environ["SKYLOOP_LOCAL_TRACE"] = str(trace_path)  # the stack's processes inherit it
    direct_samples: dict[str, list[float]] = {t: [] for t in TOOLS}
    hosted_samples: dict[str, list[dict[str, float]]] = {t: [] for t in TOOLS}
    try:
        direct = Direct(direct_root)
        with tl.running_stack(tl.RESULTS_DIR, "hosted_tools", persist=False) as stack:
            os.environ.pop("SKYLOOP_LOCAL_TRACE", None)
            hosted = Hosted(stack, Trace(trace_path), args.turn_timeout)
            try:
                hosted.prepare()
                for r in range(args.rounds + 1):
                    for tool in TOOLS:  # interleaved: the machine's load hits both sides alike
                        d = [direct.once(tool) for _ in range(args.calls_per_round)]
                        h = hosted.turn(tool, args.calls_per_round)
                        if r == 0:  # warm-up: the workspace made, first invocations, caches
                            report.setdefault("first_call_ms", {})[tool] = round(
                                h[0]["announced_to_recorded_ms"], 2
                            )
                            continue
                        direct_samples[tool] += d
                        hosted_samples[tool] += h
                    if r:
                        print(f"  round {r}/{args.rounds} done", flush=True)
            finally:
                hosted.close()
        report["bwrap_ms"] = {k: summary(v) for k, v in bwrap_starts(args.bwrap_runs).items()}
    finally:
        os.environ.pop("SKYLOOP_LOCAL_TRACE", None)
        shutil.rmtree(direct_root, ignore_errors=True)
    tools: dict[str, Any] = {}
    for tool in TOOLS:
        direct_ms = direct_samples[tool]
        server = [s["announced_to_recorded_ms"] for s in hosted_samples[tool]]
        base = statistics.median(direct_ms)
        entry: dict[str, Any] = {
            "direct_ms": summary(direct_ms),
            "announced_to_recorded_ms": summary(server),
            "added_ms": summary([s - base for s in server]),
            "record_write_ms": summary([s["record_write_ms"] for s in hosted_samples[tool]]),
            "run_tool_invocation_ms": summary([s["invocation_ms"] for s in hosted_samples[tool]]),
            "client_seen_ms": summary([s["client_seen_ms"] for s in hosted_samples[tool]]),
        }
        commands = [s for s in hosted_samples[tool] if "command_ms" in s]
        if commands:
            entry["command_ms"] = summary([s["command_ms"] for s in commands])
            entry["outside_command_ms"] = summary(
                [s["announced_to_recorded_ms"] - s["command_ms"] for s in commands]
            )
        tools[tool] = entry
    report["tools"] = tools
    plain = report["bwrap_ms"]["sh -c true"]["p50"]
    bash = tools["Bash"]
    bash["added_over_sh_true_ms"] = summary(
        [s["announced_to_recorded_ms"] - plain for s in hosted_samples["Bash"]]
    )
    report["samples"] = {"direct_ms": direct_samples, "hosted": hosted_samples}


def bars(report: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for tool, bar in BARS_MS.items():
        entry = report["tools"][tool]
        added = entry["added_over_sh_true_ms"] if tool == "Bash" else entry["added_ms"]
        out[tool] = {"bar_ms": bar, "added_p50_ms": added["p50"], "added_p90_ms": added["p90"],
                     "met_at_p50": added["p50"] <= bar, "met_at_p90": added["p90"] <= bar}  # fmt: skip
    return out


def print_table(report: dict[str, Any]) -> None:
    m = report["machine"]
    print(
        f"\nhosted tools: rounds={report['params']['rounds']} x {report['params']['calls_per_round']} calls per tool"
        f" | cpus={m['cpu_count']} load1m={m['loadavg_1m_at_start']}->{m['loadavg_1m_at_end']}"
        f" | code={report['code'].get('git_commit', '?')}{'+dirty' if report['code'].get('git_dirty') else ''}"
    )
    cols = ("direct", "hosted", "added", "record", "invocation", "client sees")
    header = f"{'tool':<6}{'n':>4}" + "".join(f"{c:>17}" for c in cols)
    print(
        "ms, p50 / p90. direct: run_tool in this process; hosted: announced -> output recorded, in the"
        " stack's run_tool invocation; added: hosted - direct p50; record: the output's write;"
        " invocation: the whole run_tool invocation; client sees: in_progress frame -> output frame"
    )
    print(header)
    print("-" * len(header))
    for tool, e in report["tools"].items():
        cells = [
            e["direct_ms"],
            e["announced_to_recorded_ms"],
            e["added_ms"],
            e["record_write_ms"],
            e["run_tool_invocation_ms"],
            e["client_seen_ms"],
        ]
        row = f"{tool:<6}{e['direct_ms']['n']:>4}" + "".join(
            f"{c['p50']:>8.1f} /{c['p90']:>7.1f}" for c in cells
        )
        print(row)
    bash = report["tools"]["Bash"]
    print(
        f"Bash: the command as the server timed it (bwrap included) {bash['command_ms']['p50']:.1f} / "
        f"{bash['command_ms']['p90']:.1f}; outside it {bash['outside_command_ms']['p50']:.1f} / "
        f"{bash['outside_command_ms']['p90']:.1f}; added over `sh -c true` {bash['added_over_sh_true_ms']['p50']:.1f} / "
        f"{bash['added_over_sh_true_ms']['p90']:.1f}"
    )
    first = ", ".join(f"{t} {v:.1f}" for t, v in report.get("first_call_ms", {}).items())
    print(f"a session's first call (its workspace made: {len(FILES)} files written), ms: {first}")
    print("\nprocess start, ms p50 / p90:")
    for name, s in report["bwrap_ms"].items():
        print(f"  {name:<42}{s['p50']:>8.2f} /{s['p90']:>8.2f}  (n={s['n']})")
    print("\nbars (added, warm):")
    for tool, b in report["bars"].items():
        verdict = (
            "met"
            if b["met_at_p50"] and b["met_at_p90"]
            else ("met at p50 only" if b["met_at_p50"] else "NOT met")
        )
        print(
            f"  {tool:<6} <= {b['bar_ms']:.0f} ms: p50 {b['added_p50_ms']:.1f}, p90 {b['added_p90_ms']:.1f}: {verdict}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=4, help="measured rounds, after one warm-up (default 4)"
    )
    parser.add_argument("--calls-per-round", type=int, default=6, help="calls per tool per round (default 6)")
    parser.add_argument("--bwrap-runs", type=int, default=40, help="process starts of each kind (default 40)")
    parser.add_argument("--turn-timeout", type=float, default=120.0, help="seconds before a turn fails")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON report (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls_per_round < 1 or args.bwrap_runs < 1:
        parser.error("--rounds, --calls-per-round and --bwrap-runs must be >= 1")
    if shutil.which("bwrap") is None:
        parser.error("bubblewrap (bwrap) is not installed: hosted tools cannot run here")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers are stopped by `finally`
    report: dict[str, Any] = {
        "benchmark": "hosted_tools",
        "started_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "params": {
            "rounds": args.rounds,
            "calls_per_round": args.calls_per_round,
            "bwrap_runs": args.bwrap_runs,
        },
        "code": tl.code_revision(),
        "machine": tl.machine_info(),
        "failure": None,
    }
    failure = None
    try:
        measure(args, report)
        report["bars"] = bars(report)
    except (tl.BenchError, httpx.HTTPError) as exc:
        failure = f"{type(exc).__name__}: {exc}"
        print(f"FAILED: {failure}", file=sys.stderr)
    report["failure"] = failure
    report["machine"]["loadavg_1m_at_end"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if failure is None:
        print_table(report)
    print(f"\nwrote {args.out}")
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
