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
# The helpers' one-off calls share one client: ``httpx.get()`` builds a client, and with it an SSL context
# that loads the CA bundle (~20 ms of CPU), on every call; polled ten times a second while a stack started,
# that took a fifth of a core from the stack it waited for. No keep-alive: the stacks restart on their ports.
LOOPBACK = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))


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
            if LOOPBACK.get(url + path, timeout=1).status_code == 200:
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
    # Bedrock agents here talk to the mock: sign with dummy keys, never the developer's AWS identity
    bedrock = {"SKYLOOP_BEDROCK_ACCESS_KEY_ID": "mock", "SKYLOOP_BEDROCK_SECRET_ACCESS_KEY": "mock"}
    env = {"OPENAI_API_KEY": "", "SKYLOOP_HEARTBEAT_S": "15", **bedrock}
    proc = _start(["dev", "--port", str(port), "--ephemeral"], log, env)
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
    runners = LOOPBACK.get(f"{live_server}/v1/runners", timeout=10).json()["data"]
    runner_id = runners[0]["runner_id"]
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        status = LOOPBACK.get(f"{live_server}/v1/runners/{runner_id}/status", timeout=10).json()
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
    assert url, "configure_mock_llm needs the mock LLM's URL (the mock_llm_server_url fixture)"
    if match is not None and key == "default":
        key = match
    body: dict[str, Any] = {"key": key, "responses": responses}
    if match is not None:
        body["match"] = match
    LOOPBACK.post(f"{url}/mock/configure", json=body, timeout=5).raise_for_status()


def reset_mock_llm(url: str | None) -> None:
    assert url, "reset_mock_llm needs the mock LLM's URL (the mock_llm_server_url fixture)"
    LOOPBACK.post(f"{url}/mock/reset", timeout=5).raise_for_status()


def get_mock_requests(url: str | None, *, key: str | None = None) -> list[dict[str, Any]]:
    assert url, "get_mock_requests needs the mock LLM's URL (the mock_llm_server_url fixture)"
    r = LOOPBACK.get(f"{url}/mock/requests", params={"key": key} if key else None, timeout=5)
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
    assert resp.status_code == 201, f"agent upload failed: {resp.status_code} {resp.text[:300]}"
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
    assert match, f"item {item_id} not in snapshot with a response_id"
    assert match[0].get("response_id"), f"item {item_id} not in snapshot with a response_id"
    return str(item_id)


def get_session_snapshot(http_client: httpx.Client, session_id: str) -> dict[str, Any]:
    resp = http_client.get(f"/v1/sessions/{session_id}")
    resp.raise_for_status()
    return dict(resp.json())


# ------------------------------------------------- stream watcher and event helpers (client calls,
# failures, history, agents). Imports are local so this block can be appended without touching the top.
if TYPE_CHECKING:
    from collections.abc import Callable

ECHO_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "Echo",
        "description": "Echo the given text back.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


def unique(prefix: str) -> str:
    import uuid

    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def message_event(text: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "message",
        "data": {"role": "user", "content": [{"type": "input_text", "text": text}]},
    }
    if tools is not None:
        body["tools"] = tools
    return body


def output_event(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "data": {"call_id": call_id, "output": output}}


def new_mock_agent_session(
    http_client: httpx.Client,
    mock_llm_server_url: str,
    prefix: str,
    responses: list[dict[str, Any]],
    *,
    extra: dict[str, Any] | None = None,
) -> tuple[str, str, str]:
    """Upload a uniquely named agent whose model key is scripted with ``responses``.

    Returns ``(agent_id, model, session_id)``; the session is the idle one the upload created,
    bound to the default runner.
    """
    name = unique(prefix)
    model = f"mock-{name}"
    configure_mock_llm(mock_llm_server_url, responses, key=model)
    executor = {
        "harness": "openai-agents",
        "model": model,
        "profile": "",
        "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{mock_llm_server_url}/v1"},
    }
    spec = {"name": name, "prompt": "You are a test agent.", "executor": executor, **(extra or {})}
    created = upload_agent(http_client, {f"{name}.yaml": json.dumps(spec)})
    return str(created["agent_id"]), model, str(created["session_id"])


