"""What keeping the table on disk costs per request: the DynamoDB process with and without a data directory.

Two ``sl-dynamodb`` processes (the local stack's, see
``skyloop.local.dynamodb_process``), one keeping a data directory and one in
memory only, each with the stack's table. The same requests go to both,
alternating in batches so that machine load hits both alike:

* ``put``: a 1 KB PutItem;
* ``append``: what a turn step's append is, a TransactWriteItems moving the
  session row's ``last_seq`` on condition and putting three events;
* ``update``: an UpdateItem with an ADD (the answer countdown);
* ``step_append``: the same append sent as a turn step sends it (``X-Skyloop-Sync: deferred``:
  journaled in order, synced by the journal's thread, answered at once);
* ``get``: a consistent GetItem (a read waits only for writes still unsynced);
* ``append x8``: the append from 8 threads at once (group commit: one sync serves many).

For each: median and p90 latency per request in ms on both, the difference
(the cost of durability), and journal bytes per request. Writes JSON to
``bench/results/persistence_cost.json``.

    .venv/bin/python bench/persistence_cost.py              # 1,000 requests of each kind
    .venv/bin/python bench/persistence_cost.py --requests 3000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from skyloop.local.dynamodb_process import DynamoDBProcess, Remote
from skyloop.store.schema import create_table_kwargs

RESULTS = Path(__file__).resolve().parent / "results"
URL = "https://dynamodb.us-east-1.amazonaws.com/"
TABLE = "skyloop-local"
BATCH = 100


def call(remote: Remote, operation: str, body: dict[str, Any], *, deferred: bool = False) -> dict[str, Any]:
    headers = [
        ("X-Amz-Target", f"DynamoDB_20120810.{operation}"),
        ("Content-Type", "application/x-amz-json-1.0"),
    ]
    if deferred:  # what a turn step's requests carry (skyloop.local.persistence.dynamodb.DEFER_HEADER)
        headers.append(("X-Skyloop-Sync", "deferred"))
    status, _, out = remote.call("POST", URL, headers, json.dumps(body).encode())
    if status != 200:
        raise RuntimeError(f"{operation}: {status} {out[:300]!r}")
    return dict(json.loads(out or b"{}"))


class Target:
    """One DynamoDB process and the session rows the requests move forward."""

    def __init__(self, label: str, data_dir: str | None) -> None:
        self.label = label
        self.data_dir = data_dir
        self.handle = DynamoDBProcess(data_dir)
        self.remote = self.handle.connect()
        kwargs = create_table_kwargs(TABLE)
        call(self.remote, "CreateTable", kwargs)
        self.seq: dict[str, int] = {}
        self.lock = threading.Lock()

    def journal_bytes(self) -> int:
        if self.data_dir is None:
            return 0
        return sum(f.stat().st_size for f in Path(self.data_dir).rglob("journal.*"))

    def put(self, n: int) -> None:
        call(
            self.remote,
            "PutItem",
            {
                "TableName": TABLE,
                "Item": {"pk": {"S": f"P#{n % 500}"}, "sk": {"S": "X"}, "v": {"S": "x" * 1000}},
            },
        )

    def append(self, n: int, session: str = "s", *, deferred: bool = False) -> None:
        with self.lock:
            seq = self.seq.get(session, 0)
            self.seq[session] = seq + 3
        items = [
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": {"pk": {"S": f"SESSION#{session}"}, "sk": {"S": "META"}},
                    "UpdateExpression": "SET last_seq = :n",
                    "ConditionExpression": "attribute_not_exists(last_seq) OR last_seq = :o",
                    "ExpressionAttributeValues": {":n": {"N": str(seq + 3)}, ":o": {"N": str(seq)}},
                }
            }
        ]
        for i in range(1, 4):
            event = {"type": "response.output_text.delta", "delta": "word " * 20, "n": n}
            items.append(
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": {
                            "pk": {"S": f"SESSION#{session}"},
                            "sk": {"S": f"EVENT#{seq + i:012d}"},
                            "data": {"S": json.dumps(event)},
                        },
                    }
                }
            )
        call(self.remote, "TransactWriteItems", {"TransactItems": items}, deferred=deferred)

    def step_append(self, n: int) -> None:
        self.append(n, "step", deferred=True)

    def update(self, n: int) -> None:
        call(
            self.remote,
            "UpdateItem",
            {
                "TableName": TABLE,
                "Key": {"pk": {"S": "COUNTER"}, "sk": {"S": str(n % 10)}},
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            },
        )

    def get(self, n: int) -> None:
        call(
            self.remote,
            "GetItem",
            {
                "TableName": TABLE,
                "Key": {"pk": {"S": f"P#{n % 500}"}, "sk": {"S": "X"}},
                "ConsistentRead": True,
            },
        )

    def close(self) -> None:
        self.handle.close()


def timed(fn: Any, n: int) -> float:
    start = time.perf_counter()
    fn(n)
    return (time.perf_counter() - start) * 1000


def concurrent_appends(target: Target, requests: int, threads: int = 8) -> list[float]:
    """Per-request latency of appends sent by ``threads`` threads at once (each to its own session)."""
    out: list[float] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        mine = [timed(lambda n: target.append(n, f"t{worker}"), n) for n in range(requests // threads)]
        with lock:
            out.extend(mine)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return out


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered), 3),
        "p90_ms": round(ordered[int(len(ordered) * 0.9) - 1], 3),
    }


def measure(requests: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="skyloop-persistence-cost-") as tmp:
        targets = [Target("disk", tmp), Target("memory", None)]
        try:
            kinds = ["put", "append", "step_append", "update", "get"]
            samples: dict[str, dict[str, list[float]]] = {t.label: {k: [] for k in kinds} for t in targets}
            journal: dict[str, int] = {}
            for kind in kinds:
                before = targets[0].journal_bytes()
                for start in range(0, requests, BATCH):  # alternate batches: load drifts hit both
                    for target in targets:
                        fn = getattr(target, kind)
                        samples[target.label][kind] += [timed(fn, n) for n in range(start, start + BATCH)]
                journal[kind] = round((targets[0].journal_bytes() - before) / requests)
            for target in targets:
                samples[target.label]["append x8"] = concurrent_appends(target, requests)
        finally:
            for target in targets:
                target.close()
    out: dict[str, Any] = {}
    for kind in [*kinds, "append x8"]:
        disk, memory = summary(samples["disk"][kind]), summary(samples["memory"][kind])
        out[kind] = {
            "disk": disk,
            "memory": memory,
            "cost_median_ms": round(disk["median_ms"] - memory["median_ms"], 3),
            "journal_bytes_per_request": journal.get(kind),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests of each kind, per process")
    parser.add_argument("--out", type=Path, default=RESULTS / "persistence_cost.json")
    args = parser.parse_args(argv)
    import os

    load = os.getloadavg()[0]
    results = measure(args.requests)
    print(
        f"{'request':<12}{'memory p50':>12}{'disk p50':>10}{'cost p50':>10}{'disk p90':>10}{'journal B':>11}"
    )
    for kind, row in results.items():
        print(
            f"{kind:<12}{row['memory']['median_ms']:>12.3f}{row['disk']['median_ms']:>10.3f}"
            f"{row['cost_median_ms']:>10.3f}{row['disk']['p90_ms']:>10.3f}{row['journal_bytes_per_request'] or '-'!s:>11}"
        )
    report = {"requests": args.requests, "load_1m_at_start": load, "cpus": os.cpu_count(), "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
