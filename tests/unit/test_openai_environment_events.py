"""The hosted environment's lifecycle (``session.environment`` in the session's log) as OpenAI's
``agent.session.environment.*`` events, and the idle stop's ``suspended`` written once."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.beta import AgentSessionEvent
from pydantic import TypeAdapter

from skyloop import events as ev
from skyloop.environments import service
from skyloop.models.agent import Agent, AgentSpec
from skyloop.models.environment import HostedEnvironment
from skyloop.models.session import Session
from skyloop.openai_compat.translate import Context, translate
from skyloop.store import StoredEvent
from skyloop.store.memory import MemoryStore

SDK_EVENT: TypeAdapter[Any] = TypeAdapter(AgentSessionEvent)
SID = "s" * 32


def context() -> Context:
    session = Session(
        id=SID,
        agent_id="a" * 32,
        agent_name="coder",
        created_at=1,
        updated_at=1,
        environment=HostedEnvironment(),
    )
    spec = AgentSpec.model_validate(
        {
            "name": "coder",
            "executor": {"harness": "scripted", "model": "scripted", "script": [{"text": "ok"}]},
        }
    )
    return Context(session=session, agent=Agent(id="a" * 32, name="coder", created_at=1, spec=spec))


def openai_events(seq: int, data: dict[str, Any]) -> list[Any]:
    out = translate(StoredEvent(seq, ev.SESSION_ENVIRONMENT, data), context())
    return [SDK_EVENT.validate_python(e) for e in out]  # each one of the pinned SDK's events, strictly


@pytest.mark.parametrize("status", ["pending", "ready", "suspended"])
def test_each_status_is_the_sdks_environment_event(status: str) -> None:
    (event,) = openai_events(7, ev.environment_status(status, response_id="resp_1"))
    assert event.type == f"agent.session.environment.{status}"
    assert (event.event_id, event.session_id, event.turn_id) == ("evt_7_0", SID, "resp_1")
    assert (event.environment.id, event.environment.type) == (f"env_{SID}", "openai_hosted")
    assert (event.environment.status, event.environment.error) == (status, None)


def test_a_failed_setup_is_the_failed_event_with_its_error() -> None:
    data = ev.environment_status("failed", response_id="resp_1", error="the setup command 'x' exited 3")
    (event,) = openai_events(3, data)
    assert event.type == "agent.session.environment.failed"
    assert event.environment.status == "failed"
    assert event.environment.error.code == "environment_setup_failed"
    assert event.environment.error.message == "the setup command 'x' exited 3"


def test_a_restored_workspace_is_pending_then_ready_not_a_reset() -> None:
    """Its files come back from the snapshot: OpenAI's ``reset`` would say they were lost."""
    kinds = [
        e.type
        for seq, status in ((1, "pending"), (2, "ready"))
        for e in openai_events(seq, ev.environment_status(status, restored=True))
    ]
    assert kinds == ["agent.session.environment.pending", "agent.session.environment.ready"]
    assert openai_events(4, {"status": "rebooted"}) == []  # nothing OpenAI could read


class _IdleEngine:
    name = "fake"

    def __init__(self, stops: list[tuple[str, str]]) -> None:
        self.stops = stops

    def stop_idle_sessions(self, now: int | None = None) -> list[tuple[str, str]]:
        return self.stops


def test_an_idle_stop_is_suspended_in_the_log_once_per_interpreter_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryStore()
    store.create_session(Session(id=SID, agent_id="a" * 32, agent_name="coder", created_at=1, updated_at=1))
    engine = _IdleEngine([(SID, "ci-1"), ("gone" * 8, "ci-2")])  # the second session was deleted meanwhile
    monkeypatch.setattr(service, "engine", lambda settings=None: engine)
    assert service.stop_idle(store=store) == [SID, "gone" * 8]
    assert service.stop_idle(store=store) == [SID, "gone" * 8]  # a pass that reports the same stop again
    engine.stops = [(SID, "ci-2")]  # a later interpreter session of the session, stopped in its turn
    service.stop_idle(store=store)
    page, _, _ = store.read_event_page(SID, 0)
    logged = [(e.type, e.data["status"]) for e in page]
    assert logged == [(ev.SESSION_ENVIRONMENT, "suspended")] * 2
