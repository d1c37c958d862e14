"""Python values <-> DynamoDB attribute values, and compact JSON for the payloads we store as text.

JSON blobs (event data, item data, specs) are stored as compact UTF-8
(``ensure_ascii=False``): DynamoDB counts item size in UTF-8 bytes, and the
``\\uXXXX`` escapes of the default encoder cost six bytes per non-ASCII
character (twelve per emoji), three to six times what the text needs.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

_ser = TypeSerializer()
_de = TypeDeserializer()


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str | None, default: Any = None) -> Any:
    return json.loads(text) if text else default


def attr(value: Any) -> dict[str, Any]:
    """One attribute value (``{"S": ...}``, ``{"N": ...}``...)."""
    return _ser.serialize(_decimals(value))


def to_item(attrs: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB item from plain values; ``None`` values are left out."""
    return {k: _ser.serialize(_decimals(v)) for k, v in attrs.items() if v is not None}


def _decimals(value: Any) -> Any:
    """Floats as the Decimals boto3 wants (by their shortest repr: 0.1 stays 0.1), nested ones too."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _decimals(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decimals(v) for v in value]
    return value


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    """Plain values from a DynamoDB item; numbers come back as int or float, not Decimal."""
    out = {k: _de.deserialize(v) for k, v in item.items()}
    for k, v in out.items():
        if isinstance(v, Decimal):
            out[k] = int(v) if v == int(v) else float(v)
    return out
