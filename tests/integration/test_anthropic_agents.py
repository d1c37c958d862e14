"""The Claude Managed Agents suite against the API handler in Lambda's shape (tokens required).

The real ``anthropic`` SDK over real HTTP, to a local edge that does what CloudFront and API Gateway
do: a GET of the Claude events stream goes to the stream app (:mod:`skyloop.stream.anthropic`), and
every other request becomes an HTTP API payload 2.0 event for the real ``functions/api/handler.py``,
run by moto's Lambda; turns run on the real state machine (moto's Step Functions). The same
scenarios run against ``skyloop dev`` in ``tests/compat/test_anthropic_agents.py``.

moto runs no table stream and no queue trigger, so the webhook scenario hands the session's rows to
the real ``lifecycle_events`` function and the FIFO queue's messages to the real ``webhook_delivery``
function, as the cloud's triggers would (``Target.pump``; the helpers of ``tests/integration/test_webhooks.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anthropic
import httpx
import pytest
import uvicorn
from anthropic import Omit

from skyloop import auth, deps
from skyloop.local import lambda_hook
from skyloop.local.gateway import create_gateway
from skyloop.settings import get_settings
from tests.anthropic_suite import scenarios
from tests.anthropic_suite.scenarios import (
    TOOL_SCRIPT,
    Target,
    environment,
    idle,
    read_until,
    scripted_agent,
    send_text,
    strict_events,
)
from tests.integration.test_webhooks import deliver, publish, stream_records

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.conftest import MockLLM, Stack


@pytest.fixture(scope="module")
def target(aws: Stack, mock_llm: MockLLM) -> Iterator[Target]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SKYLOOP_REQUIRE_TOKEN", "true")
        # what an agent made through the Claude API runs on (its model id is a bare name): the mock model
        default = {"harness": "openai-agents", "auth": {"type": "api_key", "base_url": mock_llm.base_url}}
        mp.setenv("SKYLOOP_DEFAULT_EXECUTOR", json.dumps(default))
        mp.setenv("SKYLOOP_API_FUNCTION", aws.resources.function_arns["api"])
        mp.setenv("SKYLOOP_HEARTBEAT_S", "15")
        get_settings.cache_clear()
        token, _ = auth.create_token(deps.store(), "anthropic-suite")
        app = create_gateway(lambda_hook.direct_invoker(aws.resources.function_arns["api"]))
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        )
        thread = threading.Thread(target=server.run, name="anthropic-edge", daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "the local edge did not start"
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield Target(f"http://127.0.0.1:{port}", token=token, mock_control=mock_llm.url)
        finally:
            server.should_exit = True
            thread.join(timeout=5)
    get_settings.cache_clear()


def test_a_wrong_token_is_an_authentication_error(target: Target) -> None:
    with pytest.raises(anthropic.AuthenticationError) as err:
        Target(target.base_url, token="not-a-token").client().beta.agents.list()
    assert err.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]


# What CloudFront's Origin Access Control puts in Authorization on the way to the stream function's URL
OAC_SIGNATURE = (
    "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20260401/us-east-1/lambda/aws4_request, "
    "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + "0" * 64
)
OAC_HEADERS = {
    "Authorization": OAC_SIGNATURE,
    "x-amz-date": "20260401T000000Z",
    "x-amz-content-sha256": "UNSIGNED",
}


def _session(target: Target) -> str:
    client = target.client()
    agent_id = scripted_agent(target, TOOL_SCRIPT)
    return client.beta.sessions.create(agent=agent_id, environment_id=environment(client)).id


def _open_stream(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """The status and first chunk of a stream (its ``: connected`` comment, or the error's body)."""
    with httpx.stream("GET", url, headers=headers, timeout=30) as r:
        return r.status_code, next(r.iter_bytes())


def test_cloudfront_signed_stream_request_authenticates_by_x_api_key(target: Target) -> None:
    """Behind CloudFront the stream function sees OAC's SigV4 signature in Authorization and the
    client's key in x-api-key (no edge copy: the client sent no Authorization): the key is the token."""
    url = f"{target.base_url}/anthropic/v1/sessions/{_session(target)}/events/stream"
    status, first = _open_stream(url, {**OAC_HEADERS, "x-api-key": target.token})
    assert (status, first) == (200, b": connected\n\n"), first
    status, first = _open_stream(url, OAC_HEADERS)  # a signature and no key: refused, in Claude's shape
    assert status == 401, first
    body = json.loads(first)
    assert (body["type"], body["error"]["type"]) == ("error", "authentication_error"), body
    status, first = _open_stream(url, {**OAC_HEADERS, "x-api-key": "not-a-token"})
    assert status == 401, first


def test_api_takes_x_api_key_over_a_sigv4_authorization(target: Target) -> None:
    """The API reads the client's credential the same way (a SigV4 Authorization is never a token)."""
    r = httpx.get(
        f"{target.base_url}/anthropic/v1/agents",
        headers={**OAC_HEADERS, "x-api-key": target.token},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    r = httpx.get(f"{target.base_url}/anthropic/v1/agents", headers=OAC_HEADERS, timeout=30)
    assert r.status_code == 401, r.text
    assert r.json()["error"]["type"] == "authentication_error"


@pytest.mark.parametrize("form", ["api_key", "auth_token", "x-api-key", "x-api-key behind CloudFront"])
def test_each_sdk_credential_form_reaches_api_and_stream(target: Target, form: str) -> None:
    """The SDK (2.17.0) sends ``api_key=`` and ``auth_token=`` both as ``Authorization: Bearer``; a
    client that sends only ``X-Api-Key`` (``default_headers``, Authorization omitted) is accepted too,
    on the API and on the stream, also with CloudFront's signature in Authorization."""
    common: dict[str, Any] = {
        "base_url": f"{target.base_url}/anthropic",
        "max_retries": 0,
        "timeout": 30,
        "_strict_response_validation": True,
    }
    if form == "api_key":
        client = anthropic.Anthropic(api_key=target.token, **common)
        sent = ("authorization", f"Bearer {target.token}")
    elif form == "auth_token":
        client = anthropic.Anthropic(auth_token=target.token, **common)
        sent = ("authorization", f"Bearer {target.token}")
    else:
        auth: str | Omit = OAC_SIGNATURE if form.endswith("CloudFront") else Omit()
        client = anthropic.Anthropic(
            default_headers={"X-Api-Key": target.token, "Authorization": auth}, **common
        )
        sent = ("x-api-key", target.token)
    listed = client.beta.agents.with_raw_response.list(limit=1)
    assert listed.http_request.headers.get(sent[0]) == sent[1]
    if form == "x-api-key":
        assert "authorization" not in listed.http_request.headers
    listed.parse()
    session_id = _session(target)
    with client.beta.sessions.events.stream(session_id) as stream:  # a refusal raises here
        send_text(client, session_id, "go")
        events = read_until(stream, idle("requires_action"))
    strict_events(events)
    assert events[-1].type == "session.status_idle"


def test_agents_and_versions(target: Target) -> None:
    scenarios.agents_and_versions(target)


def test_environments(target: Target) -> None:
    scenarios.environments_crud(target)


@pytest.mark.parametrize(
    ("config", "network", "setup"),
    [
        (
            {"networking": {"type": "unrestricted"}, "packages": {"pip": ["rich"], "npm": ["left-pad"]}},
            "public",
            2,
        ),
        ({"networking": {"type": "limited"}}, "none", 0),
    ],
)
def test_a_cloud_environment_session_gets_the_hosted_environment(
    target: Target, config: dict[str, Any], network: str, setup: int
) -> None:
    """The session record (read in this process: moto is shared) carries the mapped hosted environment."""
    client = target.client()
    env_id = environment(client, "cloud", **config)
    session = client.beta.sessions.create(agent=scripted_agent(target, TOOL_SCRIPT), environment_id=env_id)
    stored = deps.store().get_session(session.id)
    assert stored.environment is not None
    assert stored.environment_id == env_id
    assert stored.environment.network == network
    assert len(stored.environment.setup) == setup
    assert [c.split()[-1] for c in stored.environment.setup] == ["rich", "left-pad"][:setup]


def test_custom_tool_turn(target: Target) -> None:
    scenarios.custom_tool_turn(target)


@pytest.mark.parametrize("case", list(scenarios.UNSUPPORTED))
def test_unsupported_feature_is_a_400_naming_it(target: Target, case: str) -> None:
    scenarios.unsupported_feature(target, case)


def test_an_unknown_route_is_a_404_in_anthropics_shape(target: Target) -> None:
    scenarios.unknown_route_is_404(target)


def test_tool_runner_on_a_self_hosted_environment(target: Target, tmp_path: Path) -> None:
    asyncio.run(scenarios.tool_runner_self_hosted(target, tmp_path))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="hosted tools run in bubblewrap")
def test_cloud_environment_runs_bash_with_nobody_connected(target: Target) -> None:
    scenarios.cloud_bash_with_nobody_connected(target)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="hosted tools run in bubblewrap")
