"""Untrusted agent uploads: multipart bodies, gzipped tar bundles and their YAML.

Everything here reads attacker-controlled bytes, so every step is bounded:
the request body, the compressed bundle, what it expands to, the number of
tar members, tar extension headers, the YAML file and the YAML node graph.
Nothing is ever extracted to disk; the tar is read as a stream and only the
agent YAML is kept in memory. Every refusal is a ``SkyloopError`` (400 or
413) whose message names the problem without echoing secrets.
"""

from __future__ import annotations

import datetime
import gzip
import io
import json
import math
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from email import policy
from email.errors import (
    CloseBoundaryNotFoundDefect,
    MultipartInvariantViolationDefect,
    NoBoundaryInMultipartDefect,
    StartBoundaryNotFoundDefect,
)
from email.parser import BytesParser
from email.utils import collapse_rfc2231_value
from typing import TYPE_CHECKING, Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator
from yaml.parser import ParserError
from yaml.reader import ReaderError
from yaml.scanner import ScannerError

from skyloop.errors import (
    InvalidInputError,
    PayloadTooLargeError,
    SkyloopError,
    UnsupportedMediaTypeError,
)
from skyloop.models.agent import AgentSpec

if TYPE_CHECKING:
    from email.message import Message

__all__ = [
    "MAX_BUNDLE_BYTES",
    "MAX_BUNDLE_FILES",
    "MAX_BUNDLE_UNCOMPRESSED_BYTES",
    "MAX_FORM_PARTS",
    "MAX_METADATA_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES",
    "MAX_TAR_EXTENSION_HEADER_BYTES",
    "MAX_YAML_ALIASES",
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "MultipartForm",
    "SessionMetadata",
    "UploadedFile",
    "build_bundle",
    "load_agent_bundle",
    "load_agent_spec_dict",
    "parse_multipart_form",
    "parse_session_metadata",
]

KiB = 1024
MiB = 1024 * KiB

# Lambda's synchronous invocation payload limit: a larger body never reaches a
# function behind API Gateway, so the local server refuses it the same way.
MAX_REQUEST_BYTES = 6 * MiB
# A session-create form has two parts; a cap keeps a body of thousands of tiny
# parts from costing parse time for nothing.
MAX_FORM_PARTS = 16
# Leaves room for the multipart framing and metadata inside MAX_REQUEST_BYTES.
MAX_BUNDLE_BYTES = 5 * MiB
# Bounds the memory and CPU one upload may cost a Lambda, whatever the
# compression ratio (deflate reaches ~1000:1 on zeros).
MAX_BUNDLE_UNCOMPRESSED_BYTES = 20 * MiB
# Agent bundles are a YAML plus a few tools/skills; thousands of members only
# serve to slow the scan down.
MAX_BUNDLE_FILES = 1000
# Agent specs are small and PyYAML's pure-Python loader is slow; 256 KiB is
# far above any real spec (the prompt itself is capped at 200k characters).
MAX_YAML_BYTES = 256 * KiB
# "Billion laughs": a few aliases can stand for an exponential object graph.
MAX_YAML_ALIASES = 100
# The node count after expanding every alias: what downstream code will walk.
# Real specs have a few hundred nodes; PyYAML composes ~20k nodes a second,
# so the limit also caps the parse at about a second (parsing stops there).
MAX_YAML_NODES = 20_000
# Deep nesting makes PyYAML's composer (and anything walking the result) recurse.
MAX_YAML_DEPTH = 64
# pax / GNU long-name headers are parsed by tarfile with regexes that are
# quadratic on some inputs (CVE-2024-6232 on unpatched Pythons); real ones
# carry a path and a few attributes, well under 4 KiB.
MAX_TAR_EXTENSION_HEADER_BYTES = 4 * KiB
MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES = 256 * KiB
# Title and labels are small by contract; 64 KiB is ample for them.
MAX_METADATA_BYTES = 64 * KiB

