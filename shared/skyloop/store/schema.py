"""The table's physical schema, shared by the CDK construct and the local stack.

Keeping it in one place means a test table built on moto cannot drift from
the deployed one.
"""

from __future__ import annotations

from typing import Any

PK = "pk"
SK = "sk"
TTL_ATTRIBUTE = "expires_at"
GSI_BY_OWNER = "gsi1"  # sessions of an owner, agents of a name, newest last
GSI_BY_NAME = "gsi2"  # sessions of an agent name, all agents

GSIS: tuple[str, ...] = (GSI_BY_OWNER, GSI_BY_NAME)


def create_table_kwargs(table_name: str) -> dict[str, Any]:
    """``CreateTable`` arguments for boto3 (used on moto; CDK mirrors them)."""
    attrs = [PK, SK] + [f"{g}pk" for g in GSIS] + [f"{g}sk" for g in GSIS]
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in attrs],
        "KeySchema": [{"AttributeName": PK, "KeyType": "HASH"}, {"AttributeName": SK, "KeyType": "RANGE"}],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": g,
                "KeySchema": [
                    {"AttributeName": f"{g}pk", "KeyType": "HASH"},
                    {"AttributeName": f"{g}sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for g in GSIS
        ],
    }
