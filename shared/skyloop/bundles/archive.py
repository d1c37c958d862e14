"""Reading an untrusted gzipped tar as a stream, never extracting it.

One pass, front to back: every member is checked (no absolute paths, no
``..``, no links or devices, no duplicates), sizes and counts are bounded
both as the headers claim them and as the bytes really inflate, and only the
members the caller asks for are kept in memory. Refusals are 400s, or 413s
when a limit in ``limits`` is exceeded.
"""

from __future__ import annotations

import gzip
import io
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skyloop.bundles import limits
from skyloop.bundles._messages import BUNDLE_PREFIX, show, truncate
from skyloop.errors import InvalidInputError, PayloadTooLargeError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["BundleScan", "build_bundle", "scan_bundle"]

_GZIP_MAGIC = b"\x1f\x8b"
# What a hostile or broken archive makes tarfile, gzip and zlib raise.
_ARCHIVE_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, ValueError)
_DRIVE_RE = re.compile(r"^[A-Za-z]:")
# Header types whose payload is metadata about the next member, parsed by tarfile itself.
_EXTENSION_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


@dataclass
class BundleScan:
    """What one pass over a bundle learned: its file paths and the members kept."""

    files: set[str] = field(default_factory=set)
    # First path component of every member (file or directory).
    roots: set[str] = field(default_factory=set)
    # Kept members -> content, or None when over the keep limit (only an error
    # if the caller turns out to need that member).
    kept: dict[str, bytes | None] = field(default_factory=dict)


def scan_bundle(data: bytes, *, keep: Callable[[str], bool], max_kept_bytes: int) -> BundleScan:
    """Check every member of a gzipped (or plain) tar and keep those ``keep`` selects.

    A kept member larger than ``max_kept_bytes`` is recorded as ``None``
    instead of being read.
    """
    if len(data) > limits.MAX_BUNDLE_BYTES:
        raise PayloadTooLargeError(
            f"{BUNDLE_PREFIX}archive is {len(data)} bytes; the limit is {limits.MAX_BUNDLE_BYTES} bytes"
        )
    if not data:
        raise InvalidInputError(f"{BUNDLE_PREFIX}the bundle is empty")

    is_gzip = data.startswith(_GZIP_MAGIC)
    raw: _GzipMemberReader | io.BytesIO = _GzipMemberReader(data) if is_gzip else io.BytesIO(data)
    stream = _CappedReader(raw, limits.MAX_BUNDLE_UNCOMPRESSED_BYTES + limits.TAR_FRAMING_ALLOWANCE)
    try:
        tar = _BundleTarFile.open(fileobj=stream, mode="r|")
    except _ARCHIVE_ERRORS as exc:
        what = "not a valid gzip-compressed tar archive" if is_gzip else "not a gzip-compressed tar archive"
        raise InvalidInputError(f"{BUNDLE_PREFIX}{what} ({_describe_exception(exc)})") from None
    try:
        with tar:
            return _scan_tar(tar, keep, max_kept_bytes)
    except _ARCHIVE_ERRORS as exc:
        raise InvalidInputError(
            f"{BUNDLE_PREFIX}archive is corrupt or truncated ({_describe_exception(exc)})"
        ) from None


def build_bundle(files: dict[str, bytes | str]) -> bytes:
    """Pack ``{path: content}`` into a gzipped tar in memory (for tests and the CLI).

    Output is deterministic (zero mtimes, fixed modes) so equal inputs give
    equal bytes.
    """
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, content in files.items():
            payload = content.encode("utf-8") if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


class _GzipMemberReader:
    """Inflates one gzip member, never more than ``size`` bytes per read.

    Unlike ``gzip.GzipFile`` it does not hunt through concatenated members
    (a cheap way to burn CPU on megabytes of empty ones); tar tools write a
    single member, and anything after it is ignored. zlib checks the CRC.
    """

    def __init__(self, data: bytes) -> None:
        self._view = memoryview(data)
        self._pos = 0
        self._inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)

    def read(self, size: int = -1) -> bytes:
        chunk_bytes = limits.READ_CHUNK_BYTES
        size = size if size > 0 else chunk_bytes
        while not self._inflater.eof:
            chunk: bytes | memoryview = self._inflater.unconsumed_tail
            if not chunk and self._pos < len(self._view):
                chunk = self._view[self._pos : self._pos + chunk_bytes]
                self._pos += len(chunk)
            output = self._inflater.decompress(chunk, size)
            if output:
                return output
            if not chunk:
                raise EOFError("gzip data is truncated")
        return b""


class _CappedReader(io.RawIOBase):
    """Counts the decompressed bytes tarfile pulls and stops past ``limit``.

    Header sizes are only claims; this counts what is really decompressed,
    which is what a gzip bomb inflates. Reads are also bounded per call, so
    the decompressor never produces more than one chunk at a time. A read-only
    ``RawIOBase``, so it is the file object ``tarfile.open`` expects.
    """

    def __init__(self, raw: _GzipMemberReader | io.BytesIO, limit: int) -> None:
        super().__init__()
        self._raw = raw
        self._limit = limit
        self._count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1, /) -> bytes:
        if size is None or size < 0:
            size = limits.READ_CHUNK_BYTES
        chunk = self._raw.read(min(size, self._limit - self._count + 1))
        self._count += len(chunk)
        if self._count > self._limit:
            raise PayloadTooLargeError(
                f"{BUNDLE_PREFIX}archive expands to more than {limits.MAX_BUNDLE_UNCOMPRESSED_BYTES} bytes"
            )
        return chunk


