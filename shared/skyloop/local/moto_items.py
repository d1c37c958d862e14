"""Stored DynamoDB items in moto, a little denser: one copy of each attribute name in the process.

moto builds an ``Item`` from the request's JSON, whose keys are fresh
strings per request (the JSON decoder shares a key only within one
document), so every stored item held its own copy of every attribute name
(``pk``, ``sk``, ``type``, ``data``...: ~50 bytes each, ~10% of an item in
moto's objects here). :func:`install` interns each top-level name as moto
sets it on an item (``LimitedSizeDict``, the class of ``Item.attrs`` only:
on a put, and on an update that adds an attribute); the values, and
everything moto does with them, are unchanged. Real DynamoDB needs none of this.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from skyloop.local._patch import replace

if TYPE_CHECKING:
    from collections.abc import Callable

_undo: list[Callable[[], None]] = []


def install() -> Callable[[], None]:
    """Patch moto's item attributes to intern their names; returns the undo."""
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict

    if _undo:
        return lambda: None
    original = LimitedSizeDict.__setitem__
    intern = sys.intern

    def setitem(self: Any, key: str, value: Any) -> None:
        original(self, intern(key) if type(key) is str else key, value)

    replace(LimitedSizeDict, "__setitem__", setitem)

    def undo() -> None:
        replace(LimitedSizeDict, "__setitem__", original)
        _undo.clear()

    _undo.append(undo)
    return undo
