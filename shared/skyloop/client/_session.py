"""What both session handles share: how ``send`` tells an option left out from one set to ``None``.

The handles themselves are written once, in ``_async/_session.py``
(``AsyncSession``); ``Session`` is generated from it. The sentinel lives here
so both take the very same default, as their signatures say.
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["UNSET", "or_default"]

T = TypeVar("T")

UNSET: Any = object()
"""``send``'s default for each option: the session's own value (``None`` would mean "none")."""


def or_default(value: T, default: T) -> T:
    return default if value is UNSET else value
