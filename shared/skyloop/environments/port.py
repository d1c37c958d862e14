"""What an engine gives the hosted tools: a session's workspace and a place to run commands in it.

Paths crossing this port are relative to the workspace root (``""`` is the
root), already checked by :mod:`skyloop.workspace`. An engine refuses
what would follow a symbolic link out of the workspace (``PathOutsideWorkspace``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable


class SandboxError(Exception):
    """The environment cannot do what was asked (not installed, unreachable, full); said to the model."""


class WorkspaceFull(SandboxError):
    """A write would take the workspace past its size cap."""


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None: killed at its timeout
    output: str  # stdout and stderr as they interleaved
    duration_ms: int
    timed_out: bool = False


@dataclass(frozen=True)
class WorkspaceEntry:
    path: str  # relative to the workspace root
    bytes: int
    modified_at: float
    type: str = "file"  # "file" or "directory" (an empty one) or "symlink"


class Sandbox(Protocol):
    """One session's workspace, as one engine serves it."""

    def run(
        self,
        command: str,
        *,
        timeout_s: float,
        env: dict[str, str],
        on_output: Callable[[str], None] | None = None,
    ) -> CommandResult: ...

    def read(self, path: str) -> bytes: ...

    def write(self, path: str, data: bytes) -> None: ...

    def search(self, request: dict[str, object]) -> str:
        """Glob or Grep (:mod:`skyloop.environments.search`), where the files are."""
        ...

    def entries(self) -> list[WorkspaceEntry]: ...

    def start(self, task: str, command: str, *, timeout_s: float, env: dict[str, str]) -> None:
        """Run a long command in the background, named ``task`` (it outlives the invocation)."""
        ...

    def task(
        self, task: str, *, wait_s: float, on_output: Callable[[str], None] | None = None
    ) -> CommandResult | None:
        """The background command's result once it ended (waiting up to ``wait_s``), else None."""
        ...

    def stop(self, task: str) -> None: ...


class Engine(Protocol):
    """Where a deployment's workspaces live: made on first use, copied by fork, removed by delete."""

    name: str

    def sandbox(self, session_id: str, *, network: str) -> Sandbox: ...

    def exists(self, session_id: str) -> bool: ...

    def mark_ready(self, session_id: str) -> None: ...

    def is_ready(self, session_id: str) -> bool: ...

    def copy(self, source_id: str, target_id: str) -> None: ...

    def delete(self, session_id: str) -> None: ...

    def entries(self, session_id: str) -> list[WorkspaceEntry]: ...

    def read(self, session_id: str, path: str) -> bytes: ...
