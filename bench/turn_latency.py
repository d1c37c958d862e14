"""Turn latency of the local stack, measured over real HTTP and SSE.

Starts its own ``skyloop dev`` and ``skyloop mock-llm`` on free ports,
registers one agent backed by the mock, then for each run times session setup,
a streamed text turn and a one-call client-tool turn. Only httpx is used on the
client side; no skyloop client code. See bench/README.md for how to read it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import math
import os
import platform
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_OUT = RESULTS_DIR / "turn_latency.json"
ORIGIN = "omnigent://internal"
STARTUP_TIMEOUT_S = 60.0
IDLE_TIMEOUT_S = 30.0
PRELOAD_CHECKPOINT = 25

TEXT_REPLY = "Hello from the latency benchmark."  # streamed word by word by the mock
TOOL_REPLY = "Echo answered: ping"
ECHO_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "Echo",
        "description": "Return the given text unchanged.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
}
TERMINAL = {"response.completed": "completed", "response.failed": "failed", "response.cancelled": "cancelled"}

SETUP = "session_setup_ms"
TEXT_METRICS = ("text_message_post_ms", "text_first_delta_ms", "text_completed_ms")
TOOL_METRICS = ("tool_action_required_ms", "tool_resume_ms", "tool_total_ms")
SERVER_CPU = "server_cpu_ms_per_run"  # CPU time, not wall clock: no ratio to the setup median
METRICS = (SETUP, *TEXT_METRICS, *TOOL_METRICS, SERVER_CPU)


class BenchError(Exception):
    """A turn or a setup step did not do what the benchmark expects."""


# ----------------------------------------------------------------------------- processes
@dataclass
class Stack:
    """Where the two servers listen, plus what was registered on them."""

    api_url: str
    mock_url: str
    runner_id: str = ""
    agent_id: str = ""
    model: str = ""
    server_pids: list[int] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_process(args: list[str], log_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "skyloop", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
        )


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def wait_ready(url: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(
                f"{log_path.name}: exited with {proc.returncode}:\n{log_path.read_text()[-2000:]}"
            )
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise BenchError(f"{url} not ready after {STARTUP_TIMEOUT_S:.0f}s (see {log_path})")


@contextmanager
def running_stack(log_dir: Path, prefix: str, *, persist: bool = True) -> Iterator[Stack]:
    """``skyloop dev`` and ``skyloop mock-llm`` on free ports; both are stopped on the way out.

    Their output goes to ``<log_dir>/<prefix>.dev.log`` and ``<prefix>.mock-llm.log``. With
    ``persist`` (the default, as ``skyloop dev`` runs by default) the stack keeps its data in
    ``<log_dir>/<prefix>.data``, emptied first; without, it keeps nothing (``--ephemeral``).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    data = ["--data-dir", str(log_dir / f"{prefix}.data"), "--reset"] if persist else ["--ephemeral"]
    try:
        mock_port, api_port = free_port(), free_port()
        mock_log, dev_log = log_dir / f"{prefix}.mock-llm.log", log_dir / f"{prefix}.dev.log"
        procs.append(start_process(["mock-llm", "--port", str(mock_port)], mock_log, {}))
        procs.append(start_process(["dev", "--port", str(api_port), *data], dev_log, {"OPENAI_API_KEY": ""}))
        stack = Stack(
            api_url=f"http://127.0.0.1:{api_port}",
            mock_url=f"http://127.0.0.1:{mock_port}",
            server_pids=[proc.pid for proc in procs],
        )
        wait_ready(stack.mock_url + "/stats", procs[0], mock_log)
        wait_ready(stack.api_url + "/health", procs[1], dev_log)
        yield stack
    finally:
        for proc in reversed(procs):
            stop_process(proc)


