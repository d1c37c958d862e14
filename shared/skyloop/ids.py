"""Identifier rules: 32-char lowercase hex for stored objects, prefixed ids for turns.

Ids of items written by turn steps are *derived* from (turn, step, index) so a
retried step writes the very same ids and its conditional puts become no-ops.
"""

from __future__ import annotations

import hashlib
import re
import uuid

DEFAULT_OWNER = "local"  # who owns what a stack without tokens stores (the open principal)

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def new_id() -> str:
    return uuid.uuid4().hex


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex[:24]}"


def new_turn_group_id() -> str:
    return f"turn_{uuid.uuid4().hex}"


def derived_id(*parts: object) -> str:
    """A stable 32-hex id for the object a step creates at position ``parts``."""
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()[:32]


def is_hex32(value: str) -> bool:
    return bool(HEX32.match(value))
