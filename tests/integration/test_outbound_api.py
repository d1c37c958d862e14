"""Outbound safety through the API and the turn: refused at registration, and again at call time."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from skyloop.settings import get_settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.conftest import Api, Stack

pytestmark = pytest.mark.usefixtures("fresh_table")


@pytest.fixture
def cloud_rules(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Outbound rules as the deployed stack has them: no loopback."""
    monkeypatch.setenv("SKYLOOP_OUTBOUND_ALLOW_LOOPBACK", "false")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def spec(base_url: str, **tools: object) -> dict[str, object]:
    return {
        "name": "probe",
        "prompt": "p",
        "executor": {
            "harness": "openai-agents",
            "model": "m",
            "auth": {"type": "api_key", "base_url": base_url},
        },
        **({"tools": tools} if tools else {}),
    }


@pytest.mark.usefixtures("cloud_rules")
@pytest.mark.parametrize(
    ("body", "field"),
    [
        (spec("http://169.254.169.254/latest/"), "executor.auth.base_url"),
        (spec("http://127.0.0.1:9/v1"), "executor.auth.base_url"),
        (
            spec("https://93.184.215.14/v1", inner={"type": "mcp", "url": "http://10.0.0.7/mcp"}),
            "tools.inner.url",
        ),
    ],
)
def test_registering_an_agent_that_points_inside_is_400_and_stores_nothing(
    aws: Stack, api: Api, body: dict[str, object], field: str
) -> None:
    before = aws.count_agents()
    resp = api.post_json("/v1/agents", body)
    assert resp.status == 400, resp.body
    err = resp.error()
    assert err["code"] == "url_not_allowed"
    assert err["message"].startswith(field)
    assert aws.count_agents() == before


def test_a_model_url_that_turned_internal_fails_the_turn_at_call_time(
    aws: Stack, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an agent registered while its (mock, loopback) endpoint was allowed
    key = aws.mock_llm.script({"text": "never sent"})
    session = aws.new_session(key)
    # When the rules change (the cloud's: no loopback) before the turn calls the model
    monkeypatch.setenv("SKYLOOP_OUTBOUND_ALLOW_LOOPBACK", "false")
    get_settings.cache_clear()
    try:
        assert api.post_message(session.id, "hi").status == 202
        failed = aws.wait_for_event(session.id, lambda e: e.type == "response.failed", what="response.failed")
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    # Then the turn failed with the refusal, and the model was never called
    assert failed.data["response"]["error"]["code"] == "url_not_allowed"
    assert aws.mock_llm.requests(key) == []