# Tar headers, padding and extension records come on top of the member data
# counted against MAX_BUNDLE_UNCOMPRESSED_BYTES; the decompressed stream as a
# whole may exceed it only by this much.
_TAR_FRAMING_ALLOWANCE = 4 * MiB
_READ_CHUNK = 64 * KiB
_GZIP_MAGIC = b"\x1f\x8b"
# What a hostile or broken archive makes tarfile, gzip and zlib raise.
_ARCHIVE_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, ValueError)
# RFC 2046 boundary: 1-70 bchars, not ending in a space.
_BOUNDARY_RE = re.compile(r"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]")
_DRIVE_RE = re.compile(r"^[A-Za-z]:")
_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")
_CONFIG_YAML = "config.yaml"
_YAML_SUFFIXES = (".yaml", ".yml")
_BUNDLE_PREFIX = "invalid agent bundle: "
_SPEC_PREFIX = "invalid agent spec: "
_METADATA_PREFIX = "invalid session metadata: "
_MAX_LISTED_ERRORS = 10


# --------------------------------------------------------------------------
# multipart/form-data
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UploadedFile:
    """One file part of a form, held in memory (bodies are capped at 6 MiB)."""

    filename: str | None
    content_type: str | None
    data: bytes


@dataclass(frozen=True, slots=True)
class MultipartForm:
    """A parsed form: text fields and file parts, each name at most once."""

    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, UploadedFile] = field(default_factory=dict)


def parse_multipart_form(body: bytes, content_type: str) -> MultipartForm:
    """Parse a ``multipart/form-data`` body with the standard library's MIME parser.

    A part is a file when it carries a ``filename`` or a non-text
    ``Content-Type``; otherwise it is a UTF-8 text field. Truncated bodies
    (no closing boundary), nested multiparts and repeated names are refused
    rather than guessed at.
    """
    if len(body) > MAX_REQUEST_BYTES:
        raise PayloadTooLargeError(f"request body is {len(body)} bytes; the limit is {MAX_REQUEST_BYTES}")
    if any(ch in content_type for ch in "\r\n\x00"):
        raise InvalidInputError("invalid Content-Type header")
    try:
        header = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("ascii")
    except UnicodeEncodeError:
        raise InvalidInputError("invalid Content-Type header: not ASCII") from None

    try:
        message = BytesParser(policy=policy.HTTP).parsebytes(header + body)
        media_type = message.get_content_type()
        boundary = message.get_boundary()
    except Exception as exc:  # the MIME parser raises assorted errors on hostile input
        raise InvalidInputError(f"malformed multipart body ({type(exc).__name__})") from None

    if media_type != "multipart/form-data":
        raise UnsupportedMediaTypeError(f"expected multipart/form-data, got {media_type}")
    if not boundary:
        raise InvalidInputError("multipart/form-data Content-Type has no boundary parameter")
    if not _BOUNDARY_RE.fullmatch(boundary):
        raise InvalidInputError("multipart/form-data boundary is not a valid RFC 2046 boundary")

    for defect in message.defects:
        if isinstance(defect, StartBoundaryNotFoundDefect | NoBoundaryInMultipartDefect):
            raise InvalidInputError("malformed multipart body: the boundary never appears in the body")
        if isinstance(defect, CloseBoundaryNotFoundDefect):
            raise InvalidInputError("malformed multipart body: no closing boundary (truncated upload?)")
        if isinstance(defect, MultipartInvariantViolationDefect):
            raise InvalidInputError("malformed multipart body")
    parts = message.get_payload()
    if not message.is_multipart() or not isinstance(parts, list):
        raise InvalidInputError("malformed multipart body")
    if len(parts) > MAX_FORM_PARTS:
        raise InvalidInputError(
            f"multipart body has {len(parts)} parts; at most {MAX_FORM_PARTS} are accepted"
        )

    fields: dict[str, str] = {}
    files: dict[str, UploadedFile] = {}
    for index, part in enumerate(parts):
        try:
            name, upload = _read_form_part(part, index)
        except SkyloopError:
            raise
        except Exception as exc:  # header parsing of hostile parts
            raise InvalidInputError(f"malformed multipart part #{index + 1} ({type(exc).__name__})") from None
        if name in fields or name in files:
            raise InvalidInputError(f"multipart form repeats the field {_show(name)}")
        if isinstance(upload, UploadedFile):
            files[name] = upload
        else:
            fields[name] = upload
    return MultipartForm(fields=fields, files=files)


