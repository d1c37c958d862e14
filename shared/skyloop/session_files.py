"""Files uploaded into a session (``/v1/sessions/{id}/resources/files``): checks, then the store.

Everything that can refuse an upload is checked before a byte is stored: the
filename (400), the per-file size (413 ``file_too_large``); the store then
holds the per-session count and bytes in the same conditional write that adds
the file (413 ``session_file_count_exceeded`` / ``session_file_bytes_exceeded``).
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
import time
import urllib.parse
from typing import TYPE_CHECKING

from skyloop.errors import InvalidInputError, NotFoundError
from skyloop.ids import is_hex32, new_id
from skyloop.models.session import SessionFile
from skyloop.store.records import FileLimits

if TYPE_CHECKING:
    from skyloop.models.session import Session
    from skyloop.settings import Settings
    from skyloop.store import Store

MAX_FILENAME_BYTES = 255  # what common filesystems allow for one name
MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}$")
DEFAULT_TYPE = "application/octet-stream"


def limits(settings: Settings) -> FileLimits:
    return FileLimits(
        max_file_bytes=settings.file_max_bytes,
        max_files=settings.session_files_max,
        max_total_bytes=settings.session_files_max_bytes,
    )


def check_filename(name: str | None) -> str:
    """A plain file name: no path, no control characters, not ``.``/``..``, at most 255 UTF-8 bytes."""

    def bad(why: str) -> InvalidInputError:
        return InvalidInputError(f"invalid filename: {why}", param="filename")

    if not name:
        raise bad("a filename is required")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_FILENAME_BYTES:
        raise bad(f"longer than {MAX_FILENAME_BYTES} bytes of UTF-8")
    if "/" in name or "\\" in name:
        raise bad("it may not contain '/' or '\\'")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in name):
        raise bad("it may not contain control characters")
    if name in (".", "..") or name.strip() != name:
        raise bad("it may not be '.' or '..' or start or end with whitespace")
    return name


def content_type_for(declared: str | None, filename: str) -> str:
    """The declared media type when it is one (parameters dropped), else a guess from the name."""
    bare = (declared or "").split(";")[0].strip().lower()
    if bare and bare != DEFAULT_TYPE and MEDIA_TYPE.match(bare):
        return bare
    return mimetypes.guess_type(filename)[0] or DEFAULT_TYPE


def upload(
    store: Store,
    session: Session,
    settings: Settings,
    *,
    filename: str | None,
    data: bytes,
    declared: str | None,
) -> SessionFile:
    name = check_filename(filename)
    file_limits = limits(settings)
    file_limits.check((0, 0), len(data))  # the per-file limit first: nothing is read for an oversize file
    file = SessionFile(
        id=new_id(),
        session_id=session.id,
        filename=name,
        bytes=len(data),
        content_type=content_type_for(declared, name),
        created_at=int(time.time()),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    store.add_file(file, data, file_limits)
    return file


def get(store: Store, session: Session, file_id: str) -> SessionFile:
    found = store.get_file(session.id, file_id) if is_hex32(file_id) else None
    if found is None:
        raise NotFoundError(f"File not found: '{file_id}'")
    return found


def delete(store: Store, session: Session, file_id: str) -> SessionFile:
    found = store.delete_file(session.id, file_id) if is_hex32(file_id) else None
    if found is None:
        raise NotFoundError(f"File not found: '{file_id}'")
    return found


def attachment_disposition(filename: str) -> str:
    """``Content-Disposition: attachment`` that no filename can break out of (as omnigent builds it)."""
    ascii_name = "".join(ch for ch in filename if 0x20 <= ord(ch) < 0x7F and ch not in '"\\') or "download"
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{urllib.parse.quote(filename, safe='')}"
