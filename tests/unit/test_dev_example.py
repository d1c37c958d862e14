"""``skyloop dev``'s example agent: which model answers ``coder``, and the AWS identity Bedrock keeps locally."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from skyloop.local import dev
from skyloop.local.lambda_worker import _forward
from skyloop.models.agent import AgentSpec

if TYPE_CHECKING:
    from pathlib import Path

URL = "http://127.0.0.1:8080"


def spec_of(executor: dict[str, object]) -> AgentSpec:
    return AgentSpec.model_validate({"name": dev.EXAMPLE_AGENT, "executor": executor})


def test_bedrock_when_asked_for_with_the_captured_region() -> None:
    env = {
        "SKYLOOP_EXAMPLE_HARNESS": "bedrock-converse",
        "SKYLOOP_BEDROCK_REGION": "eu-central-1",
        "OPENAI_API_KEY": "sk",
    }
    executor, answering = dev.example_executor(env, URL)
    assert executor == {
        "harness": "bedrock-converse",
        "model": dev.EXAMPLE_BEDROCK_MODEL,
        "region": "eu-central-1",
    }
    assert answering == f"Bedrock ({dev.EXAMPLE_BEDROCK_MODEL})"
    assert spec_of(executor).executor.auth is None  # no key, no endpoint: the real Bedrock, signed


def test_bedrock_model_comes_from_skyloop_example_model() -> None:
    env = {"SKYLOOP_EXAMPLE_HARNESS": "bedrock-converse", "SKYLOOP_EXAMPLE_MODEL": "amazon.nova-lite-v1:0"}
    executor, _ = dev.example_executor(env, URL)
    assert executor == {"harness": "bedrock-converse", "model": "amazon.nova-lite-v1:0"}


def test_openai_when_a_key_is_set() -> None:
    executor, answering = dev.example_executor({"OPENAI_API_KEY": "sk"}, URL)
    assert executor == {"harness": "openai-agents", "model": dev.EXAMPLE_OPENAI_MODEL}
    assert answering.startswith("OpenAI")


def test_the_scripted_model_otherwise() -> None:
    executor, answering = dev.example_executor({}, URL)
    spec = spec_of(executor)
    assert spec.executor.model == dev.OFFLINE_MODEL
    assert spec.executor.auth is not None
    assert spec.executor.auth.base_url == f"{URL}/_mock/v1"
    assert answering == "the offline scripted model"


def test_an_unknown_example_harness_is_refused() -> None:
    with pytest.raises(SystemExit, match="SKYLOOP_EXAMPLE_HARNESS"):
        dev.example_executor({"SKYLOOP_EXAMPLE_HARNESS": "gemini"}, URL)


@pytest.fixture
def no_aws_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))


@pytest.mark.usefixtures("no_aws_files")
def test_the_users_key_pair_and_region_are_captured() -> None:
    env = {
        "AWS_ACCESS_KEY_ID": "AKIAREAL",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_SESSION_TOKEN": "t",
        "AWS_REGION": "us-west-2",
    }
    dev.capture_bedrock_identity(env)
    assert env["SKYLOOP_BEDROCK_ACCESS_KEY_ID"] == "AKIAREAL"
    assert env["SKYLOOP_BEDROCK_SECRET_ACCESS_KEY"] == "s"
    assert env["SKYLOOP_BEDROCK_SESSION_TOKEN"] == "t"
    assert env["SKYLOOP_BEDROCK_REGION"] == "us-west-2"


@pytest.mark.usefixtures("no_aws_files")
def test_fake_keys_are_never_captured_and_set_values_win() -> None:
    env = {
        "AWS_ACCESS_KEY_ID": "FOOBARKEY",
        "AWS_SECRET_ACCESS_KEY": "x",
        "SKYLOOP_BEDROCK_REGION": "ap-south-1",
    }
    env["AWS_REGION"] = "us-east-1"
    dev.capture_bedrock_identity(env)
    assert "SKYLOOP_BEDROCK_ACCESS_KEY_ID" not in env
    assert env["SKYLOOP_BEDROCK_REGION"] == "ap-south-1"


def test_a_profile_is_captured_with_its_region(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config"
    config.write_text("[default]\nregion = eu-west-3\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    env: dict[str, str] = {}
    dev.capture_bedrock_identity(env)
    assert env == {"SKYLOOP_BEDROCK_PROFILE": "default", "SKYLOOP_BEDROCK_REGION": "eu-west-3"}


def test_local_lambda_environments_send_bedrock_to_the_network() -> None:
    """Every other AWS call of a local function goes to the stack's moto; a model call must not."""
    assert _forward(object(), event_name="before-send.bedrock-runtime.ConverseStream") is None
    with pytest.raises(RuntimeError):  # no channel in this process: it would have been forwarded
        _forward(
            type("R", (), {"body": b"", "headers": {}, "method": "POST", "url": "u"})(),
            event_name="before-send.dynamodb",
        )


def test_moto_passes_bedrock_runtime_through() -> None:
    assert "bedrockruntime" in dev.MOTO_CONFIG["core"]["passthrough"]["services"]
