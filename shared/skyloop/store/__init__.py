"""Persistence behind one interface (:class:`Store`): DynamoDB in production, a dict in unit tests.

Only this package knows item keys, attribute names, indexes and DynamoDB
types (``keys`` documents the key design); callers speak in records
(``records``) and models.
"""

from skyloop.store.dynamodb import DynamoStore
from skyloop.store.memory import MemoryStore
from skyloop.store.protocol import Store
from skyloop.store.records import (
    Append,
    AppendResult,
    ApprovalResolution,
    ConditionFailedError,
    ContentionError,
    FileLimits,
    Guard,
    NewItem,
    SessionChange,
    StoredEvent,
    TokenRecord,
    TurnDecision,
    TurnEnd,
)

__all__ = [
    "Append",
    "AppendResult",
    "ApprovalResolution",
    "ConditionFailedError",
    "ContentionError",
    "DynamoStore",
    "FileLimits",
    "Guard",
    "MemoryStore",
    "NewItem",
    "SessionChange",
    "Store",
    "StoredEvent",
    "TokenRecord",
    "TurnDecision",
    "TurnEnd",
]
