"""The hosted environment's steps on AWS: what each adds to a turn, and what an environment costs.

The machine cannot reach AWS, so this is a model, not a measurement: the
requests each step makes are read from the code (``skyloop.environments.agentcore``,
and counted for real against the loopback fake by ``tests/integration/test_hosted_agentcore.py``),
and each request is priced with a figure that carries its source, or is marked
``ASSUMPTION`` where AWS publishes none (AgentCore publishes no latency figures).

    .venv/bin/python bench/hosted_cloud_model.py          # the table
    .venv/bin/python bench/hosted_cloud_model.py --json   # and bench/results/hosted_cloud_model.json

Steps, per hosted call or per turn:

* **interpreter session start** (a session's first hosted call, or after skyloop stopped the last
  one when idle): ``StartCodeInterpreterSession`` + a conditional ``UpdateItem`` + the restore (one
  ``writeFiles`` per 50 files of the snapshot, each file one S3 ``GetObject``, then one
  ``executeCommand`` putting modes, links and empty directories back) + the environment's setup
  commands again (one ``executeCommand`` each, plus their own time).
* **warm call**: ``Write``/``Edit`` are a ``du`` (``executeCommand``) and a ``writeFiles``, ``Read`` one
  ``readFiles``, ``Bash`` one ``executeCommand`` (plus the command's own time), Glob/Grep one
  ``executeCommand``; the first mutating call of a step adds one ``UpdateItem`` (a change counted).
* **snapshot** at a turn's end when something changed: one ``GetItem``, one ``executeCommand`` (hash
  every file), one ``readFiles`` and one S3 ``PutObject`` per changed file, the manifest ``PutObject``,
  one ``UpdateItem``.
* **idle stop** (the reconciler, on no turn's path): the index ``Query`` (16 partitions, shared by every
  session due), the row and the session read (``GetItem`` x2), a snapshot as above, a conditional
  ``UpdateItem``, ``StopCodeInterpreterSession``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "hosted_cloud_model.json"

# (p50 ms, p99 ms, source)
LATENCY = {
    "invoke": (
        120,
        400,
        "ASSUMPTION: AgentCore publishes no latency; a same-region HTTPS call into a warm microVM "
        "(cf. E2B's published ~150 ms cold start for a whole Firecracker sandbox)",
    ),
    "start": (
        1000,
        3000,
        "ASSUMPTION: a new microVM per session (AgentCore: 'each session runs in a dedicated microVM')",
    ),
    "dynamodb": (5, 25, "DynamoDB: single-digit ms at any scale (aws.amazon.com/dynamodb/features)"),
    "s3_put": (
        60,
        200,
        "S3 performance guidelines: 100-200 ms first-byte latency for small objects (p99 side); "
        "p50 ASSUMPTION",
    ),
    "s3_get": (
        30,
        150,
        "as s3_put (docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html)",
    ),
}
# USD
PRICE = {
    "vcpu_hour": (0.0895, "AgentCore Code Interpreter: $0.0895 per vCPU-hour, per second, idle free"),
    "gb_hour": (0.00945, "AgentCore Code Interpreter: $0.00945 per GB-hour, per second, idle free"),
    "s3_put_1000": (0.005, "S3 Standard PUT/COPY/POST/LIST, us-east-1"),
    "s3_get_1000": (0.0004, "S3 Standard GET, us-east-1"),
    "s3_gb_month": (0.023, "S3 Standard storage, first 50 TB, us-east-1"),
    "lambda_gb_s": (0.0000133334, "Lambda arm64 duration, first 6 billion GB-s, us-east-1"),
    "ddb_write_million": (0.625, "DynamoDB on-demand write request units, us-east-1"),
    "ddb_read_million": (0.125, "DynamoDB on-demand read request units, us-east-1"),
}
SESSION_VCPU = 2  # ASSUMPTION: the interpreter's size (AgentCore does not let a custom interpreter choose)
SESSION_GB = 4  # ASSUMPTION
RUN_TOOL_GB = 256 / 1024  # the manifest's run_tool memory


def step_latency(requests: dict[str, int]) -> tuple[int, int]:
    p50 = sum(LATENCY[kind][0] * n for kind, n in requests.items())
    p99 = sum(LATENCY[kind][1] * n for kind, n in requests.items())
    return p50, p99


STEPS = {
    "warm Read": {"invoke": 1},
    "warm Write/Edit": {"invoke": 2, "dynamodb": 1},
    "warm Bash (plus the command)": {"invoke": 1, "dynamodb": 1},
    "warm Glob/Grep": {"invoke": 1},
    "interpreter session start (empty workspace)": {"start": 1, "dynamodb": 2},
    "interpreter session start, restoring 20 files": {"start": 1, "dynamodb": 2, "s3_get": 20, "invoke": 2},
    "  the same, with one setup command (plus its time)": {
        "start": 1,
        "dynamodb": 3,
        "s3_get": 20,
        "invoke": 3,
    },
    "snapshot, 3 files changed": {"dynamodb": 2, "invoke": 4, "s3_put": 4},
    "snapshot, nothing changed": {"dynamodb": 1},
    "idle stop, 3 files changed since the last snapshot": {"dynamodb": 5, "invoke": 5, "s3_put": 4},
}
IDLE_S = 900  # SKYLOOP_HOSTED_IDLE_S's default: how long an interpreter session outlives its last call


def monthly_cost(
    sessions: int, calls_per_session: int, cpu_s_per_call: float, snapshot_mb: float
) -> dict[str, float]:
    """A month of ``sessions`` active sessions, each ``calls_per_session`` hosted calls, then idle."""
    compute = sessions * calls_per_session * cpu_s_per_call / 3600
    interpreter = compute * (SESSION_VCPU * PRICE["vcpu_hour"][0] + SESSION_GB * PRICE["gb_hour"][0])
    puts = sessions * (calls_per_session / 2) * 2  # a snapshot per two calls (turns), file + manifest
    s3 = puts / 1000 * PRICE["s3_put_1000"][0] + sessions * snapshot_mb / 1024 * PRICE["s3_gb_month"][0]
    lambda_s = sessions * calls_per_session * (LATENCY["invoke"][0] / 1000 + cpu_s_per_call)
    lam = lambda_s * RUN_TOOL_GB * PRICE["lambda_gb_s"][0]
    ddb = sessions * calls_per_session * 2 / 1e6 * PRICE["ddb_write_million"][0]
    return {
        "interpreter": round(interpreter, 4),
        "s3": round(s3, 4),
        "lambda (run_tool waiting)": round(lam, 4),
        "dynamodb": round(ddb, 4),
        "total": round(interpreter + s3 + lam + ddb, 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = {name: step_latency(requests) for name, requests in STEPS.items()}
    print(f"{'step':48} {'p50 ms':>8} {'p99 ms':>8}")
    for name, (p50, p99) in rows.items():
        print(f"{name:48} {p50:8d} {p99:8d}")
    idle_week = 10 * PRICE["s3_gb_month"][0] / 1024 / 4  # a 10 MB workspace kept a week
    cost = monthly_cost(sessions=1000, calls_per_session=20, cpu_s_per_call=0.5, snapshot_mb=10)
    print("\na month of 1,000 sessions x 20 hosted calls (0.5 CPU-s each), 10 MB workspaces, USD:")
    for name, value in cost.items():
        print(f"  {name:28} {value:10.4f}")
    print(f"\nan idle session's environment: its snapshot only (a 10 MB workspace: ${idle_week:.6f} a week)")
    tail = IDLE_S / 3600 * SESSION_GB * PRICE["gb_hour"][0]
    print(
        f"the {IDLE_S // 60} minutes an interpreter session outlives its last call before skyloop stops it: "
        f"$0 if idle memory is free as priced above, ${tail:.4f} per burst of activity if AgentCore bills "
        f"its {SESSION_GB} GB while idle (ASSUMPTION to check against the bill; SKYLOOP_HOSTED_IDLE_S shortens it)"
    )
    print("\nsources:")
    for kind, (_p50, _p99, source) in LATENCY.items():
        print(f"  {kind}: {source}")
    for kind, (value, source) in PRICE.items():
        print(f"  {kind} = {value}: {source}")
    if args.json:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(
            json.dumps({"steps": rows, "monthly": cost, "latency": LATENCY, "price": PRICE}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
