"""The first burst after a quiet spell: ten fresh sessions start a client-tool turn at once (issue 35).

Each round starts its own stack (persistence on, as ``skyloop dev`` runs by
default), warms it with a series of single turns, one after another, and then
meets it with a burst, the way a person does after the stack sat quiet:

* **one turn alone** (``--singles`` of them, the median): a fresh session whose
  agent has its own model key; the client opens the session's stream, posts
  the message offering one client tool (``Echo``), answers the call the
  moment it is ``action_required``, and reads until ``response.completed``.
  The mock model takes ``--model-latency-ms`` (300) before each of its two
  answers, as a real model's time to first token does;
* **the burst**: ``--n`` (10) such sessions (made before, not timed) whose
  clients all start at once; the wall is from the moment they start (each
  opens its stream, then posts its message) to the last ``response.completed``.

The ratio burst / one turn is the figure (goal ≤ 1.5, 0 errors). Only the
first burst of a stack is measured: ``local_load.py``'s ``concurrent`` takes
the median of three rounds from the first POST, which hides the first.

    .venv/bin/python bench/first_burst.py                 # 3 rounds -> bench/results/first_burst.json
    .venv/bin/python bench/first_burst.py --rounds 1 --n 10 --model-latency-ms 300
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_load as ll
import turn_latency as tl

GOAL = 1.5


def one_round(args: argparse.Namespace, index: int) -> dict[str, Any]:
    with tl.running_stack(tl.RESULTS_DIR, f"first_burst.{index}") as stack:
        bench = ll.LoadBench(stack, args.turn_timeout)
        try:
            bench.prepare()
            singles = []
            for _ in range(args.singles):
                session, model = bench._own_agent_session()
                began = time.perf_counter()
                _, done = bench._one_tool_turn(session, model, threading.Barrier(1), args.model_latency_ms)
                singles.append(tl.elapsed_ms(began, done))
            pairs = [bench._own_agent_session() for _ in range(args.n)]
            time.sleep(args.quiet_s)
            barrier = threading.Barrier(args.n)
            errors: list[str] = []
            ends: list[float] = []
            began = time.perf_counter()
            with ThreadPoolExecutor(args.n) as pool:
                futures = [
                    pool.submit(bench._one_tool_turn, s, m, barrier, args.model_latency_ms) for s, m in pairs
                ]
                for future in futures:
                    try:
                        ends.append(future.result()[1])
                    except Exception as exc:
                        errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
            burst = tl.elapsed_ms(began, max(ends)) if ends else None
        finally:
            bench.close()
    single = statistics.median(singles)
    return {
        "single_turn_ms": [round(s, 1) for s in singles],
        "single_turn_median_ms": round(single, 1),
        "burst_wall_ms": round(burst, 1) if burst is not None else None,
        "ratio": round(burst / single, 2) if burst is not None else None,
        "errors": len(errors),
        "error_samples": errors[:3],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="stacks started, one burst each")
    parser.add_argument("--n", type=int, default=10, help="sessions in the burst")
    parser.add_argument("--singles", type=int, default=5, help="single turns before the burst")
    parser.add_argument("--model-latency-ms", type=int, default=300)
    parser.add_argument(
        "--quiet-s", type=float, default=0.0, help="how long the stack sits quiet before the burst"
    )
    parser.add_argument("--turn-timeout", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=tl.RESULTS_DIR / "first_burst.json")
    args = parser.parse_args(argv)
    load0 = os.getloadavg()[0]
    rounds = []
    for index in range(args.rounds):
        rounds.append(one_round(args, index))
        r = rounds[-1]
        print(
            f"round {index + 1}: one turn {r['single_turn_median_ms']} ms, burst of {args.n} "
            f"{r['burst_wall_ms']} ms, ratio {r['ratio']}, errors {r['errors']}",
            flush=True,
        )
    ratios = [r["ratio"] for r in rounds if r["ratio"] is not None]
    report = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv[1:],
        "code": tl.code_revision(),
        "machine": tl.machine_info(),
        "load1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "n": args.n,
        "model_latency_ms": args.model_latency_ms,
        "rounds": rounds,
        "ratio_median": statistics.median(ratios) if ratios else None,
        "goal": GOAL,
        "met": bool(ratios) and max(ratios) <= GOAL and all(r["errors"] == 0 for r in rounds),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"first burst / one turn: {ratios} (goal <= {GOAL}); wrote {args.out}")
    return 0 if report["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