def test_tool_confirmation_denied_then_allowed(target: Target) -> None:
    scenarios.tool_confirmation(target)


def test_dropped_stream_resumes_without_gap(target: Target) -> None:
    scenarios.dropped_stream_resumes(target)


def test_stream_resumed_while_the_turn_runs(target: Target) -> None:
    scenarios.stream_resumed_while_running(target)


def test_budget_reached(target: Target) -> None:
    scenarios.budget_reached(target)


def test_events_listed_and_paged(target: Target) -> None:
    scenarios.events_listed_and_paged(target)


def test_async_client(target: Target) -> None:
    asyncio.run(scenarios.async_client(target))


def test_every_frame_of_every_stream_names_its_type(target: Target) -> None:
    scenarios.every_frame_names_its_type(target)


def test_mcp_tool_turn(target: Target) -> None:
    with scenarios.glossary_mcp() as mcp:
        scenarios.mcp_tool_turn(target, f"{mcp.url}/mcp")


def test_initial_events_and_interrupt(target: Target) -> None:
    scenarios.initial_events_and_interrupt(target)


def test_environment_worker_serves_a_self_hosted_session(target: Target, tmp_path: Path) -> None:
    asyncio.run(scenarios.environment_worker(target, tmp_path))


def test_turn_on_an_agent_made_through_the_claude_api(target: Target) -> None:
    with scenarios.glossary_mcp() as mcp:
        scenarios.claude_created_agent_turn(target, f"{mcp.url}/mcp")


def test_a_session_pinned_to_a_version_runs_it_after_an_update(target: Target) -> None:
    scenarios.pinned_version_and_session_update(target)


@pytest.fixture
def webhook_target(target: Target, aws: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Target]:
    """The target, with a FIFO delivery queue and receivers on loopback; its pump publishes a session's
    rows (as the table stream would) and delivers every queued message (as the queue's trigger would)."""
    queue = deps.client("sqs").create_queue(
        QueueName=f"claude-suite-{uuid.uuid4().hex[:8]}.fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    monkeypatch.setenv("SKYLOOP_WEBHOOK_QUEUE_URL", queue)
    monkeypatch.setenv("SKYLOOP_OUTBOUND_ALLOW_LOOPBACK", "true")
    get_settings.cache_clear()

    def pump(session_id: str) -> None:
        assert publish(stream_records(aws, session_id, created=True)) == {"batchItemFailures": []}
        while deliver(queue)[1]:
            pass

    yield dataclasses.replace(target, pump=pump)
    get_settings.cache_clear()


def test_a_webhook_verifies_with_unwrap(webhook_target: Target) -> None:
    scenarios.webhook_verified_with_unwrap(webhook_target)
