"""The local stack under ordinary use: idle streams, concurrent sessions, long sessions, a full table.

Starts its own ``skyloop dev`` and ``skyloop mock-llm`` (see ``turn_latency.py``),
then, in one run, measures a baseline (session create, text turn, client-tool
turn, server CPU per turn) and each loaded situation, and reports every
figure as a ratio to the baseline of the same run. Targets are those of
issue 8; the report says which are met. See bench/README.md.

    .venv/bin/python bench/local_load.py                 # -> bench/results/local_load.json
    .venv/bin/python bench/local_load.py --quick         # fewer samples, 200 preloaded sessions
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memory
import turn_latency as tl

DEFAULT_OUT = tl.RESULTS_DIR / "local_load.json"
TARGETS = {
    "idle_streams_text_ratio": 1.2,
    "concurrent_10_wall_ratio": 3.0,
    "successive_20th_ratio": 1.2,
    "full_table_ratio": 1.2,
    "tool_turn_ms": 400.0,
    "text_turn_ms": 250.0,
    "session_create_ms": 50.0,
    # issue 23, measured with persistence on (the default): the stack keeps its data on disk
    "peak_memory_pss_mib": 400.0,
    "warm_tool_turn_ms": 80.0,
    "concurrent_10_model_latency_wall_ratio": 1.5,
}


def tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` and all its descendants (the stack and its Lambda worker processes)."""
    return tl.cpu_seconds([root]) or 0.0


class IdleStream:
    """A stream held open on a thread, read until closed (what a chat window on screen does)."""

    def __init__(self, api_url: str, session_id: str) -> None:
        self.client = httpx.Client(
            base_url=api_url, timeout=httpx.Timeout(30, read=None), verify=tl.ssl_context()
        )
        self.frames = 0
        self.opened = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(session_id,), daemon=True)
        self._thread.start()

    def _run(self, session_id: str) -> None:
        # Frames are counted, not parsed: a viewer's JSON parsing is its own machine's work, and 20
        # viewer threads parsing every frame here took CPU and the GIL from the turn being timed.
        try:
            with self.client.stream("GET", f"/v1/sessions/{session_id}/stream") as resp:
                for chunk in resp.iter_raw():
                    self.frames += chunk.count(b"\n\n")
                    self.opened.set()
                    if self._stop.is_set():
                        return
        except httpx.HTTPError:
            pass
        finally:
            self.opened.set()

    def close(self) -> None:
        self._stop.set()
        self.client.close()


