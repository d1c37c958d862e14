"""Claude Managed Agents' view of a session's log (skyloop.anthropic_compat.translate) on the fake store.

The invariants every client relies on: the same log gives the same events with the same ids (history
and stream agree, a reconnect de-duplicates); a step's client calls are all listed by the one idle
that follows the last of them; a call's answer names the call; a model call's usage is one span.
"""

from __future__ import annotations

import json
from typing import Any

from anthropic.types.beta.sessions import BetaManagedAgentsSessionEvent
from pydantic import TypeAdapter

from skyloop.anthropic_compat import toolset
from skyloop.anthropic_compat.translate import Context, deltas, position_of, tool_use_id, translate
from skyloop.harnesses.base import FunctionCall, ModelResult
from skyloop.models.session import ClientTool
from skyloop.store import StoredEvent
from skyloop.turns import lifecycle, steps
from tests.unit.test_turns import Model, World, text

HISTORY: TypeAdapter[Any] = TypeAdapter(BetaManagedAgentsSessionEvent)
LOOKUP = ClientTool(name="lookup", description="Look", parameters={"type": "object"})
OTHER = ClientTool(name="other", description="Other", parameters={"type": "object"})


def claude_events(world: World) -> list[dict[str, Any]]:
    ctx = Context.of(world.store, world.store.get_session(world.sid))
    out = [e for stored in world.events() for e in translate(stored, ctx)]
    for event in out:
        HISTORY.validate_python(event)  # every event is one of the SDK's, strictly
    return out


def two_calls() -> ModelResult:
    return ModelResult(
        calls=[
            FunctionCall(call_id="c1", name="lookup", arguments=json.dumps({"q": "a"})),
            FunctionCall(call_id="c2", name="other", arguments="{}"),
        ],
        usage={"input_tokens": 120, "output_tokens": 7},
    )


def test_the_idle_after_a_step_lists_every_client_call_and_each_answer_names_its_call() -> None:
    world = World()
    state = world.start("go", [LOOKUP, OTHER])
    state = world.run(state, Model(two_calls(), text("done")))  # parks: nobody answers yet
    events = claude_events(world)
    uses = [e for e in events if e["type"] == "agent.custom_tool_use"]
    assert [(u["name"], u["input"]) for u in uses] == [("lookup", {"q": "a"}), ("other", {})]
    idles = [e for e in events if e["type"] == "session.status_idle"]
    assert len(idles) == 1  # one idle, after the step's last call, listing both
    assert idles[0]["stop_reason"] == {"type": "requires_action", "event_ids": [u["id"] for u in uses]}
    assert [e["type"] for e in events].index("session.status_idle") > [e["type"] for e in events].index(
        "agent.custom_tool_use"
    )
    # answered, the turn resumes: each result names its call, the session runs again after the last
    lifecycle.answer(world.store, world.engine, world.sid, "c1", "A")
    lifecycle.answer(world.store, world.engine, world.sid, "c2", "Error: broke")
    world.run(state.model_copy(update={"next": "call_model"}), Model(text("done")))
    events = claude_events(world)
    results = [e for e in events if e["type"] == "user.custom_tool_result"]
    assert [(r["custom_tool_use_id"], r["is_error"]) for r in results] == [
        (uses[0]["id"], False),
        (uses[1]["id"], True),
    ]
    types = [e["type"] for e in events]
    running = [i for i, t in enumerate(types) if t == "session.status_running"]
    assert running[-1] == types.index("user.custom_tool_result") + 2  # once, after the last answer
    assert types[-1] == "session.status_idle"
    assert events[-1]["stop_reason"] == {"type": "end_turn"}


def test_the_same_log_gives_the_same_events_and_ids_every_time() -> None:
    world = World()
    state = world.start("go", [LOOKUP])
    world.run(
        state,
        Model(ModelResult(calls=[FunctionCall(call_id="c1", name="lookup")]), text("ok")),
        answers={"lookup": "x"},
    )
    first = claude_events(world)
    again = claude_events(world)  # a fresh context: nothing remembered between the two
    assert first == again
    ids = [e["id"] for e in first]
    assert len(ids) == len(set(ids))
    # and an event's id finds its place in the log (a stream resumed after it)
    ctx = Context.of(world.store, world.store.get_session(world.sid))
    for event in first:
        seq, k = position_of(world.store, ctx, event["id"])  # type: ignore[misc]
        (stored,) = [s for s in world.events() if s.seq == seq]
        assert translate(stored, ctx)[k]["id"] == event["id"]


def test_a_model_calls_usage_is_one_span_with_that_calls_tokens_and_the_session_totals() -> None:
    world = World()
    state = world.start("go", [LOOKUP, OTHER])
    model = Model(two_calls(), ModelResult(text="done", usage={"input_tokens": 300, "output_tokens": 20}))
    world.run(state, model, answers={"lookup": "A", "other": "B"})
    events = claude_events(world)
    starts = [e for e in events if e["type"] == "span.model_request_start"]
    ends = [e for e in events if e["type"] == "span.model_request_end"]
    assert [e["model_request_start_id"] for e in ends] == [s["id"] for s in starts]
    assert [(e["model_usage"]["input_tokens"], e["model_usage"]["output_tokens"]) for e in ends] == [
        (120, 7),
        (300, 20),
    ]
    usage = [e["usage"] for e in events if e["type"] == "session.usage"]
    assert [(u["input_tokens"], u["output_tokens"]) for u in usage] == [(120, 7), (420, 27)]


