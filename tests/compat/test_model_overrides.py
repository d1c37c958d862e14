"""A session's ``reasoning_effort`` and ``model_override`` (PATCH) and a message's ``model_override``
reach the model calls they apply to, on both OpenAI harnesses."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.e2e.conftest import (
    configure_mock_llm,
    get_mock_requests,
    message_event,
    unique,
    upload_agent,
    wait_status,
)

if TYPE_CHECKING:
    import httpx

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("harness", ["openai-agents", "chat-completions"])
def test_overrides_reach_the_next_model_calls(
    http_client: httpx.Client, mock_llm_server_url: str, harness: str
) -> None:
    name = unique("overrides")
    base, session_model, event_model = (f"mock-{name}-{k}" for k in ("base", "session", "event"))
    for key in (base, session_model, event_model):
        configure_mock_llm(mock_llm_server_url, [{"text": "ok"}] * 3, key=key)
    executor = {
        "harness": harness,
        "model": base,
        "auth": {"type": "api_key", "api_key": "k", "base_url": f"{mock_llm_server_url}/v1"},
    }
    created = upload_agent(http_client, {f"{name}.yaml": json.dumps({"name": name, "executor": executor})})
    sid = created["session_id"]
    events = f"/v1/sessions/{sid}/events"

    # Given no override, the agent's model answers with no reasoning setting
    assert http_client.post(events, json=message_event("one")).status_code == 202
    wait_status(http_client, sid, "idle")
    first = get_mock_requests(mock_llm_server_url, key=base)[-1]
    assert "reasoning" not in first
    assert "reasoning_effort" not in first

    # When the session is patched, its next call uses the override and the effort
    patch = {"model_override": session_model, "reasoning_effort": "high"}
    assert http_client.patch(f"/v1/sessions/{sid}", json=patch).status_code == 200
    assert http_client.post(events, json=message_event("two")).status_code == 202
    wait_status(http_client, sid, "idle")
    second = get_mock_requests(mock_llm_server_url, key=session_model)[-1]
    if harness == "openai-agents":
        assert second["reasoning"] == {"effort": "high"}
    else:
        assert second["reasoning_effort"] == "high"

    # And a message's own model_override wins for the turn it starts
    body = {**message_event("three"), "model_override": event_model}
    assert http_client.post(events, json=body).status_code == 202
    wait_status(http_client, sid, "idle")
    assert len(get_mock_requests(mock_llm_server_url, key=event_model)) == 1

    # And clearing the session's override brings the agent's model back
    assert http_client.patch(f"/v1/sessions/{sid}", json={"model_override": "default"}).status_code == 200
    assert http_client.post(events, json=message_event("four")).status_code == 202
    wait_status(http_client, sid, "idle")
    assert len(get_mock_requests(mock_llm_server_url, key=base)) == 2


def test_a_bad_event_model_override_is_a_400(http_client: httpx.Client, mock_llm_server_url: str) -> None:
    name = unique("bad-override")
    executor = {
        "model": "m",
        "auth": {"type": "api_key", "api_key": "k", "base_url": f"{mock_llm_server_url}/v1"},
    }
    sid = upload_agent(http_client, {f"{name}.yaml": json.dumps({"name": name, "executor": executor})})[
        "session_id"
    ]
    resp = http_client.post(
        f"/v1/sessions/{sid}/events", json={**message_event("x"), "model_override": "a b"}
    )
    assert resp.status_code == 400, resp.text
    assert http_client.get(f"/v1/sessions/{sid}").json()["items"] == []
