"""The turn lifecycle and steps on the in-memory store and a recording engine: no AWS, no HTTP."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest

from skyloop import events as ev
from skyloop.errors import ConflictError, ModelCallError, NotFoundError, RunnerUnavailableError
from skyloop.harnesses.base import FunctionCall, ModelResult
from skyloop.models.agent import Agent, AgentSpec
from skyloop.models.session import ClientTool, Session
from skyloop.store import ConditionFailedError, MemoryStore, StoredEvent
from skyloop.turns import lifecycle, model_step, steps
from skyloop.turns.engine import StaleTokenError
from skyloop.turns.state import TurnError, TurnState
from tests.fakes import RecordingEngine

READ = ClientTool(name="read_file", description="Read", parameters={"type": "object"})


class Model:
    """A scripted model: each call returns the next result (or raises the next error)."""

    def __init__(self, *results: ModelResult | Exception, deltas: list[str] | None = None) -> None:
        self.results = list(results)
        self.deltas = deltas or []
        self.calls: list[list[Any]] = []

    def __call__(self, spec: Any, items: list[Any], tools: Any, on_delta: Any, **_: Any) -> ModelResult:
        self.calls.append(items)
        for delta in self.deltas:
            on_delta(delta)
        result = self.results.pop(0)
        if isinstance(result, Exception):
            raise result
        return result


def text(value: str) -> ModelResult:
    return ModelResult(text=value)


def calls(*names: str) -> ModelResult:
    """Calls named ``call_<name>``, or ``call_<name>_<n>`` for a name called more than once."""
    ids = [f"call_{n}" if names.count(n) == 1 else f"call_{n}_{i}" for i, n in enumerate(names)]
    return ModelResult(
        calls=[FunctionCall(call_id=i, name=n, arguments="{}") for i, n in zip(ids, names, strict=True)]
    )


class World:
    """A store, an engine, an agent and one session; helpers play Step Functions."""

    def __init__(self, *, max_iterations: int = 50, client_tool_timeout_s: int = 3600) -> None:
        self.store = MemoryStore()
        self.engine = RecordingEngine()
        limits = {"max_iterations": max_iterations, "client_tool_timeout_s": client_tool_timeout_s}
        spec = AgentSpec.model_validate({"name": "unit", "executor": {"model": "m"}, "limits": limits})
        self.agent = Agent(id=uuid.uuid4().hex, name="unit", created_at=1, spec=spec)
        self.store.put_agent(self.agent)
        now = int(time.time())
        self.session = Session(
            id=uuid.uuid4().hex, agent_id=self.agent.id, agent_name="unit", created_at=now, updated_at=now
        )
        self.store.create_session(self.session)

    @property
    def sid(self) -> str:
        return self.session.id

    def post(self, words: str = "hi", tools: list[ClientTool] | None = None, **kw: Any) -> dict[str, Any]:
        message = {"role": "user", "content": [{"type": "input_text", "text": words}]}
        return lifecycle.start_or_join(self.store, self.engine, self.agent, self.sid, message, tools, **kw)

    def start(self, words: str = "hi", tools: list[ClientTool] | None = None) -> TurnState:
        """Post a message that starts a turn; its execution's input (the turn has no prepare step)."""
        self.post(words, tools)
        return self.engine.started[-1]

    def events(self) -> list[StoredEvent]:
        return self.store.read_event_page(self.sid, 0, limit=10_000)[0]

    def types(self) -> list[str]:
        return [e.type for e in self.events()]

    def observable(self) -> Any:
        session = self.store.get_session(self.sid)
        return (
            session.model_dump(exclude={"updated_at"}),
            [(e.seq, e.type, e.data) for e in self.events()],
            [i.model_dump() for i in self.store.list_items(self.sid)],
        )

    def run(self, state: TurnState, model: Model, *, answers: dict[str, str] | None = None) -> TurnState:
        """Drive the turn's states like the ASL does until it stops."""
        while state.next != "stop":
            if state.next == "call_model":
                state = steps.call_model(self.store, state, model)
            elif state.next == "await_client":
                token = f"token-{state.iteration}"
                steps.await_client(self.store, self.engine, state, token)
                for call in self.store.list_calls(self.sid, state.response_id, iteration=state.iteration - 1):
                    if call.output is None and answers is not None:
                        lifecycle.answer(self.store, self.engine, self.sid, call.call_id, answers[call.name])
                if not self.engine.resumed or self.engine.resumed[-1][0] != token:
                    return state  # still parked
                state = state.model_copy(update={"next": "call_model"})
            elif state.next == "finish_turn":
                state = steps.finish_turn(self.store, state)
            else:
                raise AssertionError(state.next)
        return state


def twice(world: World, step: Any) -> Any:
    first = step()
    before = world.observable()
    second = step()
    assert world.observable() == before, "a repeated step wrote something"
    assert first == second
    return first


