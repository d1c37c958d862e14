"""The warm two-tool client turn, omnigent 0.19.1's server against ``skyloop dev``, in one run (issue 35).

The workload: a client-tool turn on an existing session. The user message
offers omnigent's ``coding`` client tools (``omnigent.client_tools.coding.TOOLS``,
nested Chat-Completions form), the scripted model calls Glob, then (after its
output) Read, then (after that output) answers with text: three model calls,
two client round trips. The client subscribes to ``GET /v1/sessions/{id}/stream``,
posts the message when the first frame arrives, posts each ``function_call_output``
the moment its ``action_required`` frame arrives (outputs computed once, before
the runs, by omnigent's own ``execute_tool`` on a two-file sample directory)
and reads until ``response.completed``: the way omnigent's own client-tool test
drives it (``_run_with_tunneling`` in omnigent's
``tests/e2e/test_openai_coder_client_tools.py``, same tool set, same Glob/Read/text
script). Timed: message POST sent -> ``response.completed`` frame.

Both servers run at once, one ``skyloop mock-llm`` answers both (queues keyed by
each agent's model name). omnigent is started as its e2e suite and benchmark
harness start it (``live_server`` in ``tests/e2e/conftest.py``,
``BenchEnvironment`` in ``dev/benchmarks/omnigent/environment.py``): a dedicated
``omnigent server --port P --database-uri sqlite:///<tmp>/omnigent.db
--artifact-location <tmp>/artifacts --config <tmp>/server.yaml`` (the config
points the server's policy classifier at the mock) with
``OMNIGENT_RUNNER_TUNNEL_TOKEN``, and a sibling runner
``python -m omnigent.runner._entry`` bound to it by that token, everything under
a fresh temporary HOME and data directory. Agents are registered on both the
same way (``register_inline_agent``: a multipart bundle holding one
``<name>.yaml``, harness ``openai-agents``, ``auth.base_url`` at the mock), one
session each is created and bound to the runner, ``--warmup`` turns are done
and discarded, then each round runs one turn on each server, the order
alternating, so the machine's load hits both alike. ``skyloop dev`` keeps its
data (a fresh ``bench/results/<name>.data``) unless ``--ephemeral``.

    .venv/bin/python bench/vs_omnigent.py --runs 20          # -> bench/results/vs_omnigent.json
    .venv/bin/python bench/vs_omnigent.py --skyloop-only --runs 200   # a profiling driver

Only httpx on the client side. See bench/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import turn_latency as tl

OMNIGENT_VERSION = "0.19.1"
REPO = tl.BENCH_DIR.parent
DEFAULT_VENV = REPO / ".pytest_cache" / f"omnigent-venv-{OMNIGENT_VERSION}"
DEFAULT_OUT = tl.RESULTS_DIR / "vs_omnigent.json"
OMNIGENT_STARTUP_S = 180.0
POLICY_KEY = "_policy_llm_"  # omnigent's server-side policy classifier model (its e2e suite's key)
POLICY_ALLOW = '{"action": "allow", "reason": ""}'
FINAL_TEXT = "I found the Python files and read calculator.py. It contains divide and average functions."
PROMPT = (
    "List all Python files in {root} with the Glob tool (pattern '**/*.py'), then read "
    "calculator.py with the Read tool. Use the Glob and Read tools only. (run {n})"
)
GOAL_RATIO = 0.5
METRICS = ("turn_ms", "glob_parked_ms", "read_parked_ms", "final_ms", "server_cpu_ms")
SAMPLE_FILES = {
    "calculator.py": (
        '"""A small calculator."""\n\n\ndef divide(a: float, b: float) -> float:\n'
        '    if b == 0:\n        raise ZeroDivisionError("b is zero")\n    return a / b\n\n\n'
        "def average(values: list[float]) -> float:\n    return divide(sum(values), len(values))\n"
    ),
    "utils.py": '"""Helpers."""\n\n\ndef clamp(x: int, lo: int, hi: int) -> int:\n    return max(lo, min(hi, x))\n',
}
# Run in omnigent's venv: its coding tool schemas, and what its own execute_tool answers to the script's calls.
FIXTURE_SCRIPT = """
import json, sys
from omnigent.client_tools.coding import TOOLS, execute_tool
from omnigent.version import VERSION
glob_args, read_args = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({"version": VERSION, "tools": TOOLS, "glob_output": execute_tool("Glob", glob_args),
                  "read_output": execute_tool("Read", read_args)}))
