"""Take per-request work that nothing reads out of moto's dispatch and boto3's requests.

Every request moto serves lists its handler class's methods with
``inspect.getmembers`` to check the action exists (about 0.1 ms, more than a
GetItem's own work). A class's methods do not change while the stack runs,
so the list is computed once per class. The local stack's own clients also
skip SigV4 signing for the services on its hot path (:func:`skip_signing`).
Real AWS needs none of this.
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


UNSIGNED_SERVICES = ("dynamodb", "sfn", "lambda")  # botocore service ids of the hot paths


def _unsigned(**_: Any) -> Any:
    import botocore

    return botocore.UNSIGNED


def skip_signing() -> None:
    """Let this process's future boto3 clients send the hot services' requests unsigned.

    Every request of the local stack is served by moto in this process tree,
    which reads no signature (an unsigned request is moto's default account,
    as the stack's fixed local keys are); SigV4 signing was a sixth of a turn
    step's CPU. Registered first, so it wins over the operation's own signer.
    """
    import botocore.handlers

    for service in UNSIGNED_SERVICES:
        spec = (f"choose-signer.{service}", _unsigned, botocore.handlers.REGISTER_FIRST)
        if spec not in botocore.handlers.BUILTIN_HANDLERS:
            botocore.handlers.BUILTIN_HANDLERS.append(spec)
