"""bench/cloud_latency.py's recorder on the local stack: a client-tool turn, every state and step in its trace.

The module's stack (``aws``, real handlers, moto running infra/turn.asl.json)
runs with ``skyloop.local.trace`` on, so every handler invocation and SDK call
is recorded. The test asserts the trace is complete enough for the latency
model: each Lambda task the execution scheduled has the invocation that ran
it, the model's critical-path walk reaches both client-visible moments, and
the hand-offs to Step Functions are inside the API invocations. It names no
state or step function, so it holds for a restructured turn too.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import manifest
from skyloop.local import trace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import cloud_latency as cl
import latency_model as lm

if TYPE_CHECKING:
    from collections.abc import Iterator

    from skyloop.store import StoredEvent
    from tests.integration.conftest import Api, Stack

GLOB = {
    "type": "function",
    "function": {
        "name": "Glob",
        "description": "find files",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
    },
}
EVENTS_ROUTE = "/v1/sessions/{id}/events"


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Tracing on for this module; requested before the stack, whose clients then carry the hooks."""
    path = tmp_path_factory.mktemp("cloud-latency") / "records.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(trace.ENV, str(path))
        trace.install()
        try:
            yield path
        finally:
            trace.uninstall()


@pytest.fixture(scope="module")
def traced(records: Path, aws: Stack) -> Stack:
    return aws


def _read(path: Path, offset: int) -> list[dict[str, Any]]:
    import json

    with path.open("rb") as f:
        f.seek(offset)
        return [json.loads(line) for line in f.read().splitlines() if line.strip()]


def _is_action_required(e: StoredEvent) -> bool:
    return e.type == "response.output_item.done" and e.data["item"]["status"] == "action_required"


def _post(api: Api, label: str, send: Any) -> lm.HttpCall:
    t0 = time.time()
    r = send()
    assert r.status == 202, r.body
    return lm.HttpCall(label=label, method="POST", route=EVENTS_ROUTE, t0=t0, t1=time.time(), status=r.status)


@pytest.fixture
def parking(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No hot wait: the client tool's turn parks on its task token (every state of the machine runs)."""
    from skyloop.settings import get_settings

    monkeypatch.setenv("SKYLOOP_HOT_WAIT_S", "0")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_a_client_tool_turn_is_recorded_state_by_state(
    traced: Stack, api: Api, records: Path, parking: None
) -> None:
    key = traced.mock_llm.script(
        {"tool_calls": [{"call_id": "c1", "name": "Glob", "arguments": {"pattern": "*.py"}}]},
        {"text": "Found a.py."},
    )
    session = traced.new_session(key)
    offset = records.stat().st_size if records.exists() else 0

    http = [_post(api, "message", lambda: api.post_message(session.id, "hi", tools=[GLOB]))]
    running = traced.wait_for_event(
        session.id, lambda e: e.type == "session.status" and e.data["status"] == "running", what="running"
    )
    response_id = str(running.data["response_id"])
    traced.wait_for_event(session.id, _is_action_required, what="action_required")
    http.append(_post(api, "function_call_output", lambda: api.post_output(session.id, "c1", "a.py")))
    traced.wait_for_status(session.id, "idle")
    assert traced.wait_for_execution(response_id)["status"] == "SUCCEEDED"
    history = cl.history_events(traced.history(response_id))
    turn = cl.turn_trace(
        "client_tool_turn", session.id, response_id, _read(records, offset), http, [], history
    )

    # every Lambda task the execution scheduled ran in a recorded invocation of that function
    scheduled = [e for e in history if e.type == "TaskScheduled" and e.function in manifest.NAMES]
    assert any(e.resource == "invoke.waitForTaskToken" for e in scheduled)
    for event in scheduled:
        ran = [i for i in turn.invocations if i.function == event.function and i.t0 >= event.ts - 0.005]
        assert ran, f"no recorded invocation of {event.function} (scheduled by event {event.id})"
    # each of them made its DynamoDB calls inside it, and the API served both client requests
    for inv in turn.invocations:
        assert any(c.inv == inv.request_id and c.service == "dynamodb" for c in turn.sdk_calls), inv.function
    api_calls = {(c.service, c.op) for c in turn.sdk_calls if c.inv and c.inv in _api_ids(turn)}
    assert {("sfn", "StartExecution"), ("sfn", "SendTaskSuccess")} <= api_calls
    assert [i.invoked_by for i in turn.invocations if i.trigger == "http_api"] == ["apigateway", "apigateway"]

    # and the model's walk reaches what the client waits for: the parked call, then the turn's end
    hops = lm.critical_path(turn, set(manifest.NAMES))
    assert [h.label for h in hops if h.kind == "visibility"] == [
        "the stream shows action_required",
        "the stream shows response.completed",
    ]
    assert [h.kind for h in hops if h.kind.startswith("sfn_")] == ["sfn_start", "sfn_resume"]
    entered = {e.name for e in history if e.type.endswith("StateEntered")}
    assert {h.state for h in hops if h.kind == "transition"} <= entered
    on_path = [h for h in hops if h.kind == "invoke" and h.function != "api"]
    assert on_path
    assert all(h.calls for h in on_path)


def _api_ids(turn: lm.TurnTrace) -> set[str]:
    return {i.request_id for i in turn.invocations if i.trigger == "http_api"}


def test_tracing_off_leaves_handlers_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    from skyloop.local.handlers import _handlers, handler_for

    monkeypatch.delenv(trace.ENV, raising=False)
    assert handler_for("api") is _handlers["api"]
    monkeypatch.setenv(trace.ENV, os.devnull)
    assert handler_for("api") is not _handlers["api"]