# ------------------------------------------------------------------------------ happy paths
def test_a_text_turn_streams_then_completes_and_goes_idle() -> None:
    world = World()
    state = world.run(world.start(), Model(text("Hello there"), deltas=["Hello ", "there"]))
    assert state.next == "stop"
    assert world.types() == [
        ev.SESSION_STATUS,
        ev.SESSION_INPUT_CONSUMED,
        ev.RESPONSE_IN_PROGRESS,
        ev.RESPONSE_TEXT_DELTA,
        ev.RESPONSE_ITEM_DONE,
        ev.SESSION_USAGE,  # the model call's tokens, with the result
        ev.RESPONSE_COMPLETED,
        ev.SESSION_STATUS,
    ]
    session = world.store.get_session(world.sid)
    assert (session.status, session.active_response_id) == ("idle", None)
    assert [i.type for i in world.store.list_items(world.sid)] == ["message", "message"]


def test_the_post_that_starts_a_turn_announces_it_and_the_answer_ends_it_in_one_write() -> None:
    # Given a store that counts its appends
    world = World()
    appends: list[list[str]] = []
    append = world.store.append

    def counting(batch: Any) -> Any:
        appends.append([kind for kind, _ in batch.events])
        return append(batch)

    world.store.append = counting  # type: ignore[method-assign]
    # When a message starts a turn, the post's own append announces it: no prepare step
    state = world.start("hi")
    assert appends == [[ev.SESSION_STATUS, ev.SESSION_INPUT_CONSUMED, ev.RESPONSE_IN_PROGRESS]]
    assert (state.next, state.iteration) == ("call_model", 0)
    # And a text answer is recorded and completes the turn in the model step's one write
    ended = steps.call_model(world.store, state, Model(text("Hello")))
    assert (ended.next, ended.finished) == ("stop", True)
    assert appends[1:] == [
        [
            ev.RESPONSE_TEXT_DELTA,
            ev.RESPONSE_ITEM_DONE,
            ev.SESSION_USAGE,
            ev.RESPONSE_COMPLETED,
            ev.SESSION_STATUS,
        ]
    ]
    assert world.store.get_session(world.sid).status == "idle"


def test_every_step_run_twice_writes_once() -> None:
    world = World()
    world.post("hi", [READ])
    state = world.engine.started[0]
    model = Model(
        ModelResult(text="Let me look.", calls=[FunctionCall(call_id="c1", name="read_file")]), text("Done")
    )
    state = twice(world, lambda: steps.call_model(world.store, state, model))
    assert (state.next, state.iteration) == ("await_client", 1)
    twice(world, lambda: steps.await_client(world.store, world.engine, state, "token-1"))
    twice(world, lambda: lifecycle.answer(world.store, world.engine, world.sid, "c1", "contents"))
    assert world.engine.resumed == [("token-1", {"resumed_iteration": 0})]
    # The last model call ends the turn in its own write; run again, it writes nothing and stops too
    ended = steps.call_model(world.store, state, model)
    assert (ended.next, ended.finished) == ("stop", True)
    before = world.observable()
    assert steps.call_model(world.store, state, model).next == "stop"
    assert world.observable() == before
    assert twice(world, lambda: steps.finish_turn(world.store, ended)).next == "stop"
    assert len(model.calls) == 2  # a repeated model step returned its recorded decision
    items = world.store.list_items(world.sid)
    assert [i.type for i in items] == [
        "message",
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]


def test_several_calls_resume_once_after_the_last_output_in_any_order() -> None:
    world = World()
    state = world.start("go", [READ, ClientTool(name="list_dir")])
    state = steps.call_model(world.store, state, Model(calls("read_file", "list_dir")))
    steps.await_client(world.store, world.engine, state, "token-1")
    lifecycle.answer(world.store, world.engine, world.sid, "call_list_dir", "a b")
    assert world.engine.resumed == []
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "text")
    assert world.engine.resumed == [("token-1", {"resumed_iteration": 0})]


def test_a_call_to_a_tool_the_client_did_not_offer_is_answered_at_once() -> None:
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("delete_disk"), text("ok")))
    assert state.next == "call_model"  # nothing to wait for
    (call,) = world.store.list_calls(world.sid, state.response_id)
    assert call.output == "Error: tool 'delete_disk' is not available in this session"
    assert world.run(state, Model(text("ok"))).next == "stop"


# ------------------------------------------------------------------------- answering calls
def test_answers_same_again_is_a_no_op_different_is_409_unknown_is_404() -> None:
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file", "read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    ok = lifecycle.answer(world.store, world.engine, world.sid, "call_read_file_0", "one")
    assert ok == {"queued": True, "item_id": "call_read_file_0"}
    assert lifecycle.answer(world.store, world.engine, world.sid, "call_read_file_0", "one") == ok
    with pytest.raises(ConflictError):
        lifecycle.answer(world.store, world.engine, world.sid, "call_read_file_0", "two")
    with pytest.raises(NotFoundError):
        lifecycle.answer(world.store, world.engine, world.sid, "call_nope", "x")


def test_a_failed_wake_up_is_not_lost_a_repost_of_the_same_output_wakes_the_turn() -> None:
    # Given a turn parked on one call, and Step Functions unreachable for one request
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    world.engine.fail_resumes = 1
    # When the output is posted, the wake-up fails
    with pytest.raises(ConnectionError):
        lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "out")
    assert world.engine.resumed == []
    # Then re-posting the same output wakes the turn, once
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "out")
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "out")
    assert world.engine.resumed == [("token-1", {"resumed_iteration": 0})]


