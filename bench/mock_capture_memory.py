"""Memory the scripted model's request capture holds over one long chat.

`skyloop dev`'s built-in model is the mock, and every model request carries
the whole conversation so far. This feeds ``--calls`` requests of a chat that
grows by two messages a call through ``MockState.record_and_next`` (with the
size each body had as JSON, as the HTTP routes pass it) and reports the Python
heap the capture holds (tracemalloc), with the byte budget as shipped and with
none (the count bound alone).

    .venv/bin/python bench/mock_capture_memory.py [--calls 1500]
"""

from __future__ import annotations

import argparse
import json
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared"))

from skyloop.mockllm import _state

RESULTS = Path(__file__).resolve().parent / "results"


def held_mib(calls: int, budget: int) -> float:
    """The heap the capture holds after ``calls`` requests, in MiB."""
    shipped = _state.CAPTURED_BYTES
    _state.CAPTURED_BYTES = budget
    try:
        mock = _state.MockState()
        tracemalloc.start()
        conversation: list[dict[str, str]] = []
        for _ in range(calls):
            conversation = [
                *conversation,
                {"type": "message", "role": "user", "content": "x" * 200},
                {"type": "message", "role": "assistant", "content": "y" * 200},
            ]
            raw = json.dumps({"model": "m", "input": conversation})
            mock.record_and_next(json.loads(raw), size=len(raw))  # a fresh parse, as the route makes
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return round(held / 2**20, 1)
    finally:
        _state.CAPTURED_BYTES = shipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1500)
    args = parser.parse_args()
    report = {
        "calls": args.calls,
        "captured_requests": _state.CAPTURED_REQUESTS,
        "captured_bytes": _state.CAPTURED_BYTES,
        "held_mib_with_budget": held_mib(args.calls, _state.CAPTURED_BYTES),
        "held_mib_count_bound_only": held_mib(args.calls, 2**62),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "mock_capture_memory.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
