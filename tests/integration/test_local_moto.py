"""The local stack's shortcuts through moto answer exactly as moto's generic path does."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
import botocore.handlers
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from skyloop.local import aws_shortcut, lambda_hook, lambda_runtime, moto_dynamodb
from skyloop.store.schema import create_table_kwargs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

REGION = "us-east-1"


@pytest.fixture
def ddb() -> Iterator[Any]:
    env = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": REGION}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("AWS_ENDPOINT_URL", raising=False)
        with mock_aws():
            yield boto3.client("dynamodb", region_name=REGION)


def _outcome(call: Callable[[], dict[str, Any]]) -> Any:
    """A response without its request metadata, or the error as botocore raised it."""
    try:
        out = call()
    except ClientError as exc:
        body = dict(exc.response)
        body.pop("ResponseMetadata", None)
        return ("error", body)
    out.pop("ResponseMetadata", None)
    return out


def _script(ddb: Any, table: str) -> list[Any]:
    """Every data-plane operation the store uses, successes and failures alike."""
    ddb.create_table(**create_table_kwargs(table))
    key = {"pk": {"S": "S#1"}, "sk": {"S": "META"}}
    item = {
        **key,
        "status": {"S": "idle"},
        "n": {"N": "1"},
        "owner_key": {"S": "OWNER#a"},
        "created_key": {"S": "x"},
    }
    every_type = {  # every value type items hold (binary: see the update below)
        "flag": {"BOOL": True},
        "none": {"NULL": True},
        "tags": {"SS": ["a", "b"]},
        "nums": {"NS": ["1", "2.5"]},
        "list": {"L": [{"S": "x"}, {"N": "3"}, {"M": {"k": {"BOOL": False}, "l": {"L": []}}}]},
    }
    events = [
        {"pk": {"S": "S#1"}, "sk": {"S": f"E#{i:012d}"}, "d": {"M": {"t": {"S": 'é\n"q"'}}}, **every_type}
        for i in range(7)
    ]
    steps: list[Callable[[], dict[str, Any]]] = [
        lambda: ddb.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)"),
        lambda: ddb.put_item(
            TableName=table,
            Item=item,
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ),
        lambda: ddb.get_item(TableName=table, Key=key, ConsistentRead=True),
        lambda: ddb.get_item(TableName=table, Key={"pk": {"S": "nope"}, "sk": {"S": "META"}}),
        lambda: ddb.get_item(TableName=table, Key=key, ProjectionExpression="#s", ExpressionAttributeNames={"#s": "status"}),
        lambda: ddb.transact_write_items(
            TransactItems=[
                {"Update": {"TableName": table, "Key": key, "UpdateExpression": "SET n = n + :one",
                            "ConditionExpression": "n = :n", "ExpressionAttributeValues": {":one": {"N": "1"}, ":n": {"N": "1"}}}},
                *({"Put": {"TableName": table, "Item": e, "ConditionExpression": "attribute_not_exists(sk)"}} for e in events),
            ]
        ),
        lambda: ddb.transact_write_items(
            TransactItems=[
                {"Update": {"TableName": table, "Key": key, "UpdateExpression": "SET n = n + :one",
                            "ConditionExpression": "n = :n", "ExpressionAttributeValues": {":one": {"N": "1"}, ":n": {"N": "1"}},
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
                {"Put": {"TableName": table, "Item": events[0], "ConditionExpression": "attribute_not_exists(sk)"}},
            ]
        ),
        lambda: ddb.query(
            TableName=table, KeyConditionExpression="pk = :p AND sk > :s", ConsistentRead=True, Limit=3,
            ExpressionAttributeValues={":p": {"S": "S#1"}, ":s": {"S": "E#000000000001"}},
        ),
        lambda: ddb.query(
            TableName=table, KeyConditionExpression="pk = :p AND begins_with(sk, :s)", ScanIndexForward=False,
            ExclusiveStartKey={"pk": {"S": "S#1"}, "sk": {"S": "E#000000000005"}},
            ExpressionAttributeValues={":p": {"S": "S#1"}, ":s": {"S": "E#"}},
        ),
        lambda: ddb.query(
            TableName=table, IndexName="by_owner", KeyConditionExpression="owner_key = :o",
            ExpressionAttributeValues={":o": {"S": "OWNER#a"}},
        ),
        lambda: ddb.query(TableName=table, KeyConditionExpression="nope = :o", ExpressionAttributeValues={":o": {"S": "a"}}),
        lambda: ddb.update_item(
            TableName=table, Key=key, UpdateExpression="SET #s = :s REMOVE created_key", ReturnValues="ALL_NEW",
            ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues={":s": {"S": "running"}},
        ),
        lambda: ddb.update_item(TableName=table, Key=key, UpdateExpression="SET b = :b", ExpressionAttributeValues={":b": {"B": b"\x00\x01"}}),
        lambda: ddb.get_item(TableName=table, Key=key),
        lambda: ddb.batch_get_item(RequestItems={table: {"Keys": [key, {"pk": {"S": "S#1"}, "sk": {"S": "E#000000000002"}}]}}),
        lambda: ddb.scan(TableName=table, FilterExpression="attribute_exists(d)", Select="COUNT"),
        lambda: ddb.delete_item(TableName=table, Key=key, ConditionExpression="#s = :s", ReturnValues="ALL_OLD",
                                ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues={":s": {"S": "idle"}}),
        lambda: ddb.delete_item(TableName=table, Key=key, ReturnValues="ALL_OLD"),
        lambda: ddb.get_item(TableName="no-such-table", Key=key),
    ]  # fmt: skip
    try:
        return [_outcome(step) for step in steps]
    finally:
        ddb.delete_table(TableName=table)


def test_the_patched_dynamodb_answers_as_moto_does(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _script(ddb, "t")
    undo = moto_dynamodb.install()
    try:
        fast = _script(ddb, "t")
        fast_again = _script(ddb, "t")  # the caches of parsed expressions are warm now
        with monkeypatch.context() as mp:
            mp.setattr(moto_dynamodb, "FAST_OPERATIONS", frozenset())
            generic = _script(ddb, "t")
    finally:
        undo()
    assert fast == plain
    assert fast_again == plain
    assert generic == plain
    assert fast[1][0] == "error"  # the failures really failed
    assert fast[6][1]["Error"]["Code"] == "TransactionCanceledException"
    assert "CancellationReasons" in fast[6][1]


def test_calls_answered_without_botocores_transport_are_the_same(ddb: Any) -> None:
    plain = _script(ddb, "t")
    undo = moto_dynamodb.install()
    aws_shortcut.install(lambda_runtime.dispatch_aws)
    try:
        short = boto3.session.Session().client("dynamodb", region_name=REGION)  # a new session takes the hook
        assert (aws_shortcut.EVENT, aws_shortcut.answer) in botocore.handlers.BUILTIN_HANDLERS
        assert _script(short, "t") == plain
        # and the metadata botocore adds is there too (the answers above are compared without it)
        short.create_table(**create_table_kwargs("m"))
        key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
        short_meta = short.get_item(TableName="m", Key=key)["ResponseMetadata"]
        plain_meta = ddb.get_item(TableName="m", Key=key)["ResponseMetadata"]
        assert list(short_meta) == list(plain_meta)
        assert short_meta["HTTPStatusCode"] == 200
        assert short_meta["RequestId"] == short_meta["HTTPHeaders"]["x-amzn-requestid"]
    finally:
        aws_shortcut.uninstall()
        undo()


def test_fast_path_serves_only_data_plane_requests(ddb: Any) -> None:
    undo = moto_dynamodb.install()
    try:
        _only_data_plane()
    finally:
        undo()


def _only_data_plane() -> None:
    assert moto_dynamodb.dispatch_fast("https://dynamodb.us-east-1.amazonaws.com/", {}, b"{}") is None
    headers = {"X-Amz-Target": "DynamoDB_20120810.CreateTable"}
    assert moto_dynamodb.dispatch_fast("https://dynamodb.us-east-1.amazonaws.com/", headers, b"{}") is None
    headers = {"X-Amz-Target": "DynamoDB_20120810.PutItem"}
    binary = b'{"TableName": "t", "Item": {"pk": {"B": "AAE="}}}'
    assert moto_dynamodb.dispatch_fast("https://dynamodb.us-east-1.amazonaws.com/", headers, binary) is None
    headers = {"X-Amz-Target": "DynamoDB_20120810.GetItem", "Content-Type": "application/x-amz-json-1.0"}
    body = b'{"TableName": "none", "Key": {"pk": {"S": "a"}, "sk": {"S": "b"}}}'
    status, _, text = moto_dynamodb.dispatch_fast("https://dynamodb.us-east-1.amazonaws.com/", headers, body)
    assert (status, "ResourceNotFoundException" in text) == (400, True)


def _invocations(lam: Any) -> list[Any]:
    """Invoke's outcomes: a result, a function error, an unknown function, an asynchronous call."""
    out: list[Any] = []
    for name, payload, kind in (
        ("shout", {"call_id": "c", "arguments": {"text": "hi"}}, "RequestResponse"),
        ("explode", {"arguments": {"why": "test"}}, "RequestResponse"),
        ("nope", {}, "RequestResponse"),
        ("shout", {"call_id": "e", "arguments": {"text": "later"}}, "Event"),
    ):
        try:
            resp = lam.invoke(FunctionName=name, Payload=json.dumps(payload).encode(), InvocationType=kind)
        except ClientError as exc:
            out.append(("error", exc.response["Error"]["Code"]))
            continue
        body = json.loads(resp["Payload"].read() or b"null")
        if isinstance(body, dict):
            body.pop("stackTrace", None)
        out.append((resp["StatusCode"], resp.get("FunctionError"), resp.get("ExecutedVersion"), body))
    return out


