"""Make moto's DynamoDB safe and fast to call from many threads at once.

moto's DynamoDB backend has no lock, and its ``TransactWriteItems`` deep-copies
every touched table up front and puts the copy back when a condition fails:
that silently undoes other threads' writes, and costs time in proportion to
the whole table on every transaction (every event append is one). The local
stack serves requests on many threads (the moto server, Step Functions
executions, streams, the TTL sweeper), so:

* every DynamoDB request runs under one lock, and
* transactions roll back only the items they touched (safe under that lock).

Real DynamoDB needs none of this.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

_lock = threading.RLock()


def serialize_requests() -> Callable[[], None]:
    """Patch moto's DynamoDB: one request at a time, cheap transaction rollback; returns the undo."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action
    original_transact = DynamoDBBackend.transact_write_items

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        with _lock:
            return original(self)

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]

    def undo() -> None:
        DynamoHandler.call_action = original  # type: ignore[method-assign]
        DynamoDBBackend.transact_write_items = original_transact  # type: ignore[method-assign]

    return undo


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """moto's ``transact_write_items`` with an item-level undo log instead of whole-table copies."""
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    undo: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
    seen: set[tuple[str, str]] = set()
    errors: list[tuple[str | None, str | None, dict[str, Any] | None]] = []

    def rollback() -> None:
        for table_name, key, previous in reversed(undo):
            if previous is None:
                self.delete_item(table_name, key)
            else:
                self.put_item(table_name, previous)

    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(item) > 1:
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            names = op.get("ExpressionAttributeNames")
            values = op.get("ExpressionAttributeValues")
            if op_type == "Put":
                table = self.get_table(table_name)
                key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"][table.range_key_attr]
            else:
                key = op["Key"]
            marker = (str(table_name), str(dict(sorted(key.items()))))
            if marker in seen:
                raise MultipleTransactionsException()
            seen.add(marker)
            current = self.get_item(table_name, key)
            condition = op.get("ConditionExpression")
            if condition is not None and not get_filter_expression(condition, names, values).expr(current):
                if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                    original_item = current.to_json()["Attributes"]
                raise ConditionalCheckFailed(item=original_item)
            if op_type != "ConditionCheck":
                undo.append((table_name, key, current.to_json()["Attributes"] if current else None))
            if op_type == "Put":
                self.put_item(
                    table_name,
                    op["Item"],
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name, key, expression_attribute_names=names, expression_attribute_values=values
                )
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            rollback()
            raise
        except ConditionalCheckFailed as exc:
            errors.append(("ConditionalCheckFailed", str(exc.message), original_item))
        except Exception as exc:  # moto reports any other failure per item, too
            errors.append((type(exc).__name__, str(exc), original_item))
    if any(code is not None for code, _, _ in errors):
        rollback()
        raise TransactionCanceledException(errors)