def test_parking_again_after_every_call_was_answered_resumes_the_turn_itself() -> None:
    # Given a parked call whose answer landed but whose wake-up failed
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    assert world.engine.resumed == []  # a call is open: parking leaves the wake-up to its answer
    world.engine.fail_resumes = 1
    with pytest.raises(ConnectionError):
        lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "out")
    # When the parking step runs again (a retried invocation with a new token)
    steps.await_client(world.store, world.engine, state, "token-2")
    # Then, no call being open any more, parking itself wakes the turn, once
    assert world.engine.resumed == [("token-2", {"resumed_iteration": 0})]
    steps.await_client(world.store, world.engine, state, "token-2")
    assert world.engine.resumed == [("token-2", {"resumed_iteration": 0})]


def test_an_output_for_a_turn_whose_execution_is_gone_is_409() -> None:
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    world.engine.stale_tokens.add("token-1")
    with pytest.raises(StaleTokenError):
        lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "late")


# --------------------------------------------------------------------- steering, continuing
class PostingModel(Model):
    """A model during whose call the user posts another message (after the conversation was read)."""

    def __init__(self, world: World, words: str, *results: ModelResult) -> None:
        super().__init__(*results)
        self.world, self.words = world, words

    def __call__(self, spec: Any, items: list[Any], tools: Any, on_delta: Any, **kw: Any) -> ModelResult:
        self.world.post(self.words)
        return super().__call__(spec, items, tools, on_delta, **kw)


def test_a_message_during_a_turn_joins_it_and_finish_continues_instead_of_ending() -> None:
    world = World()
    model_one = PostingModel(world, "and also this", text("answer one"))
    state = steps.call_model(world.store, world.start("first"), model_one)
    assert len(world.engine.started) == 1  # joined, no second turn
    # The model step could not end the turn (input it did not see arrived): FinishTurn decides
    assert (state.next, state.finished) == ("finish_turn", False)
    assert ev.RESPONSE_COMPLETED not in world.types()
    state = steps.finish_turn(world.store, state)
    assert (state.next, state.iteration) == ("call_model", 1)
    assert ev.RESPONSE_COMPLETED not in world.types()
    model = Model(text("answer two"))
    assert world.run(state, model).next == "stop"
    assert "and also this" in str(model.calls[0])
    assert world.types().count(ev.RESPONSE_COMPLETED) == 1


# ------------------------------------------------------------------------------ interrupts
def test_interrupting_a_parked_turn_cancels_its_calls_marks_once_and_stops_the_execution() -> None:
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file", "read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file_0", "done")
    assert lifecycle.cancel(world.store, world.engine, world.sid) == {"queued": False}
    assert lifecycle.cancel(world.store, world.engine, world.sid) == {"queued": False}  # idle now: no-op
    assert world.engine.stopped == [state.response_id]
    assert world.engine.woken == ["token-1"]
    outputs = [c.output for c in world.store.list_calls(world.sid, state.response_id)]
    assert outputs == ["done", lifecycle.CANCELLED_OUTPUT]
    markers = [i for i in world.store.list_items(world.sid) if "[System: interrupted]" in str(i.data)]
    assert len(markers) == 1
    assert world.types()[-2:] == [ev.RESPONSE_CANCELLED, ev.SESSION_STATUS]
    with pytest.raises(ConflictError):  # a late output for a cancelled call
        lifecycle.answer(world.store, world.engine, world.sid, "call_read_file_1", "late")
    # and the stopped turn's steps write nothing any more
    before = world.observable()
    assert steps.call_model(world.store, state, Model(text("x"))).next == "stop"
    assert steps.finish_turn(world.store, state).next == "stop"
    assert world.observable() == before


def test_a_first_step_that_reads_the_session_before_its_posts_append_waits_for_it_and_runs_the_turn() -> None:
    # Given a post whose turn's execution starts while its append is on its way, and a first step that
    # reads the session before the append lands (the append waits for that read)
    world = World()
    model = Model(text("Hello."))
    first_read = threading.Event()
    results: list[TurnState] = []
    get_session, append = world.store.get_session, world.store.append

    def reads(session_id: str) -> Any:
        found = get_session(session_id)
        if threading.current_thread().name == "first-step":
            first_read.set()
        return found

    def lands_after_the_read(batch: Any) -> Any:
        if batch.new_turn is not None:
            assert first_read.wait(10)
        return append(batch)

    class StepsAtOnce(RecordingEngine):
        def start(self, state: TurnState) -> None:
            super().start(state)
            step = threading.Thread(
                target=lambda: results.append(steps.call_model(world.store, state, model)), name="first-step"
            )
            self.steps.append(step)
            step.start()

    engine = StepsAtOnce()
    engine.steps = []  # type: ignore[attr-defined]
    world.engine = engine
    world.store.get_session = reads  # type: ignore[method-assign]
    world.store.append = lands_after_the_read  # type: ignore[method-assign]
    # When the message is posted
    assert world.post("hi") == {"queued": True, "item_id": world.store.list_items(world.sid)[0].id}
    for step in engine.steps:  # type: ignore[attr-defined]
        step.join(10)
    # Then the step waited for the append and ran the turn to its end
    (result,) = results
    assert (result.next, result.finished) == ("stop", True)
    assert len(model.calls) == 1
    assert world.store.get_session(world.sid).status == "idle"
    assert world.types()[-1] == ev.SESSION_STATUS