def _read_form_part(part: Message, index: int) -> tuple[str, UploadedFile | str]:
    if part.is_multipart():
        raise InvalidInputError(
            f"multipart part #{index + 1} is itself multipart; nested forms are not supported"
        )
    if part.get_content_disposition() != "form-data":
        raise InvalidInputError(f"multipart part #{index + 1} has no 'Content-Disposition: form-data' header")
    raw_name = part.get_param("name", header="content-disposition")
    name = collapse_rfc2231_value(raw_name) if raw_name is not None else ""
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"multipart part #{index + 1} has no field name")
    name = _from_surrogates(name)
    filename = part.get_filename()
    if filename is not None:
        filename = _from_surrogates(filename)
    explicit_type = part.get("content-type") is not None
    payload = part.get_payload(decode=True)
    data = payload if isinstance(payload, bytes) else b""

    if filename is not None or (explicit_type and part.get_content_maintype() != "text"):
        content_type = part.get_content_type() if explicit_type else None
        return name, UploadedFile(filename=filename, content_type=content_type, data=data)

    charset = part.get_content_charset() or "utf-8"
    try:
        return name, data.decode(charset)
    except (LookupError, UnicodeDecodeError):
        raise InvalidInputError(f"form field {_show(name)} is not valid {charset} text") from None


def _from_surrogates(value: str) -> str:
    """Header values hold raw non-ASCII bytes as surrogates; read them as UTF-8."""
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")


# --------------------------------------------------------------------------
# Bundles
# --------------------------------------------------------------------------


def load_agent_bundle(data: bytes) -> AgentSpec:
    """Validate an uploaded bundle and return the agent it declares.

    The bundle is a gzipped (or plain) tar holding either exactly one
    ``<name>.yaml``/``.yml`` at its root, or a directory bundle whose
    ``config.yaml`` sits at the root or inside the single top-level directory.
    """
    if len(data) > MAX_BUNDLE_BYTES:
        raise PayloadTooLargeError(
            f"{_BUNDLE_PREFIX}archive is {len(data)} bytes; the limit is {MAX_BUNDLE_BYTES} bytes"
        )
    if not data:
        raise InvalidInputError(f"{_BUNDLE_PREFIX}the bundle is empty")

    is_gzip = data.startswith(_GZIP_MAGIC)
    raw: _GzipMemberReader | io.BytesIO = _GzipMemberReader(data) if is_gzip else io.BytesIO(data)
    stream = _CappedReader(raw, MAX_BUNDLE_UNCOMPRESSED_BYTES + _TAR_FRAMING_ALLOWANCE)
    try:
        tar = _BundleTarFile.open(fileobj=stream, mode="r|")  # type: ignore[arg-type]
    except _ARCHIVE_ERRORS as exc:
        what = "not a valid gzip-compressed tar archive" if is_gzip else "not a gzip-compressed tar archive"
        raise InvalidInputError(f"{_BUNDLE_PREFIX}{what} ({_describe_exception(exc)})") from None
    try:
        with tar:
            scan = _scan_tar(tar)
    except _ARCHIVE_ERRORS as exc:
        raise InvalidInputError(
            f"{_BUNDLE_PREFIX}archive is corrupt or truncated ({_describe_exception(exc)})"
        ) from None

    path = _choose_spec_file(scan)
    content = scan.candidates[path]
    if content is None:
        raise PayloadTooLargeError(
            f"{_BUNDLE_PREFIX}{path} is larger than the {MAX_YAML_BYTES} byte limit for agent YAML"
        )
    raw_spec = _load_yaml(content, path)
    return _validate_spec(raw_spec, _BUNDLE_PREFIX, f" (in {path})")