class LoadBench(tl.Bench):
    def __init__(self, stack: tl.Stack, turn_timeout_s: float) -> None:
        super().__init__(stack, turn_timeout_s)
        self.mock_pid, self.dev_pid = stack.server_pids[0], stack.server_pids[1]

    # ------------------------------------------------------------------- single turns
    def text_ms(self, session_id: str | None = None) -> float:
        session_id = session_id or tl.create_session(self.api, self.stack)
        tl.configure_mock(self.mock, self.stack.model, [{"text": tl.TEXT_REPLY, "stream": True}])
        trace = self.driver.run(session_id, tl.message_event("Say hello."))
        tl.wait_idle(self.api, session_id)
        return tl.elapsed_ms(trace.posts["message"][0], trace.frames[-1][0])

    def tool_ms(self, session_id: str | None = None, *, model: str | None = None) -> float:
        session_id = session_id or tl.create_session(self.api, self.stack)
        call = {"call_id": f"call_{time.monotonic_ns()}", "name": "Echo", "arguments": '{"text": "ping"}'}
        tl.configure_mock(
            self.mock, model or self.stack.model, [{"tool_calls": [call]}, {"text": tl.TOOL_REPLY}]
        )
        trace = self.driver.run(session_id, tl.message_event("Echo ping.", [tl.ECHO_TOOL]), tl.echo)
        tl.wait_idle(self.api, session_id)
        return tl.elapsed_ms(trace.posts["message"][0], trace.frames[-1][0])

    def create_ms(self) -> float:
        start = time.perf_counter()
        tl.check(self.api.post("/v1/sessions", json={"agent_id": self.stack.agent_id}), 201)
        return tl.elapsed_ms(start, time.perf_counter())

    def baseline(self, samples: int) -> dict[str, Any]:
        text = [self.text_ms() for _ in range(samples)]
        tool = [self.tool_ms() for _ in range(samples)]
        create = [self.create_ms() for _ in range(samples)]
        cpu0 = tree_cpu_s(self.dev_pid)
        for _ in range(samples):
            self.tool_ms()
        cpu_tool = (tree_cpu_s(self.dev_pid) - cpu0) * 1000 / samples
        cpu0 = tree_cpu_s(self.dev_pid)
        for _ in range(samples):
            self.text_ms()
        cpu_text = (tree_cpu_s(self.dev_pid) - cpu0) * 1000 / samples
        return {
            "text_turn_ms": tl.summarize(text),
            "tool_turn_ms": tl.summarize(tool),
            "session_create_ms": tl.summarize(create),
            "server_cpu_ms_per_tool_turn": round(cpu_tool, 1),
            "server_cpu_ms_per_text_turn": round(cpu_text, 1),
        }

    # ----------------------------------------------------------------- idle streams
    def idle_streams(self, count: int, samples: int) -> dict[str, Any]:
        without = [self.text_ms() for _ in range(samples)]
        streams = [
            IdleStream(self.stack.api_url, tl.create_session(self.api, self.stack)) for _ in range(count)
        ]
        for stream in streams:
            stream.opened.wait(30)
        time.sleep(1.0)
        cpu0 = tree_cpu_s(self.dev_pid)
        time.sleep(5.0)
        idle_cpu_ms_per_s = (tree_cpu_s(self.dev_pid) - cpu0) * 1000 / 5.0
        with_streams = [self.text_ms() for _ in range(samples)]
        for stream in streams:
            stream.close()
        a, b = statistics.median(without), statistics.median(with_streams)
        return {
            "idle_streams": count,
            "text_turn_ms_without": tl.summarize(without),
            "text_turn_ms_with": tl.summarize(with_streams),
            "server_cpu_ms_per_s_while_idle": round(idle_cpu_ms_per_s, 1),
            "ratio": round(b / a, 2),
        }

    # ------------------------------------------------------------------- concurrency
    def concurrent(self, n: int, rounds: int, model_latency_ms: int = 0) -> dict[str, Any]:
        """``n`` fresh sessions start a client-tool turn at once; one model key per session.

        The server tree's CPU over each round gives the CPU floor: on ``os.cpu_count()`` cores the
        round's wall cannot be shorter than its CPU spread over every core. ``model_latency_ms``
        delays each of the turn's two model answers, as a real model's time to first token does.
        """
        walls: list[float] = []
        from_submit: list[float] = []
        per_turn: list[float] = []
        cpu_per_turn: list[float] = []
        mock_cpu_per_turn: list[float] = []
        errors: list[str] = []
        for _ in range(rounds):
            pairs = [self._own_agent_session() for _ in range(n)]
            barrier = threading.Barrier(n)
            spans: list[tuple[float, float]] = []

            cpu0, mock0 = tree_cpu_s(self.dev_pid), tree_cpu_s(self.mock_pid)
            start = time.perf_counter()
            with ThreadPoolExecutor(n) as pool:
                futures = [
                    pool.submit(self._one_tool_turn, s, m, barrier, model_latency_ms) for s, m in pairs
                ]
                for future in futures:
                    try:
                        spans.append(future.result())
                        per_turn.append(tl.elapsed_ms(*spans[-1]))
                    except Exception as exc:
                        errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
            from_submit.append(tl.elapsed_ms(start, time.perf_counter()))
            cpu_per_turn.append((tree_cpu_s(self.dev_pid) - cpu0) * 1000 / n)
            mock_cpu_per_turn.append((tree_cpu_s(self.mock_pid) - mock0) * 1000 / n)
            if spans:  # first message POST to last response.completed, as documented
                walls.append(tl.elapsed_ms(min(a for a, _ in spans), max(b for _, b in spans)))
        cpu_ms = statistics.median(cpu_per_turn)
        floor_ms = n * cpu_ms / (os.cpu_count() or 1)
        latency = {"model_latency_ms": model_latency_ms} if model_latency_ms else {}
        return {
            "n": n,
            "rounds": rounds,
            **latency,
            "wall_ms": tl.summarize(walls) if walls else None,
            "wall_from_submit_ms": tl.summarize(from_submit),
            "per_turn_ms": tl.summarize(per_turn) if per_turn else None,
            "cpu_ms_per_turn": round(cpu_ms, 1),
            "cpu_ms_per_turn_rounds": [round(c, 1) for c in cpu_per_turn],
            "mock_cpu_ms_per_turn": round(statistics.median(mock_cpu_per_turn), 1),
            "cpu_floor_ms": round(floor_ms, 1),
            "core_use": round(floor_ms / statistics.median(walls), 2) if walls else None,
            "errors": len(errors),
            "error_samples": errors[:3],
        }

    def _one_tool_turn(
        self, session_id: str, model: str, barrier: threading.Barrier, model_latency_ms: int = 0
    ) -> tuple[float, float]:
        """The turn's message POST and last frame, ``perf_counter`` times."""
        driver = tl.TurnDriver(self.stack.api_url, self.driver.timeout_s)
        try:
            call = {"call_id": f"call_{session_id[:8]}", "name": "Echo", "arguments": '{"text": "ping"}'}
            answers: list[dict[str, Any]] = [{"tool_calls": [call]}, {"text": tl.TOOL_REPLY}]
            if model_latency_ms:
                answers = [{**answer, "delay_ms": model_latency_ms} for answer in answers]
            tl.configure_mock(self.mock, model, answers)
            barrier.wait(30)
            trace = driver.run(session_id, tl.message_event("Echo ping.", [tl.ECHO_TOOL]), tl.echo)
            return trace.posts["message"][0], trace.frames[-1][0]
        finally:
            driver.close()

    def _own_agent_session(self) -> tuple[str, str]:
        """A fresh session whose agent has its own model key, so concurrent turns cannot swap answers."""
        uid = f"{time.monotonic_ns()}"
        model = f"bench-model-{uid}"
        spec = {
            "name": f"bench-{uid}",
            "prompt": "You are a benchmark agent.",
            "executor": {
                "harness": "openai-agents",
                "model": model,
                "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{self.stack.mock_url}/v1"},
            },
        }
        agent_id = tl.check(self.api.post("/v1/agents", json=spec), 201)["id"]
        session_id = tl.check(self.api.post("/v1/sessions", json={"agent_id": agent_id}), 201)["id"]
        return str(session_id), model

    # ----------------------------------------------------------------- long sessions
    def successive(self, turns: int, kind: str) -> dict[str, Any]:
        """``turns`` turns in one session; each turn's stream stays open for the rest of the run."""
        session_id = tl.create_session(self.api, self.stack)
        kept: list[IdleStream] = []
        times: list[float] = []
        for _ in range(turns):
            times.append(self.text_ms(session_id) if kind == "text" else self.tool_ms(session_id))
            kept.append(IdleStream(self.stack.api_url, session_id))
            kept[-1].opened.wait(30)
        for stream in kept:
            stream.close()
        first, last = statistics.median(times[:3]), statistics.median(times[-3:])
        return {
            "kind": kind,
            "turns": turns,
            "ms": [round(t, 1) for t in times],
            "first_3_median_ms": round(first, 1),
            "last_3_median_ms": round(last, 1),
            "ratio": round(last / first, 2),
        }

    # ------------------------------------------------------------------- full table
    def preload(self, count: int, workers: int = 8) -> float:
        """``count`` sessions, each with one short text turn, several at a time; returns seconds."""
        model_sessions = []
        for _ in range(count):
            session_id = tl.create_session(self.api, self.stack)
            model_sessions.append(session_id)
        # every preload session answers "ok" from the shared queue
        tl.configure_mock(self.mock, self.stack.model, [{"text": "ok"}] * count)
        start = time.perf_counter()

        def one(session_id: str) -> None:
            driver = tl.TurnDriver(self.stack.api_url, self.driver.timeout_s)
            try:
                driver.run(session_id, tl.message_event("preload"))
            finally:
                driver.close()

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, model_sessions))
        return time.perf_counter() - start