def test_a_first_step_whose_turn_read_came_before_its_posts_append_and_session_read_after_runs_the_turn() -> (
    None
):
    # Given a first step whose turn read (alongside its session read) comes before the post's append lands,
    # and whose session read comes after it
    world = World()
    model = Model(text("Hello."))
    turn_read, appended = threading.Event(), threading.Event()
    results: list[Any] = []
    get_turn, get_session, append = world.store.get_turn, world.store.get_session, world.store.append

    def turn_first(session_id: str, response_id: str) -> Any:
        try:
            return get_turn(session_id, response_id)
        finally:
            turn_read.set()

    def session_after(session_id: str) -> Any:
        if threading.current_thread().name == "first-step":
            assert appended.wait(10)
        return get_session(session_id)

    def lands_after_the_turn_read(batch: Any) -> Any:
        if batch.new_turn is None:
            return append(batch)
        assert turn_read.wait(10)
        try:
            return append(batch)
        finally:
            appended.set()

    def run(state: TurnState) -> None:
        try:
            results.append(steps.call_model(world.store, state, model))
        except Exception as exc:  # the step's failure is the test's
            results.append(exc)

    class StepsAtOnce(RecordingEngine):
        def start(self, state: TurnState) -> None:
            super().start(state)
            threading.Thread(target=run, args=(state,), name="first-step").start()

    world.engine = StepsAtOnce()
    world.store.get_turn = turn_first  # type: ignore[method-assign]
    world.store.get_session = session_after  # type: ignore[method-assign]
    world.store.append = lands_after_the_turn_read  # type: ignore[method-assign]
    # When a message is posted
    world.post("hi")
    deadline = time.monotonic() + 10
    while not results and time.monotonic() < deadline:
        time.sleep(0.01)
    # Then the step read the turn again and ran it to its end
    (result,) = results
    assert not isinstance(result, Exception), result
    assert (result.next, result.finished) == ("stop", True)
    assert len(model.calls) == 1


def test_an_execution_started_for_an_append_that_did_not_land_is_stopped_and_writes_nothing() -> None:
    # Given a post whose first append loses a race (another writer moved the session first)
    world = World()
    append = world.store.append
    lost: list[Any] = []

    def loses_once(batch: Any) -> Any:
        if batch.new_turn is not None and not lost:
            lost.append(batch)
            raise ConditionFailedError("the session moved")
        return append(batch)

    world.store.append = loses_once  # type: ignore[method-assign]
    # When the message is posted
    world.post("hi")
    # Then the post decided again under a new response id, and the first attempt's execution was stopped
    first, second = world.engine.started
    assert first.response_id != second.response_id
    assert world.engine.stopped == [first.response_id]
    assert world.store.get_session(world.sid).active_response_id == second.response_id
    # and if it still ran, its first step found no turn of its own and wrote nothing
    before = world.observable()
    model = Model(text("never"))
    assert steps.call_model(world.store, first, model).next == "stop"
    assert world.observable() == before
    assert model.calls == []


def _answered(world: World) -> TurnState:
    """A turn whose one client call was answered: the next model step's input."""
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "text")
    return state.model_copy(update={"next": "call_model"})


def test_a_turn_stopped_before_its_outputs_append_lands_stops_its_model_call_and_writes_nothing_more() -> (
    None
):
    # Given an answered call, and an interrupt that lands just before the next step's outputs' append
    # (which goes on while the model is called)
    world = World()
    state = _answered(world)
    append = world.store.append
    before: list[Any] = []

    def interrupted_first(batch: Any) -> Any:
        if batch.dedupe_key and batch.dedupe_key.endswith(":outputs") and not before:
            lifecycle.cancel(world.store, world.engine, world.sid)
            before.append(world.observable())
        return append(batch)

    streamed: list[int] = []

    def model(spec: Any, items: Any, tools: Any, on_delta: Any, **_: Any) -> ModelResult:
        for n in range(100):
            time.sleep(0.01)
            on_delta(f"t{n} ")
            streamed.append(n)
        return text("done")

    world.store.append = interrupted_first  # type: ignore[method-assign]
    # When the model step runs
    result = steps.call_model(world.store, state, model)
    # Then the model call was stopped at its next streamed text, and the stopped turn wrote nothing more
    assert result.next == "stop"
    assert before
    assert world.observable() == before[0]
    assert len(streamed) < 100


