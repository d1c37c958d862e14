"""``skyloop dev`` enforces each function's deployed role, in its Lambda environments and its own process.

A stack started with a planted export (``SKYLOOP_LOCAL_IAM_POLICIES``) whose
``api`` role lacks ``dynamodb:DeleteItem`` and whose ``stream`` role lacks
``dynamodb:Query`` refuses exactly those calls, as AWS would: a session's turn
runs, deleting it (a DeleteItem in the API's Lambda environment) fails, and the
SSE stream (the stream app in the stack's process) cannot replay its log. The
unplanted stack (every other e2e test) does all of it.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from skyloop.local import iam
from tests.e2e.conftest import LOOPBACK

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.e2e.conftest import DevProcess


def _without(document: dict[str, object], function: str, action: str) -> None:
    for statement in document["functions"][function]["statements"]:  # type: ignore[index]
        if isinstance(statement["Action"], list) and action in statement["Action"]:
            statement["Action"].remove(action)


@pytest.fixture(scope="module")
def planted_dev(
    skyloop_dev_factory: Callable[..., DevProcess], tmp_path_factory: pytest.TempPathFactory
) -> DevProcess:
    document = json.loads(iam.POLICIES_PATH.read_text())
    _without(document, "api", "dynamodb:DeleteItem")
    _without(document, "stream", "dynamodb:Query")
    path: Path = tmp_path_factory.mktemp("iam") / "policies.json"
    path.write_text(json.dumps(document))
    dev = skyloop_dev_factory({iam.POLICIES_ENV: str(path)})
    dev.ready()
    return dev


@pytest.fixture(scope="module")
def session_id(planted_dev: DevProcess) -> str:
    """A session whose turn ran (the api and turn functions have what that takes)."""
    url = planted_dev.ready()
    spec = {
        "name": "iam-planted",
        "prompt": "p",
        "executor": {"harness": "scripted", "model": "scripted", "script": [{"text": "hi"}]},
    }
    agent = LOOPBACK.post(f"{url}/v1/agents", json=spec, timeout=30)
    assert agent.status_code == 201, agent.text
    session = LOOPBACK.post(f"{url}/v1/sessions", json={"agent_id": agent.json()["id"]}, timeout=30).json()
    message = {"type": "message", "data": {"role": "user", "content": [{"type": "input_text", "text": "go"}]}}
    posted = LOOPBACK.post(f"{url}/v1/sessions/{session['id']}/events", json=message, timeout=30)
    assert posted.status_code < 300, posted.text
    deadline = time.monotonic() + 30
    while LOOPBACK.get(f"{url}/v1/sessions/{session['id']}", timeout=30).json()["status"] != "idle":
        assert time.monotonic() < deadline, "the turn did not end"
        time.sleep(0.1)
    return str(session["id"])


def test_a_write_the_api_role_lacks_is_refused_in_its_environment(
    planted_dev: DevProcess, session_id: str
) -> None:
    url = planted_dev.ready()
    # A delete (DeleteItem, which the planted role lacks) fails before moto sees it: nothing deleted
    refused = httpx.delete(f"{url}/v1/sessions/{session_id}", timeout=30)
    assert refused.status_code == 500, refused.text
    assert refused.json()["error"]["code"] == "internal_error"
    assert LOOPBACK.get(f"{url}/v1/sessions/{session_id}", timeout=30).status_code == 200
    # and what refused it is AWS's AccessDenied for the API function's role, logged by its environment
    log = planted_dev.log_path.read_text()
    assert "skyloop-api is not authorized to perform: dynamodb:DeleteItem" in log


def test_a_read_the_stream_role_lacks_is_refused_in_the_stacks_process(
    planted_dev: DevProcess, session_id: str
) -> None:
    url = planted_dev.ready()
    frames = ""
    timeout = httpx.Timeout(30, read=4)  # the replay would come at once; a heartbeat only every 15 s
    with httpx.stream(
        "GET", f"{url}/v1/sessions/{session_id}/stream", headers={"Last-Event-ID": "0"}, timeout=timeout
    ) as response:
        assert response.status_code == 200
        try:
            for chunk in response.iter_text():
                frames += chunk
        except httpx.ReadTimeout:
            pass
    # The stream opens (its GetItem is granted) but cannot replay the log (its Query is not)
    assert "event: session.heartbeat" in frames
    assert '"sequence_number":1' not in frames
    log = planted_dev.log_path.read_text()
    assert "skyloop-stream is not authorized to perform: dynamodb:Query" in log
