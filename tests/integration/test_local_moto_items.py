"""moto's stored items with interned attribute names (skyloop.local.moto_items) answer as before."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from moto import mock_aws

from skyloop.local import moto_dynamodb, moto_items

EVERY_TYPE: dict[str, Any] = {
    "pk": {"S": "session#1"},
    "sk": {"N": "42"},
    "text": {"S": "héllo ✓"},
    "count": {"N": "-3.25"},
    "blob": {"B": b"\x00\xffbytes"},
    "flag": {"BOOL": False},
    "nothing": {"NULL": True},
    "map": {
        "M": {"nested": {"M": {"deep": {"L": [{"S": "a"}, {"N": "1"}, {"BOOL": True}]}}}, "n": {"N": "7"}}
    },
    "list": {"L": [{"S": "x"}, {"M": {"k": {"S": "v"}}}, {"NULL": True}, {"B": b"\x01"}]},
    "strings": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2.5"]},
    "binaries": {"BS": [b"\x01", b"\x02"]},
    "empty": {"S": ""},
}


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        undo_ddb = moto_dynamodb.install()
        undo_items = moto_items.install()
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="t",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        try:
            yield client
        finally:
            undo_items()
            undo_ddb()


def _stored(name: str) -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables["t"]
    return next(iter(table.all_items()))


def _normal(item: dict[str, Any]) -> dict[str, Any]:
    """Sets come back in any order."""
    out = dict(item)
    for name in ("strings", "numbers", "binaries"):
        kind = next(iter(out[name]))
        out[name] = {kind: sorted(out[name][kind])}
    return out


def test_every_type_round_trips_through_put_get_query_and_transactions(ddb: Any) -> None:
    key = {"pk": EVERY_TYPE["pk"], "sk": EVERY_TYPE["sk"]}
    ddb.put_item(TableName="t", Item=EVERY_TYPE)
    assert _normal(ddb.get_item(TableName="t", Key=key)["Item"]) == _normal(EVERY_TYPE)
    queried = ddb.query(
        TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": EVERY_TYPE["pk"]}
    )["Items"]
    assert [_normal(i) for i in queried] == [_normal(EVERY_TYPE)]
    ddb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": "t",
                    "Key": key,
                    "UpdateExpression": "SET #m.#n = :n, added = :a ADD #c :one",
                    "ExpressionAttributeNames": {"#m": "map", "#n": "n", "#c": "count"},
                    "ExpressionAttributeValues": {":n": {"N": "8"}, ":a": {"S": "new"}, ":one": {"N": "1"}},
                }
            }
        ]
    )
    after = ddb.get_item(TableName="t", Key=key, ConsistentRead=True)["Item"]
    assert after["map"]["M"]["n"] == {"N": "8"}
    assert after["added"] == {"S": "new"}
    assert Decimal(after["count"]["N"]) == Decimal("-2.25")
    assert after["blob"] == {"B": b"\x00\xffbytes"}
    # the stored item's attribute names are the process's one copy of each name
    for name in _stored("t").attrs:
        assert name is sys.intern(name)


def test_conditions_and_projections_see_the_same_item(ddb: Any) -> None:
    ddb.put_item(TableName="t", Item=EVERY_TYPE)
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.put_item(TableName="t", Item=EVERY_TYPE, ConditionExpression="attribute_not_exists(pk)")
    got = ddb.get_item(
        TableName="t",
        Key={"pk": EVERY_TYPE["pk"], "sk": EVERY_TYPE["sk"]},
        ProjectionExpression="#t, #m.nested",
        ExpressionAttributeNames={"#t": "text", "#m": "map"},
    )["Item"]
    assert got == {"text": EVERY_TYPE["text"], "map": {"M": {"nested": EVERY_TYPE["map"]["M"]["nested"]}}}
    ddb.delete_item(TableName="t", Key={"pk": EVERY_TYPE["pk"], "sk": EVERY_TYPE["sk"]})
    assert "Item" not in ddb.get_item(TableName="t", Key={"pk": EVERY_TYPE["pk"], "sk": EVERY_TYPE["sk"]})
