"""Append-only record files: the framing, a group-committing writer, and a reader that survives damage.

Every file of a data directory (journals and snapshots alike) is a sequence
of records::

    MAGIC (4 bytes) | length (u32, big-endian) | CRC-32 of the payload (u32) | payload (JSON)

The magic lets a reader find the next record after a damaged one, the CRC
tells a damaged record from a good one, and the length tells an incomplete
last record (the process died while writing it) from a complete one. A
record is written whole or not at all as far as a reader can tell.

:class:`JournalWriter` makes appends durable in batches (group commit): a
caller appends under its own lock, so the file's order is the order in which
the changes were applied, and then waits outside that lock until an
``fdatasync`` covers its record. One thread syncs for everyone waiting, so
ten concurrent writes cost about one sync, not ten.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# How long the writer's own thread waits after an unawaited append before syncing: a turn step's next
# writes join the same sync. A request that waits never waits for this (it syncs at once).
FLUSH_DELAY_S = float(os.environ.get("SKYLOOP_JOURNAL_FLUSH_DELAY_S", "0.005"))
MAGIC = b"SKJ1"
_HEAD = struct.Struct(">4sII")
MAX_RECORD = 256 * 1024 * 1024  # a length beyond this is damage, not a record


class JournalError(Exception):
    """The data directory can no longer be written; acknowledging a change would be a lie."""


def frame(payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    return _HEAD.pack(MAGIC, len(body), zlib.crc32(body)) + body


def frame_raw(body: bytes) -> bytes:
    """A record around an already-encoded JSON payload."""
    return _HEAD.pack(MAGIC, len(body), zlib.crc32(body)) + body


@dataclass
class Damage:
    """What a reader could not use in one file: kept out of the state, and reported."""

    path: str
    unreadable: list[tuple[int, int]] = field(default_factory=list)  # byte ranges [start, end)
    incomplete_tail: int = 0  # bytes of a last record cut short (a write that was never acknowledged)
    missing_end: bool = False  # a snapshot without its end record: records after the last good one are gone

    @property
    def damaged(self) -> bool:
        return bool(self.unreadable) or self.missing_end

    def describe(self) -> str:
        parts = []
        if self.unreadable:
            total = sum(end - start for start, end in self.unreadable)
            ranges = ", ".join(f"{start}-{end}" for start, end in self.unreadable[:5])
            more = f" and {len(self.unreadable) - 5} more" if len(self.unreadable) > 5 else ""
            parts.append(f"{total} unreadable bytes (at {ranges}{more})")
        if self.incomplete_tail:
            parts.append(f"an incomplete last record of {self.incomplete_tail} bytes (never acknowledged)")
        if self.missing_end:
            parts.append("no end record (the file was cut short: what followed the last good record is lost)")
        return f"{self.path}: " + "; ".join(parts)


def read_records(path: Path) -> tuple[list[dict[str, Any]], Damage]:
    """Every good record of ``path``, in order, and what could not be read.

    A bad record in the middle (wrong magic, wrong CRC, not JSON) is skipped
    and the reader resumes at the next magic that starts a good record, so one
    damaged write costs that write, not the rest of the file. Bytes cut off at
    the very end are an incomplete last write.
    """
    data = path.read_bytes()
    damage = Damage(str(path))
    records: list[dict[str, Any]] = []
    pos, n = 0, len(data)
    bad_from: int | None = None
    while pos < n:
        record, end = _record_at(data, pos)
        if record is not None:
            if bad_from is not None:
                damage.unreadable.append((bad_from, pos))
                bad_from = None
            records.append(record)
            pos = end
            continue
        if end == -1 and bad_from is None:  # a clean prefix ends in a record cut short
            damage.incomplete_tail = n - pos
            return records, damage
        if bad_from is None:
            bad_from = pos
        found = data.find(MAGIC, pos + 1)
        if found < 0:
            break
        pos = found
    if bad_from is not None:
        damage.unreadable.append((bad_from, n))
    return records, damage


def _record_at(data: bytes, pos: int) -> tuple[dict[str, Any] | None, int]:
    """The record starting at ``pos`` and where it ends; ``(None, -1)`` if it is cut short, else ``(None, 0)``."""
    if len(data) - pos < _HEAD.size:
        return None, (-1 if MAGIC.startswith(data[pos : pos + 4]) else 0)
    magic, length, crc = _HEAD.unpack_from(data, pos)
    if magic != MAGIC or length > MAX_RECORD:
        return None, 0
    start, end = pos + _HEAD.size, pos + _HEAD.size + length
    if end > len(data):
        return None, -1
    body = data[start:end]
    if zlib.crc32(body) != crc:
        return None, 0
    try:
        record = json.loads(body)
    except ValueError:
        return None, 0
    if not isinstance(record, dict):
        return None, 0
    return record, end


def iter_files(directory: Path, prefix: str) -> Iterator[tuple[int, Path]]:
    """``(generation, path)`` of ``prefix.<generation>`` files, oldest first."""
    found = []
    for path in directory.glob(f"{prefix}.*"):
        suffix = path.name[len(prefix) + 1 :]
        if suffix.isdigit():
            found.append((int(suffix), path))
    yield from sorted(found)


def file_name(prefix: str, generation: int) -> str:
    return f"{prefix}.{generation:08d}"


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class JournalWriter:
    """One journal file, appended in the callers' order and synced in groups.

    ``append`` returns the position after the record; ``wait(position)``
    returns once everything up to it is on disk. Positions count bytes over
    every file this writer has written (:meth:`rotate` moves to a new file
    without resetting them). After a failed write every wait raises
    :class:`JournalError`: the stack must not acknowledge anything again.
    """

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self._fd = self._open(path, header)
        self._pending: list[bytes] = []
        self._written = 0
        self._durable = 0
        self._cond = threading.Condition()
        self._syncing = False
        self._failed: BaseException | None = None
        self.bytes_since_snapshot = 0
        self.syncs = 0
        self._kicked = threading.Event()
        self._flusher: threading.Thread | None = None

    @staticmethod
    def _open(path: Path, header: dict[str, Any]) -> int:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, frame(header))
        os.fsync(fd)
        fsync_dir(path.parent)
        return fd

    @property
    def position(self) -> int:
        return self._written

    def append(self, payload: dict[str, Any] | bytes) -> int:
        record = frame_raw(payload) if isinstance(payload, bytes) else frame(payload)
        with self._cond:
            self._pending.append(record)
            self._written += len(record)
            self.bytes_since_snapshot += len(record)
            return self._written

    def wait(self, position: int) -> None:
        if self._durable >= position and self._failed is None:
            return
        with self._cond:
            while True:
                if self._failed is not None:
                    raise JournalError(f"cannot write {self.path}: {self._failed}") from self._failed
                if self._durable >= position:
                    return
                if self._syncing:
                    self._cond.wait()
                    continue
                self._sync_locked()

    def _sync_locked(self) -> None:
        """Write and sync what is pending; called with the condition held, released during the I/O."""
        self._syncing = True
        data, target, fd = b"".join(self._pending), self._written, self._fd
        self._pending.clear()
        self._cond.release()
        error: BaseException | None = None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fdatasync(fd)
        except OSError as exc:
            error = exc
        finally:
            self._cond.acquire()
            self._syncing = False
            self.syncs += 1
            if error is not None:
                self._failed = error
            else:
                self._durable = max(self._durable, target)
            self._cond.notify_all()

    def sync(self) -> None:
        """Everything appended so far, on disk."""
        self.wait(self._written)

    def kick(self) -> None:
        """Have what is appended synced soon, by a thread of the writer's own (nobody waits for it)."""
        if self._flusher is None:
            with self._cond:
                if self._flusher is None:
                    self._flusher = threading.Thread(target=self._flush, name="journal-flusher", daemon=True)
                    self._flusher.start()
        self._kicked.set()

    def _flush(self) -> None:
        while self._fd >= 0:
            self._kicked.wait()
            time.sleep(FLUSH_DELAY_S)  # gather the rest of a step's writes into the same sync
            self._kicked.clear()
            with contextlib.suppress(JournalError):  # the next acknowledged request reports it
                self.sync()

    def rotate(self, path: Path, header: dict[str, Any]) -> None:
        """Continue in a new file (the caller holds its own lock, so no append races this)."""
        self.sync()
        with self._cond:
            while self._syncing:
                self._cond.wait()
            old, self._fd, self.path = self._fd, self._open(path, header), path
            self.bytes_since_snapshot = 0
        os.close(old)

    def close(self) -> None:
        with contextlib.suppress(JournalError):  # what failed was never acknowledged
            self.sync()
        with self._cond:
            while self._syncing:
                self._cond.wait()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