def is_call_frame(frame: Any, status: str, call_id: str | None = None) -> bool:
    item = frame.data.get("item") or {}
    return (
        frame.data.get("type") == "response.output_item.done"
        and item.get("type") == "function_call"
        and item.get("status") == status
        and (call_id is None or item.get("call_id") == call_id)
    )


def is_type(etype: str) -> Any:
    return lambda frame: frame.data.get("type") == etype


class StreamWatcher:
    """Reads a session's live stream on a background thread so a test can post and then wait.

    ``start()`` returns once the first frame (the heartbeat) arrived, so anything posted
    afterwards is seen. Stored events are ``frames`` with an ``id``; heartbeats have none.
    """

    def __init__(
        self,
        base_url: str,
        session_id: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        import threading

        self.base_url = base_url
        self.session_id = session_id
        self.params = params
        self.headers = headers
        self.frames: list[Any] = []
        self.error: BaseException | None = None
        self.status_code: int | None = None
        self.closed = False
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from tests.e2e.sse import iter_frames

        try:
            with (
                httpx.Client(base_url=self.base_url, timeout=httpx.Timeout(30, read=None)) as client,
                client.stream(
                    "GET", f"/v1/sessions/{self.session_id}/stream", params=self.params, headers=self.headers
                ) as resp,
            ):
                self._response = resp
                self.status_code = resp.status_code
                resp.raise_for_status()
                for frame in iter_frames(resp):
                    with self._cond:
                        self.frames.append(frame)
                        self._cond.notify_all()
                    if self._stop.is_set():
                        return
        except BaseException as exc:
            if not self._stop.is_set():
                self.error = exc
        finally:
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    def start(self, timeout: float = 15.0) -> StreamWatcher:
        self._thread.start()
        first = self.wait_for(lambda f: True, timeout=timeout, what="the first frame")
        assert first.data.get("type") == "session.heartbeat", first.data
        return self

    def __enter__(self) -> StreamWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        import contextlib

        with contextlib.suppress(Exception):
            if self._response is not None:
                self._response.close()

    def count(self) -> int:
        with self._cond:
            return len(self.frames)

    def types(self) -> list[str]:
        with self._cond:
            return [f.data.get("type") for f in self.frames]

    def stored(self, start: int = 0) -> list[Any]:
        """Frames with an ``id`` (stored events), from index ``start``."""
        with self._cond:
            return [f for f in self.frames[start:] if f.id is not None]

    def matching(self, predicate: Callable[[Any], bool], start: int = 0) -> list[Any]:
        with self._cond:
            return [f for f in self.frames[start:] if predicate(f)]

    def wait_for(
        self,
        predicate: Callable[[Any], bool],
        *,
        count: int = 1,
        start: int = 0,
        timeout: float = 30.0,
        what: str = "a matching frame",
    ) -> Any:
        """Wait until ``count`` frames from index ``start`` match; returns the last of them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [f for f in self.frames[start:] if predicate(f)]
                if len(found) >= count:
                    return found[count - 1]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    types = [f.data.get("type") for f in self.frames]
                    raise AssertionError(
                        f"timed out waiting for {what} (x{count}); stream error={self.error!r}, "
                        f"status={self.status_code}, frames={types}"
                    )
                self._cond.wait(min(remaining, 0.5))

    def wait_terminal(self, *, start: int = 0, timeout: float = 30.0) -> Any:
        terminal = {"response.completed", "response.failed", "response.cancelled"}
        return self.wait_for(
            lambda f: f.data.get("type") in terminal, start=start, timeout=timeout, what="a terminal event"
        )


def wait_session_status(
    http_client: httpx.Client, session_id: str, statuses: set[str], timeout_s: float = 30.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        snap = get_session_snapshot(http_client, session_id)
        if snap["status"] in statuses:
            return snap
        if time.monotonic() > deadline:
            raise AssertionError(f"session {session_id} status {snap['status']!r}, wanted {statuses}")
        time.sleep(0.1)


# ------------------------------------------------------------- extra `skyloop dev` processes
class DevProcess:
    """A ``skyloop dev`` process started with its own environment; ``ready()`` waits for it."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
        self.proc = proc
        self.url = url
        self.log_path = log_path
        self._ready = False

    def ready(self) -> str:
        if not self._ready:
            _wait_ready(self.url, self.proc, self.log_path, "/health")
            self._ready = True
        return self.url


@pytest.fixture(scope="session")
def skyloop_dev_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., DevProcess]]:
    """Start extra ``skyloop dev`` processes with env overrides (e.g. ``SKYLOOP_STREAM_MAX_S``).

    ``factory(env, args)`` launches at once and returns a handle; call ``handle.ready()``
    for the URL, so a module can launch early and wait only when it needs it.
    Every process is stopped at the end of the session.
    """
    started: list[DevProcess] = []

    def launch(env: dict[str, str] | None = None, args: list[str] | None = None) -> DevProcess:
        port = _free_port()
        log = tmp_path_factory.mktemp("skyloop-dev-extra") / "dev.log"
        args = args or []
        if "--data-dir" not in args:
            args = [*args, "--ephemeral"]  # keeps nothing unless the test gives it a directory of its own
        proc = _start(["dev", "--port", str(port), *args], log, {"OPENAI_API_KEY": "", **(env or {})})
        handle = DevProcess(proc, f"http://127.0.0.1:{port}", log)
        started.append(handle)
        return handle

    try:
        yield launch
    finally:
        for handle in started:
            _stop(handle.proc)


