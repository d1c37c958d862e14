"""Restarting a real ``skyloop dev`` on a data directory: the helpers the persistence tests share."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.e2e.conftest import ORIGIN, _free_port, _wait_ready, configure_mock_llm, unique, upload_agent

if TYPE_CHECKING:
    from pathlib import Path

STOPS = [pytest.param(signal.SIGTERM, id="sigterm"), pytest.param(signal.SIGKILL, id="sigkill")]
RESTART_TURN_S = 10.0  # a turn that was running ends (or waits again) this soon after the stack is back


class Stack:
    """One ``skyloop dev`` on one data directory and one port, restarted at will."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = tmp_path / "data"
        self.tmp_path = tmp_path
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = list(args)
        self.env = {**os.environ, "OPENAI_API_KEY": "", **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path = tmp_path / "dev-0.log"

    def launch(self, *extra: str) -> subprocess.Popen[bytes]:
        self.starts += 1
        self.log_path = self.tmp_path / f"dev-{self.starts}.log"
        command = [
            sys.executable,
            "-m",
            "skyloop",
            "dev",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
        ]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [*command, *self.args, *extra], stdout=log, stderr=subprocess.STDOUT, env=self.env
            )
        return self.proc

    def start(self, *extra: str) -> float:
        """Start and wait until it serves; returns when it was ready (``time.monotonic()``)."""
        proc = self.launch(*extra)
        _wait_ready(self.url, proc, self.log_path, "/health")
        return time.monotonic()

    def stop(self, how: signal.Signals = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(how)
        self.proc.wait(timeout=30)
        self.proc = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Origin": ORIGIN, **({"Authorization": f"Bearer {token}"} if token else {})}
        return httpx.Client(base_url=self.url, timeout=30, headers=headers)

    def banner(self, label: str) -> str:
        match = re.search(rf"{label}:\s+(\S+)", self.log())
        assert match, f"no {label!r} in the banner:\n{self.log()[-2000:]}"
        return match.group(1)


def scripted_agent(
    http: httpx.Client, mock_url: str, responses: list[dict[str, Any]], **extra: Any
) -> tuple[str, str, str]:
    """A new agent whose model key is scripted; returns ``(agent_id, model, session_id)``."""
    name = unique("persist")
    model = f"mock-{name}"
    configure_mock_llm(mock_url, responses, key=model)
    spec = {
        "name": name,
        "prompt": "You are a test agent.",
        "executor": {
            "harness": "openai-agents",
            "model": model,
            "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{mock_url}/v1"},
        },
        **extra,
    }
    created = upload_agent(http, {f"{name}.yaml": json.dumps(spec)})
    return str(created["agent_id"]), model, str(created["session_id"])


def echo_call(call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"call_id": call_id, "name": "Echo", "arguments": json.dumps({"text": call_id})}]}


def state_of(http: httpx.Client) -> dict[str, Any]:
    """Everything a client can read back: agents, sessions, their items and files (with their bytes)."""
    agents = http.get("/v1/agents", params={"limit": 100}).json()["data"]
    sessions = http.get("/v1/sessions", params={"limit": 100}).json()["data"]
    out: dict[str, Any] = {"agents": sorted(a["id"] for a in agents), "sessions": {}}
    for session in sessions:
        sid = session["id"]
        items = http.get(f"/v1/sessions/{sid}/items", params={"limit": 100}).json()["data"]
        files = http.get(f"/v1/sessions/{sid}/resources/files").json()["data"]
        contents = {
            f["id"]: http.get(f"/v1/sessions/{sid}/resources/files/{f['id']}/content").content for f in files
        }
        snapshot = http.get(f"/v1/sessions/{sid}").json()
        out["sessions"][sid] = {
            "status": snapshot["status"],
            "last_event_id": snapshot["last_event_id"],
            "items": [(i["id"], i["type"]) for i in items],
            "files": contents,
        }
    return out


def no_traceback(stack: Stack) -> None:
    assert "Traceback" not in stack.log(), stack.log()[-3000:]
