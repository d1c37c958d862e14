"""The DynamoDB process of the local stack, driven with raw DynamoDB requests from many threads."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from skyloop.local.dynamodb_process import DynamoDBProcess, Remote, remote_from_env

URL = "https://dynamodb.us-east-1.amazonaws.com/"
TABLE = "t"


def call(remote: Remote, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    headers = [
        ("X-Amz-Target", f"DynamoDB_20120810.{operation}"),
        ("Content-Type", "application/x-amz-json-1.0"),
    ]
    status, _, out = remote.call("POST", URL, headers, json.dumps(body).encode())
    return status, json.loads(out or b"{}")


@pytest.fixture(scope="module")
def process() -> Iterator[DynamoDBProcess]:
    handle = DynamoDBProcess()
    remote = handle.connect()
    status, out = call(
        remote,
        "CreateTable",
        {
            "TableName": TABLE,
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    assert status == 200, out
    try:
        yield handle
    finally:
        handle.close()


def test_conditional_writes_from_many_threads_have_one_winner_each(process: DynamoDBProcess) -> None:
    # Given 8 threads that each try to create the same 40 items, conditionally, over pooled connections
    remote = remote_from_env({"SKYLOOP_LOCAL_DYNAMODB_ADDRESS": process.env_value})  # as a worker does
    assert remote is not None
    wins: list[tuple[str, int]] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        for i in range(40):
            status, out = call(
                remote,
                "PutItem",
                {
                    "TableName": TABLE,
                    "Item": {"pk": {"S": f"k{i}"}, "writer": {"N": str(n)}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                },
            )
            if status == 200:
                with lock:
                    wins.append((f"k{i}", n))
            else:
                assert out["__type"].endswith("ConditionalCheckFailedException"), out

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then each item was created exactly once, and what is stored is the winner's write
    assert sorted(k for k, _ in wins) == sorted(f"k{i}" for i in range(40))
    for key, writer_n in wins:
        _, out = call(
            remote, "GetItem", {"TableName": TABLE, "Key": {"pk": {"S": key}}, "ConsistentRead": True}
        )
        assert out["Item"]["writer"] == {"N": str(writer_n)}


def test_an_error_answer_is_dynamodbs_own(process: DynamoDBProcess) -> None:
    status, out = call(process.remote, "GetItem", {"TableName": "missing", "Key": {"pk": {"S": "x"}}})
    assert status == 400
    assert out["__type"].endswith("ResourceNotFoundException")


def test_a_closed_process_fails_calls_at_once_and_reports_no_exit() -> None:
    # Given a process that is watched and then closed by its owner
    handle = DynamoDBProcess()
    remote = handle.connect()
    assert call(remote, "ListTables", {})[0] == 200
    exits: list[int] = []
    watcher = handle.watch(exits.append)
    handle.close()
    watcher.join(10)
    assert not watcher.is_alive()
    # Then the process is gone, a planned close is not reported as a crash,
    # and a new call fails at once (a pooled connection that broke is never reused)
    with pytest.raises((OSError, EOFError)):
        call(remote, "ListTables", {})
    with pytest.raises((OSError, EOFError)):
        call(remote, "ListTables", {})
    assert exits == []
