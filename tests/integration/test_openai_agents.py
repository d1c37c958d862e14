"""The OpenAI Agents API suite against the API handler in Lambda's shape (tokens required).

The real ``openai`` SDK over real HTTP, to a local edge that does what
CloudFront and API Gateway do: a GET of the OpenAI events stream goes to the
stream app (:mod:`skyloop.stream.openai`), and every other request (a post on
the same path too, as CloudFront's viewer-request function sends it) becomes an
HTTP API payload 2.0 event for the real ``functions/api/handler.py``, run by
moto's Lambda; turns run on the real state machine (moto's Step Functions). The same
scenarios run against ``skyloop dev`` in ``tests/compat/test_openai_agents.py``.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from typing import TYPE_CHECKING

import openai
import pytest
import uvicorn

from skyloop import auth, deps
from skyloop.local import lambda_hook
from skyloop.local.gateway import create_gateway
from skyloop.settings import get_settings
from tests.openai_suite import scenarios
from tests.openai_suite.scenarios import Target

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.conftest import Stack


@pytest.fixture(scope="module")
def target(aws: Stack) -> Iterator[Target]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SKYLOOP_REQUIRE_TOKEN", "true")
        mp.setenv("SKYLOOP_API_FUNCTION", aws.resources.function_arns["api"])
        mp.setenv("SKYLOOP_HEARTBEAT_S", "15")
        get_settings.cache_clear()
        token, _ = auth.create_token(deps.store(), "openai-suite")
        app = create_gateway(lambda_hook.direct_invoker(aws.resources.function_arns["api"]))
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        )
        thread = threading.Thread(target=server.run, name="openai-edge", daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "the local edge did not start"
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield Target(f"http://127.0.0.1:{port}", token=token)
        finally:
            server.should_exit = True
            thread.join(timeout=5)
    get_settings.cache_clear()


def test_a_wrong_token_is_an_authentication_error(target: Target) -> None:
    with pytest.raises(openai.AuthenticationError) as err:
        Target(target.base_url, token="not-a-token").client().beta.agents.list()
    assert err.value.body["type"] == "authentication_error"  # type: ignore[index]


def test_agents_crud(target: Target) -> None:
    scenarios.agents_crud(target)


def test_client_tool_turn_with_tool_handlers(target: Target) -> None:
    scenarios.client_tool_turn(target)


def test_events_stream_replays_a_finished_turn(target: Target) -> None:
    scenarios.replay_finished_turn(target)


def test_items_turns_and_sessions_listed_and_paged(target: Target) -> None:
    scenarios.listings(target)


def test_dropped_stream_resumes_without_gap(target: Target) -> None:
    scenarios.dropped_stream_resumes(target)


def test_spend_control_stops_the_turn(target: Target) -> None:
    scenarios.spend_control(target)


def test_unsupported_features_are_400_naming_them(target: Target) -> None:
    scenarios.unsupported_features(target)


def test_streamed_create_with_tool_handlers(target: Target) -> None:
    scenarios.streamed_create(target)


def test_streamed_create_answers_303_to_its_stream(target: Target) -> None:
    scenarios.streamed_create_answers_303_to_its_stream(target)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="hosted tools run in bubblewrap")
def test_openai_hosted_environment_runs_command_executions(target: Target) -> None:
    scenarios.openai_hosted_environment_runs_command_executions(target)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="hosted tools run in bubblewrap")
def test_openai_hosted_environment_setup_failure_is_the_failed_event(target: Target) -> None:
    scenarios.openai_hosted_environment_setup_failure(target)


def test_cancel_while_parked(target: Target) -> None:
    scenarios.cancel_while_parked(target)


def test_async_client(target: Target) -> None:
    asyncio.run(scenarios.async_client(target))


def test_automations_crud_pause_resume(target: Target) -> None:
    scenarios.automations_crud(target)


def test_automation_invocation_completes_a_turn(target: Target) -> None:
    scenarios.automation_invocation(target)


def test_async_automations(target: Target) -> None:
    asyncio.run(scenarios.async_automations(target))


def test_webhook_endpoints(target: Target) -> None:
    scenarios.webhook_endpoints(target)


def test_async_webhook_endpoints(target: Target) -> None:
    asyncio.run(scenarios.async_webhook_endpoints(target))
