"""The official ``anthropic`` SDK's Claude Managed Agents (``client.beta.*``) against ``skyloop dev``.

The scenarios live in ``tests/anthropic_suite`` and run against the API handler in Lambda's shape too
(``tests/integration/test_anthropic_agents.py``).
"""

from __future__ import annotations

import asyncio
import shutil
from importlib import metadata
from pathlib import Path

import pytest

from tests.anthropic_suite import scenarios
from tests.anthropic_suite.scenarios import Target

pytestmark = pytest.mark.e2e


@pytest.fixture
def target(live_server: str, live_runner_id: str) -> Target:
    return Target(live_server, mock_control=f"{live_server}/_mock")  # skyloop dev's offline model


def test_pinned_sdk_version() -> None:
    """The suite tests the SDK version the dev extras pin (``anthropic[webhooks]==...``)."""
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    pins = [line.strip().strip('",') for line in text.splitlines() if line.strip().startswith('"anthropic[')]
    assert pins == [f"anthropic[webhooks]=={metadata.version('anthropic')}"]


def test_agents_and_versions(target: Target) -> None:
    scenarios.agents_and_versions(target)


def test_environments(target: Target) -> None:
    scenarios.environments_crud(target)


def test_custom_tool_turn(target: Target) -> None:
    scenarios.custom_tool_turn(target)


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


@pytest.mark.parametrize("case", list(scenarios.UNSUPPORTED))
def test_unsupported_feature_is_a_400_naming_it(target: Target, case: str) -> None:
    scenarios.unsupported_feature(target, case)


def test_an_unknown_route_is_a_404_in_anthropics_shape(target: Target) -> None:
    scenarios.unknown_route_is_404(target)


def test_async_client(target: Target) -> None:
    asyncio.run(scenarios.async_client(target))


def test_every_frame_of_every_stream_names_its_type(target: Target) -> None:
    scenarios.every_frame_names_its_type(target)


def test_a_webhook_verifies_with_unwrap(target: Target) -> None:
    scenarios.webhook_verified_with_unwrap(target)


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