def test_lambda_invoke_shortcut_answers_as_moto_does(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.integration import tool_functions

    env = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": REGION}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SKYLOOP_LAMBDA_TOOLS", tool_functions.__file__)
    with mock_aws(config={"lambda": {"use_docker": False}}):
        lambda_hook.install()
        try:
            iam = boto3.client("iam", region_name=REGION)
            trust = {"Version": "2012-10-17", "Statement": []}
            role = iam.create_role(RoleName="r", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
            lam = boto3.client("lambda", region_name=REGION)
            for name in ("shout", "explode"):
                lam.create_function(
                    FunctionName=name,
                    Runtime="python3.12",
                    Role=role,
                    Handler=f"{name}.handler",
                    Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
                )
            plain = _invocations(lam)
            lambda_hook.install_invoke_shortcut()
            short = boto3.client("lambda", region_name=REGION)
            answered: list[bool] = []

            def spy(**kwargs: Any) -> Any:
                out = lambda_hook.answer_invoke(**kwargs)
                answered.append(out is not None)
                return out

            short.meta.events.unregister(lambda_hook.INVOKE_EVENT, lambda_hook.answer_invoke)
            short.meta.events.register(lambda_hook.INVOKE_EVENT, spy)
            assert _invocations(short) == plain
            assert answered == [True, True, False, True]  # the unknown function took moto's own path
            assert [plain[0][0], plain[1][1], plain[2][0]] == [200, "Unhandled", "error"]
        finally:
            spec = (lambda_hook.INVOKE_EVENT, lambda_hook.answer_invoke)
            if spec in botocore.handlers.BUILTIN_HANDLERS:
                botocore.handlers.BUILTIN_HANDLERS.remove(spec)
            lambda_hook.uninstall()
