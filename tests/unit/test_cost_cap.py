"""A turn's cost cap (a scheduled task's ``max_cost_usd``): checked between model calls, on the in-memory
store, with prices from ``SKYLOOP_MODEL_PRICES``; the turn ends failed with ``cost_cap_reached``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skyloop import events as ev
from skyloop.harnesses.base import FunctionCall, ModelResult
from skyloop.pricing import PRICES_ENV, price_of
from skyloop.turns import steps
from skyloop.turns.state import TurnError, TurnState
from tests.unit.test_turns import READ, Model, World

# "m" (the unit agent's model) at 1 USD per thousand tokens either way: 100 tokens cost 0.1 USD
PRICES = json.dumps({"m": {"input": 1000, "output": 1000}})


def usage(result: ModelResult, tokens: int) -> ModelResult:
    return result.model_copy(update={"usage": {"input_tokens": tokens, "output_tokens": 0}})


def calls_read(n: int = 1) -> ModelResult:
    return ModelResult(calls=[FunctionCall(call_id=f"c{n}", name="read_file")])


@pytest.fixture(autouse=True)
def _prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRICES_ENV, PRICES)


def _fail(world: World, state: TurnState, error: TurnError) -> None:
    """What the state machine's Catch does with a step's TurnError: FailTurn."""
    cause = {"Error": "TurnError", "Cause": json.dumps({"errorMessage": str(error)})}
    steps.fail_turn(world.store, state.model_copy(update={"error": cause}))


def test_a_turn_stops_after_the_model_call_that_reaches_its_cap() -> None:
    world = World()
    world.post("read it", [READ], max_cost_usd=0.25)
    state = world.engine.started[0]
    model = Model(usage(calls_read(), 300), usage(ModelResult(text="never"), 1))
    with pytest.raises(TurnError) as caught:
        steps.call_model(world.store, state, model)
    assert caught.value.code == "cost_cap_reached"
    assert "0.300000 USD" in caught.value.message
    assert "0.25 USD" in caught.value.message
    _fail(world, state, caught.value)
    session = world.store.get_session(world.sid)
    assert (session.status, session.last_task_error and session.last_task_error.code) == (
        "failed",
        "cost_cap_reached",
    )
    turn = world.store.get_turn(world.sid, state.response_id)
    assert (turn.status, turn.input_tokens, (turn.error or {}).get("code")) == (
        "failed",
        300,
        "cost_cap_reached",
    )
    # the call the capped answer asked for was recorded but never published for the client to run
    published = [e for e in world.events() if e.type == ev.RESPONSE_ITEM_DONE]
    assert not any(e.data["item"].get("status") == "action_required" for e in published)
    assert len(model.calls) == 1


def test_a_turn_under_its_cap_runs_on_and_an_answer_past_it_still_completes() -> None:
    world = World()
    world.post("read it", [READ], max_cost_usd=0.25)
    model = Model(usage(calls_read(), 100), usage(ModelResult(text="done"), 200))
    state = world.run(world.engine.started[0], model, answers={"read_file": "contents"})
    assert state.next == "stop"
    turn = world.store.get_turn(world.sid, state.response_id)
    # 0.3 USD in the end: the last answer ended the turn, so there was nothing left to stop
    assert (turn.status, turn.input_tokens) == ("completed", 300)


def test_a_capped_turn_that_reached_its_cap_makes_no_further_model_call() -> None:
    """The check before each model call: a turn continuing at its cap (a message arrived) stops there."""
    world = World()
    world.post("hi", max_cost_usd=0.1)
    state = world.engine.started[0]
    ended = steps.call_model(world.store, state, Model(usage(ModelResult(text="a long answer"), 500)))
    assert ended.finished  # the answer ended the turn: nothing to stop
    continued = state.model_copy(update={"iteration": 1, "next": "call_model"})
    session = world.store.get_session(world.sid)
    turn = world.store.get_turn(world.sid, state.response_id)
    model = Model(ModelResult(text="never"))
    from skyloop.turns import model_step

    live = session.model_copy(update={"status": "running", "active_response_id": state.response_id})
    with pytest.raises(TurnError) as caught:
        model_step.run(world.store, continued, live, turn, world.agent, model, timeout_s=10)
    assert caught.value.code == "cost_cap_reached"
    assert model.calls == []


def test_a_capped_turn_on_a_model_without_a_price_never_calls_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRICES_ENV, json.dumps({"other": {"input": 1, "output": 1}}))
    world = World()
    world.post("hi", max_cost_usd=1.0)
    model = Model(ModelResult(text="never"))
    with pytest.raises(TurnError) as caught:
        steps.call_model(world.store, world.engine.started[0], model)
    assert caught.value.code == "cost_unknown"
    assert model.calls == []


def test_a_turn_without_a_cap_ignores_prices() -> None:
    world = World()
    world.post("hi")
    state = world.run(world.engine.started[0], Model(usage(ModelResult(text="fine"), 10**9)))
    assert world.store.get_turn(world.sid, state.response_id).status == "completed"


def test_prices_match_exactly_or_by_the_longest_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    from skyloop.models.agent import AgentExecutor

    monkeypatch.setenv(PRICES_ENV, json.dumps({"gpt-4.1": {"input": 9, "output": 9}}))

    def price(model: str) -> Any:
        found = price_of(AgentExecutor(model=model))
        return (found.input, found.output) if found else None

    assert price("gpt-4.1") == (9, 9)  # the environment over the table
    assert price("gpt-4.1-mini-2025-04-14") == (0.4, 1.6)  # the longest prefix in the table
    assert price("my-own-model") is None
    monkeypatch.setenv(PRICES_ENV, "{not json")
    with pytest.raises(ValueError, match=PRICES_ENV):
        price("gpt-4.1")