def load_agent_spec_dict(raw: object) -> AgentSpec:
    """Validate an agent spec that arrived as JSON (``POST /v1/agents``)."""
    return _validate_spec(raw, _SPEC_PREFIX, "")


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
        size = size if size > 0 else _READ_CHUNK
        while not self._inflater.eof:
            chunk: bytes | memoryview = self._inflater.unconsumed_tail
            if not chunk and self._pos < len(self._view):
                chunk = self._view[self._pos : self._pos + _READ_CHUNK]
                self._pos += len(chunk)
            output = self._inflater.decompress(chunk, size)
            if output:
                return output
            if not chunk:
                raise EOFError("gzip data is truncated")
        return b""


class _CappedReader:
    """Counts the decompressed bytes tarfile pulls and stops past ``limit``.

    Header sizes are only claims; this counts what is really decompressed,
    which is what a gzip bomb inflates. Reads are also bounded per call, so
    the decompressor never produces more than one chunk at a time.
    """

    def __init__(self, raw: _GzipMemberReader | io.BytesIO, limit: int) -> None:
        self._raw = raw
        self._limit = limit
        self._count = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = _READ_CHUNK
        chunk = self._raw.read(min(size, self._limit - self._count + 1))
        self._count += len(chunk)
        if self._count > self._limit:
            raise PayloadTooLargeError(
                f"{_BUNDLE_PREFIX}archive expands to more than {MAX_BUNDLE_UNCOMPRESSED_BYTES} bytes"
            )
        return chunk


