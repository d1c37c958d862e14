"""``skyloop chat`` driven in a real pseudo-terminal against ``skyloop dev`` and ``skyloop mock-llm``.

The chat process gets the pty as its controlling terminal, so Ctrl-C typed
into the master (``\\x03``) reaches it as SIGINT from the line discipline,
exactly as in a terminal. Also: ``skyloop sessions ls --json`` and
``skyloop agents ls`` against the same live server.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.e2e.conftest import LOOPBACK, configure_mock_llm, get_mock_requests, upload_agent

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.e2e

MARKER = "[System: interrupted]"
PROMPT = r"(?:^|\n)> $"
# Makes the pty the child's controlling terminal (the child is already a session leader), then execs.
# The pty becomes the child's controlling terminal, and Ctrl-C's SIGINT gets its default action back, as
# a shell gives a foreground job: a disposition the test process inherited (an ignored SIGINT) would
# otherwise pass through exec, and Python installs no KeyboardInterrupt for an ignored SIGINT.
_BOOT = (
    "import fcntl, os, signal, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|[\x01\x02]")


class PtyChat:
    """A process on a fresh pty: ``send`` keystrokes, ``expect`` output (a regex), ``wait`` for its exit."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, sys.executable, "-m", "skyloop", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self.fd = master
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.output = ""
        self.pos = 0

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed its side
            return False
        if not data:
            return False
        self.output += _ANSI.sub("", self._decoder.decode(data)).replace("\r\n", "\n")
        return True

    def expect(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        """Wait for ``pattern`` after the previous match; returns the match."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.output, self.pos)
            if match:
                self.pos = match.end()
                return match
            remaining = deadline - time.monotonic()
            got = remaining > 0 and self._read(min(remaining, 0.2))
            if remaining <= 0 or (
                not got and self.proc.poll() is not None and not regex.search(self.output, self.pos)
            ):
                raise AssertionError(
                    f"no {pattern!r} within {timeout}s (exit={self.proc.poll()}); "
                    f"output since the last match:\n{self.output[self.pos :]}"
                )

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def line(self, text: str) -> None:
        self.send(text + "\r")

    def wait(self, timeout: float = 15.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        while self._read(0.05):  # whatever it printed last
            pass
        code = self.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        with contextlib.suppress(OSError):
            os.close(self.fd)


@pytest.fixture
def chat_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SKYLOOP_URL", "SKYLOOP_TOKEN")}
    env.update(
        {
            "SKYLOOP_CONFIG": str(tmp_path / "no-config.toml"),
            "NO_COLOR": "1",
            "TERM": "dumb",
            "PYTHONUNBUFFERED": "1",
            "PYTHONIOENCODING": "utf-8",
        }
    )
    return env


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def spawn_chat(live_server: str, chat_env: dict[str, str], workdir: Path) -> Iterator[Any]:
    started: list[PtyChat] = []

    def spawn(*args: str) -> PtyChat:
        chat = PtyChat(["chat", "--url", live_server, *args], cwd=workdir, env=chat_env)
        started.append(chat)
        return chat

    yield spawn
    for chat in started:
        chat.close()


def scripted_agent(live_server: str, mock_url: str, responses: list[dict[str, Any]]) -> tuple[str, str]:
    """Register a uniquely named agent whose model the mock answers with ``responses``; ``(name, model)``."""
    name = f"chat-{uuid.uuid4().hex[:8]}"
    model = f"mock-{name}"
    configure_mock_llm(mock_url, responses, key=model)
    spec = {
        "name": name,
        "prompt": "You are a coding assistant.",
        "executor": {
            "harness": "openai-agents",
            "model": model,
            "profile": "",
            "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{mock_url}/v1"},
        },
    }
    with httpx.Client(base_url=live_server, timeout=30) as http:
        upload_agent(http, {f"{name}.yaml": json.dumps(spec)})
    return name, model


def write_call(path: Path, content: str) -> dict[str, Any]:
    arguments = {"file_path": str(path), "content": content}
    return {"tool_calls": [{"call_id": "call_write", "name": "Write", "arguments": arguments}]}


def session_id_of(chat: PtyChat) -> str:
    return chat.expect(r"session ([0-9a-f]{32})").group(1)


# ----------------------------------------------------------------------------- tests
def test_write_call_confirmed_runs_here_and_the_answer_streams(
    live_server: str, live_runner_id: str, mock_llm_server_url: str, spawn_chat: Any, workdir: Path
) -> None:
    # Given an agent whose model calls Write, then answers with streamed text
    target = workdir / "hello.txt"
    name, _ = scripted_agent(
        live_server,
        mock_llm_server_url,
        [write_call(target, "hello from the chat\n"), {"text": "I wrote hello.txt for you.", "stream": True}],
    )
    chat = spawn_chat("--agent", name)
    session_id_of(chat)
    chat.expect(PROMPT)

    # When the user asks, the call is shown and confirmation is asked before anything is written
    chat.line("please write hello.txt")
    chat.expect(r"Write\(file_path=\"" + re.escape(str(target)))
    chat.expect(r"Run Write\? \[y/N\] $")
    assert not target.exists()
    chat.line("y")

    # Then the tool ran here, its short output and the streamed answer are shown, and the prompt returns
    chat.expect("Successfully wrote " + re.escape(str(target)))
    chat.expect(r"I wrote hello\.txt for you\.")
    chat.expect(PROMPT)
    assert target.read_text() == "hello from the chat\n"

    # And /exit quits cleanly
    chat.line("/exit")
    assert chat.wait() == 0


def test_declined_write_is_answered_with_an_error_and_writes_nothing(
    live_server: str, live_runner_id: str, mock_llm_server_url: str, spawn_chat: Any, workdir: Path
) -> None:
    # Given an agent whose model calls Write, then answers
    target = workdir / "nope.txt"
    name, model = scripted_agent(
        live_server,
        mock_llm_server_url,
        [write_call(target, "should not exist\n"), {"text": "Understood, I left it alone."}],
    )
    chat = spawn_chat("--agent", name)
    chat.expect(PROMPT)

    # When the user declines the confirmation
    chat.line("write nope.txt")
    chat.expect(r"Run Write\? \[y/N\] $")
    chat.line("n")

    # Then the declined error output is shown, the model reads it, and the turn completes
    chat.expect(r"Error: the user declined to run Write")
    chat.expect(r"Understood, I left it alone\.")
    chat.expect(PROMPT)
    assert not target.exists()
    requests = get_mock_requests(mock_llm_server_url, key=model)
    assert len(requests) == 2, requests
    outputs = [
        item
        for item in requests[1].get("input") or []
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert [o["output"] for o in outputs] == ["Error: the user declined to run Write"], requests[1]

    # And Ctrl-D at the prompt quits cleanly
    chat.send("\x04")
    assert chat.wait() == 0


def test_ctrl_c_interrupts_a_blocked_turn_and_a_second_ctrl_c_quits(
    live_server: str, live_runner_id: str, mock_llm_server_url: str, spawn_chat: Any
) -> None:
    # Given an agent whose model call blocks at the mock's gate
    name, model = scripted_agent(live_server, mock_llm_server_url, [{"block": True, "text": "too late"}])
    chat = spawn_chat("--agent", name)
    session_id = session_id_of(chat)
    chat.expect(PROMPT)
    try:
        chat.line("take your time")
        wait_for_gate(mock_llm_server_url, model)

        # When the user presses Ctrl-C during the turn
        chat.send("\x03")

        # Then the turn is interrupted and the prompt returns
        chat.expect(r"interrupted")
        chat.expect(PROMPT)
        with httpx.Client(base_url=live_server, timeout=10) as http:
            snapshot = http.get(f"/v1/sessions/{session_id}").json()
        assert snapshot["status"] == "idle", snapshot
        user_texts = [
            block.get("text", "")
            for item in snapshot["items"]
            if item["type"] == "message" and item["data"].get("role") == "user"
            for block in item["data"].get("content") or []
        ]
        assert any(text.startswith(MARKER) for text in user_texts), user_texts
        assert "too late" not in chat.output

        # And Ctrl-C over a half-typed line only drops the line
        chat.send("half a thought")
        chat.expect("half a thought")
        chat.send("\x03")
        chat.expect(PROMPT)
        assert chat.proc.poll() is None

        # And Ctrl-C at the empty prompt quits with status 0
        chat.send("\x03")
        assert chat.wait() == 0
    finally:
        with contextlib.suppress(Exception):
            LOOPBACK.post(f"{mock_llm_server_url}/gate/release", timeout=5)


def wait_for_gate(mock_url: str, model: str, timeout_s: float = 20.0) -> None:
    """Until this test's model request waits at the gate (another test's gate may still be pending)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        mine = LOOPBACK.get(f"{mock_url}/mock/requests", params={"key": model}, timeout=5).json()["requests"]
        if mine and LOOPBACK.get(f"{mock_url}/gate/pending", timeout=5).json()["pending"]:
            return
        time.sleep(0.05)
    raise AssertionError(f"no model request reached the mock's gate within {timeout_s}s")


