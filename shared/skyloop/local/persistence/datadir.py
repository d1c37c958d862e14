"""The data directory of ``skyloop dev``: its layout, its format version, its lock, and damage reports.

::

    .skyloop/                    (``--data-dir``; default: ./.skyloop)
      FORMAT.json                {"format": 1, "written_by": "skyloop 0.1.0", "moto": "5.2.5"}
      dev.lock                   held by the running stack: one stack per directory
      dynamodb/                  the table (kept by the DynamoDB process, see persistence.dynamodb)
        dynamodb.lock
        snapshot.<generation>    every item as of the start of journal.<generation>
        journal.<generation>     every change since, one record per acknowledged request
      aws/                       S3 objects and Secrets Manager secrets (persistence.services)
        snapshot.<generation>
        journal.<generation>
      damaged/                   copies of files that had unreadable records (never deleted by the stack)

Lambda functions, the IAM role and the state machine are not kept: the stack
creates them from the code at every start. Step Functions executions are not
kept either: turns are continued from the table (:mod:`skyloop.local.recovery`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pathlib import Path

    from skyloop.local.persistence.journal import Damage

FORMAT = 1  # the layout and record kinds this version reads and writes
FORMAT_FILE = "FORMAT.json"
DEFAULT_DIR = ".skyloop"
LOCK_WAIT_S = 10.0  # a stack that was just killed may take a moment to let go
WHAT_TO_DO = (
    "start with --reset to discard it, --data-dir PATH to keep it and use another directory, "
    "or --ephemeral for a stack that keeps nothing"
)


class DataDirError(Exception):
    """The data directory cannot be used as it is; the message says why and what to do."""


@dataclass
class LoadReport:
    """What one part of the stack loaded from the data directory, and what it could not."""

    part: str
    records: int = 0
    items: int = 0
    damage: list[Damage] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # copies of damaged files, under damaged/
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"{self.part}: {note}" for note in self.notes]
        for damage, kept in zip(self.damage, self.kept, strict=True):
            out.append(
                f"{self.part}: DAMAGED {damage.describe()}; loaded every readable record, kept a copy at {kept}"
            )
        return out


def describe_format(data: dict[str, Any]) -> str:
    written = data.get("written_by") or "an unknown version"
    return f"data format {data.get('format')!r} (written by {written})"


class DataDir:
    """One stack's data directory, locked for as long as the stack runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock: TextIO | None = None

    @property
    def dynamodb(self) -> Path:
        return self.path / "dynamodb"

    @property
    def services(self) -> Path:
        return self.path / "aws"

    def open(self, *, reset: bool = False) -> None:
        """Lock the directory, wipe it if asked, then check (or write) its format."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataDirError(f"cannot create the data directory {self.path}: {exc}") from None
        self._lock = lock_file(self.path / "dev.lock", f"another skyloop dev uses {self.path}", wait_s=0)
        if reset:
            self.wipe()
        self.check_format()
        for sub in (self.dynamodb, self.services):
            sub.mkdir(exist_ok=True)

    def wipe(self) -> None:
        """Remove everything the stack keeps (``--reset``); the lock file stays, held."""
        for child in self.path.iterdir():
            if child.name == "dev.lock":
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    def check_format(self) -> None:
        marker = self.path / FORMAT_FILE
        if not marker.exists():
            others = [p.name for p in self.path.iterdir() if p.name != "dev.lock"]
            if others:
                raise DataDirError(
                    f"{self.path} is not a skyloop data directory (it has {', '.join(sorted(others)[:5])} "
                    f"but no {FORMAT_FILE}): {WHAT_TO_DO}"
                )
            self._write_format()
            return
        try:
            data = json.loads(marker.read_text())
            version = int(data["format"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataDirError(
                f"{marker} is unreadable ({exc}); the data directory's version is unknown: {WHAT_TO_DO}"
            ) from None
        if version > FORMAT:
            raise DataDirError(
                f"{self.path} holds {describe_format(data)}, newer than this skyloop reads (format {FORMAT}): "
                f"upgrade skyloop, or {WHAT_TO_DO}"
            )
        if version < FORMAT:
            raise DataDirError(
                f"{self.path} holds {describe_format(data)}, which this skyloop (format {FORMAT}) cannot "
                f"read and cannot convert: finish with it on the version that wrote it, then {WHAT_TO_DO}"
            )

    def _write_format(self) -> None:
        from importlib.metadata import version

        from skyloop import __version__

        data = {"format": FORMAT, "written_by": f"skyloop {__version__}", "moto": version("moto")}
        tmp = self.path / (FORMAT_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        tmp.replace(self.path / FORMAT_FILE)
        from skyloop.local.persistence.journal import fsync_dir

        fsync_dir(self.path)

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def lock_file(path: Path, held_by: str, *, wait_s: float = LOCK_WAIT_S) -> TextIO:
    """Hold an exclusive lock on ``path`` (released when the process ends, however it ends)."""
    handle = open(path, "a+")  # noqa: SIM115  (held for the process's life)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.seek(0)
                owner = handle.read().strip()
                handle.close()
                raise DataDirError(f"{held_by}{f' (pid {owner})' if owner else ''}; stop it first") from None
            time.sleep(0.05)
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def keep_damaged(data_dir: Path, damaged: Path) -> str:
    """Copy a file with unreadable records under ``damaged/`` (its original name and the time)."""
    target_dir = data_dir / "damaged"
    target_dir.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = target_dir / f"{stamp}-{damaged.parent.name}-{damaged.name}"
    with contextlib.suppress(FileExistsError):
        shutil.copy2(damaged, target)
    return str(target)
