"""The SDK (``skyloop.client``) against real ``skyloop dev`` and ``skyloop mock-llm`` processes.

Client-side tools run locally through ``Session.send``/``run``, and a stream
cut in the middle of a turn (by a TCP proxy the test owns) is resumed with
``Last-Event-ID`` without losing or repeating an event, checked against a raw
replay of the session's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from skyloop.client import (
    AsyncClient,
    Client,
    FunctionCallItem,
    FunctionCallOutputItem,
    OutputItemDone,
    ResponseCompleted,
    ToolCall,
)
from tests.e2e.conftest import LOOPBACK, configure_mock_llm

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.e2e

TERMINAL = {"response.completed", "response.failed", "response.cancelled"}


# --------------------------------------------------------------------------- helpers
@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The SDK must talk to the test's server with no token, whatever the machine has configured."""
    monkeypatch.delenv("SKYLOOP_URL", raising=False)
    monkeypatch.delenv("SKYLOOP_TOKEN", raising=False)
    monkeypatch.setenv("SKYLOOP_CONFIG", str(tmp_path / "no-config.toml"))


def scripted_agent(mock_url: str, responses: list[dict[str, Any]]) -> dict[str, Any]:
    """A uniquely named agent spec whose model key the mock answers with ``responses``."""
    name = f"sdk-{uuid.uuid4().hex[:8]}"
    model = f"mock-{name}"
    configure_mock_llm(mock_url, responses, key=model)
    return {
        "name": name,
        "prompt": "You are a coding assistant.",
        "executor": {
            "harness": "openai-agents",
            "model": model,
            "profile": "",
            "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{mock_url}/v1"},
        },
    }