class _BundleTarInfo(tarfile.TarInfo):
    """Bounds pax and GNU long-name headers before tarfile parses them."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENSION_TYPES:
            if not 0 <= self.size <= MAX_TAR_EXTENSION_HEADER_BYTES:
                raise PayloadTooLargeError(
                    f"{_BUNDLE_PREFIX}a tar extension header is {self.size} bytes; "
                    f"the limit is {MAX_TAR_EXTENSION_HEADER_BYTES}"
                )
            if isinstance(tarfile_, _BundleTarFile):
                tarfile_.extension_bytes += self.size
                if tarfile_.extension_bytes > MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES:
                    raise PayloadTooLargeError(
                        f"{_BUNDLE_PREFIX}tar extension headers exceed "
                        f"{MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES} bytes in total"
                    )
        return super()._proc_member(tarfile_)


_EXTENSION_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


class _BundleTarFile(tarfile.TarFile):
    """A TarFile that counts extension-header bytes across the archive."""

    tarinfo = _BundleTarInfo
    extension_bytes = 0


@dataclass
class _TarScan:
    files: set[str] = field(default_factory=set)
    roots: set[str] = field(default_factory=set)
    # Possible spec files -> content, or None when over MAX_YAML_BYTES (only
    # an error if that file turns out to be the spec).
    candidates: dict[str, bytes | None] = field(default_factory=dict)


def _scan_tar(tar: tarfile.TarFile) -> _TarScan:
    """Walk the tar once, front to back, refusing any unsafe member."""
    scan = _TarScan()
    declared_total = 0
    count = 0
    while (member := tar.next()) is not None:
        count += 1
        if count > MAX_BUNDLE_FILES:
            raise PayloadTooLargeError(f"{_BUNDLE_PREFIX}archive has more than {MAX_BUNDLE_FILES} members")
        path = _member_path(member.name)
        _check_member_type(member)
        if path:
            scan.roots.add(path.split("/", 1)[0])
        if member.isdir():
            continue
        if not path:
            raise InvalidInputError(f"{_BUNDLE_PREFIX}member {_show(member.name)} has an empty name")
        if member.size < 0:
            raise InvalidInputError(f"{_BUNDLE_PREFIX}member {_show(member.name)} has a negative size")
        declared_total += member.size
        if declared_total > MAX_BUNDLE_UNCOMPRESSED_BYTES:
            raise PayloadTooLargeError(
                f"{_BUNDLE_PREFIX}archive expands to more than {MAX_BUNDLE_UNCOMPRESSED_BYTES} bytes"
            )
        if path in scan.files:
            raise InvalidInputError(f"{_BUNDLE_PREFIX}member {_show(path)} appears more than once")
        scan.files.add(path)
        if _is_spec_candidate(path):
            if member.size > MAX_YAML_BYTES:
                scan.candidates[path] = None
                continue
            handle = tar.extractfile(member)
            content = handle.read(MAX_YAML_BYTES + 1) if handle is not None else b""
            if len(content) != member.size:
                raise InvalidInputError(f"{_BUNDLE_PREFIX}member {_show(path)} is truncated")
            scan.candidates[path] = content
    return scan


def _member_path(name: str) -> str:
    """Normalise a member name, refusing anything that could escape a directory."""
    if "\x00" in name:
        raise InvalidInputError(f"{_BUNDLE_PREFIX}member {_show(name)} has a NUL byte in its name")
    if "\\" in name:
        raise InvalidInputError(f"{_BUNDLE_PREFIX}member {_show(name)} has a backslash in its name")
    if name.startswith("/") or _DRIVE_RE.match(name):
        raise InvalidInputError(f"{_BUNDLE_PREFIX}member {_show(name)} has an absolute path")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidInputError(f"{_BUNDLE_PREFIX}member {_show(name)} has a '..' path component")
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
    raise InvalidInputError(f"{_BUNDLE_PREFIX}member {_show(member.name)} {problem}")


def _is_spec_candidate(path: str) -> bool:
    """Root-level YAML files and ``<dir>/config.yaml`` may turn out to be the spec."""
    parts = path.split("/")
    if len(parts) == 1:
        return path.lower().endswith(_YAML_SUFFIXES) and not path.startswith(".")
    return len(parts) == 2 and parts[1] == _CONFIG_YAML


def _choose_spec_file(scan: _TarScan) -> str:
    if _CONFIG_YAML in scan.files:
        return _CONFIG_YAML
    root_yaml = sorted(p for p in scan.candidates if "/" not in p)
    if len(root_yaml) == 1:
        return root_yaml[0]
    if len(root_yaml) > 1:
        listed = ", ".join(_show(p) for p in root_yaml[:5])
        raise InvalidInputError(
            f"{_BUNDLE_PREFIX}several YAML files at the root ({listed}) and no config.yaml; "
            "expected exactly one <name>.yaml or a directory bundle with config.yaml"
        )
    visible_roots = {root for root in scan.roots if not root.startswith(".")}
    if len(visible_roots) == 1:
        (top,) = visible_roots
        nested = f"{top}/{_CONFIG_YAML}"
        if nested in scan.files:
            return nested
    raise InvalidInputError(
        f"{_BUNDLE_PREFIX}no agent YAML found; expected one <name>.yaml at the root, "
        "or config.yaml at the root or inside a single top-level directory"
    )


def _describe_exception(exc: BaseException) -> str:
    text = str(exc).strip()
    return _truncate(text, 120) if text else type(exc).__name__


# --------------------------------------------------------------------------
# YAML
# --------------------------------------------------------------------------


class _YamlLimitError(yaml.YAMLError):
    """A hardening limit was hit; the message is safe to show as-is."""


class _HardenedLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases and nodes and bounds nesting while composing.

    Counting as events arrive stops an oversized document early instead of
    parsing all of it first.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._alias_count = 0
        self._node_count = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._alias_count += 1
            if self._alias_count > MAX_YAML_ALIASES:
                raise _YamlLimitError(f"uses too many aliases (more than {MAX_YAML_ALIASES})")
            return super().compose_node(parent, index)
        self._node_count += 1
        if self._node_count > MAX_YAML_NODES:
            raise _YamlLimitError(f"has too many nodes (more than {MAX_YAML_NODES})")
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _YamlLimitError(f"nests deeper than {MAX_YAML_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _load_yaml(content: bytes, path: str) -> object:
    """Parse one YAML document with alias, size and depth limits."""
    where = f"YAML in {path}"
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInputError(f"{_BUNDLE_PREFIX}{where} is not valid UTF-8") from None

    loader: _HardenedLoader | None = None
    try:
        loader = _HardenedLoader(text)
        node = loader.get_single_node()
        if node is None:
            raise InvalidInputError(f"{_BUNDLE_PREFIX}{where} is empty")
        _check_node_graph(node)
        value = loader.construct_document(node)
    except _YamlLimitError as exc:
        raise InvalidInputError(f"{_BUNDLE_PREFIX}{where} {exc}") from None
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"{_BUNDLE_PREFIX}{where}: {_yaml_problem(exc)}") from None
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise InvalidInputError(f"{_BUNDLE_PREFIX}{where} holds a value that cannot be loaded") from None
    finally:
        if loader is not None:
            loader.dispose()
    return _to_plain(value, path, "")


def _check_node_graph(root: yaml.Node) -> None:
    """Refuse graphs whose alias-expanded size or depth exceeds the limits.

    PyYAML shares aliased nodes, so the composed graph stays small while its
    expansion (what validation and JSON encoding walk) can be exponential.
    Sizes are memoised per node, so this runs in time linear in the graph.
    """
    sizes: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _node_children(node)
        if finished:
            on_path.discard(key)
            size = 1 + sum(sizes[id(child)][0] for child in children)
            depth = 1 + max((sizes[id(child)][1] for child in children), default=0)
            if size > MAX_YAML_NODES:
                raise _YamlLimitError(f"expands to too many nodes (more than {MAX_YAML_NODES})")
            if depth > MAX_YAML_DEPTH:
                raise _YamlLimitError(f"nests deeper than {MAX_YAML_DEPTH} levels once aliases are expanded")
            sizes[key] = (size, depth)
            continue
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise _YamlLimitError("has an alias that refers to itself (recursive structure)")
            if id(child) not in sizes:
                stack.append((child, False))


def _node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """Describe a YAML error by position only: PyYAML's snippet could show a secret."""
    if isinstance(exc, yaml.MarkedYAMLError):
        if "expected a single document" in (exc.context or ""):
            return "must hold a single document, found more than one"
        problem = _truncate(exc.problem or exc.context or "malformed YAML", 200)
        kind = "syntax error" if isinstance(exc, ScannerError | ParserError) else "error"
        mark = exc.problem_mark or exc.context_mark
        if mark is not None:
            return f"{kind} at line {mark.line + 1}, column {mark.column + 1}: {problem}"
        return f"{kind}: {problem}"
    if isinstance(exc, ReaderError):
        return f"unacceptable character at position {exc.position}"
    return "malformed YAML"