"""


# ------------------------------------------------------------------------------- workload
@dataclass
class Workload:
    """The tools offered and the two calls' arguments and answers, the same for both servers."""

    root: Path
    tools: list[dict[str, Any]]
    glob_args: dict[str, Any]
    read_args: dict[str, Any]
    outputs: dict[str, str]
    omnigent_version: str

    def script(self, tag: str) -> tuple[list[dict[str, Any]], list[str]]:
        """The mock's three answers for one turn and the call ids it will make."""
        ids = [f"call_glob_{tag}", f"call_read_{tag}"]
        return [
            {"tool_calls": [{"call_id": ids[0], "name": "Glob", "arguments": json.dumps(self.glob_args)}]},
            {"tool_calls": [{"call_id": ids[1], "name": "Read", "arguments": json.dumps(self.read_args)}]},
            {"text": FINAL_TEXT},
        ], ids

    def answer(self, name: str, _arguments: dict[str, Any]) -> str:
        if name not in self.outputs:
            raise tl.BenchError(f"model called unexpected tool {name!r}")
        return self.outputs[name]


def omnigent_python(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        raise tl.BenchError(
            f"no omnigent venv at {venv}: the compat suite builds it (`make test`, or "
            f"`.venv/bin/python -c 'from pathlib import Path; from tests.compat.omnigent_env import "
            f'ensure_venv; ensure_venv(Path(".pytest_cache"))\'`), or pass --omnigent-venv'
        )
    return python


def build_workload(venv: Path, root: Path) -> Workload:
    """Write the sample directory and ask omnigent's venv for the tools and the tools' answers."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in SAMPLE_FILES.items():
        (root / name).write_text(text)
    glob_args = {"pattern": "**/*.py", "path": str(root)}
    read_args = {"file_path": str(root / "calculator.py")}
    out = subprocess.run(
        [str(omnigent_python(venv)), "-c", FIXTURE_SCRIPT, json.dumps(glob_args), json.dumps(read_args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            **omnigent_env(root.parent / "fixture-home"),
            "OMNIGENT_DATA_DIR": str(root.parent / "fixture-data"),
        },
    )
    if out.returncode != 0:
        raise tl.BenchError(f"omnigent venv: {out.stderr[-2000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    names = {t["function"]["name"] for t in data["tools"]}
    if not {"Glob", "Read"} <= names or "calculator.py" not in data["glob_output"]:
        raise tl.BenchError(f"unexpected coding tools {sorted(names)} or Glob output {data['glob_output']!r}")
    return Workload(
        root=root,
        tools=data["tools"],
        glob_args=glob_args,
        read_args=read_args,
        outputs={"Glob": data["glob_output"], "Read": data["read_output"]},
        omnigent_version=data["version"],
    )


# ------------------------------------------------------------------------------- omnigent
def omnigent_env(home: Path) -> dict[str, str]:
    """A clean environment for omnigent's processes: its own HOME, no telemetry, no update check."""
    home.mkdir(parents=True, exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "TERM")}
    return {
        **keep,
        "HOME": str(home),
        "OMNIGENT_CONFIG_HOME": str(home / ".omnigent"),
        "NO_PROXY": "127.0.0.1,localhost",
        "DO_NOT_TRACK": "1",
        "OMNIGENT_DISABLE_UPDATE_CHECK": "1",
        "PYTHONUNBUFFERED": "1",
    }


def token_bound_runner_id(token: str) -> str:
    """omnigent's ``omnigent.runner.identity.token_bound_runner_id`` (0.19.1): the id a token may claim."""
    return "runner_token_" + hashlib.sha256(f"omnigent-runner:{token}".encode()).hexdigest()[:32]