def ratio(a: dict[str, Any], b: dict[str, Any]) -> float:
    return round(b["median"] / a["median"], 2)


def concurrent_levels(
    bench: LoadBench, label: str, levels: list[int], rounds: int, model_latency_ms: int = 0
) -> dict[str, Any]:
    """``concurrent`` at each N, then each N's wall and CPU floor as ratios to the N=1 wall."""
    results: dict[str, Any] = {}
    for n in levels:
        print(f"{label} N={n} ...", flush=True)
        result = results[str(n)] = bench.concurrent(n, rounds, model_latency_ms)
        wall = (result["wall_ms"] or {}).get("median")
        print(
            f"  wall {wall} ms, cpu {result['cpu_ms_per_turn']} ms/turn (mock {result['mock_cpu_ms_per_turn']}),"
            f" cpu floor {result['cpu_floor_ms']} ms, core use {result['core_use']}, errors {result['errors']}",
            flush=True,
        )
    one = results.get("1", {}).get("wall_ms")
    for result in results.values():
        wall = result["wall_ms"]
        result["wall_ratio_to_n1"] = ratio(one, wall) if one and wall else None
        result["floor_ratio_to_n1"] = round(result["cpu_floor_ms"] / one["median"], 2) if one else None
    print(
        "  to N=1 wall: "
        + ", ".join(
            f"N={n} wall {r['wall_ratio_to_n1']}x floor {r['floor_ratio_to_n1']}x" for n, r in results.items()
        ),
        flush=True,
    )
    return results


