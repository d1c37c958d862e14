"""``multipart/form-data`` bodies, parsed with the standard library's MIME parser.

The parser is lenient by design (it is built for mail), so everything it
would paper over is refused here instead: truncated bodies, nested forms,
repeated field names and non-RFC boundaries. Bodies are held in memory,
which the request-size limit keeps affordable.
"""

from __future__ import annotations

import re
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
from typing import TYPE_CHECKING

from skyloop.bundles import limits
from skyloop.bundles._messages import show
from skyloop.errors import InvalidInputError, PayloadTooLargeError, SkyloopError, UnsupportedMediaTypeError

if TYPE_CHECKING:
    from email.message import Message

__all__ = ["MultipartForm", "UploadedFile", "parse_multipart_form"]

# RFC 2046 boundary: 1 to MAX_BOUNDARY_CHARS bchars, not ending in a space.
_BOUNDARY_RE = re.compile(
    rf"[0-9A-Za-z'()+_,\-./:=? ]{{0,{limits.MAX_BOUNDARY_CHARS - 1}}}[0-9A-Za-z'()+_,\-./:=?]"
)


@dataclass(frozen=True, slots=True)
class UploadedFile:
    """One file part of a form, held in memory (bodies are capped at MAX_REQUEST_BYTES)."""

    filename: str | None
    content_type: str | None
    data: bytes


@dataclass(frozen=True, slots=True)
class MultipartForm:
    """A parsed form: text fields and file parts, each name at most once."""

    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, UploadedFile] = field(default_factory=dict)


def parse_multipart_form(body: bytes, content_type: str) -> MultipartForm:
    """Parse a ``multipart/form-data`` body.

    A part is a file when it carries a ``filename`` or a non-text
    ``Content-Type``; otherwise it is a text field in its declared charset
    (UTF-8 by default). Truncated bodies (no closing boundary), nested
    multiparts and repeated names are refused rather than guessed at.
    """
    if len(body) > limits.MAX_REQUEST_BYTES:
        raise PayloadTooLargeError(
            f"request body is {len(body)} bytes; the limit is {limits.MAX_REQUEST_BYTES}"
        )
    message = _parse_mime(body, content_type)

    parts = message.get_payload()
    if not message.is_multipart() or not isinstance(parts, list):
        raise InvalidInputError("malformed multipart body")
    if len(parts) > limits.MAX_FORM_PARTS:
        raise InvalidInputError(
            f"multipart body has {len(parts)} parts; at most {limits.MAX_FORM_PARTS} are accepted"
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
            raise InvalidInputError(f"multipart form repeats the field {show(name)}")
        if isinstance(upload, UploadedFile):
            files[name] = upload
        else:
            fields[name] = upload
    return MultipartForm(fields=fields, files=files)


def _parse_mime(body: bytes, content_type: str) -> Message:
    """Parse the body under a synthetic header; refuse what is not a well-formed form."""
    if any(ch in content_type for ch in "\r\n\x00"):
        raise InvalidInputError("invalid Content-Type header")  # it would inject headers below
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

    _refuse_defects(message)
    return message


def _refuse_defects(message: Message) -> None:
    """The parser records structural problems as defects instead of raising."""
    for defect in message.defects:
        if isinstance(defect, StartBoundaryNotFoundDefect | NoBoundaryInMultipartDefect):
            raise InvalidInputError("malformed multipart body: the boundary never appears in the body")
        if isinstance(defect, CloseBoundaryNotFoundDefect):
            raise InvalidInputError("malformed multipart body: no closing boundary (truncated upload?)")
        if isinstance(defect, MultipartInvariantViolationDefect):
            raise InvalidInputError("malformed multipart body")


def _read_form_part(part: Message, index: int) -> tuple[str, UploadedFile | str]:
    """One part as ``(field name, file or text)``."""
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
        raise InvalidInputError(f"form field {show(name)} is not valid {charset} text") from None


def _from_surrogates(value: str) -> str:
    """Header values hold raw non-ASCII bytes as surrogates; read them as UTF-8."""
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")
