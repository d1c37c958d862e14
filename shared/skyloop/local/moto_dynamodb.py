"""Make moto's DynamoDB safe to call from many threads at once.

moto's DynamoDB backend has no lock, and its ``TransactWriteItems`` deep-copies
the table and puts the copy back when a condition fails, silently undoing
other threads' writes. The local stack serves requests on many threads (the
moto server, Step Functions executions, streams, the TTL sweeper), so every
DynamoDB request runs under one lock. Real DynamoDB needs none of this.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

_lock = threading.RLock()


def serialize_requests() -> Callable[[], None]:
    """Patch moto's DynamoDB dispatch to take one request at a time; returns the undo."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        with _lock:
            return original(self)

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]

    def undo() -> None:
        DynamoHandler.call_action = original  # type: ignore[method-assign]

    return undo