def start_group(args: list[str], log_path: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """A child in its own process group, so stopping it also stops whatever it spawned."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the child's process group (its id is the child's pid), SIGKILL after 10 s."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    with suppress(ProcessLookupError):  # the group may outlive its leader for a moment
        os.killpg(proc.pid, signal.SIGKILL)


@contextmanager
def running_omnigent(venv: Path, mock_url: str, tmp: Path, log_prefix: Path) -> Iterator[tl.Stack]:
    """omnigent's server and one runner bound to it, on a free port, data under ``tmp``; stopped on exit."""
    python = omnigent_python(venv)
    for sub in ("data", "artifacts", "workspace"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    config = tmp / "server.yaml"  # JSON is YAML
    config.write_text(
        json.dumps(
            {
                "llm": {
                    "model": POLICY_KEY,
                    "connection": {"base_url": f"{mock_url}/v1", "api_key": "mock-key"},
                }
            }
        )
    )
    token = secrets.token_urlsafe(32)
    port = tl.free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **omnigent_env(tmp / "home"),
        "OMNIGENT_DATA_DIR": str(tmp / "data"),
        "OPENAI_API_KEY": "mock-key",
        "OPENAI_BASE_URL": f"{mock_url}/v1",
    }
    server_args = [
        str(venv / "bin" / "omnigent"), "server", "--port", str(port),
        "--database-uri", f"sqlite:///{tmp / 'data' / 'omnigent.db'}",
        "--artifact-location", str(tmp / "artifacts"), "--config", str(config), "--no-open",
    ]  # fmt: skip
    runner_env = {
        **env,
        "OMNIGENT_RUNNER_ID": token_bound_runner_id(token),
        "OMNIGENT_RUNNER_TUNNEL_BINDING_TOKEN": token,
        "OMNIGENT_RUNNER_PARENT_PID": str(os.getpid()),
        "RUNNER_SERVER_URL": url,
        "OMNIGENT_RUNNER_WORKSPACE": str(tmp / "workspace"),
    }
    logs = [Path(f"{log_prefix}.omnigent-server.log"), Path(f"{log_prefix}.omnigent-runner.log")]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_group(server_args, logs[0], {**env, "OMNIGENT_RUNNER_TUNNEL_TOKEN": token}, tmp))
        procs.append(
            start_group([str(python), "-m", "omnigent.runner._entry"], logs[1], runner_env, tmp / "workspace")
        )
        stack = tl.Stack(api_url=url, mock_url=mock_url, runner_id=runner_env["OMNIGENT_RUNNER_ID"])
        stack.server_pids = [proc.pid for proc in procs]
        wait_omnigent(stack, procs, logs)
        yield stack
    finally:
        for proc in reversed(procs):  # the runner first, as omnigent's harness does
            stop_group(proc)


