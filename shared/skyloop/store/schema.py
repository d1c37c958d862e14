"""The table's physical schema, shared by the CDK construct and the local stack.

Keeping it in one place means a test table built on moto cannot drift from
the deployed one. Key and index names come from :mod:`skyloop.store.keys`.
"""

from __future__ import annotations

from typing import Any

from skyloop.store.keys import INDEXES, PK, SK, TTL_ATTRIBUTE

__all__ = ["INDEXES", "PK", "SK", "TTL_ATTRIBUTE", "create_table_kwargs"]


def create_table_kwargs(table_name: str) -> dict[str, Any]:
    """``CreateTable`` arguments for boto3 (used on moto; CDK mirrors them)."""
    attrs = [PK, SK, *sorted({a for pair in INDEXES.values() for a in pair})]
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in attrs],
        "KeySchema": [{"AttributeName": PK, "KeyType": "HASH"}, {"AttributeName": SK, "KeyType": "RANGE"}],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": name,
                "KeySchema": [
                    {"AttributeName": hash_key, "KeyType": "HASH"},
                    {"AttributeName": range_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for name, (hash_key, range_key) in INDEXES.items()
        ],
    }