def data_dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {}
    with tl.running_stack(tl.RESULTS_DIR, args.out.stem, persist=not args.ephemeral) as stack:
        bench = LoadBench(stack, args.turn_timeout)
        sampler = memory.MemorySampler(bench.dev_pid)
        report["persistence"] = "off (--ephemeral)" if args.ephemeral else "on (a fresh data directory)"
        try:
            sampler.__enter__()
            bench.prepare()
            for _ in range(args.warmup):
                bench.text_ms()
                bench.tool_ms()
            print("baseline ...", flush=True)
            report["baseline"] = base = bench.baseline(args.samples)
            print(f"  {json.dumps(base)}", flush=True)
            print(f"idle streams ({args.idle_streams}) ...", flush=True)
            report["idle_streams"] = bench.idle_streams(args.idle_streams, args.samples)
            print(f"  ratio {report['idle_streams']['ratio']}", flush=True)
            report["concurrent"] = concurrent_levels(bench, "concurrent", args.concurrency, args.rounds)
            if args.model_latency_ms:  # reported on its own: the target above stays the instant model's
                report["concurrent_model_latency"] = concurrent_levels(
                    bench,
                    f"concurrent, model latency {args.model_latency_ms} ms",
                    [1, 10],
                    args.rounds,
                    args.model_latency_ms,
                )
            print(f"successive turns ({args.successive}) ...", flush=True)
            report["successive"] = {
                kind: bench.successive(args.successive, kind) for kind in ("tool", "text")
            }
            print(f"  ratios {[r['ratio'] for r in report['successive'].values()]}", flush=True)
            print(f"preloading {args.preload} sessions ...", flush=True)
            seconds = bench.preload(args.preload)
            full = bench.baseline(args.samples)
            report["full_table"] = {
                "sessions_preloaded": args.preload,
                "preload_seconds": round(seconds, 1),
                **full,
                "ratio_text": ratio(base["text_turn_ms"], full["text_turn_ms"]),
                "ratio_tool": ratio(base["tool_turn_ms"], full["tool_turn_ms"]),
                "ratio_create": ratio(base["session_create_ms"], full["session_create_ms"]),
            }
            print(
                f"  ratios text {report['full_table']['ratio_text']} tool {report['full_table']['ratio_tool']}"
            )
        finally:
            sampler.__exit__()
            bench.close()
        report["memory"] = sampler.report()
        report["memory"]["data_dir_mib"] = round(
            data_dir_bytes(tl.RESULTS_DIR / f"{args.out.stem}.data") / 2**20, 1
        )
        peak = report["memory"]
        print(
            f"memory: peak PSS {peak['peak_pss_mib']} MiB (RSS summed {peak['peak_rss_sum_mib']} MiB), "
            f"{peak['most_processes']} processes at most; data directory {peak['data_dir_mib']} MiB",
            flush=True,
        )
    return report


