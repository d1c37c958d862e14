"""Glob and Grep over a workspace directory: standard library only, so the same code runs in-process
(the local engine) and inside a remote sandbox (``python3 -c``, the AgentCore engine).

Paths in and out are relative to the workspace root. Directory links are not
followed (a link out of the workspace is not a way to read the host), files
over ``MAX_GREP_BYTES`` and binary files are not searched, results are sorted
and capped so one call cannot flood the model.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys

MAX_GLOB_RESULTS = 200
MAX_GREP_LINES = 500
MAX_GREP_BYTES = 2_000_000
MAX_LINE_CHARS = 2_000


def _inside(root: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)


def _walk(root: str, base: str) -> list[str]:
    """Every file and directory under ``base`` (relative to ``root``), links not followed."""
    start = os.path.join(root, base) if base else root
    if not _inside(root, start):
        return []
    if os.path.isfile(start):
        return [base]
    out: list[str] = []
    for directory, dirs, files in os.walk(start, followlinks=False):
        dirs.sort()
        rel_dir = os.path.relpath(directory, root)
        rel_dir = "" if rel_dir == "." else rel_dir
        for name in sorted(dirs + files):
            out.append(f"{rel_dir}/{name}" if rel_dir else name)
    return out


def _pattern(pattern: str) -> re.Pattern[str]:
    """A glob with ``**`` (any number of directories) as a regular expression over ``/`` paths."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z", re.DOTALL)


def glob(root: str, pattern: str, base: str = "") -> str:
    matcher = _pattern(pattern.lstrip("/"))
    prefix = f"{base}/" if base else ""
    found = [p for p in _walk(root, base) if matcher.match(p[len(prefix) :] if p.startswith(prefix) else p)]
    found = [
        p for p in found if os.path.isfile(os.path.join(root, p)) or os.path.islink(os.path.join(root, p))
    ]
    if not found:
        return "No files matched."
    shown = [f"/workspace/{p}" for p in found[:MAX_GLOB_RESULTS]]
    if len(found) > MAX_GLOB_RESULTS:
        return "\n".join(shown) + f"\n\n... ({len(found)} total matches, showing first {MAX_GLOB_RESULTS})"
    return "\n".join(shown)


def _hits(full: str, regex: re.Pattern[str]) -> list[tuple[int, str]]:
    """The matching lines of one regular text file (not a link, not binary, not too large)."""
    if os.path.islink(full) or not os.path.isfile(full) or os.path.getsize(full) > MAX_GREP_BYTES:
        return []
    with open(full, "rb") as handle:
        data = handle.read()
    if b"\x00" in data[:8192]:
        return []  # binary
    text = data.decode("utf-8", errors="replace")
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if regex.search(line)]


def grep(root: str, pattern: str, base: str = "", include: str | None = None, mode: str | None = None) -> str:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        return f"Search failed: invalid regular expression: {exc}"
    mode = mode or "files_with_matches"
    lines: list[str] = []
    for rel in _walk(root, base):
        if include is not None and not fnmatch.fnmatch(os.path.basename(rel), include):
            continue
        hits = _hits(os.path.join(root, rel), regex)
        if not hits:
            continue
        shown = f"/workspace/{rel}"
        if mode == "files_with_matches":
            lines.append(shown)
        elif mode == "count":
            lines.append(f"{shown}:{len(hits)}")
        else:
            lines.extend(f"{shown}:{n}:{line[:MAX_LINE_CHARS]}" for n, line in hits)
        if len(lines) >= MAX_GREP_LINES:
            lines = lines[:MAX_GREP_LINES]
            lines.append(f"... (stopped at {MAX_GREP_LINES} lines)")
            break
    return "\n".join(lines) or "No matches found."


def run(root: str, request: dict[str, object]) -> str:
    """One ``{"op": "glob"|"grep", ...}`` request over the workspace at ``root``."""
    root = os.path.realpath(root)
    base = str(request.get("base") or "")
    if request.get("op") == "glob":
        return glob(root, str(request["pattern"]), base)
    include = request.get("include")
    mode = request.get("mode")
    return grep(
        root, str(request["pattern"]), base, str(include) if include else None, str(mode) if mode else None
    )


if __name__ == "__main__":  # in a remote sandbox: python3 search.py ROOT '<request JSON>'
    sys.stdout.write(run(sys.argv[1], json.loads(sys.argv[2])))