def test_sessions_ls_json_and_agents_ls_against_the_live_server(
    live_server: str,
    mock_llm_server_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # In-process (the pty tests above cover the real entry point): a second interpreter start per
    # command would only add seconds.
    from skyloop.cli import main

    monkeypatch.delenv("SKYLOOP_URL", raising=False)
    monkeypatch.delenv("SKYLOOP_TOKEN", raising=False)
    monkeypatch.setenv("SKYLOOP_CONFIG", str(tmp_path / "no-config.toml"))

    def skyloop(*args: str) -> tuple[int, str, str]:
        code = main([*args, "--url", live_server])
        out, err = capsys.readouterr()
        return code, out, err

    # Given an agent registered with its first session
    name, _ = scripted_agent(live_server, mock_llm_server_url, [])

    # When listing its sessions as JSON
    code, out, err = skyloop("sessions", "ls", "--agent", name, "--json")
    assert code == 0, err

    # Then the raw page lists the upload's session
    page = json.loads(out)
    assert page["object"] == "list"
    assert [s["agent_name"] for s in page["data"]] == [name]
    assert set(page) >= {"data", "first_id", "last_id", "has_more"}

    # And the agents table shows the agent with aligned columns
    code, out, err = skyloop("agents", "ls")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "ID", "MODEL", "HARNESS", "CREATED"]
    row = next(line for line in lines if line.startswith(name + " "))
    assert row.index("mock-" + name) == lines[0].index("MODEL")

    # And the session shows with its details, and an unknown one is a one-line error with status 1
    code, out, err = skyloop("sessions", "show", page["data"][0]["id"])
    assert code == 0, err
    assert out.splitlines()[0] == f"session     {page['data'][0]['id']}"
    code, out, err = skyloop("sessions", "show", "0" * 32)
    assert (code, out) == (1, "")
    assert err.startswith("skyloop: not_found: ")


def test_offline_coder_reads_and_edits_local_files_without_an_api_key(
    live_server: str, live_runner_id: str, spawn_chat: Any, workdir: Path
) -> None:
    # Given the local stack's example agent `coder` (offline: no OPENAI_API_KEY) and a file here
    source = workdir / "calculator.py"
    source.write_text("def divide(a, b):\n    return a / b\n")
    chat = spawn_chat("--agent", "coder")
    session_id_of(chat)
    chat.expect(PROMPT)

    # When the user asks it to read the file, Read runs here and the model reports what it returned
    chat.line("read calculator.py")
    chat.expect(r"Read\(file_path=\"calculator\.py\"")
    chat.expect(r"Read ran on your machine and returned:")
    chat.expect(r"return a / b")
    chat.expect(PROMPT)

    # And when it asks for an edit, the chat confirms first, then Edit changes the file on this machine
    chat.line("replace 'a / b' with 'a // b' in calculator.py")
    chat.expect(r"Run Edit\? \[y/N\] $")
    chat.line("y")
    chat.expect(r"Replaced 1 occurrence")
    chat.expect(PROMPT)
    assert source.read_text() == "def divide(a, b):\n    return a // b\n"
    chat.line("/exit")
    assert chat.wait() == 0