def wait_for_gate(mock_url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if LOOPBACK.get(f"{mock_url}/gate/pending", timeout=5).json()["pending"]:
            return
        time.sleep(0.05)
    raise AssertionError(f"no model request reached the mock's gate within {timeout_s}s")


def release_gate(mock_url: str) -> None:
    assert LOOPBACK.post(f"{mock_url}/gate/release", timeout=5).json()["released"] is True


def raw_replay(base_url: str, session_id: str, through: int) -> list[tuple[int, str]]:
    """``(id, type)`` of every stored event up to ``through``, via plain httpx from ``Last-Event-ID: 0``."""
    out: list[tuple[int, str]] = []
    headers = {"Last-Event-ID": "0", "Accept": "text/event-stream"}
    with (
        httpx.Client(base_url=base_url, timeout=httpx.Timeout(10, read=20)) as http,
        http.stream("GET", f"/v1/sessions/{session_id}/stream", headers=headers) as resp,
    ):
        assert resp.status_code == 200
        buffer = ""
        for chunk in resp.iter_text():
            buffer += chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
                if "id" in fields:
                    out.append((int(fields["id"]), json.loads(fields["data"])["type"]))
                    if int(fields["id"]) >= through:
                        return out
    raise AssertionError(f"replay ended before event {through}")


class CuttableProxy:
    """A TCP proxy on 127.0.0.1 whose open connections the test can cut at will, like a network drop.

    New connections keep being accepted after a cut, so a client can reconnect through it.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._pairs.append((downstream, upstream))
                self.accepted += 1
            threading.Thread(target=self._pump, args=(downstream, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, downstream), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> int:
        """Drop every open connection; returns how many there were."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()


@pytest.fixture
def proxy(live_server: str) -> Iterator[CuttableProxy]:
    port = int(live_server.rsplit(":", 1)[1])
    p = CuttableProxy(port)
    try:
        yield p
    finally:
        p.close()


def stored_ids(events: list[Any]) -> list[int]:
    return [e.event_id for e in events if e.event_id is not None]


# ----------------------------------------------------------------------------- tests
def test_coding_tool_turn_through_the_sdk(
    live_server: str, live_runner_id: str, mock_llm_server_url: str, sample_code_dir: Path
) -> None:
    # Given an agent whose model calls Glob, then answers
    spec = scripted_agent(
        mock_llm_server_url,
        [
            {
                "tool_calls": [
                    {
                        "call_id": "call_glob",
                        "name": "Glob",
                        "arguments": json.dumps({"pattern": "**/*.py", "path": str(sample_code_dir)}),
                    }
                ]
            },
            {"text": "There are two Python files: calculator.py and utils.py."},
        ],
    )
    ran: list[tuple[str, str]] = []

    def on_tool_end(call: ToolCall, output: str) -> None:
        ran.append((call.name, output))

    with Client(live_server) as client:
        created = client.register_agent(spec)
        assert created.agent_name == spec["name"]
        session = client.session(created.session_id, tools="coding", on_tool_end=on_tool_end)

        # When the user sends a message through the SDK
        turn = session.send("List the Python files")
        events = list(turn)
        result = turn.result

        # Then the tool ran here, its output went back, and the turn completed
        assert result is not None
        assert result.status == "completed", result.error
        assert result.text == "There are two Python files: calculator.py and utils.py."
        assert [name for name, _ in ran] == ["Glob"]
        assert str(sample_code_dir / "calculator.py") in ran[0][1]
        parked = [e for e in events if isinstance(e, OutputItemDone) and isinstance(e.item, FunctionCallItem)]
        assert [e.item.status for e in parked] == ["action_required", "completed"]
        outputs = [i for i in result.items if isinstance(i, FunctionCallOutputItem)]
        assert [(o.call_id, o.output) for o in outputs] == [("call_glob", ran[0][1])]
        assert isinstance(events[-1], ResponseCompleted)
        assert stored_ids(events) == sorted(set(stored_ids(events)))

        # And the session's history holds the call and its output
        kinds = [i.type for i in client.iter_items(created.session_id)]
        assert kinds == ["message", "function_call", "function_call_output", "message"]
        assert client.get_session(created.session_id).status == "idle"


def test_python_tool_that_raises_is_answered_with_an_error(
    live_server: str, live_runner_id: str, mock_llm_server_url: str
) -> None:
    # Given a model that calls a Python tool which raises, then a declared tool this client cannot run
    spec = scripted_agent(
        mock_llm_server_url,
        [
            {"tool_calls": [{"call_id": "call_div", "name": "divide", "arguments": '{"a": 1, "b": 0}'}]},
            {"tool_calls": [{"call_id": "call_ghost", "name": "ghost", "arguments": "{}"}]},
            {"text": "Division by zero is undefined."},
        ],
    )

    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    ghost = {"type": "function", "function": {"name": "ghost", "description": "Declared, not implemented."}}

    with Client(live_server) as client:
        created = client.register_agent(spec)
        result = client.session(created.session_id).run("1/0?", tools=[divide, ghost])

    # Then each call got an error output and the turn still completed
    assert result.status == "completed", result.error
    outputs = {i.call_id: i.output for i in result.items if isinstance(i, FunctionCallOutputItem)}
    assert outputs["call_div"] == "Error: divide failed: ZeroDivisionError: float division by zero"
    assert outputs["call_ghost"] == "Error: tool 'ghost' has no implementation in this client"
    assert result.text == "Division by zero is undefined."


def test_async_client_runs_the_same_turn(
    live_server: str, live_runner_id: str, mock_llm_server_url: str, sample_code_dir: Path
) -> None:
    spec = scripted_agent(
        mock_llm_server_url,
        [
            {
                "tool_calls": [
                    {
                        "call_id": "call_glob",
                        "name": "Glob",
                        "arguments": json.dumps({"pattern": "*.py", "path": str(sample_code_dir)}),
                    }
                ]
            },
            {"text": "Two files."},
        ],
    )

    async def main() -> Any:
        async with AsyncClient(live_server) as client:
            created = await client.register_agent(spec)
            session = client.session(created.session_id, tools="coding")
            turn = session.send("List the Python files")
            events = [event async for event in turn]
            return turn.result, events

    result, events = asyncio.run(main())
    assert result.status == "completed", result.error
    assert result.text == "Two files."
    outputs = [i.output for i in result.items if isinstance(i, FunctionCallOutputItem)]
    assert len(outputs) == 1
    assert str(sample_code_dir / "utils.py") in outputs[0]
    assert stored_ids(events) == sorted(set(stored_ids(events)))


def test_stream_cut_mid_turn_is_resumed_without_missing_or_repeated_events(
    live_server: str,
    live_runner_id: str,
    mock_llm_server_url: str,
    sample_code_dir: Path,
    proxy: CuttableProxy,
) -> None:
    # Given a turn whose two model calls each block at the mock's gate
    spec = scripted_agent(
        mock_llm_server_url,
        [
            {
                "block": True,
                "tool_calls": [
                    {
                        "call_id": "call_glob",
                        "name": "Glob",
                        "arguments": json.dumps({"pattern": "*.py", "path": str(sample_code_dir)}),
                    }
                ],
            },
            {"block": True, "text": "Resumed and done."},
        ],
    )
    cuts: list[int] = []
    failures: list[BaseException] = []

    def network_trouble() -> None:
        """While each model call is held, cut every connection of the client, then let the model go."""
        try:
            for _ in range(2):
                wait_for_gate(mock_llm_server_url)
                cuts.append(proxy.cut())
                time.sleep(0.3)  # let the client notice and reconnect while the turn is still held
                release_gate(mock_llm_server_url)
        except BaseException as exc:
            failures.append(exc)

    with Client(live_server) as direct:
        session_id = direct.register_agent(spec).session_id

    # When the SDK drives the turn through the proxy and the network drops twice mid-turn
    trouble = threading.Thread(target=network_trouble, daemon=True)
    with Client(proxy.url) as client:
        turn = client.session(session_id, tools="coding").send("List the Python files")
        trouble.start()
        events = list(turn)
    trouble.join(timeout=30)
    assert not failures, failures

    # Then the turn completed after transparent reconnects
    result = turn.result
    assert result is not None
    assert result.status == "completed", result.error
    assert result.text == "Resumed and done."
    assert len(cuts) == 2
    assert all(n >= 1 for n in cuts), cuts  # the stream's connection was among those cut
    assert turn.reconnects >= 2
    assert proxy.accepted >= 3

    # And the SDK saw exactly the stored events a full replay from Last-Event-ID 0 shows, once each
    seen = [(e.event_id, e.type) for e in events if e.event_id is not None]
    assert seen[-1][1] == "response.completed"
    replayed = raw_replay(live_server, session_id, through=seen[-1][0])
    assert seen == [r for r in replayed if r[0] >= seen[0][0]]
    assert seen[0][0] == 1  # a fresh session: the SDK's view starts at the first event
    unnumbered = {e.type for e in events if e.event_id is None}
    assert unnumbered == {"session.heartbeat"}  # only heartbeats (one or more per connection) lack ids


@pytest.mark.parametrize("beats", [True, False], ids=["heartbeats", "silent"])
def test_a_slow_tool_keeps_its_turn_alive_with_heartbeats_a_silent_client_loses_it(
    live_server: str,
    live_runner_id: str,
    mock_llm_server_url: str,
    monkeypatch: pytest.MonkeyPatch,
    beats: bool,
) -> None:
    from skyloop.client import _turn

    # Given an agent that wants a heartbeat every 2 s while it waits, and a tool that takes 4 s (10 s
    # without heartbeats: the missed one is noticed on a loaded machine well before the output comes)
    monkeypatch.setattr(_turn, "HEARTBEAT_S", 0.3 if beats else 3600.0)
    tool_s = 4 if beats else 10
    spec = scripted_agent(
        mock_llm_server_url,
        [{"tool_calls": [{"call_id": "call_slow", "name": "slow", "arguments": "{}"}]}, {"text": "Done."}],
    )
    spec["limits"] = {"client_tool_timeout_s": 600, "client_heartbeat_s": 2}

    def slow() -> str:
        """Take its time."""
        time.sleep(tool_s)
        return "ok"

    # When the SDK runs the tool
    with Client(live_server) as client:
        created = client.register_agent(spec)
        result = client.session(created.session_id).run("go", tools=[slow])
    # Then its heartbeats kept the turn parked until the output came; without them it failed on its
    # heartbeat, long before the deadline
    if beats:
        assert result.status == "completed", result.error
        assert result.text == "Done."
    else:
        assert result.status == "failed"
        assert result.error is not None
        assert result.error.code == "client_heartbeat_timeout"