def test_a_model_step_rerun_after_its_outputs_landed_gives_the_model_each_output_once() -> None:
    # Given an answered call, and a model step whose outputs' append landed before its model call died
    world = World()
    state = _answered(world)
    with pytest.raises(RuntimeError):
        steps.call_model(world.store, state, Model(RuntimeError("the environment died")))
    assert ev.RESPONSE_ITEM_DONE in world.types()[-2:]
    # When the step runs again
    model = Model(text("done"))
    result = steps.call_model(world.store, state, model)
    # Then the model saw the call and its output once, as the log keeps them, and the turn ended
    assert [i.type for i in model.calls[0]] == ["message", "function_call", "function_call_output"]
    assert [i.type for i in world.store.list_items(world.sid)] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert (result.next, result.finished) == ("stop", True)


def test_a_model_call_sees_the_outputs_it_resumes_with_as_the_log_keeps_them() -> None:
    # Given a turn that called two client tools, each answered
    world = World()
    state = steps.call_model(
        world.store,
        world.start("go", [READ, ClientTool(name="list_dir")]),
        Model(calls("read_file", "list_dir")),
    )
    steps.await_client(world.store, world.engine, state, "token-1")
    lifecycle.answer(world.store, world.engine, world.sid, "call_list_dir", "a b")
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "text")
    # When the next model call runs (its outputs' append going on meanwhile)
    model = Model(text("done"))
    steps.call_model(world.store, state.model_copy(update={"next": "call_model"}), model)
    # Then what it saw is what a read of the log gives up to its answer
    seen = [(i.id, i.type, i.data) for i in model.calls[0]]
    stored = [(i.id, i.type, i.data) for i in world.store.list_items(world.sid)]
    assert seen == stored[:-1]
    assert [t for _, t, _ in seen] == ["message", *["function_call", "function_call_output"] * 2]


def _used(result: ModelResult, input_tokens: int, output_tokens: int) -> ModelResult:
    return result.model_copy(update={"usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}})


def _terminal_usage(world: World, kind: str) -> Any:
    return [e.data["response"]["usage"] for e in world.events() if e.type == kind][-1]


def test_usage_sums_over_a_turns_model_calls_and_the_sessions_turns() -> None:
    world = World()
    reported: list[tuple[str, int, int]] = []

    def report(agent: str, usage: Any) -> None:
        reported.append((agent, usage.input_tokens, usage.output_tokens))

    state = world.start("go", [READ])
    model = Model(_used(calls("read_file"), 100, 7), _used(text("done"), 150, 30))
    state = twice(world, lambda: steps.call_model(world.store, state, model, report_usage=report))
    steps.await_client(world.store, world.engine, state, "token-1")
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "ok")
    state = steps.call_model(world.store, state, model, report_usage=report)
    assert state.finished
    assert reported == [("unit", 100, 7), ("unit", 150, 30)]  # the rerun reported nothing again
    assert _terminal_usage(world, ev.RESPONSE_COMPLETED) == {
        "input_tokens": 250,
        "output_tokens": 37,
        "total_tokens": 287,
    }
    # a second turn starts its own count; the session's goes on
    world.run(world.start("again"), Model(_used(text("x"), 40, 2)))
    assert _terminal_usage(world, ev.RESPONSE_COMPLETED)["total_tokens"] == 42
    session = world.store.get_session(world.sid)
    assert (session.input_tokens, session.output_tokens) == (290, 39)


def test_an_interrupted_or_failed_turn_reports_what_it_used() -> None:
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(_used(calls("read_file"), 11, 3)))
    steps.await_client(world.store, world.engine, state, "token-1")
    lifecycle.cancel(world.store, world.engine, world.sid)
    assert _terminal_usage(world, ev.RESPONSE_CANCELLED)["total_tokens"] == 14

    state = steps.call_model(
        world.store, world.start("again", [READ]), Model(_used(calls("read_file"), 5, 1))
    )
    failed = state.model_copy(update={"error": {"Error": "States.Timeout", "Cause": "client tool deadline"}})
    steps.fail_turn(world.store, failed)
    assert _terminal_usage(world, ev.RESPONSE_FAILED)["total_tokens"] == 6


def test_deleting_a_session_stops_and_wakes_its_turn() -> None:
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    lifecycle.delete_session(world.store, world.engine, world.sid)
    assert world.engine.stopped == [state.response_id]
    assert world.engine.woken == ["token-1"]
    with pytest.raises(NotFoundError):
        world.store.get_session(world.sid)


# ----------------------------------------------------------------------- retries, failures
def test_a_retried_model_step_announces_itself_and_streams_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a model call that streamed some text and then died (the step will be retried)
    monkeypatch.setattr(model_step, "DELTA_FLUSH_S", 0.0)  # every delta is written at once
    world = World()
    state = world.start()
    dying = Model(RuntimeError("Lambda died"), deltas=["partial "])
    with pytest.raises(RuntimeError):
        steps.call_model(world.store, state, dying)
    # When the step runs again
    state = steps.call_model(world.store, state, Model(text("full answer"), deltas=["full ", "answer"]))
    # Then viewers were told the attempt restarts, and the new attempt's text was streamed too
    types = world.types()
    retry = types.index(ev.RESPONSE_RETRY)
    deltas = [e.data["delta"] for e in world.events() if e.type == ev.RESPONSE_TEXT_DELTA]
    assert types.index(ev.RESPONSE_TEXT_DELTA) < retry
    assert deltas == ["partial ", "full ", "answer"]
    assert [e.data.get("attempt") for e in world.events() if e.type == ev.RESPONSE_RETRY] == [1]


