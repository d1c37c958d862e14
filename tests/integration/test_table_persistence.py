"""The DynamoDB process keeping its table in a data directory, under concurrent writes and snapshots.

A real ``sl-dynamodb`` process on a directory under ``tmp_path``; many threads
send raw DynamoDB requests; snapshots are taken every ~30 KB of changes while
they write. A second process loading the directory must see exactly the
table the first one served, and after a SIGKILL every acknowledged write.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import pytest

from skyloop.local.dynamodb_process import DynamoDBProcess, Remote
from skyloop.local.persistence.journal import iter_files

if TYPE_CHECKING:
    from pathlib import Path

URL = "https://dynamodb.us-east-1.amazonaws.com/"
TABLE = "t"
KEYS = 20


def call(remote: Remote, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    headers = [
        ("X-Amz-Target", f"DynamoDB_20120810.{operation}"),
        ("Content-Type", "application/x-amz-json-1.0"),
    ]
    status, _, out = remote.call("POST", URL, headers, json.dumps(body).encode())
    return status, json.loads(out or b"{}")


def started(data_dir: Path) -> tuple[DynamoDBProcess, Remote]:
    handle = DynamoDBProcess(str(data_dir))
    return handle, handle.connect()


def scan(remote: Remote) -> dict[str, dict[str, Any]]:
    items: dict[str, dict[str, Any]] = {}
    body: dict[str, Any] = {"TableName": TABLE, "ConsistentRead": True}
    while True:
        status, out = call(remote, "Scan", body)
        assert status == 200, out
        items.update({i["pk"]["S"] + "/" + i["sk"]["S"]: i for i in out["Items"]})
        if "LastEvaluatedKey" not in out:
            return items
        body["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def create_table(remote: Remote) -> None:
    status, out = call(
        remote,
        "CreateTable",
        {
            "TableName": TABLE,
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    assert status == 200, out


class Writers:
    """Threads that count up shared keys, put and delete items of their own, and transact pairs."""

    def __init__(self, remote: Remote, threads: int = 8, ops: int = 150) -> None:
        self.remote = remote
        self.ops = ops
        self.acked: dict[str, int] = {f"k{i}": 0 for i in range(KEYS)}  # increments answered 200
        self.tried: dict[str, int] = {f"k{i}": 0 for i in range(KEYS)}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(t,)) for t in range(threads)]

    def run(self, worker: int) -> None:
        for op in range(self.ops):
            if self.stop.is_set():
                return
            key = f"k{(worker * 7 + op) % KEYS}"
            with self.lock:
                self.tried[key] += 1
            try:
                status, _ = call(
                    self.remote,
                    "UpdateItem",
                    {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": "counter"}, "sk": {"S": key}},
                        "UpdateExpression": "ADD n :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    },
                )
                if status == 200:
                    with self.lock:
                        self.acked[key] += 1
                own = {"pk": {"S": f"w{worker}"}, "sk": {"S": f"{op:04d}"}}
                call(self.remote, "PutItem", {"TableName": TABLE, "Item": {**own, "pad": {"S": "x" * 200}}})
                if op % 3 == 0:
                    previous = {"pk": own["pk"], "sk": {"S": f"{op - 1:04d}"}}
                    call(self.remote, "DeleteItem", {"TableName": TABLE, "Key": previous})
                if op % 5 == 0:
                    pair = [
                        {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "pair"}, "sk": {"S": f"{worker}-{s}"}, "op": {"N": str(op)}}}}
                        for s in ("a", "b")
                    ]  # fmt: skip
                    call(self.remote, "TransactWriteItems", {"TransactItems": pair})
            except (OSError, EOFError):
                return  # the process was killed

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=120)


@pytest.fixture
def small_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLOOP_SNAPSHOT_BYTES", "30000")


@pytest.mark.usefixtures("small_snapshots")
def test_a_reloaded_directory_is_exactly_the_table_that_was_served(tmp_path: Path) -> None:
    # Given a table written by 8 threads while snapshots are taken
    handle, remote = started(tmp_path)
    create_table(remote)
    writers = Writers(remote)
    writers.start()
    writers.join()
    served = scan(remote)
    assert sum(int(served[f"counter/{k}"]["n"]["N"]) for k in writers.acked) == 8 * 150
    snapshots = list(iter_files(tmp_path / "dynamodb", "snapshot"))
    assert snapshots, "no snapshot was taken while the threads wrote"
    handle.close()

    # When another process loads the directory
    handle, remote = started(tmp_path)
    try:
        # Then it serves exactly the same table
        assert handle.loaded["items"] > 0
        assert scan(remote) == served
    finally:
        handle.close()


@pytest.mark.usefixtures("small_snapshots")
def test_after_sigkill_every_acknowledged_write_is_there(tmp_path: Path) -> None:
    # Given writers in full flow
    handle, remote = started(tmp_path)
    create_table(remote)
    writers = Writers(remote, ops=10_000)
    writers.start()
    threading.Event().wait(2.0)

    # When the process is killed under them
    handle._proc.kill()
    writers.stop.set()
    writers.join()
    handle.close()
    assert sum(writers.acked.values()) > 50

    # Then each counter holds every acknowledged increment (and at most the ones tried)
    handle, remote = started(tmp_path)
    try:
        table = scan(remote)
        for key, acked in writers.acked.items():
            stored = int(table[f"counter/{key}"]["n"]["N"]) if f"counter/{key}" in table else 0
            assert acked <= stored <= writers.tried[key], (key, acked, stored, writers.tried[key])
    finally:
        handle.close()


def test_a_read_makes_every_write_it_could_see_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a process whose journal syncs unawaited writes only after 30 s
    monkeypatch.setenv("SKYLOOP_JOURNAL_FLUSH_DELAY_S", "30")
    handle, remote = started(tmp_path)
    create_table(remote)
    headers = [
        ("X-Amz-Target", "DynamoDB_20120810.PutItem"),
        ("Content-Type", "application/x-amz-json-1.0"),
        ("X-Skyloop-Sync", "deferred"),  # as a turn step writes: answered without waiting for the disk
    ]
    keys = [{"pk": {"S": "turn"}, "sk": {"S": f"{i:03d}"}} for i in range(10)]
    for key in keys:
        status, _, _ = remote.call(
            "POST", URL, headers, json.dumps({"TableName": TABLE, "Item": key}).encode()
        )
        assert status == 200

    # When a client-facing read sees the last of them, and the process is killed right after
    status, out = call(remote, "GetItem", {"TableName": TABLE, "Key": keys[-1], "ConsistentRead": True})
    assert status == 200
    assert out["Item"] == keys[-1]
    handle._proc.kill()
    handle.close()

    # Then everything written before that read is there
    handle, remote = started(tmp_path)
    try:
        assert [
            k for k in keys if "Item" not in call(remote, "GetItem", {"TableName": TABLE, "Key": k})[1]
        ] == []
    finally:
        handle.close()
