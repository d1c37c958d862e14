"""Where the CPU of one turn goes: per process of the local stack, optionally sampled by py-spy.

Starts its own stack (like ``turn_latency.py``), warms it up, then runs
``--turns`` turns of one kind one after another and reports the CPU each
process of the stack's tree spent per turn, grouped by process name (the
dev process, the fork server, and each Lambda worker, which names itself
``sl-<function>``). With ``--py-spy PATH`` (a py-spy binary) the measured
turns are also sampled across the whole tree into collapsed stacks
(``bench/results/turn_profile.<kind>.txt``), for a flame graph or ``grep``.

    .venv/bin/python bench/turn_profile.py --kind tool --turns 20
    .venv/bin/python bench/turn_profile.py --kind tool --py-spy /path/to/py-spy
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_load as ll
import turn_latency as tl


def tree_cpu_by_name(root: int) -> Counter[str]:
    """CPU seconds per process name over ``root`` and its descendants (pid-qualified names merged)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, str, float, float]] = {}
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = path.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        stats[int(path.parent.name)] = (int(fields[1]), name, int(fields[11]) / tick, int(fields[12]) / tick)
    members, changed = {root}, True
    while changed:
        changed = False
        for pid, (ppid, *_) in stats.items():
            if ppid in members and pid not in members:
                members.add(pid)
                changed = True
    out: Counter[str] = Counter()
    for pid in members:
        if pid in stats:
            _, name, user, system = stats[pid]
            out["dev" if pid == root else name] += user + system
            out["(system, all processes)"] += system
            if pid == root:
                out["(system, dev)"] += system
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("tool", "text"), default="tool")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--same-session", action="store_true", help="all turns in one session")
    parser.add_argument("--py-spy", help="path to a py-spy binary: sample the measured turns")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument(
        "--ephemeral", action="store_true", help="run the stack with --ephemeral (persistence off)"
    )
    args = parser.parse_args(argv)
    with tl.running_stack(tl.RESULTS_DIR, "turn_profile", persist=not args.ephemeral) as stack:
        bench = ll.LoadBench(stack, 60.0)
        try:
            bench.prepare()
            session = tl.create_session(bench.api, stack) if args.same_session else None
            turn = bench.tool_ms if args.kind == "tool" else bench.text_ms
            for _ in range(args.warmup):
                turn(session)
            spy = None
            out = tl.RESULTS_DIR / f"turn_profile.{args.kind}.txt"
            if args.py_spy:
                spy = subprocess.Popen(
                    [args.py_spy, "record", "--pid", str(bench.dev_pid), "--subprocesses", "--format", "raw",
                     "--rate", str(args.rate), "--output", str(out), "--nonblocking", "--gil"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                time.sleep(2.0)
            before = tree_cpu_by_name(bench.dev_pid)
            walls = [turn(session) for _ in range(args.turns)]
            after = tree_cpu_by_name(bench.dev_pid)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(30)
        finally:
            bench.close()
    per_turn = {k: round((after[k] - before.get(k, 0.0)) * 1000 / args.turns, 1) for k in after}
    per_turn = {k: v for k, v in sorted(per_turn.items(), key=lambda kv: -kv[1]) if v}
    report = {
        "kind": args.kind,
        "turns": args.turns,
        "wall_ms_median": round(sorted(walls)[len(walls) // 2], 1),
        "wall_ms": [round(w, 1) for w in walls],
        "cpu_ms_per_turn_total": round(sum(v for k, v in per_turn.items() if not k.startswith("(")), 1),
        "cpu_ms_per_turn": per_turn,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
