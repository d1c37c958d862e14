"""Paths as the hosted tools see them: inside ``/workspace``, or refused.

A tool's path is relative to ``/workspace`` or absolute under it; anything that
leaves it (``..`` past the root, another absolute path) is refused before any
engine sees it. Symbolic links that point out of the workspace are refused by
the engine that follows them (:mod:`skyloop.environments.local` resolves them).
"""

from __future__ import annotations

import posixpath

WORKSPACE = "/workspace"


class PathOutsideWorkspace(ValueError):
    """A path that is not inside the workspace."""


def relative(path: str) -> str:
    """``path`` relative to the workspace root (``""`` for the root itself), normalized."""
    if "\x00" in path:
        raise PathOutsideWorkspace("a path may not contain a NUL character")
    raw = path.strip()
    if not raw:
        raise PathOutsideWorkspace("the path is empty")
    if raw.startswith("/"):
        if raw != WORKSPACE and not raw.startswith(WORKSPACE + "/"):
            raise PathOutsideWorkspace(f"{path!r} is outside the workspace ({WORKSPACE})")
        raw = raw[len(WORKSPACE) :].lstrip("/")
    if raw.startswith("~"):
        raise PathOutsideWorkspace(f"{path!r} is outside the workspace ({WORKSPACE})")
    normalized = posixpath.normpath(raw) if raw else "."
    if normalized == ".":
        return ""
    if normalized == ".." or normalized.startswith("../"):
        raise PathOutsideWorkspace(f"{path!r} leaves the workspace ({WORKSPACE})")
    return normalized


def absolute(path: str) -> str:
    """``path`` as the sandbox names it (``/workspace/...``)."""
    rel = relative(path)
    return f"{WORKSPACE}/{rel}" if rel else WORKSPACE
