"""End-to-end fixtures: real ``skyloop dev`` and ``skyloop mock-llm`` processes on free ports.

Fixture and helper names and meanings follow the seed scenario's conftest
(``live_server``, ``http_client``, ``live_runner_id``, ``mock_llm_server_url``,
``sample_code_dir``, ``configure_mock_llm``, ``reset_mock_llm``,
``register_inline_agent``, ``create_runner_bound_session``,
``send_user_message_to_session``), so the scenario reads the same here.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ORIGIN = "omnigent://internal"
STARTUP_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log = log_path.open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "skyloop", *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log_path: Path, path: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            if httpx.get(url + path, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {STARTUP_TIMEOUT_S}s:\n{log_path.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def mock_llm_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("mock-llm") / "mock-llm.log"
    proc = _start(["mock-llm", "--port", str(port)], log)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log, "/stats")
        yield url
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def live_server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    port = _free_port()
    log = tmp_path_factory.mktemp("skyloop-dev") / "dev.log"
    env = {"OPENAI_API_KEY": "", "SKYLOOP_HEARTBEAT_S": "15"}
    proc = _start(["dev", "--port", str(port)], log, env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log, "/health")
        yield url, log
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def live_server(live_server_process: tuple[str, Path]) -> str:
    return live_server_process[0]


@pytest.fixture(scope="session")
def live_runner_id(live_server: str) -> str:
    runners = httpx.get(f"{live_server}/v1/runners", timeout=10).json()["data"]
    runner_id = runners[0]["runner_id"]
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        status = httpx.get(f"{live_server}/v1/runners/{runner_id}/status", timeout=10).json()
        if status.get("online") is True:
            return runner_id
        time.sleep(0.2)
    raise RuntimeError(f"runner {runner_id} never came online")


@pytest.fixture
def http_client(live_server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server, timeout=30, headers={"Origin": ORIGIN}) as client:
        yield client


@pytest.fixture
def sample_code_dir(tmp_path: Path) -> Path:
    root = tmp_path / "sample_code"
    root.mkdir()
    (root / "calculator.py").write_text(
        '"""A tiny calculator."""\n\n\ndef divide(a, b):\n    return a / b\n\n\n'
        "def average(values):\n    return sum(values) / len(values)\n"
    )
    (root / "utils.py").write_text("def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n")
    return root


# ----------------------------------------------------------------------- mock LLM helpers
def configure_mock_llm(
    url: str | None, responses: list[dict[str, Any]], *, key: str = "default", match: str | None = None
) -> None:
    if url is None:
        return
    if match is not None and key == "default":
        key = match
    body: dict[str, Any] = {"key": key, "responses": responses}
    if match is not None:
        body["match"] = match
    httpx.post(f"{url}/mock/configure", json=body, timeout=5).raise_for_status()


def reset_mock_llm(url: str | None) -> None:
    if url is None:
        return
    httpx.post(f"{url}/mock/reset", timeout=5).raise_for_status()


def get_mock_requests(url: str | None, *, key: str | None = None) -> list[dict[str, Any]]:
    if url is None:
        return []
    r = httpx.get(f"{url}/mock/requests", params={"key": key} if key else None, timeout=5)
    r.raise_for_status()
    return list(r.json()["requests"])


# ---------------------------------------------------------------------- session helpers
def _bundle(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def upload_agent(http_client: httpx.Client, files: dict[str, str]) -> dict[str, Any]:
    resp = http_client.post(
        "/v1/sessions",
        data={"metadata": "{}"},
        files={"bundle": ("agent.tar.gz", _bundle(files), "application/gzip")},
    )
    assert resp.status_code in (200, 201, 409), f"agent upload failed: {resp.status_code} {resp.text[:300]}"
    return dict(resp.json())


def register_inline_agent(
    http_client: httpx.Client,
    *,
    name: str,
    harness: str = "openai-agents",
    model: str,
    profile: str = "",
    prompt: str = "You are a helpful assistant.",
    mock_llm_base_url: str | None = None,
    extra: dict[str, Any] | None = None,
) -> str:
    """Upload a single-YAML bundle; returns the agent name."""
    executor: dict[str, Any] = {"harness": harness, "model": model, "profile": profile}
    if mock_llm_base_url:
        executor["auth"] = {"type": "api_key", "api_key": "mock-key", "base_url": mock_llm_base_url}
    spec = {"name": name, "prompt": prompt, "executor": executor, **(extra or {})}
    upload_agent(http_client, {f"{name}.yaml": json.dumps(spec)})  # JSON is YAML
    return name


def lookup_agent_id(http_client: httpx.Client, agent_name: str) -> str:
    resp = http_client.get("/v1/sessions", params={"agent_name": agent_name, "limit": 1})
    resp.raise_for_status()
    data = resp.json()["data"]
    assert data, f"no session lists agent {agent_name!r}"
    return str(data[0]["agent_id"])


def create_runner_bound_session(http_client: httpx.Client, *, agent_name: str, runner_id: str) -> str:
    agent_id = lookup_agent_id(http_client, agent_name)
    resp = http_client.post("/v1/sessions", json={"agent_id": agent_id})
    assert resp.status_code in (200, 201), resp.text
    session_id = str(resp.json()["id"])
    resp = http_client.patch(f"/v1/sessions/{session_id}", json={"runner_id": runner_id})
    assert resp.status_code == 200, resp.text
    return session_id


def send_user_message_to_session(
    http_client: httpx.Client,
    *,
    session_id: str,
    content: str,
    tools: list[dict[str, Any]] | None = None,
) -> str:
    body: dict[str, Any] = {
        "type": "message",
        "data": {"role": "user", "content": [{"type": "input_text", "text": content}]},
    }
    if tools is not None:
        body["tools"] = tools
    resp = http_client.post(f"/v1/sessions/{session_id}/events", json=body)
    assert resp.status_code in (200, 202), f"message POST failed: {resp.status_code} {resp.text[:300]}"
    item_id = resp.json().get("item_id")
    assert item_id, f"message was not queued: {resp.text[:300]}"
    snapshot = http_client.get(f"/v1/sessions/{session_id}").json()
    match = [i for i in snapshot["items"] if i["id"] == item_id]
    assert match and match[0].get("response_id"), f"item {item_id} not in snapshot with a response_id"
    return str(item_id)


def get_session_snapshot(http_client: httpx.Client, session_id: str) -> dict[str, Any]:
    resp = http_client.get(f"/v1/sessions/{session_id}")
    resp.raise_for_status()
    return dict(resp.json())
