"""What a turn costs in DynamoDB requests, step by step, and that the seq hints saving reads stay right.

The counts are today's exactly, so a saving undone (a re-read of the
session, of ``last_seq`` before an append, of the turn) fails here. The
fault tests put another writer, as another Lambda container would, between
two appends of one step or between two steps: the stale hint must cost a
failed condition and a retry, never a lost or repeated seq.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps, sessions
from skyloop.harnesses.base import FunctionCall, ModelResult
from skyloop.models.agent import AgentSpec
from skyloop.models.session import ClientTool
from skyloop.store import Append, DynamoStore
from skyloop.turns import engine as turn_engine
from skyloop.turns import lifecycle, model_step, server_tools, steps
from tests.fakes import RecordingEngine

if TYPE_CHECKING:
    from collections.abc import Iterator

    from skyloop.models.session import Session
    from skyloop.store import StoredEvent
    from skyloop.turns.state import TurnState
    from tests.integration.conftest import Api, Stack

pytestmark = pytest.mark.usefixtures("fresh_table")

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
OTHER = "test.other_writer"


class Requests:
    """The DynamoDB requests one client sends, by operation, since the last :meth:`take`."""

    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()

    def count(self, model: Any, **_: Any) -> None:
        self.ops[model.name] += 1

    def take(self) -> dict[str, int]:
        out = dict(self.ops)
        self.ops.clear()
        return out


@pytest.fixture
def requests(aws: Stack) -> Iterator[Requests]:
    counter = Requests()
    events = aws.store.client.meta.events
    events.register("before-call.dynamodb", counter.count, unique_id="request-counts")
    yield counter
    events.unregister("before-call.dynamodb", unique_id="request-counts")


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> RecordingEngine:
    recording = RecordingEngine()
    monkeypatch.setattr(turn_engine, "deployed", lambda: recording)
    return recording


def _other_container(aws: Stack) -> DynamoStore:
    """The same table through a client of its own (not counted), as another container reaches it."""
    return DynamoStore(aws.store.table, deps.client("dynamodb"), blobs=aws.store.blobs)


def _write_between(other: DynamoStore, session_id: str, n: int) -> None:
    other.append(Append(session_id, events=[(OTHER, {"n": n})]))


def _events(aws: Stack, session_id: str) -> list[StoredEvent]:
    events = aws.events(session_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "the log has a gap or a repeat"
    return events


def _started(aws: Stack, engine: RecordingEngine, session: Session, tools: list[ClientTool]) -> TurnState:
    agent = aws.store.get_agent(session.agent_id)
    message = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    lifecycle.start_or_join(aws.store, engine, agent, session.id, message, tools)
    return engine.started[-1]


def _calls_read_file(*_: Any, **__: Any) -> ModelResult:
    return ModelResult(text="", calls=[FunctionCall(call_id="call_1", name="read_file", arguments="{}")])


def test_a_client_tool_turn_makes_these_requests(
    aws: Stack, api: Api, engine: RecordingEngine, requests: Requests
) -> None:
    # Given a session whose agent a warm container knows already
    session = aws.new_session("unused-model")
    store = aws.store
    steps._AGENTS.get(store, session.agent_id)
    requests.take()

    # When a message with a client tool is posted: the session and the agent are read, then one append
    assert api.post_message(session.id, "hi", tools=[READ_FILE]).status == 202
    assert requests.take() == {"GetItem": 2, "TransactWriteItems": 1}
    (state,) = engine.started  # the start's seq and the turn's facts travel in the state (no prepare step)

    # And the first model call asks for the tool: session, turn, items, the attempt, the result
    state = steps.call_model(store, state, model_caller=_calls_read_file)
    assert state.next == "await_client"
    assert requests.take() == {"GetItem": 2, "Query": 1, "PutItem": 1, "TransactWriteItems": 1}

    # And the turn parks: the token, the calls, their publication (the answer will resume it)
    steps.await_client(store, engine, state, "token-1")
    assert requests.take() == {"UpdateItem": 1, "Query": 1, "TransactWriteItems": 1}

    # And the output arrives: session, call, answer, turn, the one wake-up
    assert api.post_output(session.id, "call_1", "a.py").status == 202
    assert requests.take() == {"GetItem": 3, "TransactWriteItems": 1, "UpdateItem": 1}
    assert engine.resumed == [("token-1", {"resumed_iteration": 0})]

    # And the second model call streams its answer: session, turn, calls, outputs, attempt, and the
    # streamed text rides with the result; no read of the items (since this environment's last read
    # of them, only its own appends moved the session, and they carried their items)
    def answers(spec: Any, items: Any, tools: Any, on_delta: Any, **_: Any) -> ModelResult:
        on_delta("Found ")
        on_delta("a.py.")
        return ModelResult(text="Found a.py.")

    # and the end of the turn rides with the result too (no FinishTurn step)
    state = steps.call_model(store, state, model_caller=answers)
    assert (state.next, state.finished) == ("stop", True)
    assert requests.take() == {"GetItem": 2, "Query": 1, "PutItem": 1, "TransactWriteItems": 2}

    # Then the log is the turn's, whole and in order
    assert [e.type for e in _events(aws, session.id)] == [
        "session.status",
        "session.input.consumed",
        "response.in_progress",
        "session.usage",  # the first model call's tokens, with its result
        "response.output_item.done",  # call_1 action_required
        "response.output_item.done",  # call_1 completed
        "response.output_item.done",  # its output
        "response.output_text.delta",  # "Found a.py." (streamed, written with the result)
        "response.output_item.done",  # the assistant message
        "session.usage",
        "response.completed",
        "session.status",
    ]
    assert store.get_session(session.id).status == "idle"


def test_a_stale_append_hint_costs_one_failed_write_and_one_read(aws: Stack, requests: Requests) -> None:
    # Given a session another container appended to after we last saw its seq
    session = aws.new_session("unused-model")
    store = aws.store
    seen = store.get_session(session.id).last_seq
    _write_between(_other_container(aws), session.id, 1)
    requests.take()
    # When we append from our stale value
    result = store.append(Append(session.id, events=[("ours", {})], after_seq=seen))
    # Then the append took the next seq after the other's, at the cost of one failed transaction and
    # one read of last_seq (whose value the retry starts from: no second read)
    assert (result.first_seq, result.last_seq) == (seen + 2, seen + 2)
    assert requests.take() == {"TransactWriteItems": 2, "GetItem": 1}
    assert [e.type for e in _events(aws, session.id)][-2:] == [OTHER, "ours"]


def test_writers_between_the_steps_and_the_appends_of_a_turn_cost_retries_not_seqs(
    aws: Stack, engine: RecordingEngine, requests: Requests
) -> None:
    # Given a client-tool turn, and another container appending before every step and mid-stream
    session = aws.new_session("unused-model")
    store = aws.store
    other = _other_container(aws)
    tool = ClientTool.model_validate({"name": "read_file", "description": "Read", "parameters": {}})
    state = _started(aws, engine, session, [tool])

    # When each step runs after another writer moved the seq its state expects
    _write_between(other, session.id, 1)
    _write_between(other, session.id, 2)
    state = steps.call_model(store, state, model_caller=_calls_read_file)
    _write_between(other, session.id, 3)
    steps.await_client(store, engine, state, "token-1")
    lifecycle.answer(store, engine, session.id, "call_1", "a.py")
    assert engine.resumed == [("token-1", {"resumed_iteration": 0})]

    # (the second model call: a writer between its read of the session and its outputs' append, and
    # another between two streamed deltas)
    list_calls = store.list_calls

    def list_calls_then_write(*args: Any, **kwargs: Any) -> Any:
        found = list_calls(*args, **kwargs)
        _write_between(other, session.id, 4)
        return found

    seen: list[list[str]] = []

    def streams(spec: Any, items: Any, tools: Any, on_delta: Any, **_: Any) -> ModelResult:
        seen.append([i.type for i in items])
        time.sleep(model_step.DELTA_FLUSH_S + 0.01)
        on_delta("one ")  # flushed on its own
        _write_between(other, session.id, 5)
        time.sleep(model_step.DELTA_FLUSH_S + 0.01)
        on_delta("two ")  # flushed from a stale seq
        on_delta("three")  # written with the result
        _write_between(other, session.id, 6)  # the result's (and the turn's end's) append is stale
        return ModelResult(text="one two three")

    store.list_calls = list_calls_then_write  # type: ignore[method-assign]
    try:
        state = steps.call_model(store, state, model_caller=streams)
    finally:
        del store.list_calls
    assert (state.next, state.finished) == ("stop", True)

    # Then the log is gapless, each of our events and each other write is in it once, in order
    events = _events(aws, session.id)
    ours = [e for e in events if e.type != OTHER]
    assert [e.data["n"] for e in events if e.type == OTHER] == [1, 2, 3, 4, 5, 6]
    assert [e.type for e in ours] == [
        "session.status",
        "session.input.consumed",
        "response.in_progress",
        "session.usage",  # the first model call's tokens
        "response.output_item.done",  # call_1 action_required
        "response.output_item.done",  # call_1 completed
        "response.output_item.done",  # its output
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_item.done",  # the assistant message
        "session.usage",
        "response.completed",
        "session.status",
    ]
    deltas = [e.data["delta"] for e in ours if e.type == "response.output_text.delta"]
    assert deltas == ["one ", "two ", "three"]
    # And the second model call's cut covered its outputs (the session was read again for it)
    assert seen == [["message", "function_call", "function_call_output"]]
    assert store.get_session(session.id).status == "idle"


def test_a_server_tool_is_prepared_and_recorded_without_reading_the_turn(
    aws: Stack, engine: RecordingEngine, requests: Requests
) -> None:
    # Given a turn whose model called the agent's Lambda tool (the agent known to this container)
    shout = {"type": "lambda", "function": "shout", "description": "shout", "parameters": {"type": "object"}}
    spec = AgentSpec.model_validate(
        {
            "name": f"counts-{uuid.uuid4().hex[:8]}",
            "executor": {"model": "unused", "auth": {"api_key": "k", "base_url": aws.mock_llm.base_url}},
            "tools": {"shout": shout},
        }
    )
    agent = sessions.register(spec)
    session = sessions.create_session(
        aws.store, agent, sessions.Runners(deps.get_settings().default_runner_id)
    )
    store = aws.store
    state = _started(aws, engine, session, [])

    def calls_shout(*_: Any, **__: Any) -> ModelResult:
        return ModelResult(
            text="", calls=[FunctionCall(call_id="s1", name="shout", arguments='{"text": "a"}')]
        )

    state = steps.call_model(store, state, model_caller=calls_shout)
    assert (state.next, state.run_calls) == ("act", ["s1"])
    requests.take()

    # When its branch prepares it: the session (is the turn active?), the call, the announcement
    prepared = server_tools.prepare_tool(store, state, "s1", None)
    assert prepared["invoke"]["function"] == "shout"
    assert requests.take() == {"GetItem": 2, "TransactWriteItems": 1}

    # And records what the invocation returned: the call, its output
    server_tools.record_tool(store, state, "s1", {"payload": "A"}, None)
    assert requests.take() == {"GetItem": 1, "TransactWriteItems": 1}
    assert (call := store.get_call(session.id, state.response_id, "s1")) is not None
    assert call.output == "A"


def test_a_message_joining_while_the_outputs_append_is_on_its_way_is_answered_by_the_next_model_call(
    aws: Stack, engine: RecordingEngine
) -> None:
    # Given a parked client call, answered
    session = aws.new_session("unused-model")
    store = aws.store
    other = _other_container(aws)
    agent = store.get_agent(session.agent_id)
    tool = ClientTool.model_validate({"name": "read_file", "description": "Read", "parameters": {}})
    state = _started(aws, engine, session, [tool])
    state = steps.call_model(store, state, model_caller=_calls_read_file)
    steps.await_client(store, engine, state, "token-1")
    lifecycle.answer(store, engine, session.id, "call_1", "a.py")

    # When a message joins (through another container) after the next model step read the session,
    # before its outputs' append (which goes on while the model is called)
    list_calls = store.list_calls

    def list_calls_then_join(*args: Any, **kwargs: Any) -> Any:
        found = list_calls(*args, **kwargs)
        message = {"role": "user", "content": [{"type": "input_text", "text": "two"}]}
        lifecycle.start_or_join(other, engine, agent, session.id, message, None)
        return found

    seen: list[list[str]] = []

    def answers(spec: Any, items: Any, tools: Any, on_delta: Any, **_: Any) -> ModelResult:
        seen.append(
            [f"{i.type}:{i.data.get('output') or i.data.get('content', [{}])[0].get('text')}" for i in items]
        )
        return ModelResult(text=f"done {len(seen)}")

    store.list_calls = list_calls_then_join  # type: ignore[method-assign]
    try:
        state = steps.call_model(store, state, model_caller=answers)
    finally:
        del store.list_calls

    # Then that model call answered the output without the message, the turn did not end on it, and
    # the next model call sees the message after the output and that answer, as the log keeps them
    assert seen == [["message:hi", "function_call:None", "function_call_output:a.py"]]
    assert (state.next, state.finished) == ("finish_turn", False)
    state = steps.finish_turn(store, state)
    assert state.next == "call_model"
    state = steps.call_model(store, state, model_caller=answers)
    assert seen[1] == [
        "message:hi",
        "function_call:None",
        "function_call_output:a.py",
        "message:done 1",
        "message:two",
    ]
    _events(aws, session.id)
    assert store.get_session(session.id).status == "idle"
