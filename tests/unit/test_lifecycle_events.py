"""Unit: log events -> lifecycle events (skyloop.lifecycle_events.derive), pure."""

from __future__ import annotations

import json

import pytest

from skyloop import events as ev
from skyloop.lifecycle_events import EVENT_TYPES, SessionFacts, derive, parse, session_created, window_needs
from skyloop.lifecycle_events.derive import event_id
from skyloop.store import StoredEvent

SESSION = SessionFacts(id="s" * 32, owner="alice", agent_id="a" * 32, agent_name="coder")


def status(seq: int, value: str, response_id: str = "resp_1") -> StoredEvent:
    return StoredEvent(seq, ev.SESSION_STATUS, ev.session_status(SESSION.id, value, response_id=response_id))


def call(
    seq: int, call_id: str, *, response_id: str = "resp_1", state: str = "action_required"
) -> StoredEvent:
    item = ev.function_call_item(
        item_id=f"item_{call_id}",
        call_id=call_id,
        name="Read",
        arguments=json.dumps({"file_path": call_id}),
        status=state,
        agent="coder",
        response_id=response_id,
    )
    return StoredEvent(seq, ev.RESPONSE_ITEM_DONE, ev.item_done(item))


def approval(seq: int, call_id: str) -> StoredEvent:
    data = ev.approval_request(
        elicitation_id=f"approve_{call_id}",
        call_id=call_id,
        name="deploy",
        arguments='{"env": "prod"}',
        response_id="resp_1",
        session_id=SESSION.id,
    )
    return StoredEvent(seq, ev.ELICITATION_REQUEST, data)


def terminal(seq: int, kind: str, **extra: object) -> StoredEvent:
    status_of = {
        ev.RESPONSE_COMPLETED: "completed",
        ev.RESPONSE_FAILED: "failed",
        ev.RESPONSE_CANCELLED: "cancelled",
    }
    response = ev.response_object("resp_1", status=status_of[kind], model="coder", **extra)  # type: ignore[arg-type]
    return StoredEvent(seq, kind, ev.response_event(response))


def test_a_client_tool_turn_reads_in_progress_action_required_idle() -> None:
    # GIVEN the log of a turn that parked on two calls and then completed
    log = [
        status(1, "running"),
        StoredEvent(2, ev.RESPONSE_IN_PROGRESS, {}),
        call(3, "c1"),
        call(4, "c2"),
        call(5, "c1", state="completed"),
        terminal(6, ev.RESPONSE_COMPLETED, usage={"input_tokens": 7, "output_tokens": 3}),
        status(7, "idle"),
    ]
    # WHEN it is derived
    out = derive(SESSION, log, at=1_800_000_000.0)
    # THEN one event per transition, the calls coalesced into one action_required
    assert [e.type for e in out] == [
        "agent.session.in_progress",
        "agent.session.action_required",
        "agent.session.idle",
    ]
    action = out[1].data.required_action
    assert action.type == "function_call"
    assert [(c.call_id, c.name) for c in action.calls] == [("c1", "Read"), ("c2", "Read")]
    assert json.loads(action.calls[1].arguments) == {"file_path": "c2"}
    assert out[1].data.turn_id == "resp_1"
    assert out[2].data.status == "completed"
    assert out[2].data.usage.total_tokens == 10
    assert all(e.data.id == SESSION.id and e.data.owner == "alice" for e in out)


def test_failed_and_cancelled_turns() -> None:
    error = {"code": "model_error", "message": "429"}
    failed = derive(SESSION, [terminal(9, ev.RESPONSE_FAILED, error=error), status(10, "failed")], at=1.0)
    assert [e.type for e in failed] == ["agent.session.failed"]
    assert failed[0].data.error.code == "model_error"
    cancelled = derive(SESSION, [terminal(9, ev.RESPONSE_CANCELLED), status(10, "idle")], at=1.0)
    assert [(e.type, e.data.status) for e in cancelled] == [("agent.session.idle", "cancelled")]


def test_approvals_are_mcp_approval_requests_and_a_mixed_append_gives_one_event_per_kind() -> None:
    out = derive(SESSION, [call(3, "c1"), approval(4, "s1"), approval(5, "s2")], at=1.0)
    assert [e.data.required_action.type for e in out] == ["function_call", "mcp_approval_request"]
    approvals = out[1].data.required_action.approvals
    assert [(a.id, a.call_id, a.tool) for a in approvals] == [
        ("approve_s1", "s1", "deploy"),
        ("approve_s2", "s2", "deploy"),
    ]


def test_a_run_cut_by_a_window_is_announced_once() -> None:
    # GIVEN a run of three calls split over two windows (a stream batch boundary)
    first, second = [status(1, "running"), call(2, "c1")], [call(3, "c2"), call(4, "c3")]
    # THEN the first window needs what follows, the second what precedes
    assert window_needs(first) == (False, True)
    assert window_needs(second) == (True, True)
    # WHEN the first is completed with the rest of the run (the caller reads on) and the second
    # is derived with its predecessor
    out1 = derive(SESSION, first + second, at=1.0)
    out2 = derive(SESSION, second, at=1.0, before=first[-1])
    # THEN the run is one event, in the window where it starts, and nothing in the other
    assert [len(e.data.required_action.calls) for e in out1 if e.type.endswith("action_required")] == [3]
    assert out2 == []


