"""Persistence: the single DynamoDB table (see ``dynamodb`` for the key design)."""

from skyloop.store.dynamodb import (
    Append,
    AppendResult,
    ConditionFailedError,
    DynamoStore,
    NewItem,
    StoredEvent,
)

__all__ = ["Append", "AppendResult", "ConditionFailedError", "DynamoStore", "NewItem", "StoredEvent"]