def test_a_model_error_fails_the_turn_with_its_code_once() -> None:
    world = World()
    state = world.start()
    error = ModelCallError("model endpoint answered 500: boom", code="model_http_error")
    with pytest.raises(TurnError) as caught:
        steps.call_model(world.store, state, Model(error))
    caught_error = {"Error": "TurnError", "Cause": json.dumps({"errorMessage": str(caught.value)})}
    failed_state = state.model_copy(update={"error": caught_error})
    twice(world, lambda: steps.fail_turn(world.store, failed_state))
    session = world.store.get_session(world.sid)
    assert session.status == "failed"
    assert session.last_task_error is not None
    assert session.last_task_error.code == "model_http_error"
    assert world.types()[-2:] == [ev.RESPONSE_FAILED, ev.SESSION_STATUS]
    # failed is sticky until the next turn starts, which clears the error
    world.post("again")
    assert world.store.get_session(world.sid).last_task_error is None


def test_a_turn_that_cannot_start_is_marked_failed_and_the_message_kept() -> None:
    world = World()
    world.engine.fail_starts = 1
    with pytest.raises(RunnerUnavailableError):
        world.post("hello")
    session = world.store.get_session(world.sid)
    assert session.status == "failed"
    assert session.last_task_error is not None
    assert session.last_task_error.code == "runner_unavailable"
    assert [i.type for i in world.store.list_items(world.sid)] == ["message"]


def test_an_idempotent_message_repost_starts_nothing_twice() -> None:
    world = World()
    first = world.post("hello", idempotency_key="k-1")
    again = world.post("hello", idempotency_key="k-1")
    assert first == again
    assert len(world.engine.started) == 2
    assert world.engine.started[0].response_id == world.engine.started[1].response_id
    assert [i.type for i in world.store.list_items(world.sid)] == ["message"]


def test_max_iterations_ends_a_looping_turn() -> None:
    world = World(max_iterations=2)
    state = world.start("loop", [READ])
    state = steps.call_model(world.store, state, Model(calls("nope")))
    with pytest.raises(TurnError) as caught:
        steps.call_model(world.store, state, Model(calls("nope")))
    assert caught.value.code == "max_iterations"


# ------------------------------------------------------------------------------ reconciler
def test_the_reconciler_resends_a_lost_wake_up_once() -> None:
    from skyloop.turns.reconcile import reconcile

    # Given a parked turn whose last output was recorded but whose wake-up failed, never re-posted
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    world.engine.fail_resumes = 1
    with pytest.raises(ConnectionError):
        lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "out")
    # When the reconciler runs (after the grace period), twice
    first = reconcile(world.store, world.engine, now=time.time() + 120)
    second = reconcile(world.store, world.engine, now=time.time() + 120)
    # Then the turn was woken exactly once
    assert first.resumed == [world.sid]
    assert second.resumed == []
    assert world.engine.resumed == [("token-1", {"resumed_iteration": 0})]


def test_the_reconciler_resets_a_session_whose_execution_died_and_leaves_live_ones() -> None:
    from skyloop.turns.reconcile import reconcile

    world = World()
    state = world.start()
    assert reconcile(world.store, world.engine).checked == 0  # inside the grace period: untouched
    report = reconcile(world.store, world.engine, now=time.time() + 120)
    assert report.reset == []  # its execution runs
    world.engine.statuses[state.response_id] = "FAILED"  # e.g. FailTurn itself failed
    report = reconcile(world.store, world.engine, now=time.time() + 120)
    assert report.reset == [world.sid]
    session = world.store.get_session(world.sid)
    assert session.status == "failed"
    assert session.last_task_error is not None
    assert session.last_task_error.code == "runner_error"
    assert world.store.list_running_sessions() == []
    assert reconcile(world.store, world.engine, now=time.time() + 120).checked == 0


# -------------------------------------------------------------------------------- secrets
def test_the_model_key_lives_in_the_secret_store_and_reaches_only_the_model_call() -> None:
    from skyloop import sessions
    from skyloop.secrets import MemorySecrets

    store, secrets = MemoryStore(), MemorySecrets()
    spec = AgentSpec.model_validate(
        {
            "name": "keyed",
            "executor": {"model": "m", "auth": {"api_key": "sk-very-secret", "base_url": "http://x"}},
        }
    )
    agent = sessions.register_agent(store, spec, secrets=secrets)
    stored = store.get_agent(agent.id)
    # Then the stored version holds no key, only the secret's name
    assert stored.spec.executor.auth is not None
    assert stored.spec.executor.auth.api_key is None
    assert stored.api_key_secret == f"skyloop/agents/{agent.id}/api_key"
    assert "sk-very-secret" not in stored.model_dump_json()
    assert "sk-very-secret" not in str(stored.to_api())
    assert secrets.values == {stored.api_key_secret: "sk-very-secret"}
    # And the model call receives it, read back from the secret store
    resolved = steps.with_api_key(stored, secrets)
    assert resolved.spec.executor.auth is not None
    assert resolved.spec.executor.auth.api_key is not None
    assert resolved.spec.executor.auth.api_key.get_secret_value() == "sk-very-secret"
    # And without a secret store a key is refused rather than stored in the table
    with pytest.raises(Exception, match="secret store"):
        sessions.register_agent(store, spec, secrets=None)