def test_calls_of_different_responses_or_apart_are_different_runs() -> None:
    out = derive(
        SESSION,
        [call(2, "c1"), call(3, "c2", response_id="resp_2"), call(5, "c3", response_id="resp_2")],
        at=1.0,
    )
    assert [[c.call_id for c in e.data.required_action.calls] for e in out] == [["c1"], ["c2"], ["c3"]]


def test_ids_are_deterministic_and_sort_by_time() -> None:
    log = [status(1, "running")]
    assert derive(SESSION, log, at=5.0)[0].id == derive(SESSION, log, at=5.0)[0].id
    assert derive(SESSION, log, at=5.0)[0].id != derive(SESSION, [status(2, "running")], at=5.0)[0].id
    assert event_id(SESSION.id, 9, "x", 1.0) < event_id(SESSION.id, 1, "x", 2.0)


def test_other_events_derive_nothing() -> None:
    noise = [
        StoredEvent(1, ev.RESPONSE_TEXT_DELTA, ev.text_delta("hi", response_id="r")),
        StoredEvent(2, ev.SESSION_INPUT_CONSUMED, ev.input_consumed("i", {"role": "user", "content": []})),
        status(3, "idle"),  # without a terminal response event (it always comes with one)
        call(4, "c", state="completed"),
    ]
    assert derive(SESSION, noise, at=1.0) == []


def test_created_and_the_openai_shape() -> None:
    created = session_created(SESSION, created_at=100)
    body = json.loads(created.model_dump_json())
    assert body["type"] == "agent.session.created"
    assert body["object"] == "event"
    assert body["data"]["id"] == SESSION.id
    assert body["data"]["environment_type"] == "none"
    assert parse(created.model_dump_json()) == created
    with pytest.raises(ValueError, match="does not match"):
        parse({**body, "type": "agent.session.nope"})
    assert "skyloop.webhook.test" not in EVENT_TYPES


def test_openai_sdk_reads_every_type() -> None:
    """A receiver written for OpenAI's Agents API parses these events into its own types."""
    from openai._models import construct_type
    from openai.types.webhooks.unwrap_webhook_event import UnwrapWebhookEvent

    log = [
        status(1, "running"),
        call(2, "c1"),
        terminal(3, ev.RESPONSE_COMPLETED),
        status(4, "idle"),
        terminal(5, ev.RESPONSE_FAILED, error={"code": "x", "message": "y"}),
    ]
    for event in [session_created(SESSION, created_at=1), *derive(SESSION, log, at=1.0)]:
        parsed = construct_type(type_=UnwrapWebhookEvent, value=json.loads(event.model_dump_json()))
        assert (
            type(parsed).__name__
            == {
                "agent.session.created": "AgentSessionCreatedWebhookEvent",
                "agent.session.in_progress": "AgentSessionInProgressWebhookEvent",
                "agent.session.action_required": "AgentSessionActionRequiredWebhookEvent",
                "agent.session.idle": "AgentSessionIdleWebhookEvent",
                "agent.session.failed": "AgentSessionFailedWebhookEvent",
            }[event.type]
        )
        assert parsed.data.id == SESSION.id
        assert parsed.data.environment_type == "none"  # type: ignore[union-attr]


def test_a_session_with_a_workspace_is_self_hosted_in_every_event() -> None:
    """OpenAI's ``environment_type``: ``self_hosted`` as the OpenAI API shows a session with a workspace."""
    hosted = SessionFacts(id="h" * 32, owner="alice", agent_id="a" * 32, workspace="/src")
    log = [status(1, "running"), call(2, "c1"), terminal(3, ev.RESPONSE_COMPLETED)]
    out = [session_created(hosted, created_at=1), *derive(hosted, log, at=100.0)]
    assert [e.type for e in out] == [
        "agent.session.created",
        "agent.session.in_progress",
        "agent.session.action_required",
        "agent.session.idle",
    ]
    assert {(e.data.environment_type, e.data.environment_id) for e in out} == {
        ("self_hosted", f"env_{'h' * 32}")
    }
    plain = [session_created(SESSION, created_at=1), *derive(SESSION, log, at=100.0)]
    assert {(e.data.environment_type, e.data.environment_id) for e in plain} == {("none", None)}


def test_a_session_with_its_own_hosted_environment_is_openai_hosted_in_every_event() -> None:
    """OpenAI's ``environment_type``: ``openai_hosted`` as the OpenAI API shows such a session."""
    from openai._models import construct_type
    from openai.types.webhooks.unwrap_webhook_event import UnwrapWebhookEvent

    from skyloop.models.environment import HostedEnvironment
    from skyloop.models.session import Session

    session = Session(
        id="o" * 32,
        agent_id="a" * 32,
        agent_name="coder",
        created_at=1,
        updated_at=1,
        environment=HostedEnvironment(),
    )
    facts = SessionFacts.of(session)
    log = [status(1, "running"), call(2, "c1"), terminal(3, ev.RESPONSE_COMPLETED)]
    out = [session_created(session, created_at=1), *derive(facts, log, at=100.0)]
    for event in out:
        parsed = construct_type(type_=UnwrapWebhookEvent, value=json.loads(event.model_dump_json()))
        assert (parsed.data.environment_type, parsed.data.environment_id) == (  # type: ignore[union-attr]
            "openai_hosted",
            f"env_{'o' * 32}",
        )
