"""The official ``openai`` SDK's ``client.beta.agents`` against ``skyloop dev`` (sync and async).

The scenarios live in ``tests/openai_suite`` and run against the API handler in
Lambda's shape too (``tests/integration/test_openai_agents.py``).
"""

from __future__ import annotations

import asyncio
import shutil
from importlib import metadata
from pathlib import Path

import pytest

from tests.openai_suite import scenarios
from tests.openai_suite.scenarios import Target

pytestmark = pytest.mark.e2e


@pytest.fixture
def target(live_server: str, live_runner_id: str) -> Target:
    return Target(live_server)


def test_pinned_sdk_version() -> None:
    """The suite tests the SDK version the dev extras pin (``openai==...``)."""
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    pins = [line.strip().strip('",') for line in text.splitlines() if line.strip().startswith('"openai==')]
    assert pins == [f"openai=={metadata.version('openai')}"]


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


def test_a_delivered_webhook_verifies_with_unwrap(target: Target) -> None:
    scenarios.webhook_delivered_on_turn(target)


def test_a_hosted_sessions_webhooks_say_openai_hosted(target: Target) -> None:
    scenarios.webhook_reports_openai_hosted(target)


def test_async_webhook_endpoints(target: Target) -> None:
    asyncio.run(scenarios.async_webhook_endpoints(target))
