"""The local stack's DynamoDB process: one table for every way in, and a stack that stops without it."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest

from skyloop.store import keys
from tests.e2e.conftest import LOOPBACK, DevProcess

TABLE = "skyloop-local"


def children_named(pid: int, name: str) -> list[int]:
    """The direct children of ``pid`` whose process name (``comm``) is ``name``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        if ppid == pid and comm == name:
            found.append(int(stat.parent.name))
    return found


def moto_endpoint(log: Path) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        match = re.search(r"moto endpoint:\s+(\S+)", log.read_text())
        if match:
            return match.group(1)
        time.sleep(0.1)
    raise AssertionError(log.read_text())


@pytest.fixture(scope="module")
def stack(skyloop_dev_factory: Callable[..., DevProcess]) -> DevProcess:
    handle = skyloop_dev_factory()
    handle.ready()
    return handle


def test_dynamodb_has_its_own_process_and_every_way_in_sees_one_table(stack: DevProcess) -> None:
    # Given the default stack: DynamoDB runs in a child process of its own
    assert len(children_named(stack.proc.pid, "sl-dynamodb")) == 1
    # When a session is created through the API (a Lambda worker writes it)
    agents = LOOPBACK.get(f"{stack.url}/v1/agents").json()["data"]
    created = LOOPBACK.post(f"{stack.url}/v1/sessions", json={"agent_id": agents[0]["id"]})
    assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    # Then moto's server port (another process's boto3 client) reads the same table
    ddb = boto3.client(
        "dynamodb",
        endpoint_url=moto_endpoint(stack.log_path),
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    assert TABLE in ddb.list_tables()["TableNames"]
    key = {"pk": {"S": keys.session_pk(session_id)}, "sk": {"S": keys.META}}
    assert "Item" in ddb.get_item(TableName=TABLE, Key=key), "the moto port serves another table"
    # And a write through that port is what the API then reads (one table, not two)
    ddb.update_item(
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET title = :t",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeValues={":t": {"S": "written through the moto port"}},
    )
    assert (
        LOOPBACK.get(f"{stack.url}/v1/sessions/{session_id}").json()["title"]
        == "written through the moto port"
    )


def test_the_stack_stops_with_a_clear_message_when_its_dynamodb_process_dies(
    skyloop_dev_factory: Callable[..., DevProcess],
) -> None:
    # Given a running stack
    handle = skyloop_dev_factory()
    handle.ready()
    [child] = children_named(handle.proc.pid, "sl-dynamodb")
    # When its DynamoDB process is killed
    os.kill(child, signal.SIGKILL)
    # Then the stack stops at once, saying why, instead of answering every request with an error
    assert handle.proc.wait(timeout=20) is not None
    assert "the local DynamoDB process exited (status -9); stopping the stack" in handle.log_path.read_text()


def test_inline_mode_keeps_dynamodb_in_the_stack_process(
    skyloop_dev_factory: Callable[..., DevProcess],
) -> None:
    # Given SKYLOOP_LOCAL_DYNAMODB=inline
    handle = skyloop_dev_factory({"SKYLOOP_LOCAL_DYNAMODB": "inline"})
    handle.ready()
    # Then there is no DynamoDB process, and the API still reads and writes the table
    assert children_named(handle.proc.pid, "sl-dynamodb") == []
    agents = LOOPBACK.get(f"{handle.url}/v1/agents").json()["data"]
    created = LOOPBACK.post(f"{handle.url}/v1/sessions", json={"agent_id": agents[0]["id"]})
    assert created.status_code == 201, created.text
    assert LOOPBACK.get(f"{handle.url}/v1/sessions/{created.json()['id']}").status_code == 200


def test_an_unknown_mode_is_refused_at_start(skyloop_dev_factory: Callable[..., DevProcess]) -> None:
    handle = skyloop_dev_factory({"SKYLOOP_LOCAL_DYNAMODB": "sideways"})
    assert handle.proc.wait(timeout=60) != 0
    assert "SKYLOOP_LOCAL_DYNAMODB='sideways': use process or inline" in handle.log_path.read_text()
