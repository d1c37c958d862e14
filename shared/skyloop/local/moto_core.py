"""Take per-request reflection out of moto's dispatch.

Every request moto serves lists its handler class's methods with
``inspect.getmembers`` to check the action exists (about 0.1 ms, more than a
GetItem's own work). A class's methods do not change while the stack runs,
so the list is computed once per class. Real AWS needs none of this.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from skyloop.local._patch import replace

if TYPE_CHECKING:
    from collections.abc import Callable

_undo: list[Callable[[], None]] = []


def install() -> Callable[[], None]:
    import moto.core.responses as responses

    if _undo:
        return lambda: None
    original = responses.method_names_from_class

    @functools.cache
    def cached(clazz: Any) -> list[str]:
        return original(clazz)

    replace(responses, "method_names_from_class", cached)

    def undo() -> None:
        replace(responses, "method_names_from_class", original)
        _undo.clear()

    _undo.append(undo)
    return undo
