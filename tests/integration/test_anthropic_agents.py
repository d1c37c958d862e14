"""The Claude Managed Agents suite against the API handler in Lambda's shape (tokens required).

The real ``anthropic`` SDK over real HTTP, to a local edge that does what CloudFront and API Gateway
do: a GET of the Claude events stream goes to the stream app (:mod:`skyloop.stream.anthropic`), and
every other request becomes an HTTP API payload 2.0 event for the real ``functions/api/handler.py``,
run by moto's Lambda; turns run on the real state machine (moto's Step Functions). The same
scenarios run against ``skyloop dev`` in ``tests/compat/test_anthropic_agents.py``.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anthropic
import pytest
import uvicorn

from skyloop import auth, deps
from skyloop.local import lambda_hook
from skyloop.local.gateway import create_gateway
from skyloop.settings import get_settings
from tests.anthropic_suite import scenarios
from tests.anthropic_suite.scenarios import Target

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
            yield Target(f"http://127.0.0.1:{port}", token=token)
        finally:
            server.should_exit = True
            thread.join(timeout=5)
    get_settings.cache_clear()


def test_a_wrong_token_is_an_authentication_error(target: Target) -> None:
    with pytest.raises(anthropic.AuthenticationError) as err:
        Target(target.base_url, token="not-a-token").client().beta.agents.list()
    assert err.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]


def test_agents_and_versions(target: Target) -> None:
    scenarios.agents_and_versions(target)


def test_environments(target: Target) -> None:
    scenarios.environments_crud(target)


def test_custom_tool_turn(target: Target) -> None:
    scenarios.custom_tool_turn(target)


def test_unsupported_features_are_400_naming_them(target: Target) -> None:
    scenarios.unsupported_features(target)


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
