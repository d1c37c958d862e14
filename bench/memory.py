"""Memory of a process tree, sampled from /proc while a benchmark runs (Linux).

Three figures per process, from ``/proc/<pid>/smaps_rollup``:

* **RSS**: resident pages mapped by the process, shared ones included. The
  local stack's Lambda environments are forked from one warm fork server, so
  most of each one's RSS is the same physical pages as the fork server's and
  the other environments': summing RSS over the tree counts those pages once
  per environment.
* **PSS** (proportional set size): each resident page divided by the number
  of processes sharing it. Summed over the tree it is the physical memory the
  tree holds, each page counted once: the figure ``smem`` and the kernel's
  own accounting use for "how much memory does this use".
* **USS** (private pages): what the process alone holds, freed if it exits.

:class:`MemorySampler` samples the tree every ``interval_s`` and keeps the peak
of the summed PSS (with the per-process breakdown at that moment) and the
peak of the summed RSS.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

FIELDS = {"Rss:": "rss", "Pss:": "pss", "Private_Clean:": "uss", "Private_Dirty:": "uss"}


def tree(root: int) -> list[int]:
    """``root`` and every descendant, from /proc's parent links."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    members, changed = {root}, True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in members and pid not in members:
                members.add(pid)
                changed = True
    return sorted(members)


def process_memory(pid: int) -> dict[str, Any] | None:
    """``{name, rss, pss, uss}`` in KiB, or None if the process is gone."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    out: dict[str, Any] = {"pid": pid, "name": name, "rss": 0, "pss": 0, "uss": 0}
    for line in rollup.splitlines():
        parts = line.split()
        if parts and parts[0] in FIELDS:
            out[FIELDS[parts[0]]] += int(parts[1])
    return out


def snapshot(root: int) -> list[dict[str, Any]]:
    return [m for m in (process_memory(pid) for pid in tree(root)) if m is not None]


def by_kind(processes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The tree grouped by process name (``sl-turn`` x4 ...), in MiB."""
    groups: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"count": 0, "rss_mib": 0.0, "pss_mib": 0.0, "uss_mib": 0.0}
    )
    for proc in processes:
        group = groups[proc["name"]]
        group["count"] += 1
        for key in ("rss", "pss", "uss"):
            group[f"{key}_mib"] = round(group[f"{key}_mib"] + proc[key] / 1024, 1)
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["pss_mib"]))


def totals(processes: list[dict[str, Any]]) -> dict[str, float]:
    return {f"{key}_mib": round(sum(p[key] for p in processes) / 1024, 1) for key in ("rss", "pss", "uss")}


class MemorySampler:
    """Samples the tree under ``root`` on a thread; :meth:`report` gives the peaks."""

    def __init__(self, root: int, interval_s: float = 0.5) -> None:
        self.root = root
        self.interval_s = interval_s
        self.samples = 0
        self.peak_pss: dict[str, Any] = {}
        self.peak_rss: dict[str, Any] = {}
        self.peak_processes = 0
        self.names: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        processes = snapshot(self.root)
        if not processes:
            return
        self.samples += 1
        total = totals(processes)
        self.peak_processes = max(self.peak_processes, len(processes))
        if total["pss_mib"] > self.peak_pss.get("pss_mib", 0):
            self.peak_pss = {
                **total,
                "at": time.time(),
                "processes": len(processes),
                "by_kind": by_kind(processes),
            }
        if total["rss_mib"] > self.peak_rss.get("rss_mib", 0):
            self.peak_rss = {
                **total,
                "at": time.time(),
                "processes": len(processes),
                "by_kind": by_kind(processes),
            }

    def report(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "interval_s": self.interval_s,
            "peak_pss_mib": self.peak_pss.get("pss_mib"),
            "peak_rss_sum_mib": self.peak_rss.get("rss_mib"),
            "most_processes": self.peak_processes,
            "at_peak_pss": self.peak_pss,
            "at_peak_rss": self.peak_rss,
        }
