"""The real turn state machine (infra/turn.asl.json) executed by moto, with the real step handlers.

Every test drives its turn to the end (answers every parked call) so no moto
execution thread outlives it.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps
from skyloop.harnesses.base import FunctionCall, ModelResult
from skyloop.models.session import ClientTool
from skyloop.turns import engine as turn_engine
from skyloop.turns import lifecycle, model_step, steps
from skyloop.turns.state import TurnState
from tests.fakes import RecordingEngine
from tests.integration.conftest import wait_until

if TYPE_CHECKING:
    from skyloop.store import StoredEvent
    from tests.integration.conftest import Api, MockLLM, Stack

pytestmark = pytest.mark.usefixtures("fresh_table")

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file from the user's machine",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
LIST_DIR = {
    "type": "function",
    "function": {
        "name": "list_dir",
        "description": "List a directory",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}


@pytest.fixture(autouse=True)
def _no_parked_executions(aws: Stack) -> Any:
    """Each test must leave no execution running (moto's threads would outlive the module)."""
    yield
    running = aws.sfn.list_executions(
        stateMachineArn=aws.resources.state_machine_arn, statusFilter="RUNNING"
    )["executions"]
    assert running == [], f"executions left running: {[e['name'] for e in running]}"


def _types(events: list[StoredEvent]) -> list[str]:
    return [e.type for e in events]


def _assert_gapless(events: list[StoredEvent]) -> None:
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def _response_id(aws: Stack, session_id: str) -> str:
    event = aws.wait_for_event(
        session_id,
        lambda e: e.type == "session.status" and e.data["status"] == "running",
        what="session.status running",
    )
    return str(event.data["response_id"])


def _is_action_required(e: StoredEvent) -> bool:
    return e.type == "response.output_item.done" and e.data["item"]["status"] == "action_required"


def _task_events(history: list[dict[str, Any]], kind: str, resource: str) -> list[dict[str, Any]]:
    key = {
        "TaskScheduled": "taskScheduledEventDetails",
        "TaskSucceeded": "taskSucceededEventDetails",
        "TaskFailed": "taskFailedEventDetails",
    }[kind]
    return [h for h in history if h["type"] == kind and h[key]["resource"] == resource]


def _entered(history: list[dict[str, Any]], state_name: str) -> int:
    return sum(
        1
        for h in history
        if h["type"].endswith("StateEntered") and h["stateEnteredEventDetails"]["name"] == state_name
    )


def _parked_in_await_client(history: list[dict[str, Any]]) -> bool:
    """The last task state entered is AwaitClient, submitted to Lambda and not yet resolved."""
    entered = [h for h in history if h["type"] == "TaskStateEntered"]
    if not entered or entered[-1]["stateEnteredEventDetails"]["name"] != "AwaitClient":
        return False
    after = [h for h in history if h["id"] > entered[-1]["id"]]
    kinds = [h["type"] for h in after]
    return "TaskSubmitted" in kinds and not {"TaskSucceeded", "TaskFailed", "TaskStateExited"} & set(kinds)


# ----------------------------------------------------------------------------- (1)
def test_text_only_turn_streams_and_goes_idle(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    # Given a session whose model answers with streamed text
    text = "Hello there, this answer arrives word by word."
    key = mock_llm.script({"text": text, "stream": True})
    session = aws.new_session(key)

    # When a message is posted through the API function
    r = api.post_message(session.id, "Say hello")
    assert r.status == 202, r.body
    assert r.body["queued"] is True
    response_id = _response_id(aws, session.id)

    # Then the execution succeeds and the session goes idle
    execution = aws.wait_for_execution(response_id)
    assert execution["status"] == "SUCCEEDED", execution
    aws.wait_for_status(session.id, "idle", after_seq=1)

    # And the log tells the whole turn in order, without gaps
    events = aws.events(session.id)
    _assert_gapless(events)
    types = _types(events)
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) >= 1
    assert types == [
        "session.status",
        "session.input.consumed",
        "response.in_progress",
        *["response.output_text.delta"] * len(deltas),
        "response.output_item.done",
        "session.usage",
        "response.completed",
        "session.status",
    ]
    assert events[0].data["status"] == "running"
    assert events[-1].data["status"] == "idle"
    assert events[0].data["response_id"] == events[-1].data["response_id"] == response_id
    assert "".join(d.data["delta"] for d in deltas) == text
    done = events[-4].data["item"]
    assert done["type"] == "message"
    assert done["role"] == "assistant"
    assert done["status"] == "completed"
    assert done["content"] == [{"type": "output_text", "text": text}]
    assert events[-2].data["response"]["status"] == "completed"

    # And the user and assistant items are persisted, the assistant one under the published id
    items = aws.store.list_items(session.id)
    assert [(i.type, i.data["role"]) for i in items] == [("message", "user"), ("message", "assistant")]
    assert items[1].id == done["id"]
    assert items[1].response_id == response_id
    assert items[1].data["content"] == [{"type": "output_text", "text": text}]
    assert items[0].position == 2
    assert items[1].position == events[-4].seq
    usage = events[-3].data  # omnigent's session.usage, with the model call's own tokens under "call"
    assert usage["conversation_id"] == session.id
    assert usage["call"]["response_id"] == response_id

    # And the snapshot agrees with the log
    snap = api.get(f"/v1/sessions/{session.id}").body
    assert snap["status"] == "idle"
    assert snap["active_response_id"] is None
    assert snap["last_event_id"] == events[-1].seq
    assert [i["id"] for i in snap["items"]] == [i.id for i in items]

    # And the model saw the user's text (and the agent's prompt as instructions)
    (request,) = mock_llm.requests(key)
    assert request["instructions"] == "You are a test agent."
    assert request["input"][-1]["content"] == [{"type": "input_text", "text": "Say hello"}]


# ----------------------------------------------------------------------------- (2)
def test_client_tool_turn_parks_until_the_output_arrives(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    # Given a model that calls the client's read_file tool, then (held at a gate) answers with text
    key = mock_llm.script(
        {"tool_calls": [{"call_id": "call_read", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "The file says hi.", "block": True},
    )
    session = aws.new_session(key)

    # When a message offering the tool (nested function form) is posted
    r = api.post_message(session.id, "What is in a.txt?", tools=[READ_FILE])
    assert r.status == 202, r.body
    response_id = _response_id(aws, session.id)

    # Then the call is published as action_required and the execution is parked on its task token
    parked = aws.wait_for_event(session.id, _is_action_required, what="action_required")
    item = parked.data["item"]
    assert (item["type"], item["name"], item["call_id"]) == ("function_call", "read_file", "call_read")
    assert json.loads(item["arguments"]) == {"path": "a.txt"}
    wait_until(lambda: _parked_in_await_client(aws.history(response_id)), what="AwaitClient to park")
    assert aws.sfn.describe_execution(executionArn=aws.execution_arn(response_id))["status"] == "RUNNING"
    assert aws.store.get_session(session.id).status == "running"
    # and the model was offered the tool in the flat Responses form
    (first,) = mock_llm.requests(key)
    assert [t["name"] for t in first["tools"]] == ["read_file"]
    assert first["tools"][0]["parameters"] == READ_FILE["function"]["parameters"]

    # When an output for an unknown call arrives, it is refused
    assert api.post_output(session.id, "call_nope", "x").status == 404

    # When the client posts the output: accepted, and the turn resumes into its next model call
    r = api.post_output(session.id, "call_read", "hi")
    assert r.status == 202, r.body
    assert r.body == {"queued": True, "item_id": "call_read"}
    mock_llm.wait_for_gate()
    # (the step's writes made while the model is called, the outputs and the attempt's number, have landed)
    attempt = f"DEDUPE#{response_id}:1:attempt:0"
    wait_until(lambda: attempt in aws.rows(session.id), what="the model call's attempt")
    before = aws.rows(session.id)
    # and the very same output again is a no-op with the same answer
    again = api.post_output(session.id, "call_read", "hi")
    assert (again.status, again.body) == (202, r.body)
    # while a different output for the same call is a conflict
    other = api.post_output(session.id, "call_read", "something else")
    assert other.status == 409
    assert other.error()["code"] == "conflict"
    # and neither wrote anything
    assert aws.rows(session.id) == before

    # Then, once the model answers, the turn completes
    mock_llm.release_gate()
    assert aws.wait_for_execution(response_id)["status"] == "SUCCEEDED"
    aws.wait_for_status(session.id, "idle", after_seq=1)

    # And the items are user message, completed call, its output, assistant message
    items = aws.store.list_items(session.id)
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
    assert items[1].id == item["id"]
    assert items[1].data["call_id"] == "call_read"
    assert items[1].data["name"] == "read_file"
    assert items[2].data == {"call_id": "call_read", "output": "hi"}
    assert items[3].data["content"] == [{"type": "output_text", "text": "The file says hi."}]
    # and nothing action_required was persisted, only published once
    snap = api.get(f"/v1/sessions/{session.id}").body
    assert all(i["status"] == "completed" for i in snap["items"])
    events = aws.events(session.id)
    _assert_gapless(events)
    assert sum(_is_action_required(e) for e in events) == 1
    done_calls = [
        e.data["item"]
        for e in events
        if e.type == "response.output_item.done" and e.data["item"]["type"] == "function_call"
    ]
    assert [c["status"] for c in done_calls] == ["action_required", "completed"]
    assert _types(events)[-2:] == ["response.completed", "session.status"]
    # and the model's second call saw the call and its output
    second = mock_llm.requests(key)[1]
    assert {"type": "function_call_output", "call_id": "call_read", "output": "hi"} in second["input"]


# ----------------------------------------------------------------------------- (3)
def test_two_calls_answered_in_reverse_order_resume_once(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    # Given a model response with two client calls
    key = mock_llm.script(
        {
            "tool_calls": [
                {"call_id": "call_a", "name": "read_file", "arguments": {"path": "a"}},
                {"call_id": "call_b", "name": "list_dir", "arguments": {"path": "."}},
            ]
        },
        {"text": "Both done."},
    )
    session = aws.new_session(key)
    api.post_message(session.id, "Look around", tools=[READ_FILE, LIST_DIR])
    response_id = _response_id(aws, session.id)
    aws.wait_for_event(
        session.id,
        lambda e: _is_action_required(e) and e.data["item"]["call_id"] == "call_b",
        what="both calls published",
    )
    assert sum(_is_action_required(e) for e in aws.events(session.id)) == 2

    # When the second call is answered first
    assert api.post_output(session.id, "call_b", "file1\nfile2").status == 202

    # Then the turn is still parked, waiting for the other call
    assert aws.store.get_turn(session.id, response_id).unanswered == 1
    wait_until(lambda: _parked_in_await_client(aws.history(response_id)), what="AwaitClient to park")
    assert aws.sfn.describe_execution(executionArn=aws.execution_arn(response_id))["status"] == "RUNNING"

    # When the first call is answered
    assert api.post_output(session.id, "call_a", "contents of a").status == 202

    # Then the turn completes, having resumed exactly once
    assert aws.wait_for_execution(response_id)["status"] == "SUCCEEDED"
    aws.wait_for_status(session.id, "idle", after_seq=1)
    history = aws.history(response_id)
    assert _entered(history, "AwaitClient") == 1
    assert len(_task_events(history, "TaskScheduled", "invoke.waitForTaskToken")) == 1
    (resumed,) = _task_events(history, "TaskSucceeded", "invoke.waitForTaskToken")
    assert json.loads(resumed["taskSucceededEventDetails"]["output"]) == {"resumed_iteration": 0}
    assert _entered(history, "CallModel") == 2
    turn = aws.store.get_turn(session.id, response_id)
    assert (turn.unanswered, turn.resumed_iteration) == (0, 0)

    # And the calls are persisted in the model's order, not the answering order
    items = aws.store.list_items(session.id)
    assert [(i.type, i.data.get("call_id")) for i in items] == [
        ("message", None),
        ("function_call", "call_a"),
        ("function_call_output", "call_a"),
        ("function_call", "call_b"),
        ("function_call_output", "call_b"),
        ("message", None),
    ]
    second = mock_llm.requests(key)[1]
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [
        ("call_a", "contents of a"),
        ("call_b", "file1\nfile2"),
    ]
    _assert_gapless(aws.events(session.id))


# ----------------------------------------------------------------------------- (4)
def test_model_error_fails_the_turn(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    # Given a model endpoint that refuses the request, then recovers
    key = mock_llm.script({"error": "boom", "status_code": 400}, {"text": "Back again."})
    session = aws.new_session(key)

    # When a message is posted
    api.post_message(session.id, "Hi")
    response_id = _response_id(aws, session.id)

    # Then the execution fails through FailTurn
    execution = aws.wait_for_execution(response_id)
    assert execution["status"] == "FAILED", execution
    history = aws.history(response_id)
    assert _entered(history, "FailTurn") == 1
    assert history[-1]["type"] == "ExecutionFailed"
    assert history[-1]["executionFailedEventDetails"]["error"] == "TurnFailed"

    # And the session is failed with the model error, published as response.failed
    failed = aws.wait_for_status(session.id, "failed", after_seq=1)
    assert failed.active_response_id is None
    assert failed.last_task_error is not None
    assert failed.last_task_error.code == "model_http_error"
    assert "400" in failed.last_task_error.message
    assert "boom" in failed.last_task_error.message
    events = aws.events(session.id)
    _assert_gapless(events)
    assert _types(events) == [
        "session.status",
        "session.input.consumed",
        "response.in_progress",
        "response.failed",
        "session.status",
    ]
    response = events[3].data["response"]
    assert response["status"] == "failed"
    assert response["id"] == response_id
    assert response["error"]["code"] == "model_http_error"
    assert events[4].data["status"] == "failed"
    assert events[4].data["error"] == {"code": "model_http_error", "message": failed.last_task_error.message}
    snap = api.get(f"/v1/sessions/{session.id}").body
    assert snap["status"] == "failed"
    assert snap["last_task_error"]["code"] == "model_http_error"
    # only the user message was persisted
    assert [i.type for i in aws.store.list_items(session.id)] == ["message"]

    # When the user tries again, a new turn starts and succeeds, clearing the error
    last = events[-1].seq
    assert api.post_message(session.id, "Again").status == 202
    retry = aws.wait_for_event(
        session.id, lambda e: e.seq > last and e.type == "session.status" and e.data["status"] == "running"
    ).data["response_id"]
    assert retry != response_id
    assert aws.wait_for_execution(retry)["status"] == "SUCCEEDED"
    recovered = aws.wait_for_status(session.id, "idle", after_seq=last)
    assert recovered.last_task_error is None


# ----------------------------------------------------------------------------- (5)
def _invoke_step(step: str, state: dict[str, Any], task_token: str | None = None) -> dict[str, Any]:
    """Invoke the turn function for one step (its real handler, through moto's Lambda), as the ASL does."""
    payload: dict[str, Any] = {"step": step, "state": state}
    if task_token is not None:
        payload["task_token"] = task_token
    r = deps.client("lambda").invoke(FunctionName="skyloop-turn", Payload=json.dumps(payload).encode())
    body = json.loads(r["Payload"].read())
    assert "FunctionError" not in r, body
    return body


def _log(aws: Stack, session_id: str) -> dict[str, dict[str, Any]]:
    """Everything stored under the session: events, items, turn, calls, dedupe keys and the session row."""
    return aws.rows(session_id)


def test_every_step_run_twice_writes_once(aws: Stack, mock_llm: MockLLM) -> None:
    # Given a session with a turn started (but no execution: the test plays Step Functions)
    key = mock_llm.script({"text": "All done."}, {"text": "All done."})
    session = aws.new_session(key)
    agent = aws.store.get_agent(session.agent_id)
    engine = RecordingEngine()
    tool = {"name": "read_file", "description": "Read", "parameters": {"type": "object"}}
    lifecycle.start_or_join(
        aws.store,
        engine,
        agent,
        session.id,
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        [ClientTool.model_validate(tool)],
    )
    (state,) = engine.started

    def twice(step: Any) -> Any:
        first = step()
        before = _log(aws, session.id)
        second = step()
        assert _log(aws, session.id) == before, "a repeated step wrote something"
        assert first == second
        return first

    # When the turn starts with its model call (the post announced it: no prepare step)
    assert state.next == "call_model"

    # And the first model call (text plus a client call) runs twice
    def model(spec: Any, items: Any, tools: Any, on_delta: Any, **kw: Any) -> ModelResult:
        time.sleep(model_step.DELTA_FLUSH_S + 0.01)  # so the first delta is flushed on its own
        on_delta("Let me ")
        on_delta("look.")
        return ModelResult(
            text="Let me look.",
            calls=[FunctionCall(call_id="call_1", name="read_file", arguments='{"path": "x"}')],
        )

    state = twice(lambda: steps.call_model(aws.store, state, model_caller=model))
    assert (state.next, state.iteration) == ("await_client", 1)

    # And the parking step runs twice (through its Lambda function, with a fake token)
    twice(lambda: _invoke_step("await_client", state.model_dump(), "token-1"))

    # And the client's output arrives twice (resuming through a recording Step Functions)
    twice(lambda: lifecycle.answer(aws.store, engine, session.id, "call_1", "contents"))
    assert engine.resumed == [("token-1", {"resumed_iteration": 0})]
    assert lifecycle.resume(aws.store, engine, session.id, state.response_id, 0) is False

    # And the second model call (records the outputs, then text, ending the turn in the same
    # write) runs twice through its Lambda: the rerun finds the turn ended and stops, writing nothing
    ended = TurnState.model_validate(_invoke_step("call_model", state.model_dump()))
    assert (ended.next, ended.finished) == ("stop", True)
    before = _log(aws, session.id)
    assert TurnState.model_validate(_invoke_step("call_model", state.model_dump())).next == "stop"
    assert _log(aws, session.id) == before

    # And a FinishTurn that still ran (twice) would write nothing either
    assert (
        TurnState.model_validate(twice(lambda: _invoke_step("finish_turn", ended.model_dump()))).next
        == "stop"
    )

    # Then the log holds every event exactly once, in order
    events = aws.events(session.id)
    _assert_gapless(events)
    assert _types(events) == [
        "session.status",
        "session.input.consumed",
        "response.in_progress",
        "response.output_text.delta",  # "Let me "
        "response.output_text.delta",  # "look." (flushed at the end of the call)
        "response.output_item.done",  # assistant "Let me look."
        "session.usage",  # the model call's tokens
        "response.output_item.done",  # call_1 action_required
        "response.output_item.done",  # call_1 completed
        "response.output_item.done",  # its output
        "response.output_text.delta",
        "response.output_item.done",  # assistant "All done."
        "session.usage",
        "response.completed",
        "session.status",
    ]
    # And every item exactly once
    items = aws.store.list_items(session.id)
    assert [i.type for i in items] == [
        "message",
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert len({i.id for i in items}) == len(items)
    assert aws.store.get_session(session.id).status == "idle"
    # And a repeated model step returned its recorded decision without calling the model again
    assert len(mock_llm.requests(key)) == 1


def test_fail_step_run_twice_reports_once(aws: Stack, mock_llm: MockLLM) -> None:
    # Given a running turn (played by the test, no execution)
    session = aws.new_session(mock_llm.script({"text": "unused"}))
    agent = aws.store.get_agent(session.agent_id)
    engine = RecordingEngine()
    lifecycle.start_or_join(
        aws.store,
        engine,
        agent,
        session.id,
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        None,
    )
    state = engine.started[0].model_copy(
        update={
            "error": {
                "Error": "TurnError",
                "Cause": json.dumps({"errorMessage": json.dumps({"code": "model_error", "message": "nope"})}),
            }
        }
    )

    # When the fail step runs twice (through its Lambda function)
    first = _invoke_step("fail_turn", state.model_dump())
    before = _log(aws, session.id)
    second = _invoke_step("fail_turn", state.model_dump())

    # Then it reported the failure once
    assert _log(aws, session.id) == before
    assert first == second
    assert first["error"] == {"code": "model_error", "message": "nope"}
    assert _types(aws.events(session.id))[-2:] == ["response.failed", "session.status"]
    failed = aws.store.get_session(session.id)
    assert failed.status == "failed"
    assert failed.last_task_error is not None
    assert failed.last_task_error.code == "model_error"


# ----------------------------------------------------------------------------- (6)
def test_unanswered_client_call_times_out(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    # Given an agent that waits at most one second for client tools, and a model that calls one
    key = mock_llm.script({"tool_calls": [{"call_id": "call_slow", "name": "read_file", "arguments": "{}"}]})
    session = aws.new_session(key, client_tool_timeout_s=1)

    # When the call is published and nobody answers
    api.post_message(session.id, "Read it", tools=[READ_FILE])
    response_id = _response_id(aws, session.id)
    aws.wait_for_event(session.id, _is_action_required, what="action_required")

    # Then the parked task times out and the turn fails with client_tool_timeout
    assert aws.wait_for_execution(response_id)["status"] == "FAILED"
    failed = aws.wait_for_status(session.id, "failed", after_seq=1)
    assert failed.last_task_error is not None
    assert failed.last_task_error.code == "client_tool_timeout"
    events = aws.events(session.id)
    assert _types(events)[-2:] == ["response.failed", "session.status"]

    assert aws.store.get_call(session.id, response_id, "call_slow").output is None  # type: ignore[union-attr]


def test_late_output_after_the_turn_failed_is_refused_and_not_stored(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    # Given a turn that failed because its client call timed out
    key = mock_llm.script({"tool_calls": [{"call_id": "call_late", "name": "read_file", "arguments": "{}"}]})
    session = aws.new_session(key, client_tool_timeout_s=1)
    api.post_message(session.id, "Read it", tools=[READ_FILE])
    response_id = _response_id(aws, session.id)
    assert aws.wait_for_execution(response_id)["status"] == "FAILED"
    aws.wait_for_status(session.id, "failed", after_seq=1)

    # When the output arrives late, twice
    late = api.post_output(session.id, "call_late", "too late")
    again = api.post_output(session.id, "call_late", "too late")

    # Then both are refused the same way and nothing was recorded on the dead turn
    assert late.status == 409
    assert again.status == 409
    stored = aws.store.get_call(session.id, response_id, "call_late")
    assert stored is not None
    assert stored.output is None
    assert aws.store.get_turn(session.id, response_id).unanswered == 1


# ----------------------------------------------------------------------------- (7)
def test_message_during_a_model_call_continues_the_turn(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    # Given a turn whose first model call is held at a gate
    key = mock_llm.script({"text": "first answer", "block": True}, {"text": "second answer"})
    session = aws.new_session(key)
    api.post_message(session.id, "one")
    response_id = _response_id(aws, session.id)
    mock_llm.wait_for_gate()

    # When a second message arrives during that model call, and the call then answers
    r = api.post_message(session.id, "two")
    assert r.status == 202
    assert r.body["queued"] is True
    mock_llm.release_gate()

    # Then the same turn continues with a second model call instead of going idle in between
    assert aws.wait_for_execution(response_id)["status"] == "SUCCEEDED"
    aws.wait_for_status(session.id, "idle", after_seq=1)
    events = aws.events(session.id)
    _assert_gapless(events)
    statuses = [(e.data["status"], e.data["response_id"]) for e in events if e.type == "session.status"]
    assert statuses == [("running", response_id), ("idle", response_id)]
    assert _types(events).count("response.completed") == 1
    assert _entered(aws.history(response_id), "CallModel") == 2
    first, second = mock_llm.requests(key)
    assert [i.get("content") for i in first["input"]] == [[{"type": "input_text", "text": "one"}]]
    texts = [
        i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in second["input"]
    ]
    assert sorted(texts) == ["first answer", "one", "two"]
    items = aws.store.list_items(session.id)
    assert sorted(i.data["content"][0]["text"] for i in items) == [
        "first answer",
        "one",
        "second answer",
        "two",
    ]

    # And the model saw the new message after the answer it gave without it
    assert texts == ["one", "first answer", "two"]


def test_a_message_reposted_with_its_idempotency_key_is_stored_and_run_once(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    # Given a session and a message posted with an Idempotency-Key
    key = mock_llm.script({"text": "only once"})
    session = aws.new_session(key)
    body = json.dumps(
        {"type": "message", "data": {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}}
    )
    headers = {"content-type": "application/json", "idempotency-key": "client-attempt-1"}
    first = api.call("POST", f"/v1/sessions/{session.id}/events", headers=headers, body=body)
    assert first.status == 202, first.body
    response_id = _response_id(aws, session.id)

    # When the client, unsure the first post landed, posts it again with the same key (during and after the turn)
    again = api.call("POST", f"/v1/sessions/{session.id}/events", headers=headers, body=body)
    assert aws.wait_for_execution(response_id)["status"] == "SUCCEEDED"
    aws.wait_for_status(session.id, "idle", after_seq=1)
    late = api.call("POST", f"/v1/sessions/{session.id}/events", headers=headers, body=body)

    # Then every answer is the first one, and one message, one turn and one model call exist
    assert again.status == late.status == 202
    assert again.body == late.body == first.body
    items = aws.store.list_items(session.id)
    assert [(i.type, i.data.get("role")) for i in items] == [("message", "user"), ("message", "assistant")]
    assert items[0].id == first.body["item_id"]
    assert _types(aws.events(session.id)).count("session.input.consumed") == 1
    assert len(mock_llm.requests(key)) == 1
    assert aws.store.get_session(session.id).status == "idle"


def test_a_bad_idempotency_key_is_400_and_writes_nothing(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    session = aws.new_session(mock_llm.script({"text": "unused"}))
    body = json.dumps(
        {"type": "message", "data": {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}}
    )
    r = api.call(
        "POST",
        f"/v1/sessions/{session.id}/events",
        headers={"content-type": "application/json", "idempotency-key": "has spaces"},
        body=body,
    )
    assert r.status == 400
    assert r.error()["code"] == "invalid_input"
    assert aws.store.get_session(session.id).last_seq == 0


def test_interrupting_a_parked_turn_ends_its_execution_at_once(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    # Given a turn parked on a client call (its deadline is the default hour)
    key = mock_llm.script({"tool_calls": [{"call_id": "call_p", "name": "read_file", "arguments": "{}"}]})
    session = aws.new_session(key)
    api.post_message(session.id, "Read it", tools=[READ_FILE])
    response_id = _response_id(aws, session.id)
    aws.wait_for_event(session.id, _is_action_required, what="action_required")
    wait_until(lambda: _parked_in_await_client(aws.history(response_id)), what="AwaitClient to park")

    # When the session is interrupted
    assert api.post_event(session.id, {"type": "interrupt"}).status == 202

    # Then the execution ends within seconds instead of waiting out its deadline
    assert aws.wait_for_execution(response_id, timeout=15)["status"] in ("ABORTED", "SUCCEEDED")
    assert aws.store.get_session(session.id).status == "idle"


def test_a_step_that_raises_fails_the_turn_and_the_session_takes_messages_again(
    aws: Stack, api: Api, mock_llm: MockLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a model step whose code raises something unexpected (not a model error)
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug in the step")

    monkeypatch.setattr(model_step, "default_caller", lambda _harness: broken)
    session = aws.new_session(mock_llm.script({"text": "unused"}))
    # When a turn runs
    api.post_message(session.id, "hi")
    response_id = _response_id(aws, session.id)
    # Then the execution ends through FailTurn and the session is failed with the error
    assert aws.wait_for_execution(response_id)["status"] == "FAILED"
    failed = aws.wait_for_status(session.id, "failed", after_seq=1)
    assert failed.last_task_error is not None
    assert "a bug in the step" in failed.last_task_error.message


def test_when_failturn_itself_fails_the_reconciler_resets_the_session(
    aws: Stack, api: Api, mock_llm: MockLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyloop.turns.reconcile import reconcile

    # Given a model error, and recording the failure broken too (the table unreachable for FailTurn)
    def model_down(*_: Any, **__: Any) -> Any:
        from skyloop.errors import ModelCallError

        raise ModelCallError("model endpoint answered 500", code="model_http_error")

    def fail_broken(*_: Any, **__: Any) -> None:
        raise ConnectionError("table unreachable")

    monkeypatch.setattr(model_step, "default_caller", lambda _harness: model_down)
    monkeypatch.setattr(lifecycle, "fail", fail_broken)
    session = aws.new_session(mock_llm.script({"text": "unused"}))
    api.post_message(session.id, "hi")
    response_id = _response_id(aws, session.id)
    # When the execution ends (FailTurn caught into its own Fail state)
    assert aws.wait_for_execution(response_id)["status"] == "FAILED"
    assert aws.store.get_session(session.id).status == "running"  # stranded
    monkeypatch.undo()
    # Then the reconciler ends the turn, and the session takes messages again
    report = reconcile(aws.store, turn_engine.deployed(), grace_s=0)
    assert report.reset == [session.id]
    failed = aws.store.get_session(session.id)
    assert failed.status == "failed"
    assert failed.last_task_error is not None
    assert failed.last_task_error.code == "runner_error"


# ------------------------------------------------------------------------ heartbeats
def test_a_client_that_stops_sending_heartbeats_fails_the_turn_long_before_its_deadline(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    # Given an agent that waits an hour for client tools but wants a heartbeat every 2 s
    key = mock_llm.script({"tool_calls": [{"call_id": "call_gone", "name": "read_file", "arguments": "{}"}]})
    session = aws.new_session(key, client_tool_timeout_s=3600, client_heartbeat_s=2)
    started = time.monotonic()
    # When the call is published and the client vanishes (no heartbeat, no output)
    api.post_message(session.id, "Read it", tools=[READ_FILE])
    response_id = _response_id(aws, session.id)
    aws.wait_for_event(session.id, _is_action_required, what="action_required")
    # Then the wait fails on its heartbeat, not its deadline, with a code of its own
    assert aws.wait_for_execution(response_id)["status"] == "FAILED"
    failed = aws.wait_for_status(session.id, "failed", after_seq=1)
    assert time.monotonic() - started < 30
    assert failed.last_task_error is not None
    assert failed.last_task_error.code == "client_heartbeat_timeout"


def test_heartbeats_keep_a_parked_turn_alive_until_its_output_arrives(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    # Given an agent that wants a heartbeat every 8 s (room for slow requests on a loaded machine: 4 s was
    # missed once on a slow VM), and a client that runs a slow tool (24 s: a hot wait of one period, then
    # two parked periods)
    key = mock_llm.script(
        {"tool_calls": [{"call_id": "call_slow", "name": "read_file", "arguments": "{}"}]},
        {"text": "Read it."},
    )
    session = aws.new_session(key, client_tool_timeout_s=3600, client_heartbeat_s=8)
    api.post_message(session.id, "Read it", tools=[READ_FILE])
    response_id = _response_id(aws, session.id)
    aws.wait_for_event(session.id, _is_action_required, what="action_required")
    # When it sends a heartbeat every half second while the tool runs, then the output
    for _ in range(48):
        beat = api.post_event(session.id, {"type": "heartbeat"})
        assert beat.status == 202, beat.body
        assert beat.body == {"queued": False, "parked": True}
        time.sleep(0.5)
    assert api.post_output(session.id, "call_slow", "contents").status == 202
    # Then the turn went on and completed
    assert aws.wait_for_execution(response_id)["status"] == "SUCCEEDED"
    assert aws.wait_for_status(session.id, "idle", after_seq=1).last_task_error is None
    # And a heartbeat with nothing waiting is harmless and says so
    assert api.post_event(session.id, {"type": "heartbeat"}).body == {"queued": False, "parked": False}
