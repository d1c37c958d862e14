"""The AWS event-stream binary framing (``application/vnd.amazon.eventstream``), encode side.

What Bedrock's ``ConverseStream`` answers with, so the mock's stream goes
through botocore's real parser (``botocore.eventstream``). One message is::

    total length (uint32) | headers length (uint32) | prelude CRC32 (uint32)
    headers | payload | message CRC32 (uint32, over everything before it)

and each header is ``name length (uint8) | name | type (uint8) | value``; the
mock only needs string values (type 7: ``uint16 length | utf-8 bytes``).
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7
_PRELUDE = struct.Struct(">II")
_CRC = struct.Struct(">I")


def _crc(data: bytes, value: int = 0) -> int:
    return zlib.crc32(data, value) & 0xFFFFFFFF


def encode_headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack(">B", len(raw_name)) + raw_name
        out += struct.pack(">BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed message: prelude, its CRC, headers, payload, the message CRC."""
    raw_headers = encode_headers(headers)
    total = _PRELUDE.size + _CRC.size + len(raw_headers) + len(payload) + _CRC.size
    prelude = _PRELUDE.pack(total, len(raw_headers))
    head = prelude + _CRC.pack(_crc(prelude)) + raw_headers + payload
    return head + _CRC.pack(_crc(head))


def event(event_type: str, body: dict[str, Any]) -> bytes:
    """An ``:message-type: event`` message whose JSON payload is the event's members."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, json.dumps(body, separators=(",", ":")).encode())


def exception(exception_type: str, message: str) -> bytes:
    """An in-stream modeled exception (``:message-type: exception``), e.g. ``throttlingException``."""
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_message(headers, json.dumps({"message": message}).encode())
