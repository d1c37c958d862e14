"""How a turn goes on after its execution vanished (a restarted local stack): planned from records only."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skyloop.ids import derived_id
from skyloop.models.session import PendingCall
from skyloop.store import Append, TurnDecision
from skyloop.turns import lifecycle, model_step, recovery, steps
from tests.fakes import RecordingEngine
from tests.unit.test_turns import READ, Model, World, calls, text

if TYPE_CHECKING:
    from skyloop.turns.state import TurnState


@dataclass
class RestartingEngine(RecordingEngine):
    routed: list[TurnState] = field(default_factory=list)

    def start_routed(self, state: TurnState) -> None:
        self.routed.append(state)


def world() -> World:
    w = World()
    w.engine = RestartingEngine()
    return w


def only_plan(w: World, now: float | None = None) -> recovery.Plan:
    found = recovery.plan(w.store, w.store.get_session(w.sid), now=now)
    assert found is not None
    return found


def parked(w: World) -> tuple[TurnState, TurnDecision]:
    """A turn parked on one client call (``read_file``) at iteration 0; its state as AwaitClient left it."""
    state = w.start("read it", [READ])
    state = steps.call_model(w.store, state, Model(calls("read_file")))
    steps.await_client(w.store, w.engine, state, "token-before")
    decision = w.store.get_decision(w.sid, state.response_id)
    assert decision is not None
    return state, decision


def test_an_idle_session_has_nothing_to_continue() -> None:
    w = world()
    assert recovery.plan(w.store, w.store.get_session(w.sid)) is None
    assert recovery.recover(w.store, w.engine).plans == []


def test_a_first_model_call_in_flight_is_made_again_and_announced_as_a_retry() -> None:
    # Given a turn whose first model call had claimed its attempt when the stack stopped
    w = world()
    state = w.start("think")
    model_step.claim_attempt(w.store, state)

    # When it is recovered
    report = recovery.recover(w.store, w.engine)

    # Then its execution starts again at the model call, and running it completes the turn once
    (again,) = w.engine.started[1:]
    assert (again.next, again.iteration, again.response_id) == ("call_model", 0, state.response_id)
    assert "calling the model again" in report.lines()[0]
    w.run(again, Model(text("second try")))
    assert w.types().count("response.retry") == 1
    assert w.types()[-2:] == ["response.completed", "session.status"]


def test_a_parked_call_waits_again_with_what_is_left_of_its_deadline() -> None:
    # Given a turn parked on a client call 100 s ago
    w = world()
    state, decision = parked(w)
    assert decision.decided_at is not None

    # When it is recovered
    found = only_plan(w, now=decision.decided_at + 100)
    recovery.apply(w.store, w.engine, w.store.get_session(w.sid), found)

    # Then its new execution starts at Route and goes to the wait, with 3500 s of its 3600 left
    (routed,) = w.engine.routed  # type: ignore[attr-defined]
    assert (routed.next, routed.iteration, routed.await_calls) == ("await_client", 1, True)
    assert routed.client_tool_timeout_s == 3500
    assert routed.consumed_seq == state.consumed_seq

    # And parking again publishes nothing twice; the answer wakes the new execution's wait
    before = w.types()
    steps.await_client(w.store, w.engine, routed, "token-after")
    assert w.types() == before
    lifecycle.answer(w.store, w.engine, w.sid, "call_read_file", "contents")
    assert w.engine.resumed == [("token-after", {"resumed_iteration": 0})]


def test_a_parked_call_past_its_deadline_fails_the_turn_clearly() -> None:
    w = world()
    _, decision = parked(w)
    assert decision.decided_at is not None
    found = only_plan(w, now=decision.decided_at + 3601)
    assert found.how == "fail"
    recovery.apply(w.store, w.engine, w.store.get_session(w.sid), found)
    session = w.store.get_session(w.sid)
    assert session.status == "failed"
    assert session.last_task_error is not None
    assert session.last_task_error.code == "client_tool_timeout"
    assert w.types()[-2:] == ["response.failed", "session.status"]


def test_a_woken_turn_whose_next_model_call_was_in_flight_calls_the_model_again() -> None:
    w = world()
    parked(w)
    lifecycle.answer(w.store, w.engine, w.sid, "call_read_file", "contents")  # wakes the old execution
    found = only_plan(w)
    assert found.how == "model"
    assert found.state is not None
    assert found.state.iteration == 1
    state = w.run(found.state, Model(text("read it")))
    assert state.finished


def test_answered_calls_whose_wake_up_was_lost_go_straight_to_the_model() -> None:
    w = world()
    state, _ = parked(w)
    w.store.answer_call(w.store.list_calls(w.sid, state.response_id)[0], "contents")  # no resume sent
    found = only_plan(w)
    assert (found.how, found.state and found.state.iteration) == ("model", 1)


def test_a_landed_answer_with_input_after_it_finishes_or_continues() -> None:
    w = world()
    state = w.start("hi")

    def answer_while_a_message_arrives(*args: object, **kwargs: object) -> object:
        w.post("and another thing")  # input the model call has not seen
        return text("hello")

    state = steps.call_model(w.store, state, answer_while_a_message_arrives)
    assert state.next == "finish_turn"
    found = only_plan(w)
    assert found.how == "route"
    assert found.state is not None
    assert (found.state.next, found.state.iteration) == ("finish_turn", 0)


def test_heartbeats_and_limits_come_from_the_agent() -> None:
    w = world()
    limits = w.agent.spec.limits.model_copy(update={"client_heartbeat_s": 30})
    spec = w.agent.spec.model_copy(update={"limits": limits})
    w.agent = w.agent.model_copy(update={"id": uuid.uuid4().hex, "spec": spec})
    w.store.put_agent(w.agent)
    parked(w)
    found = only_plan(w)
    assert found.state is not None
    assert found.state.client_heartbeat_s == 30


def server_calls(w: World, *calls_: PendingCall, woken: bool = False) -> str:
    """A running turn whose model call 0 made ``calls_`` (server ones, with approvals), decided ``act``."""
    state = w.start("use tools")
    unanswered = sum(
        1 for c in calls_ if c.output is None and (c.kind == "client" or c.approval == "pending")
    )
    batch = Append(w.sid, dedupe_key=f"{state.response_id}:0:result")
    batch.new_calls = [
        c.model_copy(update={"response_id": state.response_id, "session_id": w.sid}) for c in calls_
    ]
    batch.decision = TurnDecision(state.response_id, 0, "act", 1, unanswered)
    w.store.append(batch)
    if woken:
        assert w.store.claim_resume(w.sid, state.response_id, 0)
    return state.response_id


def call(
    call_id: str, *, kind: str = "server", approval: str | None = None, output: str | None = None
) -> PendingCall:
    return PendingCall(
        session_id="",
        response_id="",
        call_id=call_id,
        iteration=0,
        index=int(call_id[-1]),
        name="tool",
        arguments="{}",
        item_id=derived_id(call_id),
        kind=kind,  # type: ignore[arg-type]
        approval=approval,  # type: ignore[arg-type]
        output=output,
    )


def test_an_approval_and_a_server_tool_still_open_are_run_and_waited_for() -> None:
    w = world()
    server_calls(w, call("call_0"), call("call_1", approval="pending"), call("call_2", kind="client"))
    found = only_plan(w)
    assert found.how == "route"
    assert found.state is not None
    assert (found.state.next, found.state.run_calls, found.state.approval_calls, found.state.await_calls) == (
        "act",
        ["call_0"],
        ["call_1"],
        True,
    )


def test_an_approved_tool_that_had_not_run_runs_without_a_second_wait() -> None:
    w = world()
    server_calls(w, call("call_0", approval="approved"), call("call_1", output="done"), woken=True)
    found = only_plan(w)
    assert found.state is not None
    assert (found.state.next, found.state.run_calls, found.state.approval_calls, found.state.await_calls) == (
        "act",
        ["call_0"],
        [],
        False,
    )


def test_one_broken_session_does_not_stop_the_others() -> None:
    w = world()
    parked(w)
    other = World()  # a second running session, in the same store, whose agent is gone
    other.store = w.store
    w.store.put_agent(other.agent)
    w.store.create_session(other.session)
    other_state = other.start("hi")
    w.store.delete_agent(other.agent.id)
    report = recovery.recover(w.store, w.engine)
    assert report.failed == [other_state.session_id]
    assert [p.session_id for p in report.plans] == [w.sid]