# ------------------------------------------------------------------------------ heartbeats
def test_a_heartbeat_reaches_only_a_parked_wait_and_writes_nothing() -> None:
    world = World()
    # Given an idle session: nothing to tell
    assert lifecycle.heartbeat(world.store, world.engine, world.sid) == {"queued": False, "parked": False}
    # When a turn parks on a client call, a heartbeat goes to its task token, and nothing is written
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    before = world.observable()
    assert lifecycle.heartbeat(world.store, world.engine, world.sid) == {"queued": False, "parked": True}
    assert world.engine.heartbeats == ["token-1"]
    assert world.observable() == before
    # And once the output resumed the turn, there is no wait left to keep alive
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "out")
    assert lifecycle.heartbeat(world.store, world.engine, world.sid)["parked"] is False
    assert world.engine.heartbeats == ["token-1"]


def test_a_heartbeat_for_a_wait_that_just_ended_is_harmless() -> None:
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")))
    steps.await_client(world.store, world.engine, state, "token-1")
    world.engine.stale_tokens.add("token-1")  # the wait timed out in Step Functions meanwhile
    assert lifecycle.heartbeat(world.store, world.engine, world.sid) == {"queued": False, "parked": False}


def test_an_agents_heartbeat_must_be_shorter_than_its_deadline() -> None:
    from pydantic import ValidationError

    from skyloop.models.agent import AgentLimits

    assert AgentLimits(client_tool_timeout_s=60, client_heartbeat_s=30).client_heartbeat_s == 30
    with pytest.raises(ValidationError, match="client_heartbeat_s"):
        AgentLimits(client_tool_timeout_s=60, client_heartbeat_s=60)
    assert AgentLimits().client_heartbeat_s is None  # off by default


# ------------------------------------------------------------------------------ hot waits
class Client(threading.Thread):
    """The client at the other end of a hot wait: answers each call it sees published, after ``delay_s``."""

    def __init__(self, world: World, outputs: dict[str, str], delay_s: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.world, self.outputs, self.delay_s = world, outputs, delay_s
        self.done = threading.Event()

    def run(self) -> None:
        answered: set[str] = set()
        while not self.done.is_set() and len(answered) < len(self.outputs):
            for event in self.world.events():
                item = event.data.get("item") or {}
                if item.get("status") == "action_required" and item["call_id"] not in answered:
                    time.sleep(self.delay_s)
                    call_id = item["call_id"]
                    lifecycle.answer(
                        self.world.store, self.world.engine, self.world.sid, call_id, self.outputs[call_id]
                    )
                    answered.add(call_id)
            time.sleep(0.005)


def test_a_fast_client_round_trip_runs_in_the_same_model_step_without_parking() -> None:
    # Given a model that calls a client tool, then answers, and a client that answers at once
    world = World()
    client = Client(world, {"call_read_file": "contents"})
    client.start()
    model = Model(calls("read_file"), text("It says contents."))
    # When the model step runs with a hot wait
    state = steps.call_model(world.store, world.start("go", [READ]), model, hot_wait_s=5.0)
    client.done.set()
    # Then the same invocation made both model calls and ended the turn: nothing parked, no wake-up
    assert (state.next, state.finished) == ("stop", True)
    assert len(model.calls) == 2
    assert world.engine.resumed == []
    assert "contents" in str(model.calls[1])
    # And the log is a client-tool turn's, each event once: the call published in the result's append
    assert world.types() == [
        ev.SESSION_STATUS,
        ev.SESSION_INPUT_CONSUMED,
        ev.RESPONSE_IN_PROGRESS,
        ev.SESSION_USAGE,  # the first model call's tokens
        ev.RESPONSE_ITEM_DONE,  # action_required
        ev.RESPONSE_ITEM_DONE,  # the call, completed
        ev.RESPONSE_ITEM_DONE,  # its output
        ev.RESPONSE_TEXT_DELTA,
        ev.RESPONSE_ITEM_DONE,  # the answer
        ev.SESSION_USAGE,
        ev.RESPONSE_COMPLETED,
        ev.SESSION_STATUS,
    ]


def test_a_slow_client_parks_the_turn_with_the_rest_of_its_deadline_and_nothing_twice() -> None:
    # Given a hot wait shorter than the client takes
    world = World()
    state = steps.call_model(
        world.store, world.start("go", [READ]), Model(calls("read_file")), hot_wait_s=0.2
    )
    # Then the step returns to park, with its deadline less what it waited (at least 1 s less)
    assert state.next == "await_client"
    assert state.wait_timeout_s is not None
    assert state.wait_timeout_s <= state.client_tool_timeout_s - 1
    published = world.types()
    # And parking stores the token but publishes nothing again
    steps.await_client(world.store, world.engine, state, "token-1")
    assert world.types() == published
    assert published.count(ev.RESPONSE_ITEM_DONE) == 1
    # And the output, now arriving, resumes the parked turn once
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "late")
    assert world.engine.resumed == [("token-1", {"resumed_iteration": 0})]