def wait_omnigent(stack: tl.Stack, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    """Until ``/health`` answers and the runner reports online."""
    deadline = time.monotonic() + OMNIGENT_STARTUP_S
    while time.monotonic() < deadline:
        for proc, log in zip(procs, logs, strict=True):
            if proc.poll() is not None:
                raise tl.BenchError(f"{log.name}: exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            health = httpx.get(f"{stack.api_url}/health", timeout=2)
            status = httpx.get(f"{stack.api_url}/v1/runners/{stack.runner_id}/status", timeout=2)
            if (
                health.status_code == 200
                and status.status_code == 200
                and status.json().get("online") is True
            ):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise tl.BenchError(f"omnigent not ready after {OMNIGENT_STARTUP_S:.0f}s (see {logs[0]}, {logs[1]})")


# --------------------------------------------------------------------------------- targets
@dataclass
class Target:
    """One server under test, with its registered agent and its one session."""

    name: str
    stack: tl.Stack
    cpu_pids: list[int]
    turn_timeout_s: float
    session_id: str = ""
    api: httpx.Client = field(init=False)
    driver: tl.TurnDriver = field(init=False)

    def __post_init__(self) -> None:
        self.api = httpx.Client(
            base_url=self.stack.api_url, timeout=30, headers={"Origin": tl.ORIGIN}, verify=tl.ssl_context()
        )
        self.driver = tl.TurnDriver(self.stack.api_url, self.turn_timeout_s)

    def close(self) -> None:
        self.driver.close()
        self.api.close()

    def prepare(self) -> None:
        """Register the agent (same spec on both servers) and create the session the turns run in."""
        uid = uuid.uuid4().hex[:8]
        self.stack.model = f"vs-{self.name}-{uid}"  # the mock's queue for this server
        agent = f"vs-{self.name}-{uid}"
        spec = {
            "name": agent,
            "prompt": "You are a coding assistant. Use client tools to list and read files.",
            "executor": {
                "harness": "openai-agents",
                "model": self.stack.model,
                "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{self.stack.mock_url}/v1"},
            },
        }
        resp = self.api.post(
            "/v1/sessions",
            data={"metadata": "{}"},
            files={"bundle": ("agent.tar.gz", tl.agent_bundle(agent, spec), "application/gzip")},
        )
        created = tl.check(resp, 200, 201)
        if "agent_id" not in created:  # read it from the session the upload created
            sid = created.get("session_id") or created["id"]
            created = tl.check(self.api.get(f"/v1/sessions/{sid}"), 200)
        self.stack.agent_id = str(created["agent_id"])
        self.session_id = tl.create_session(self.api, self.stack)

    def wait_idle(self) -> None:
        deadline = time.monotonic() + tl.IDLE_TIMEOUT_S
        while time.monotonic() < deadline:
            status = tl.check(self.api.get(f"/v1/sessions/{self.session_id}"), 200).get("status")
            if status == "idle":
                return
            if status == "failed":
                raise tl.BenchError(f"{self.name}: session {self.session_id} failed")
            time.sleep(0.02)
        raise tl.BenchError(f"{self.name}: session {self.session_id} not idle after {tl.IDLE_TIMEOUT_S:.0f}s")

    def turn(self, mock: httpx.Client, work: Workload, tag: str) -> dict[str, float]:
        """One measured turn; the session is idle again when it returns."""
        responses, (glob_id, read_id) = work.script(f"{self.name}_{tag}")
        tl.configure_mock(mock, self.stack.model, responses)
        message = tl.message_event(PROMPT.format(root=work.root, n=tag), work.tools)
        cpu_before = tl.cpu_seconds(self.cpu_pids)
        try:
            trace = self.driver.run(self.session_id, message, work.answer)
            self.wait_idle()
        except tl.BenchError as exc:
            raise tl.BenchError(f"{self.name}, turn {tag}: {exc}") from exc
        cpu_after = tl.cpu_seconds(self.cpu_pids)
        text = trace.text or final_message_text(trace)
        if [c.get("call_id") for c in trace.calls] != [glob_id, read_id] or text != FINAL_TEXT:
            calls = [(c.get("name"), c.get("call_id")) for c in trace.calls]
            raise tl.BenchError(f"{self.name}, turn {tag}: calls {calls}, text {text!r}")
        posted = trace.posts["message"][0]
        done = trace.frames[-1][0]
        parked = [at for at, p in trace.frames if tl.action_required_call(p) is not None]
        metrics = {
            "turn_ms": tl.elapsed_ms(posted, done),
            "glob_parked_ms": tl.elapsed_ms(posted, parked[0]),
            "read_parked_ms": tl.elapsed_ms(trace.posts[f"output:{glob_id}"][0], parked[1]),
            "final_ms": tl.elapsed_ms(trace.posts[f"output:{read_id}"][0], done),
        }
        if cpu_before is not None and cpu_after is not None:
            metrics["server_cpu_ms"] = tl.elapsed_ms(cpu_before, cpu_after)
        return metrics


def final_message_text(trace: tl.TurnTrace) -> str:
    """The assistant message's text from its ``output_item.done``, for a server that sent no deltas."""
    for _, payload in trace.frames:
        item = payload.get("item") or {}
        if payload.get("type") == "response.output_item.done" and item.get("type") == "message":
            return "".join(part.get("text", "") for part in item.get("content") or [])
    return ""


# ------------------------------------------------------------------------------- measuring
def measure(
    args: argparse.Namespace, work: Workload, tmp: Path, samples: dict[str, dict[str, list[float]]]
) -> None:
    """Start both servers, prepare, warm up, then alternate measured turns; fills ``samples``."""
    prefix = str(tl.RESULTS_DIR / args.out.stem)
    with tl.running_stack(tl.RESULTS_DIR, args.out.stem, persist=not args.ephemeral) as stack:
        mock_pid, dev_pid = stack.server_pids
        print(
            f"skyloop dev pid {dev_pid} at {stack.api_url}, mock-llm pid {mock_pid} at {stack.mock_url}",
            flush=True,
        )
        mock = httpx.Client(base_url=stack.mock_url, timeout=10, verify=tl.ssl_context())
        targets = [Target("skyloop", stack, [dev_pid], args.turn_timeout)]
        try:
            stack.runner_id = tl.wait_runner_online(targets[0].api)
            tl.check(mock.post("/mock/set_fallback", json={"key": POLICY_KEY, "text": POLICY_ALLOW}), 200)
            if args.skyloop_only:
                run_rounds(args, work, mock, targets, samples)
                return
            with running_omnigent(args.omnigent_venv, stack.mock_url, tmp / "omnigent", Path(prefix)) as omni:
                print(
                    f"omnigent server pid {omni.server_pids[0]}, runner pid {omni.server_pids[1]} at {omni.api_url}"
                )
                targets.append(Target("omnigent", omni, omni.server_pids, args.turn_timeout))
                run_rounds(args, work, mock, targets, samples)
        finally:
            for target in targets:
                target.close()
            mock.close()


def run_rounds(
    args: argparse.Namespace,
    work: Workload,
    mock: httpx.Client,
    targets: list[Target],
    samples: dict[str, dict[str, list[float]]],
) -> None:
    for target in targets:
        target.prepare()
        for n in range(args.warmup):
            target.turn(mock, work, f"warmup{n}")
    for n in range(args.runs):
        order = targets if n % 2 == 0 else targets[::-1]
        walls = {}
        for target in order:
            metrics = target.turn(mock, work, str(n))
            for name, value in metrics.items():
                samples[target.name][name].append(value)
            walls[target.name] = metrics["turn_ms"]
        print(
            f"  run {n + 1}/{args.runs}: " + ", ".join(f"{k} {v:.0f} ms" for k, v in walls.items()),
            flush=True,
        )


# ------------------------------------------------------------------------------- reporting
def build_report(
    context: dict[str, Any], samples: dict[str, dict[str, list[float]]], failure: str | None
) -> dict[str, Any]:
    stats = {
        server: {name: tl.summarize(values) for name, values in metrics.items() if values}
        for server, metrics in samples.items()
    }
    ratios: dict[str, dict[str, float]] = {}
    sky, omni = stats.get("skyloop", {}), stats.get("omnigent", {})
    for name in METRICS:
        if name in sky and name in omni:
            ratios[name] = {
                key: round(sky[name][key] / omni[name][key], 3)
                for key in ("median", "p90", "min")
                if omni[name][key]
            }
    turn_ratio = ratios.get("turn_ms", {}).get("median")
    return {
        **context,
        "machine": {**context["machine"], "loadavg_1m_at_end": round(os.getloadavg()[0], 2)},
        "failure": failure,
        "stats_ms": stats,
        "ratio_skyloop_to_omnigent": ratios,
        "goal": {
            "turn_ms_median_ratio_at_most": GOAL_RATIO,
            "met": None if turn_ratio is None else turn_ratio <= GOAL_RATIO,
        },
        "samples_ms": {
            server: {name: [round(v, 1) for v in values] for name, values in metrics.items()}
            for server, metrics in samples.items()
        },
    }


def print_table(report: dict[str, Any]) -> None:
    m, p, code = report["machine"], report["params"], report["code"]
    print(
        f"\nwarm two-tool client turn: runs={p['runs']} warmup={p['warmup']} ephemeral={p['ephemeral']}"
        f" | omnigent {report.get('omnigent_version', '-')} | cpus={m['cpu_count']}"
        f" load1m={m['loadavg_1m_at_start']}->{m['loadavg_1m_at_end']}"
        f" | code={code.get('git_commit', '?')}{'+dirty' if code.get('git_dirty') else ''}"
    )
    header = f"{'metric':<16}{'server':<10}{'n':>4}{'p50':>9}{'p90':>9}{'min':>9}{'max':>9}"
    print(header)
    print("-" * len(header))
    for name in METRICS:
        for server, stats in report["stats_ms"].items():
            if name in stats:
                s = stats[name]
                print(
                    f"{name:<16}{server:<10}{s['n']:>4}{s['median']:>9.1f}{s['p90']:>9.1f}"
                    f"{s['min']:>9.1f}{s['max']:>9.1f}"
                )
        ratio = report["ratio_skyloop_to_omnigent"].get(name)
        if ratio:
            cells = "".join(f"{ratio.get(k, float('nan')):>9.2f}" for k in ("median", "p90", "min"))
            print(f"{'':<16}{'ratio':<10}{'':>4}{cells}")
    goal = report["goal"]
    if goal["met"] is not None:
        ratio = report["ratio_skyloop_to_omnigent"]["turn_ms"]["median"]
        verdict = "met" if goal["met"] else "NOT met"
        print(f"\nskyloop/omnigent turn p50 ratio {ratio:.2f}: goal <= {GOAL_RATIO} {verdict}")


# ------------------------------------------------------------------------------------ main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="measured turns per server (default 20)")
    parser.add_argument(
        "--warmup", type=int, default=2, help="turns per server done first and discarded (default 2)"
    )
    parser.add_argument("--skyloop-only", action="store_true", help="skip omnigent (a profiling driver)")
    parser.add_argument(
        "--ephemeral", action="store_true", help="run skyloop dev with --ephemeral (persistence off)"
    )
    parser.add_argument("--omnigent-venv", type=Path, default=DEFAULT_VENV, help=f"default {DEFAULT_VENV}")
    parser.add_argument("--turn-timeout", type=float, default=60.0, help="seconds before a turn fails")
    parser.add_argument("--out", type=Path, default=None, help=f"JSON report (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be >= 1 and --warmup >= 0")
    if args.out is None:
        args.out = DEFAULT_OUT.with_suffix(".skyloop-only.json") if args.skyloop_only else DEFAULT_OUT
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers are stopped by `finally`
    params = {
        "runs": args.runs,
        "warmup": args.warmup,
        "ephemeral": args.ephemeral,
        "skyloop_only": args.skyloop_only,
    }
    context = tl.run_context(params)
    context["benchmark"] = "vs_omnigent"
    samples: dict[str, dict[str, list[float]]] = {
        server: {name: [] for name in METRICS}
        for server in ("skyloop", "omnigent")[: 1 if args.skyloop_only else 2]
    }
    failure: str | None = None
    tmp = Path(tempfile.mkdtemp(prefix="vs-omnigent-"))
    try:
        work = build_workload(args.omnigent_venv, tmp / "sample")
        context["omnigent_version"] = work.omnigent_version
        context["tools_offered"] = [t["function"]["name"] for t in work.tools]
        measure(args, work, tmp, samples)
    except (tl.BenchError, httpx.HTTPError) as exc:
        failure = f"{type(exc).__name__}: {exc}"
        print(f"FAILED: {failure}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report = build_report(context, samples, failure)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if any(report["stats_ms"].values()):
        print_table(report)
    print(f"\nwrote {args.out}")
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