def cpu_seconds(pids: list[int]) -> float | None:
    """User+system CPU time of the given processes and all their descendants (the local Lambda
    worker processes), from /proc (Linux); None where unavailable."""
    stats: dict[int, tuple[int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = path.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(path.parent.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    if not stats or any(pid not in stats for pid in pids):
        return None
    members, changed = set(pids), True
    while changed:
        changed = False
        for pid, (ppid, _) in stats.items():
            if ppid in members and pid not in members:
                members.add(pid)
                changed = True
    return sum(stats[p][1] for p in members if p in stats)


# --------------------------------------------------------------------------- API helpers
def check(resp: httpx.Response, *codes: int) -> dict[str, Any]:
    where = f"{resp.request.method} {resp.request.url.path}"
    if resp.status_code not in codes:
        raise BenchError(f"{where}: {resp.status_code} {resp.text[:300]}")
    try:
        return dict(resp.json())
    except ValueError as exc:
        raise BenchError(f"{where}: not a JSON object: {resp.text[:300]}") from exc


def agent_bundle(name: str, spec: dict[str, Any]) -> bytes:
    """A gzipped tar holding one ``<name>.yaml`` (JSON is valid YAML)."""
    data = json.dumps(spec).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"{name}.yaml")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def wait_runner_online(api: httpx.Client) -> str:
    runner_id = str(check(api.get("/v1/runners"), 200)["data"][0]["runner_id"])
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if check(api.get(f"/v1/runners/{runner_id}/status"), 200).get("online") is True:
            return runner_id
        time.sleep(0.2)
    raise BenchError(f"runner {runner_id} never came online")


def register_agent(api: httpx.Client, stack: Stack) -> None:
    """Upload a single-agent bundle whose executor talks to the mock under a unique model name."""
    uid = uuid.uuid4().hex[:8]
    stack.model = f"bench-model-{uid}"  # the mock routes requests to the queue keyed by this name
    name = f"bench-{uid}"
    spec = {
        "name": name,
        "prompt": "You are a benchmark agent.",
        "executor": {
            "harness": "openai-agents",
            "model": stack.model,
            "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{stack.mock_url}/v1"},
        },
    }
    resp = api.post(
        "/v1/sessions",
        data={"metadata": "{}"},
        files={"bundle": ("agent.tar.gz", agent_bundle(name, spec), "application/gzip")},
    )
    stack.agent_id = str(check(resp, 200, 201)["agent_id"])


def configure_mock(mock: httpx.Client, key: str, responses: list[dict[str, Any]]) -> None:
    check(mock.post("/mock/configure", json={"key": key, "responses": responses}), 200)


def create_session(api: httpx.Client, stack: Stack) -> str:
    session_id = str(check(api.post("/v1/sessions", json={"agent_id": stack.agent_id}), 200, 201)["id"])
    check(api.patch(f"/v1/sessions/{session_id}", json={"runner_id": stack.runner_id}), 200)
    return session_id


def wait_idle(api: httpx.Client, session_id: str) -> None:
    """Let the turn's Step Functions execution finish before the next measurement starts."""
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while time.monotonic() < deadline:
        if check(api.get(f"/v1/sessions/{session_id}"), 200).get("status") != "running":
            return
        time.sleep(0.02)
    raise BenchError(f"session {session_id} still running after {IDLE_TIMEOUT_S:.0f}s")


def message_event(text: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "message",
        "data": {"role": "user", "content": [{"type": "input_text", "text": text}]},
    }
    if tools is not None:
        body["tools"] = tools
    return body


# ---------------------------------------------------------------------------- SSE turns
def elapsed_ms(start: float, end: float) -> float:
    return (end - start) * 1000.0


def iter_frames(resp: httpx.Response) -> Iterator[dict[str, Any]]:
    """JSON payloads of a text/event-stream, one per frame; stops at ``[DONE]``."""
    data: list[str] = []
    for line in resp.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            payload, data = "\n".join(data), []
            if payload == "[DONE]":
                return
            yield json.loads(payload)


def action_required_call(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The function call item a frame parks the turn on, if it is one."""
    if payload.get("type") != "response.output_item.done":
        return None
    item = payload.get("item") or {}
    if item.get("type") == "function_call" and item.get("status") == "action_required":
        return dict(item)
    return None


@dataclass
class TurnTrace:
    """Arrival time of every frame and start/end of every POST, all ``time.perf_counter()``."""

    status: str = "incomplete"
    frames: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    posts: dict[str, tuple[float, float]] = field(default_factory=dict)
    text: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)

    def first(self, predicate: Callable[[dict[str, Any]], bool]) -> float:
        for at, payload in self.frames:
            if predicate(payload):
                return at
        raise BenchError(
            "expected frame never arrived: " + ", ".join(p.get("type", "?") for _, p in self.frames)
        )

    def describe(self, opened: float, closed: float) -> str:
        """What a failed turn saw, in seconds since the stream was opened."""
        kinds = [p.get("type", "?") for _, p in self.frames if p.get("type") != "session.heartbeat"]
        posts = ", ".join(
            f"{label} POST sent +{start - opened:.2f}s answered +{end - opened:.2f}s"
            for label, (start, end) in self.posts.items()
        )
        return (
            f"turn {self.status} after {closed - opened:.1f}s; {len(self.frames)} frames, "
            f"non-heartbeat: {kinds[-8:]}; {posts or 'no POST answered'}"
        )


class Poster:
    """Sends a turn's POSTs on their own threads, so the stream is read without pause."""

    def __init__(self, client: httpx.Client, session_id: str, trace: TurnTrace) -> None:
        self.client = client
        self.path = f"/v1/sessions/{session_id}/events"
        self.trace = trace
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []

    def send(self, label: str, body: dict[str, Any]) -> None:
        thread = threading.Thread(target=self._post, args=(label, body), daemon=True)
        thread.start()
        self.threads.append(thread)

    def _post(self, label: str, body: dict[str, Any]) -> None:
        start = time.perf_counter()
        try:
            resp = self.client.post(self.path, json=body)
            if resp.status_code not in (200, 202):
                self.errors.append(f"{label} POST: {resp.status_code} {resp.text[:300]}")
        except httpx.HTTPError as exc:
            self.errors.append(f"{label} POST: {exc!r}")
        self.trace.posts[label] = (start, time.perf_counter())

    def join(self, timeout_s: float) -> None:
        for thread in self.threads:
            thread.join(timeout=timeout_s)
            if thread.is_alive():
                self.errors.append("a POST did not return in time")


def ssl_context() -> ssl.SSLContext:
    """One TLS context for every client of the run (the stack is plain HTTP; httpx builds a context
    per client otherwise, ~18 ms of CPU in the benchmark's own process each time)."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = ssl.create_default_context()
    return _SSL_CONTEXT


_SSL_CONTEXT: ssl.SSLContext | None = None


class TurnDriver:
    """Drives one turn: subscribe, post after the first frame, answer parked calls, stop when terminal."""

    def __init__(self, api_url: str, timeout_s: float) -> None:
        headers = {"Origin": ORIGIN}
        self.timeout_s = timeout_s
        ctx = ssl_context()
        self.stream_client = httpx.Client(base_url=api_url, timeout=timeout_s, headers=headers, verify=ctx)
        self.post_client = httpx.Client(base_url=api_url, timeout=timeout_s, headers=headers, verify=ctx)

    def close(self) -> None:
        self.stream_client.close()
        self.post_client.close()

    def run(
        self,
        session_id: str,
        message: dict[str, Any],
        answer: Callable[[str, dict[str, Any]], str] | None = None,
    ) -> TurnTrace:
        """The turn's trace; raises :class:`BenchError` unless it reached ``response.completed``."""
        trace = TurnTrace()
        poster = Poster(self.post_client, session_id, trace)
        opened = time.perf_counter()
        try:
            self._follow(session_id, trace, poster, message, answer, deadline=opened + self.timeout_s)
        except httpx.HTTPError as exc:
            poster.errors.append(f"stream: {exc!r}")
        closed = time.perf_counter()
        poster.join(self.timeout_s)
        if poster.errors or trace.status != "completed":
            detail = trace.describe(opened, closed)
            raise BenchError(f"session {session_id}: " + "; ".join([*poster.errors, detail]))
        return trace

    def _follow(
        self,
        session_id: str,
        trace: TurnTrace,
        poster: Poster,
        message: dict[str, Any],
        answer: Callable[[str, dict[str, Any]], str] | None,
        *,
        deadline: float,
    ) -> None:
        with self.stream_client.stream("GET", f"/v1/sessions/{session_id}/stream") as resp:
            if resp.status_code != 200:
                raise BenchError(f"stream: {resp.status_code} {resp.read()[:300]!r}")
            for payload in iter_frames(resp):
                now = time.perf_counter()
                trace.frames.append((now, payload))
                if not poster.threads:
                    poster.send("message", message)
                kind = payload.get("type", "")
                call = action_required_call(payload)
                if call is not None:
                    trace.calls.append(call)
                    if answer is None:
                        raise BenchError(f"unexpected client call {call.get('name')!r}")
                    output = answer(call["name"], json.loads(call.get("arguments") or "{}"))
                    data = {"call_id": call["call_id"], "output": output}
                    poster.send(f"output:{call['call_id']}", {"type": "function_call_output", "data": data})
                elif kind == "response.output_text.delta":
                    trace.text += payload.get("delta") or ""
                elif kind in TERMINAL:
                    trace.status = TERMINAL[kind]
                    return
                if now > deadline:
                    return


def echo(name: str, arguments: dict[str, Any]) -> str:
    """The one client-side tool the benchmark offers."""
    if name != "Echo":
        raise BenchError(f"model called unknown tool {name!r}")
    return str(arguments.get("text", ""))


# ------------------------------------------------------------------------------ one run
class Bench:
    """The measured scenario, bound to a running stack."""

    def __init__(self, stack: Stack, turn_timeout_s: float) -> None:
        self.stack = stack
        self.api = httpx.Client(
            base_url=stack.api_url, timeout=30, headers={"Origin": ORIGIN}, verify=ssl_context()
        )
        self.mock = httpx.Client(base_url=stack.mock_url, timeout=10, verify=ssl_context())
        self.driver = TurnDriver(stack.api_url, turn_timeout_s)

    def close(self) -> None:
        self.driver.close()
        self.api.close()
        self.mock.close()

    def prepare(self) -> None:
        self.stack.runner_id = wait_runner_online(self.api)
        register_agent(self.api, self.stack)

    def timed_session(self) -> tuple[str, float]:
        start = time.perf_counter()
        session_id = create_session(self.api, self.stack)
        return session_id, elapsed_ms(start, time.perf_counter())

    def text_turn(self, n: int) -> tuple[dict[str, float], float]:
        session_id, setup_ms = self.timed_session()
        configure_mock(self.mock, self.stack.model, [{"text": TEXT_REPLY, "stream": True}])
        trace = self.driver.run(session_id, message_event(f"Say hello (run {n})."))
        wait_idle(self.api, session_id)
        if trace.text != TEXT_REPLY:
            raise BenchError(f"text turn streamed {trace.text!r}, expected {TEXT_REPLY!r}")
        posted, post_done = trace.posts["message"]
        done = trace.frames[-1][0]
        delta = trace.first(lambda p: p.get("type") == "response.output_text.delta")
        metrics = {
            "text_message_post_ms": elapsed_ms(posted, post_done),
            "text_first_delta_ms": elapsed_ms(posted, delta),
            "text_completed_ms": elapsed_ms(posted, done),
        }
        return metrics, setup_ms

    def tool_turn(self, n: int) -> tuple[dict[str, float], float]:
        session_id, setup_ms = self.timed_session()
        call_id = f"call_echo_{n}"
        call = {"call_id": call_id, "name": "Echo", "arguments": json.dumps({"text": "ping"})}
        configure_mock(self.mock, self.stack.model, [{"tool_calls": [call]}, {"text": TOOL_REPLY}])
        trace = self.driver.run(session_id, message_event(f"Echo ping (run {n}).", [ECHO_TOOL]), echo)
        wait_idle(self.api, session_id)
        if [c.get("call_id") for c in trace.calls] != [call_id] or trace.text != TOOL_REPLY:
            raise BenchError(f"tool turn: calls {trace.calls!r}, text {trace.text!r}")
        posted = trace.posts["message"][0]
        output_posted = trace.posts[f"output:{call_id}"][0]
        done = trace.frames[-1][0]
        parked = trace.first(lambda p: action_required_call(p) is not None)
        metrics = {
            "tool_action_required_ms": elapsed_ms(posted, parked),
            "tool_resume_ms": elapsed_ms(output_posted, done),
            "tool_total_ms": elapsed_ms(posted, done),
        }
        return metrics, setup_ms

    def preload(self, count: int, into: dict[str, Any]) -> None:
        """``count`` extra sessions with one short text turn each, so the table is fuller.

        Every ``PRELOAD_CHECKPOINT`` sessions the last few preload turns are summarized, which
        shows how one turn's wall time and server CPU grow with the table.
        """
        started = time.perf_counter()
        turn_ms: list[float] = []
        cpu_ms: list[float] = []
        checkpoints: list[dict[str, Any]] = into.setdefault("checkpoints", [])
        for i in range(1, count + 1):
            try:
                session_id = create_session(self.api, self.stack)
                configure_mock(self.mock, self.stack.model, [{"text": "ok"}])
                cpu_before = cpu_seconds(self.stack.server_pids)
                trace = self.driver.run(session_id, message_event(f"preload {i}"))
                wait_idle(self.api, session_id)
            except BenchError as exc:
                raise BenchError(f"preload session {i}/{count}: {exc}") from exc
            cpu_after = cpu_seconds(self.stack.server_pids)
            turn_ms.append(elapsed_ms(trace.posts["message"][0], trace.frames[-1][0]))
            if cpu_before is not None and cpu_after is not None:
                cpu_ms.append(elapsed_ms(cpu_before, cpu_after))
            if i % PRELOAD_CHECKPOINT == 0 or i == count:
                point = {
                    "sessions": i,
                    "turn_ms_median_of_last_5": round(statistics.median(turn_ms[-5:]), 1),
                    "server_cpu_ms_median_of_last_5": round(statistics.median(cpu_ms[-5:]), 1)
                    if cpu_ms
                    else None,
                }
                checkpoints.append(point)
                into["seconds"] = round(time.perf_counter() - started, 1)
                print(f"  preloaded {i}/{count} sessions: {point}", flush=True)


# ----------------------------------------------------------------------------- reporting
def summarize(samples: list[float]) -> dict[str, float | int]:
    """Median, nearest-rank p90, min and max, in ms."""
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median": round(statistics.median(ordered), 1),
        "p90": round(ordered[math.ceil(0.9 * len(ordered)) - 1], 1),
        "min": round(ordered[0], 1),
        "max": round(ordered[-1], 1),
    }


def machine_info() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
        "skyloop_version": metadata.version("skyloop"),
    }