def verdict(report: dict[str, Any]) -> dict[str, Any]:
    base = report["baseline"]
    c10 = report["concurrent"].get("10", {})
    c20 = report["concurrent"].get("20", {})
    full = report["full_table"]
    measured = {
        "idle_streams_text_ratio": report["idle_streams"]["ratio"],
        "concurrent_10_wall_ratio": c10.get("wall_ratio_to_n1"),
        "successive_20th_ratio": max(r["ratio"] for r in report["successive"].values()),
        "full_table_ratio": max(full["ratio_text"], full["ratio_tool"]),
        "tool_turn_ms": base["tool_turn_ms"]["median"],
        "text_turn_ms": base["text_turn_ms"]["median"],
        "session_create_ms": base["session_create_ms"]["median"],
        "peak_memory_pss_mib": report["memory"]["peak_pss_mib"],
        "warm_tool_turn_ms": base["tool_turn_ms"]["median"],
        "concurrent_10_model_latency_wall_ratio": report.get("concurrent_model_latency", {})
        .get("10", {})
        .get("wall_ratio_to_n1"),
    }
    out: dict[str, Any] = {}
    for name, value in measured.items():
        out[name] = {
            "target": TARGETS[name],
            "measured": value,
            "met": value is not None and value <= TARGETS[name],
        }
        if name == "concurrent_10_wall_ratio":
            # A lower bound on the ratio above from CPU alone (see bench/README.md), not a target.
            out["concurrent_10_cpu_floor_ratio"] = {
                "target": None,
                "measured": c10.get("floor_ratio_to_n1"),
                "met": None,
            }
    out["concurrent_errors"] = {
        "target": 0,
        "measured": sum(r["errors"] for r in report["concurrent"].values()),
        "met": all(r["errors"] == 0 for r in report["concurrent"].values()),
    }
    out["concurrent_20_errors"] = {"target": 0, "measured": c20.get("errors"), "met": c20.get("errors") == 0}
    return out


def latency_ms(text: str) -> int:
    """0 to 60000, the range the mock accepts for an answer's ``delay_ms``."""
    value = int(text)
    if not 0 <= value <= 60_000:
        raise argparse.ArgumentTypeError(f"{value} is not in 0..60000")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10, help="turns per single-turn measurement")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--idle-streams", type=int, default=50)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 5, 10, 20])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per concurrency level")
    parser.add_argument("--successive", type=int, default=20)
    parser.add_argument("--preload", type=int, default=1000)
    parser.add_argument("--turn-timeout", type=float, default=120.0)
    parser.add_argument(
        "--model-latency-ms",
        type=latency_ms,
        default=0,
        metavar="MS",
        help="also run concurrent_model_latency: N=1 and 10 with every model answer delayed MS ms (0: not run)",
    )
    parser.add_argument("--quick", action="store_true", help="samples 5, rounds 2, preload 200")
    parser.add_argument(
        "--ephemeral",
        action="store_true",
        help="run the stack with --ephemeral (persistence off, to compare)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.rounds, args.preload = 5, 2, 200
    context = tl.run_context({k: v for k, v in vars(args).items() if k != "out"} | {"out": str(args.out)})
    context["benchmark"] = "local_load"
    failure = None
    report: dict[str, Any] = {}
    try:
        report = measure(args)
    except (tl.BenchError, httpx.HTTPError) as exc:
        failure = f"{type(exc).__name__}: {exc}"
        print(f"FAILED: {failure}", file=sys.stderr)
    result: dict[str, Any] = {**context, "failure": failure, "results": report}
    if report and not failure:
        result["targets"] = verdict(report)
        print("\ntarget                        measured   target   met")
        for name, row in result["targets"].items():
            target, met = row["target"], row["met"]
            flag = "bound" if met is None else "yes" if met else "NO"
            print(f"{name:<30}{row['measured']!s:>9}{'-' if target is None else target!s:>9}   {flag}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
