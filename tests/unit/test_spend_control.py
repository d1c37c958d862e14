"""Spend control on the in-memory store: the budget stops a turn before the model call past it, server-side.

The invariant, for any limit and any per-call cost: every model call a turn
makes starts with the session's recorded spend under the limit; the first
call that would start at or past it is never made, and the turn ends
``failed`` with ``session_budget_exceeded`` (recorded on the turn row too);
each landed call's cost is counted exactly once, however often its step runs.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from skyloop import pricing
from skyloop.harnesses.base import FunctionCall, ModelResult
from skyloop.models.agent import AgentSpec
from skyloop.turns import lifecycle, steps
from skyloop.turns.state import TurnError
from tests.unit.test_turns import READ, Model, World, _used, calls, text

PRICE = {"input": 10.0, "output": 0.0}  # USD per million: 1,000 input tokens cost 1 cent


def call(n: int) -> ModelResult:
    """A call of read_file with an id of its own (a model never repeats one)."""
    return ModelResult(calls=[FunctionCall(call_id=f"call_{n}", name="read_file", arguments="{}")])


def priced_world() -> World:
    world = World()
    spec = AgentSpec.model_validate({"name": "unit", "executor": {"model": "m", "pricing": PRICE}})
    world.agent = world.agent.model_copy(update={"id": uuid.uuid4().hex, "spec": spec})
    world.store.put_agent(world.agent)
    return world


class CountingModel(Model):
    """Records the session's spend as each model call starts."""

    def __init__(self, world: World, *results: Any) -> None:
        super().__init__(*results)
        self.world = world
        self.spend_at_call: list[int] = []

    def __call__(self, spec: Any, items: list[Any], tools: Any, on_delta: Any, **kw: Any) -> Any:
        self.spend_at_call.append(self.world.store.get_session(self.world.sid).spend_micros)
        return super().__call__(spec, items, tools, on_delta, **kw)


def drive(world: World, state: Any, model: Model) -> tuple[Any, str | None]:
    """Run the turn like the ASL: model calls, parked calls answered, a TurnError to FailTurn."""
    while state.next != "stop":
        try:
            if state.next == "call_model":
                state = steps.call_model(world.store, state, model)
            elif state.next == "await_client":
                steps.await_client(world.store, world.engine, state, f"t{state.iteration}")
                for call in world.store.list_calls(
                    world.sid, state.response_id, iteration=state.iteration - 1
                ):
                    if call.output is None:
                        lifecycle.answer(world.store, world.engine, world.sid, call.call_id, "ok")
                state = state.model_copy(update={"next": "call_model"})
            else:
                state = steps.finish_turn(world.store, state)
        except TurnError as exc:
            failed = state.model_copy(
                update={
                    "error": {
                        "Error": "TurnError",
                        "Cause": '{"errorMessage": "' + str(exc).replace('"', '\\"') + '"}',
                    }
                }
            )
            steps.fail_turn(world.store, failed)
            return state, exc.code
    return state, None


@pytest.mark.parametrize(
    ("limit_cents", "tokens_per_call", "expected_calls"),
    [
        (1, 1000, 1),  # the first call reaches the limit: no second call
        (2, 1000, 2),
        (3, 1000, 3),
        (2, 700, 3),  # 0.7, 1.4, then 2.1 cents: the call starting at 1.4 is made, the one at 2.1 is not
        (5, 2600, 2),  # 2.6, 5.2
    ],
)
def test_no_model_call_starts_at_or_past_the_limit(
    limit_cents: int, tokens_per_call: int, expected_calls: int
) -> None:
    world = priced_world()
    world.store.update_session(world.sid, {"spend_limit_cents": limit_cents})
    results = [_used(call(n), tokens_per_call, 0) for n in range(10)]
    model = CountingModel(world, *results)
    _, code = drive(world, world.start("spend", [READ]), model)
    limit = limit_cents * pricing.MICROS_PER_CENT
    assert len(model.spend_at_call) == expected_calls
    assert all(spend < limit for spend in model.spend_at_call)
    session = world.store.get_session(world.sid)
    assert session.spend_micros == expected_calls * tokens_per_call * 10  # each call counted once
    assert session.spend_micros >= limit
    assert code == "session_budget_exceeded"
    assert session.status == "failed"
    assert session.last_task_error is not None
    assert session.last_task_error.code == "session_budget_exceeded"
    (turn,) = world.store.list_turns(world.sid)
    assert turn.status == "failed"
    assert turn.error is not None
    assert turn.error["code"] == "session_budget_exceeded"
    assert turn.spend_micros == session.spend_micros


def test_a_rerun_model_step_counts_its_cost_once() -> None:
    world = priced_world()
    state = world.start("go", [READ])
    model = Model(_used(call(0), 1000, 0), _used(call(1), 1000, 0))
    first = steps.call_model(world.store, state, model)
    second = steps.call_model(world.store, state, model)  # Step Functions retried the step
    assert first == second
    assert world.store.get_session(world.sid).spend_micros == 10_000


def test_without_a_limit_spend_is_recorded_and_nothing_stops() -> None:
    world = priced_world()
    model = Model(_used(calls("read_file"), 1000, 0), _used(text("done"), 500, 0))
    _, code = drive(world, world.start("go", [READ]), model)
    assert code is None
    session = world.store.get_session(world.sid)
    assert (session.status, session.spend_micros) == ("idle", 15_000)
    (turn,) = world.store.list_turns(world.sid)
    assert (turn.status, turn.error) == ("completed", None)


def test_a_turn_started_past_the_limit_makes_no_model_call() -> None:
    world = priced_world()
    world.store.update_session(world.sid, {"spend_limit_cents": 1, "spend_micros": 10_000})
    model = CountingModel(world, text("never"))
    _, code = drive(world, world.start("go"), model)
    assert (model.spend_at_call, code) == ([], "session_budget_exceeded")


def test_prices_come_from_the_agent_then_the_table_by_longest_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = AgentSpec.model_validate({"name": "a", "executor": {"model": "gpt-4.1-mini-2025-04-14"}})
    assert pricing.price_of(spec.executor) == pricing.DEFAULT_PRICES["gpt-4.1-mini"]
    monkeypatch.setenv(pricing.PRICES_ENV, '{"gpt-4.1-mini": {"input": 1, "output": 2}}')
    assert pricing.price_of(spec.executor) == pricing.ModelPrice(input=1, output=2)
    assert pricing.price_of(spec.executor, "my-own-model") is None
    own = AgentSpec.model_validate({"name": "a", "executor": {"model": "x", "pricing": PRICE}})
    assert pricing.price_of(own.executor) == pricing.ModelPrice(**PRICE)
    assert pricing.ModelPrice(input=0.4, output=1.6).cost_micros(1000, 100) == 560