def code_revision() -> dict[str, Any]:
    """The checkout measured: commit, and whether tracked files differ from it (read-only git)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=BENCH_DIR, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        return {
            "git_commit": git("rev-parse", "--short", "HEAD"),
            "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        }
    except (OSError, subprocess.CalledProcessError):
        return {}


def run_context(params: dict[str, Any]) -> dict[str, Any]:
    """What is measured, where and when; taken before the servers start."""
    return {
        "benchmark": "turn_latency",
        "started_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]]),  # the script that ran
        "params": params,
        "code": code_revision(),
        "machine": machine_info(),
    }


def build_report(
    context: dict[str, Any], samples: dict[str, list[float]], preload: dict[str, Any], failure: str | None
) -> dict[str, Any]:
    stats = {name: summarize(values) for name, values in samples.items() if values}
    baseline = stats[SETUP]["median"] if SETUP in stats else 0
    ratios = {
        name: round(s["median"] / baseline, 2)
        for name, s in stats.items()
        if name not in (SETUP, SERVER_CPU) and baseline
    }
    return {
        **context,
        "machine": {**context["machine"], "loadavg_1m_at_end": round(os.getloadavg()[0], 2)},
        "failure": failure,
        "preload": preload,
        "stats_ms": stats,
        "ratio_to_session_setup_median": ratios,
        "samples_ms": {name: [round(v, 1) for v in values] for name, values in samples.items()},
    }


def print_table(report: dict[str, Any]) -> None:
    m, p = report["machine"], report["params"]
    print(
        f"\nturn latency: runs={p['runs']} warmup={p['warmup']} preload_sessions={p['preload_sessions']}"
        f" | cpus={m['cpu_count']} python={m['python']} load1m={m['loadavg_1m_at_start']}->{m['loadavg_1m_at_end']}"
        f" | code={report['code'].get('git_commit', '?')}{'+dirty' if report['code'].get('git_dirty') else ''}"
    )
    header = f"{'metric':<26}{'n':>4}{'median':>9}{'p90':>9}{'min':>9}{'max':>9}{'x setup':>9}"
    print(header)
    print("-" * len(header))
    for name, s in report["stats_ms"].items():
        ratio = report["ratio_to_session_setup_median"].get(name)
        cell = f"{ratio:.2f}" if ratio is not None else ("1.00" if name == SETUP else "-")
        print(
            f"{name:<26}{s['n']:>4}{s['median']:>9.1f}{s['p90']:>9.1f}{s['min']:>9.1f}{s['max']:>9.1f}{cell:>9}"
        )


# ---------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="measured runs (default 20)")
    parser.add_argument("--warmup", type=int, default=2, help="runs done first and discarded (default 2)")
    parser.add_argument(
        "--preload-sessions", type=int, default=0, help="extra sessions, one text turn each, created first"
    )
    parser.add_argument("--turn-timeout", type=float, default=60.0, help="seconds before a turn fails")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON report (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.preload_sessions < 0:
        parser.error("--runs must be >= 1, --warmup and --preload-sessions >= 0")
    return args


def measure(args: argparse.Namespace, samples: dict[str, list[float]], preload: dict[str, Any]) -> None:
    """Everything that needs the servers; fills ``samples`` and ``preload`` as it goes."""
    with running_stack(RESULTS_DIR, args.out.stem) as stack:
        bench = Bench(stack, args.turn_timeout)
        try:
            bench.prepare()
            if args.preload_sessions:
                print(f"preloading {args.preload_sessions} sessions ...", flush=True)
                bench.preload(args.preload_sessions, preload)
            for n in range(args.warmup + args.runs):
                label = f"warmup run {n + 1}" if n < args.warmup else f"run {n - args.warmup + 1}"
                cpu_before = cpu_seconds(stack.server_pids)
                try:
                    text, text_setup = bench.text_turn(n)
                except BenchError as exc:
                    raise BenchError(f"{label}, text turn: {exc}") from exc
                try:
                    tool, tool_setup = bench.tool_turn(n)
                except BenchError as exc:
                    raise BenchError(f"{label}, tool turn: {exc}") from exc
                cpu_after = cpu_seconds(stack.server_pids)
                if n < args.warmup:
                    continue
                samples[SETUP] += [text_setup, tool_setup]
                if cpu_before is not None and cpu_after is not None:
                    samples[SERVER_CPU].append(elapsed_ms(cpu_before, cpu_after))
                for name, value in {**text, **tool}.items():
                    samples[name].append(value)
                print(
                    f"  run {n - args.warmup + 1}/{args.runs}: text {text['text_completed_ms']:.0f} ms,"
                    f" tool {tool['tool_total_ms']:.0f} ms",
                    flush=True,
                )
        finally:
            bench.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers are stopped by `finally`
    params = {"runs": args.runs, "warmup": args.warmup, "preload_sessions": args.preload_sessions}
    context = run_context(params)
    samples: dict[str, list[float]] = {name: [] for name in METRICS}
    preload: dict[str, Any] = {"sessions": args.preload_sessions}
    failure: str | None = None
    try:
        measure(args, samples, preload)
    except (BenchError, httpx.HTTPError) as exc:
        failure = f"{type(exc).__name__}: {exc}"
        print(f"FAILED: {failure}", file=sys.stderr)
    report = build_report(context, samples, preload, failure)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if report["stats_ms"]:
        print_table(report)
    print(f"\nwrote {args.out}")
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
