"""Cold-import cost of each Lambda handler, as a ratio to a bare interpreter start.

Each handler file is imported in a fresh interpreter (min of N runs, so other
load on the machine mostly drops out); the bare ``python -c pass`` start in
the same run is the unit. Writes JSON to ``bench/results/import_time.json``.

    .venv/bin/python bench/import_time.py --runs 7
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from skyloop import manifest  # noqa: E402

LOADER = (
    "import importlib.util as u; s = u.spec_from_file_location('h', {path!r}); "
    "m = u.module_from_spec(s); s.loader.exec_module(m)"
)


# The deployed configuration (infra/constructs/functions.py): the Powertools tracer is opt-in.
ENV = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_SERVICE_NAME": "skyloop"}


def _best(cmd: list[str], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=ENV)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "import_time.json")
    args = parser.parse_args()
    bare = _best([sys.executable, "-c", "pass"], args.runs)
    rows = {}
    for fn in manifest.FUNCTIONS:
        target = "import skyloop.stream" if fn.streaming else LOADER.format(path=str(fn.handler_file))
        seconds = _best([sys.executable, "-c", target], args.runs)
        rows[fn.name] = {"seconds": round(seconds, 4), "ratio_to_bare": round(seconds / bare, 2)}
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "runs": args.runs,
        "bare_interpreter_s": round(bare, 4),
        "handlers": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"bare interpreter: {bare * 1000:.0f} ms")
    for name, row in rows.items():
        print(f"{name:14s} {row['seconds'] * 1000:7.0f} ms  x{row['ratio_to_bare']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