# ------------------------------------------------------------------ more mock LLM helpers
def wait_for_gate(url: str, timeout_s: float = 20.0) -> None:
    """Wait until a ``block: true`` entry holds a model request at the mock's gate."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if LOOPBACK.get(f"{url}/gate/pending", timeout=5).json()["pending"]:
            return
        time.sleep(0.05)
    raise AssertionError(f"no model request reached the mock's gate within {timeout_s}s")


def release_gate(url: str) -> None:
    resp = LOOPBACK.post(f"{url}/gate/release", timeout=5)
    resp.raise_for_status()
    assert resp.json()["released"] is True, "no pending gate to release"


def function_tool(name: str, description: str = "a client-side test tool") -> dict[str, Any]:
    """A nested OpenAI function tool schema, as a client sends it with a message."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
        },
    }


def scripted_session(
    http_client: httpx.Client,
    *,
    mock_url: str,
    runner_id: str,
    kind: str,
    responses: list[dict[str, Any]],
) -> tuple[str, str]:
    """Reset the mock, register a uniquely named agent whose model is scripted with ``responses``,
    and open a runner-bound session for it. Returns ``(session_id, model)``."""
    import uuid

    uid = uuid.uuid4().hex[:8]
    model = f"mock-{kind}-{uid}"
    reset_mock_llm(mock_url)
    name = register_inline_agent(
        http_client, name=f"{kind}-{uid}", model=model, mock_llm_base_url=f"{mock_url}/v1"
    )
    configure_mock_llm(mock_url, responses, key=model)
    return create_runner_bound_session(http_client, agent_name=name, runner_id=runner_id), model


def wait_status(
    http_client: httpx.Client, session_id: str, status: str = "idle", timeout_s: float = 30.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snap = get_session_snapshot(http_client, session_id)
        if snap["status"] == status:
            return snap
        time.sleep(0.05)
    raise AssertionError(f"session {session_id} not {status} after {timeout_s}s")


def input_texts(request_body: dict[str, Any]) -> list[str]:
    """The text of every message in a captured Responses request's ``input``, in order."""
    texts: list[str] = []
    for item in request_body.get("input") or []:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return texts