def _to_plain(value: object, file: str, at: str) -> object:
    """Turn SafeLoader output into JSON-compatible data (what storage can hold).

    Dates become ISO strings and scalar keys become strings the way JSON
    encodes them; binary values, sets and non-finite numbers are refused.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{_BUNDLE_PREFIX}non-finite number at {_where(at, file)}")
        return value
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, dict):
        result: dict[str, object] = {}
        for key, item in value.items():
            name = _plain_key(key, file, at)
            result[name] = _to_plain(item, file, f"{at}.{name}" if at else name)
        return result
    if isinstance(value, list):
        return [_to_plain(item, file, f"{at}[{i}]") for i, item in enumerate(value)]
    kind = "binary" if isinstance(value, bytes) else type(value).__name__
    raise InvalidInputError(f"{_BUNDLE_PREFIX}unsupported {kind} value at {_where(at, file)}")


def _plain_key(key: object, file: str, at: str) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    if isinstance(key, datetime.date):
        return key.isoformat()
    raise InvalidInputError(f"{_BUNDLE_PREFIX}unsupported mapping key at {_where(at, file)}")


def _where(at: str, file: str) -> str:
    return f"{_truncate(at, 200) or 'top level'} (in {file})"


# --------------------------------------------------------------------------
# Spec validation
# --------------------------------------------------------------------------


def _validate_spec(raw: object, prefix: str, where: str) -> AgentSpec:
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{prefix}the top level must be a mapping, got {_kind(raw)}{where}")
    if raw.get("name") in (None, ""):
        raise InvalidInputError(f"{prefix}missing required field 'name'{where}")
    try:
        return AgentSpec.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInputError(f"{prefix}{_format_validation_error(exc)}{where}") from None


def _format_validation_error(exc: ValidationError) -> str:
    """``loc: msg`` pairs without the offending input, so secrets never echo back."""
    items: list[str] = []
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for error in errors[:_MAX_LISTED_ERRORS]:
        location = _format_loc(error["loc"])
        message = _truncate(error["msg"].removeprefix("Value error, "), 300)
        items.append(f"{location}: {message}" if location else message)
    if len(errors) > _MAX_LISTED_ERRORS:
        items.append(f"and {len(errors) - _MAX_LISTED_ERRORS} more")
    return "; ".join(items)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    """``executor.auth.base_url``, ``tools[0]``, ``labels['a b'][key]``."""
    text = ""
    for part in loc:
        if isinstance(part, int) or part == "[key]":
            text += f"[{part}]" if isinstance(part, int) else part
        elif _PLAIN_KEY_RE.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{_show(part)}]"
    return _truncate(text, 200)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


# --------------------------------------------------------------------------
# Session metadata
# --------------------------------------------------------------------------

_LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=256)]
_LabelValue = Annotated[str, StringConstraints(max_length=256)]


class SessionMetadata(BaseModel):
    """The ``metadata`` form field of a bundle upload.

    Unknown keys are refused (as omnigent does). The omnigent fields skyloop
    has no use for are accepted so stock clients work, and excluded from dumps.
    """

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=512)
    labels: dict[_LabelKey, _LabelValue] = Field(default_factory=dict, max_length=50)
    reasoning_effort: Any = Field(default=None, exclude=True)
    host_id: Any = Field(default=None, exclude=True)
    workspace: Any = Field(default=None, exclude=True)
    terminal_launch_args: Any = Field(default=None, exclude=True)
    parent_session_id: Any = Field(default=None, exclude=True)

    @field_validator("labels", mode="before")
    @classmethod
    def _null_labels(cls, value: object) -> object:
        return {} if value is None else value


def parse_session_metadata(text: str) -> SessionMetadata:
    """Parse the metadata JSON string; bad JSON or unknown keys are a 400."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_METADATA_BYTES:
        raise PayloadTooLargeError(f"{_METADATA_PREFIX}larger than {MAX_METADATA_BYTES} bytes")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{_METADATA_PREFIX}not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise InvalidInputError(f"{_METADATA_PREFIX}JSON nests too deeply") from None
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{_METADATA_PREFIX}expected a JSON object, got {_kind(raw)}")
    try:
        return SessionMetadata.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInputError(f"{_METADATA_PREFIX}{_format_validation_error(exc)}") from None


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(name: str) -> str:
    """Quote a user-supplied name for an error message, bounded in length."""
    return repr(_truncate(name, 120))