def test_an_output_landing_between_the_hot_wait_and_the_park_resumes_the_turn() -> None:
    world = World()
    state = steps.call_model(
        world.store, world.start("go", [READ]), Model(calls("read_file")), hot_wait_s=0.05
    )
    assert state.next == "await_client"
    # When the output lands with no token stored: it resumes nothing
    lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "out")
    assert world.engine.resumed == []
    # Then parking finds every call answered and wakes the turn itself
    steps.await_client(world.store, world.engine, state, "token-1")
    assert world.engine.resumed == [("token-1", {"resumed_iteration": 0})]


def test_an_interrupt_ends_a_hot_wait_and_its_step_writes_nothing_more() -> None:
    world = World()
    model = Model(calls("read_file"), text("never"))
    timer = threading.Timer(0.3, lambda: lifecycle.cancel(world.store, world.engine, world.sid))
    timer.start()
    started = time.monotonic()
    state = steps.call_model(world.store, world.start("go", [READ]), model, hot_wait_s=5.0)
    timer.join()
    assert state.next == "stop"
    assert time.monotonic() - started < 2.5  # noticed within the session check, not the window
    assert len(model.calls) == 1
    assert world.types()[-2:] == [ev.RESPONSE_CANCELLED, ev.SESSION_STATUS]


def test_the_model_call_after_a_hot_wait_reads_the_turn_row_no_more() -> None:
    # Given a model step waiting hot for a client that answers at once, and the turn reads counted
    world = World()
    client = Client(world, {"call_read_file": "contents"})
    client.start()
    model = Model(calls("read_file"), text("It says contents."))
    reads: list[tuple[int | None, int]] = []
    get_turn = world.store.get_turn

    def counted(session_id: str, response_id: str) -> Any:
        turn = get_turn(session_id, response_id)
        if threading.current_thread() is not client:  # not the client's answer (its resume check)
            reads.append((turn.decided_iteration, turn.unanswered))
        return turn

    world.store.get_turn = counted  # type: ignore[method-assign]
    # When the step runs both model calls
    state = steps.call_model(world.store, world.start("go", [READ]), model, hot_wait_s=5.0)
    client.done.set()
    # Then the turn row as the wait ended (the call decided, its output in) was read once: the next
    # model call took the wait's read
    assert (state.next, state.finished) == ("stop", True)
    assert reads.count((0, 0)) == 1, reads


def test_a_deadline_shorter_than_the_hot_wait_still_holds() -> None:
    # Given an agent whose client tools must answer within one second
    world = World(client_tool_timeout_s=1)
    # When nobody answers during a hot wait longer than that
    with pytest.raises(TurnError) as failed:
        steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")), hot_wait_s=5.0)
    # Then the turn fails on its deadline, as a parked one would
    assert failed.value.code == "client_tool_timeout"


def test_a_recorded_output_ends_the_hot_waits_pause_before_its_next_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from skyloop.turns import hot_wait

    # Given a hot wait whose polls are 20 s apart (so only a wake-up can end its pause soon)
    monkeypatch.setattr(hot_wait, "FAST_POLL_S", 20.0)
    monkeypatch.setattr(hot_wait, "NOTIFIED_FAST_POLL_S", 20.0)
    world = World()
    model = Model(calls("read_file"), text("It says contents."))
    client = Client(world, {"call_read_file": "contents"}, delay_s=0.2)
    client.start()
    # When the client answers while the step waits
    started = time.monotonic()
    state = steps.call_model(world.store, world.start("go", [READ]), model, hot_wait_s=60.0)
    client.done.set()
    # Then the step went on at the answer (its notification), not at the next poll 20 s later
    assert (state.next, state.finished) == ("stop", True)
    assert len(model.calls) == 2
    assert time.monotonic() - started < 10.0


@pytest.mark.parametrize(("notified", "expected"), [(False, 0.01), (True, 0.02)])
def test_a_hot_wait_reads_every_10_ms_unless_outputs_notify_its_process(
    monkeypatch: pytest.MonkeyPatch, notified: bool, expected: float
) -> None:
    from skyloop.store import notifier
    from skyloop.turns import hot_wait

    # Given a turn waiting for a client call, in a process that outputs notify (the local stack) or not
    monkeypatch.setattr(notifier, "_wakeups", notified)
    world = World()
    state = steps.call_model(world.store, world.start("go", [READ]), Model(calls("read_file")))
    pauses: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds
        if len(pauses) == 3:
            lifecycle.answer(world.store, world.engine, world.sid, "call_read_file", "text")

    # When it waits
    waited = hot_wait.wait_for_outputs(world.store, state, 5.0, sleep=sleep, clock=lambda: now[0])
    # Then it read at that interval until the output was there
    assert waited.next == "call_model"
    assert pauses == [pytest.approx(expected)] * 3
