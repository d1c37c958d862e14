"""Quotas per principal on moto: over a limit is 429 with Retry-After, and nothing is written."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from skyloop import deps, quotas
from skyloop.errors import QuotaExceededError
from skyloop.settings import Settings, get_settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.conftest import Api, Stack

pytestmark = pytest.mark.usefixtures("fresh_table")


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def apply(**values: int) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"SKYLOOP_QUOTA_{name.upper()}", str(value))
        get_settings.cache_clear()

    yield apply  # type: ignore[misc]
    get_settings.cache_clear()


def test_stored_sessions_over_quota_is_429_and_writes_nothing(aws: Stack, api: Api, limits) -> None:
    agent = aws.register_agent(aws.mock_llm.script({"text": "hi"}))
    limits(sessions=2)
    # Given two sessions, the quota
    for _ in range(2):
        assert api.post_json("/v1/sessions", {"agent_id": agent.id}).status == 201
    agents_before = aws.count_agents()
    # When a third is asked for, as JSON or as a bundle upload
    over = api.post_json("/v1/sessions", {"agent_id": agent.id})
    yaml_name, yaml_text = aws.agent_yaml("m")
    upload = api.post_multipart(
        "/v1/sessions", {"file": (yaml_name, yaml_text.encode(), "application/x-yaml")}, {"metadata": "{}"}
    )
    # Then both are 429 quota_exceeded with Retry-After
    for resp in (over, upload):
        assert resp.status == 429, resp.body
        assert resp.error()["code"] == "quota_exceeded"
        assert int(resp.headers["retry-after"]) >= 1
    # And neither a session nor the uploaded agent was stored
    assert aws.store.count_sessions("local") == 2
    assert aws.count_agents() == agents_before


def test_turns_per_minute_over_quota_is_429_and_the_message_is_not_stored(
    aws: Stack, api: Api, limits
) -> None:
    limits(turns_per_minute=2)
    model = aws.mock_llm.script({"text": "one"}, {"text": "two"}, {"text": "three"})
    sessions = [aws.new_session(model) for _ in range(3)]
    # Given two turns started this minute
    for s in sessions[:2]:
        assert api.post_message(s.id, "hello").status == 202
    for s in sessions[:2]:
        aws.wait_for_status(s.id, "idle")
    before = aws.store.get_session(sessions[2].id)
    # When a third would start
    resp = api.post_message(sessions[2].id, "hello")
    # Then it is 429 with the seconds left in the minute
    assert resp.status == 429, resp.body
    assert resp.error()["code"] == "quota_exceeded"
    assert 1 <= int(resp.headers["retry-after"]) <= 61
    # And the session holds no new item, event or turn
    after = aws.store.get_session(sessions[2].id)
    assert after.last_seq == before.last_seq
    assert after.status == "idle"
    assert aws.store.list_items(sessions[2].id) == []


def test_simultaneous_turn_starts_never_exceed_the_minute_quota(aws: Stack) -> None:
    store = deps.store()
    settings = Settings.model_validate({"SKYLOOP_QUOTA_TURNS_PER_MINUTE": "3"})
    admitted: list[bool] = []
    lock = threading.Lock()

    def start() -> None:
        try:
            quotas.before_turn(store, settings, "racer", now=1_000_000.0)
            ok = True
        except QuotaExceededError:
            ok = False
        with lock:
            admitted.append(ok)

    # When ten turn starts race for three slots of one minute
    threads = [threading.Thread(target=start) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then exactly three get one (one conditional ADD each)
    assert sorted(admitted) == [False] * 7 + [True] * 3
    # And the next minute has its own three
    quotas.before_turn(store, settings, "racer", now=1_000_060.0)


def test_running_turns_over_quota_is_429_until_one_finishes(aws: Stack, api: Api, limits) -> None:
    limits(running_turns=1)
    blocked = aws.mock_llm.script({"text": "slow", "block": True}, {"text": "steered"})
    quick = aws.mock_llm.script({"text": "quick"})
    first, second = aws.new_session(blocked), aws.new_session(quick)
    # Given one turn running (held at the model)
    assert api.post_message(first.id, "go").status == 202
    aws.mock_llm.wait_for_gate()
    # When another session would start a turn
    resp = api.post_message(second.id, "me too")
    # Then it waits its turn: 429, nothing written
    assert resp.status == 429, resp.body
    assert "running" in resp.error()["message"]
    assert aws.store.get_session(second.id).last_seq == 0
    # And steering the running turn starts no turn, so it is not limited
    assert api.post_message(first.id, "also this").status == 202
    # And once the running turn ends, the other session may start
    aws.mock_llm.release_gate()
    aws.wait_for_status(first.id, "idle")
    assert api.post_message(second.id, "me too").status == 202
    aws.wait_for_status(second.id, "idle")


def test_quotas_are_per_principal(aws: Stack) -> None:
    store = deps.store()
    settings = Settings.model_validate({"SKYLOOP_QUOTA_TURNS_PER_MINUTE": "1"})
    quotas.before_turn(store, settings, "alice", now=2_000_000.0)
    with pytest.raises(QuotaExceededError):
        quotas.before_turn(store, settings, "alice", now=2_000_000.0)
    quotas.before_turn(store, settings, "bob", now=2_000_000.0)  # bob's minute is his own