def test_a_failed_turn_is_a_terminal_error_then_an_idle_that_says_retries_exhausted() -> None:
    world = World()
    state = world.start("go")
    failed = state.model_copy(update={"error": {"Error": "States.Timeout", "Cause": "client tool deadline"}})
    steps.fail_turn(world.store, failed)
    events = claude_events(world)
    errors = [e for e in events if e["type"] == "session.error"]
    assert len(errors) == 1
    assert errors[0]["error"]["retry_status"] == {"type": "terminal"}
    assert events[-1]["stop_reason"] == {"type": "retries_exhausted"}


def test_self_hosted_built_ins_are_tool_uses_answered_by_tool_results() -> None:
    world = World()
    bash = ClientTool(name="bash", parameters=toolset.CLIENT_TOOLS["bash"]["parameters"])
    spec = world.agent.spec.model_copy(
        update={"tools": {"bash": {"type": "function", "runtime": "client", **toolset.CLIENT_TOOLS["bash"]}}}
    )
    world.agent = world.agent.model_copy(update={"spec": spec})
    world.store._agents[world.agent.id] = (world.agent, 0)  # the session's agent: a self-hosted session's
    state = world.start("go", [bash])
    call = ModelResult(
        calls=[FunctionCall(call_id="b1", name="bash", arguments=json.dumps({"command": "ls"}))]
    )
    world.run(state, Model(call, text("ok")), answers={"bash": "a.txt"})
    events = claude_events(world)
    (use,) = [e for e in events if e["type"] == "agent.tool_use"]
    assert (use["name"], use["evaluated_permission"]) == ("bash", "allow")
    (result,) = [e for e in events if e["type"] == "user.tool_result"]
    assert result["tool_use_id"] == use["id"] == tool_use_id(state.response_id, "b1")


def test_text_deltas_open_one_preview_per_message_then_append_to_it() -> None:
    started: set[str] = set()
    delta = {"delta": "He", "message_id": "m1", "response_id": "r"}
    first = deltas(StoredEvent(5, "response.output_text.delta", delta), started)
    second = deltas(StoredEvent(6, "response.output_text.delta", {**delta, "delta": "llo"}), started)
    assert [e["type"] for e in first] == ["event_start", "event_delta"]
    assert [e["type"] for e in second] == ["event_delta"]
    assert first[0]["event"]["id"] == second[0]["event_id"]
    assert second[0]["delta"]["content"]["text"] == "llo"


def _self_hosted_world(policy: str) -> World:
    """A session whose agent is a self-hosted one: ``bash`` is the client's, under ``policy``."""
    world = World()
    spec = world.agent.spec.model_copy(
        update={"tools": {"bash": {"type": "function", "runtime": "client", **toolset.CLIENT_TOOLS["bash"]}}},
        deep=True,
    )
    assert spec.model_extra is not None
    spec.model_extra["anthropic"] = {"inline": True, "toolset": {"enabled": {"bash": policy}, "default": {}}}
    world.agent = world.agent.model_copy(update={"spec": spec})
    world.store._agents[world.agent.id] = (world.agent, 0)
    return world


def test_a_self_hosted_call_that_asks_is_confirmed_once_and_a_denial_answers_it() -> None:
    from skyloop.anthropic_compat.confirm import confirm_client_call

    world = _self_hosted_world("always_ask")
    bash = ClientTool(name="bash", parameters=toolset.CLIENT_TOOLS["bash"]["parameters"])
    call = ModelResult(
        calls=[FunctionCall(call_id="b1", name="bash", arguments=json.dumps({"command": "rm x"}))]
    )
    state = world.run(world.start("go", [bash]), Model(call, text("ok")))  # parked on the call
    (use,) = [e for e in claude_events(world) if e["type"] == "agent.tool_use"]
    assert (use["evaluated_permission"], use["evaluation"]) == ("ask", {"type": "always_ask"})
    pending = world.store.get_call(world.sid, state.response_id, "b1")
    assert pending is not None
    session = world.store.get_session(world.sid)
    confirm_client_call(world.store, world.engine, session, pending, allowed=False, deny_message="no")
    confirm_client_call(
        world.store, world.engine, session, pending, allowed=False, deny_message="no"
    )  # again
    answered = world.store.get_call(world.sid, state.response_id, "b1")
    assert answered is not None
    assert answered.output is not None
    assert answered.output.endswith("The user said: no")  # what the model reads
    world.run(state.model_copy(update={"next": "call_model"}), Model(text("ok")))
    events = claude_events(world)
    confirmations = [e for e in events if e["type"] == "user.tool_confirmation"]
    assert [(c["tool_use_id"], c["result"], c["deny_message"]) for c in confirmations] == [
        (use["id"], "deny", "no")
    ]
    (result,) = [e for e in events if e["type"] == "user.tool_result"]
    assert result["tool_use_id"] == use["id"]