class _BundleTarInfo(tarfile.TarInfo):
    """Bounds pax and GNU long-name headers before tarfile parses them."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        # TarInfo._proc_member is where tarfile dispatches on the header type
        # (every header, including those inside extensions, passes through);
        # it is private, so typeshed does not declare it.
        if self.type in _EXTENSION_TYPES:
            if not 0 <= self.size <= limits.MAX_TAR_EXTENSION_HEADER_BYTES:
                raise PayloadTooLargeError(
                    f"{BUNDLE_PREFIX}a tar extension header is {self.size} bytes; "
                    f"the limit is {limits.MAX_TAR_EXTENSION_HEADER_BYTES}"
                )
            if isinstance(tarfile_, _BundleTarFile):
                tarfile_.extension_bytes += self.size
                if tarfile_.extension_bytes > limits.MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES:
                    raise PayloadTooLargeError(
                        f"{BUNDLE_PREFIX}tar extension headers exceed "
                        f"{limits.MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES} bytes in total"
                    )
        return super()._proc_member(tarfile_)  # type: ignore[misc]


class _BundleTarFile(tarfile.TarFile):
    """A TarFile that counts extension-header bytes across the archive."""

    tarinfo = _BundleTarInfo
    extension_bytes = 0


def _scan_tar(tar: tarfile.TarFile, keep: Callable[[str], bool], max_kept_bytes: int) -> BundleScan:
    """Walk the tar once, front to back, refusing any unsafe member."""
    scan = BundleScan()
    declared_total = 0
    count = 0
    while (member := tar.next()) is not None:
        count += 1
        if count > limits.MAX_BUNDLE_FILES:
            raise PayloadTooLargeError(
                f"{BUNDLE_PREFIX}archive has more than {limits.MAX_BUNDLE_FILES} members"
            )
        path = _member_path(member.name)
        _check_member_type(member)
        if path:
            scan.roots.add(path.split("/", 1)[0])
        if member.isdir():
            continue
        if not path:
            raise InvalidInputError(f"{BUNDLE_PREFIX}member {show(member.name)} has an empty name")
        if member.size < 0:
            raise InvalidInputError(f"{BUNDLE_PREFIX}member {show(member.name)} has a negative size")
        declared_total += member.size
        if declared_total > limits.MAX_BUNDLE_UNCOMPRESSED_BYTES:
            raise PayloadTooLargeError(
                f"{BUNDLE_PREFIX}archive expands to more than {limits.MAX_BUNDLE_UNCOMPRESSED_BYTES} bytes"
            )
        if path in scan.files:
            raise InvalidInputError(f"{BUNDLE_PREFIX}member {show(path)} appears more than once")
        scan.files.add(path)
        if keep(path):
            scan.kept[path] = _read_kept(tar, member, path, max_kept_bytes)
    return scan


def _read_kept(tar: tarfile.TarFile, member: tarfile.TarInfo, path: str, max_kept_bytes: int) -> bytes | None:
    """A kept member's bytes; None marks one too large to keep (the caller says so in its own words)."""
    if member.size > max_kept_bytes:
        return None
    handle = tar.extractfile(member)
    content = handle.read(max_kept_bytes + 1) if handle is not None else b""
    if len(content) != member.size:
        raise InvalidInputError(f"{BUNDLE_PREFIX}member {show(path)} is truncated")
    return content


def _member_path(name: str) -> str:
    """Normalise a member name, refusing anything that could escape a directory."""
    if "\x00" in name:
        raise InvalidInputError(f"{BUNDLE_PREFIX}member {show(name)} has a NUL byte in its name")
    if "\\" in name:
        raise InvalidInputError(f"{BUNDLE_PREFIX}member {show(name)} has a backslash in its name")
    if name.startswith("/") or _DRIVE_RE.match(name):
        raise InvalidInputError(f"{BUNDLE_PREFIX}member {show(name)} has an absolute path")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidInputError(f"{BUNDLE_PREFIX}member {show(name)} has a '..' path component")
    return "/".join(parts)


def _check_member_type(member: tarfile.TarInfo) -> None:
    """Only regular files and directories: links and devices have no place in a bundle."""
    if member.issym():
        problem = "is a symbolic link; links are not allowed"
    elif member.islnk():
        problem = "is a hard link; links are not allowed"
    elif member.ischr():
        problem = "is a character device; only regular files and directories are allowed"
    elif member.isblk():
        problem = "is a block device; only regular files and directories are allowed"
    elif member.isfifo():
        problem = "is a FIFO; only regular files and directories are allowed"
    elif member.issparse():
        problem = "is a sparse file; only regular files and directories are allowed"
    elif member.isdir() or member.isreg():
        return
    else:
        problem = f"has unsupported type {member.type!r}; only regular files and directories are allowed"
    raise InvalidInputError(f"{BUNDLE_PREFIX}member {show(member.name)} {problem}")


def _describe_exception(exc: BaseException) -> str:
    """An archive library's error, bounded: its text can quote raw header bytes."""
    text = str(exc).strip()
    return truncate(text, limits.MAX_SHOWN_EXCEPTION_CHARS) if text else type(exc).__name__
