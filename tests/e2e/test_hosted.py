"""Hosted tools on real ``skyloop dev`` processes, over HTTP and SSE, with no client connected.

The agents' tools are ``{type: hosted}``: Bash, Read, Write, Edit, Glob and Grep run on the stack,
in the session's workspace (bubblewrap), and nobody answers anything. The model is the mock LLM,
scripted per test. What is checked is what a client can see: the session's items, its stream read
over a plain socket (:class:`tests.e2e.sse.SseSocket`), the workspace API
(``GET /v1/sessions/{id}/workspace``, ``.../workspace/content``) and, with a data directory, the
workspace's directory itself (``<data dir>/workspaces/<session id>``).

* one turn writes, runs, edits, reads and searches; the calls, their outputs and the Bash call's
  streamed output are on the stream and in the items;
* the workspace, and the fact that it was made (its ``setup`` ran once), outlive a restart of the
  stack on its data directory: a new turn of the same session reads the file;
* a scheduled task's run, fired with nobody connected, writes a file and completes; the file is
  listed for the run's session;
* deleting a session removes its workspace directory, and only its own.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.e2e.conftest import ORIGIN, configure_mock_llm, message_event, unique, upload_agent, wait_status
from tests.e2e.restarts import STOPS, Stack, no_traceback
from tests.e2e.sse import SseSocket, TimedFrame, of_type

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.e2e.conftest import DevProcess

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

HOSTED = {name: {"type": "hosted"} for name in ("Bash", "Read", "Write", "Edit", "Glob", "Grep")}
TURN_S = 60.0  # a turn of several hosted calls on a shared, loaded machine


# ------------------------------------------------------------------------------------- helpers
def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"call_id": call_id, "name": name, "arguments": arguments}]}


def hosted_agent(
    http: httpx.Client,
    mock_url: str,
    responses: list[dict[str, Any]],
    *,
    environment: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """Upload an agent with the six hosted tools whose model is scripted with ``responses``.

    Returns ``(agent_id, session_id)``: the session is the one the upload opened.
    """
    name = unique("hosted")
    model = f"mock-{name}"
    configure_mock_llm(mock_url, responses, key=model)
    spec: dict[str, Any] = {
        "name": name,
        "prompt": "You maintain the project in /workspace.",
        "executor": {
            "harness": "openai-agents",
            "model": model,
            "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{mock_url}/v1"},
        },
        "tools": HOSTED,
    }
    if environment is not None:
        spec["environment"] = environment
    created = upload_agent(http, {f"{name}.yaml": json.dumps(spec)})
    return str(created["agent_id"]), str(created["session_id"])


def open_stream(base_url: str, session_id: str) -> SseSocket:
    stream = SseSocket(base_url, f"/v1/sessions/{session_id}/stream")
    assert stream.status == 200, stream.status
    first = stream.next_frame(15)
    assert first is not None, "no first frame on the stream"
    assert first.data["type"] == "session.heartbeat", first.data
    return stream


def post_message(http: httpx.Client, session_id: str, text: str) -> None:
    resp = http.post(f"/v1/sessions/{session_id}/events", json=message_event(text))
    assert resp.status_code == 202, f"{resp.status_code} {resp.text[:300]}"


def run_turn(http: httpx.Client, base_url: str, session_id: str, text: str) -> list[TimedFrame]:
    """Post a message with the stream open and read it to the turn's terminal event; the turn
    must complete (nobody answers anything: every call runs on the server)."""
    with open_stream(base_url, session_id) as stream:
        post_message(http, session_id, text)
        end = stream.read_until(
            of_type("response.completed", "response.failed", "response.cancelled"), TURN_S
        )
        assert end.data["type"] == "response.completed", end.data
        frames = list(stream.frames)
    wait_status(http, session_id, "idle")
    return frames


def output_items(http: httpx.Client, session_id: str) -> dict[str, dict[str, Any]]:
    """The session's function_call_output items (their data), by call id."""
    resp = http.get(f"/v1/sessions/{session_id}/items", params={"limit": 100})
    assert resp.status_code == 200, resp.text
    out: dict[str, dict[str, Any]] = {}
    for item in resp.json()["data"]:
        data = item.get("data", item)
        if item["type"] == "function_call_output":
            out[data["call_id"]] = data
    return out


def outputs(http: httpx.Client, session_id: str) -> dict[str, str]:
    return {call_id: data["output"] for call_id, data in output_items(http, session_id).items()}


def workspace(http: httpx.Client, session_id: str) -> list[tuple[str, str, int]]:
    resp = http.get(f"/v1/sessions/{session_id}/workspace")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["root"] == "/workspace", body
    return [(e["path"], e["type"], e["bytes"]) for e in body["data"]]


def workspace_file(http: httpx.Client, session_id: str, path: str) -> httpx.Response:
    return http.get(f"/v1/sessions/{session_id}/workspace/content", params={"path": path})


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def hosted_stack(skyloop_dev_factory: Callable[..., DevProcess]) -> str:
    """A ``skyloop dev --ephemeral`` of this module's own: workspaces in a temporary directory."""
    return skyloop_dev_factory().ready()


@pytest.fixture
def http(hosted_stack: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=hosted_stack, timeout=30, headers={"Origin": ORIGIN}) as client:
        yield client


# --------------------------------------------------------------------------------------- tests
def test_a_hosted_turn_writes_runs_edits_reads_and_searches_with_nobody_connected(
    hosted_stack: str, http: httpx.Client, mock_llm_server_url: str
) -> None:
    # Breaks if a hosted call waited for a client (the turn would park, no output would come), if a
    # tool did not run in the session's workspace (the next call would not see the file), if an output
    # were not recorded as the call's item or not published, or if a command's output did not stream
    # while it ran (no response.function_call_output.delta).
    _agent_id, session_id = hosted_agent(
        http,
        mock_llm_server_url,
        [
            call("w", "Write", file_path="notes/a.txt", content="hello world\nsecond line\n"),
            call("b", "Bash", command="cat notes/a.txt && ls notes"),
            call("e", "Edit", file_path="/workspace/notes/a.txt", old_string="world", new_string="there"),
            call("r", "Read", file_path="notes/a.txt"),
            call("g", "Grep", pattern="there", output_mode="content"),
            call("l", "Glob", pattern="**/*.txt"),
            {"text": "all done"},
        ],
    )
    frames = run_turn(http, hosted_stack, session_id, "work on the notes")

    expected = {
        "w": "Successfully wrote /workspace/notes/a.txt",
        "b": "hello world\nsecond line\na.txt",
        "e": "Replaced 1 occurrence(s) in /workspace/notes/a.txt",
        "r": "1\thello there\n2\tsecond line",
        "g": "/workspace/notes/a.txt:1:hello there",
        "l": "/workspace/notes/a.txt",
    }
    # the items: every call's output, the command's with its exit code
    items = output_items(http, session_id)
    assert {k: v["output"] for k, v in items.items()} == expected
    details = items["b"]["details"]
    assert (details["kind"], details["exit_code"], details["timed_out"]) == ("command", 0, False)
    assert details["command"] == "cat notes/a.txt && ls notes"
    assert items["w"]["details"] == {"kind": "file", "path": "/workspace/notes/a.txt"}

    # the stream: each call announced in_progress (a server call: never action_required), then its output
    done_items = [f.data["item"] for f in frames if f.data.get("type") == "response.output_item.done"]
    calls = [i for i in done_items if i["type"] == "function_call"]
    assert {i["call_id"]: i["name"] for i in calls if i["status"] == "in_progress"} == {
        "w": "Write", "b": "Bash", "e": "Edit", "r": "Read", "g": "Grep", "l": "Glob",
    }  # fmt: skip
    assert not [i for i in calls if i["status"] == "action_required"]
    streamed = {i["call_id"]: i["output"] for i in done_items if i["type"] == "function_call_output"}
    assert streamed == expected
    # in order: a call's announcement comes before its output
    order = [
        (i["type"], i["call_id"])
        for i in done_items
        if i["type"] == "function_call_output" or i.get("status") == "in_progress"
    ]
    for call_id in expected:
        assert order.index(("function_call", call_id)) < order.index(("function_call_output", call_id))
    # the command's output streamed while it ran, before its item
    deltas = [
        (n, f.data["delta"])
        for n, f in enumerate(frames)
        if f.data.get("type") == "response.function_call_output.delta" and f.data.get("call_id") == "b"
    ]
    assert deltas, [f.data.get("type") for f in frames]
    assert "".join(d for _, d in deltas).startswith("hello world")
    bash_output_at = next(
        n
        for n, f in enumerate(frames)
        if f.data.get("type") == "response.output_item.done"
        and f.data["item"]["type"] == "function_call_output"
        and f.data["item"]["call_id"] == "b"
    )
    assert deltas[0][0] < bash_output_at
    # the final answer, and the file as the workspace API shows it
    text = "".join(
        f.data.get("delta", "") for f in frames if f.data.get("type") == "response.output_text.delta"
    )
    assert text == "all done"
    assert workspace(http, session_id) == [("/workspace/notes/a.txt", "file", 24)]
    content = workspace_file(http, session_id, "/workspace/notes/a.txt")
    assert (content.status_code, content.text) == (200, "hello there\nsecond line\n")


@pytest.mark.parametrize("how", STOPS)
def test_the_workspace_and_its_setup_outlive_a_restart_on_the_data_directory(
    tmp_path: Path, mock_llm_server_url: str, how: signal.Signals
) -> None:
    # Breaks if the workspace were not kept under the data directory (or not found there again after a
    # restart: the Read would say "no such file"), or if the fact that it was made were lost (its setup
    # would run again: two lines in setup.log).
    stack = Stack(tmp_path)
    try:
        stack.start()
        with stack.client() as http:
            _agent_id, session_id = hosted_agent(
                http,
                mock_llm_server_url,
                [
                    call("w", "Write", file_path="src/kept.txt", content="written before the restart\n"),
                    {"text": "written"},
                    call("r", "Read", file_path="/workspace/src/kept.txt"),
                    call("s", "Bash", command="cat setup.log; ls src"),
                    {"text": "read"},
                ],
                environment={"type": "hosted", "network": "none", "setup": ["echo made >> setup.log"]},
            )
            run_turn(http, stack.url, session_id, "write it")
            assert outputs(http, session_id) == {"w": "Successfully wrote /workspace/src/kept.txt"}

        stack.stop(how)
        stack.start()

        with stack.client() as http:
            listed = workspace(http, session_id)
            assert listed == [
                ("/workspace/setup.log", "file", 5),
                ("/workspace/src/kept.txt", "file", 27),
            ]
            run_turn(http, stack.url, session_id, "read it back")
            seen = outputs(http, session_id)
            assert seen["r"] == "1\twritten before the restart"
            assert seen["s"] == "made\nkept.txt"  # the setup ran once, before the restart
            content = workspace_file(http, session_id, "/workspace/src/kept.txt")
            assert (content.status_code, content.text) == (200, "written before the restart\n")
        # where it was kept: the session's directory under the data directory
        on_disk = stack.data_dir / "workspaces" / session_id
        assert (on_disk / "src" / "kept.txt").read_text() == "written before the restart\n"
        no_traceback(stack)
    finally:
        if stack.proc is not None:
            stack.stop(signal.SIGKILL)


SCHEDULE_RUN_S = 60.0


def test_a_scheduled_run_writes_a_file_with_nobody_connected_and_it_is_listed(
    http: httpx.Client, mock_llm_server_url: str
) -> None:
    # Breaks if a scheduled run's hosted call needed a client (the run would stay running or fail),
    # if the run's turn did not complete, or if the file were not in the run's session's workspace.
    agent_id, _session_id = hosted_agent(
        http,
        mock_llm_server_url,
        [
            call("w", "Write", file_path="reports/morning.md", content="# Morning\nall green\n"),
            {"text": "report written"},
        ],
    )
    body = {
        "name": unique("hosted-task"),
        "prompt": "Write the morning report.",
        "agent_id": agent_id,
        "rrule": "FREQ=DAILY;BYHOUR=9;BYMINUTE=0",
        "timezone": "UTC",
    }
    created = http.post("/v1/scheduled-tasks", json=body)
    assert created.status_code == 200, created.text
    task_id = created.json()["id"]
    try:
        fired = http.post(f"/v1/scheduled-tasks/{task_id}/run")  # run now; nobody watches the session
        assert fired.status_code == 202, fired.text
        run_id = fired.json()["run_id"]
        deadline = time.monotonic() + SCHEDULE_RUN_S
        run: dict[str, Any] = {}
        while time.monotonic() < deadline:
            runs = http.get(f"/v1/scheduled-tasks/{task_id}/runs").json()["runs"]
            run = next(r for r in runs if r["id"] == run_id)
            if run["status"] not in ("scheduled", "running"):
                break
            time.sleep(0.25)
        assert (run["status"], run["error_code"]) == ("succeeded", None), run
        session_id = run["conversation_id"]
        assert outputs(http, session_id) == {"w": "Successfully wrote /workspace/reports/morning.md"}
        assert workspace(http, session_id) == [("/workspace/reports/morning.md", "file", 20)]
        content = workspace_file(http, session_id, "/workspace/reports/morning.md")
        assert (content.status_code, content.text) == (200, "# Morning\nall green\n")
    finally:
        http.delete(f"/v1/scheduled-tasks/{task_id}")


def test_deleting_a_session_removes_its_workspace_directory_and_only_its_own(
    tmp_path: Path, skyloop_dev_factory: Callable[..., DevProcess], mock_llm_server_url: str
) -> None:
    # Breaks if delete left the session's workspace on disk, or removed another session's.
    data_dir = tmp_path / "data"
    url = skyloop_dev_factory(args=["--data-dir", str(data_dir)]).ready()
    with httpx.Client(base_url=url, timeout=30, headers={"Origin": ORIGIN}) as http:
        script = [call("w", "Write", file_path="mine.txt", content="x"), {"text": "ok"}]
        agent_id, doomed = hosted_agent(http, mock_llm_server_url, script * 2)
        kept = http.post("/v1/sessions", json={"agent_id": agent_id})
        assert kept.status_code == 201, kept.text
        kept_id = kept.json()["id"]
        run_turn(http, url, doomed, "write")
        run_turn(http, url, kept_id, "write")
        root = data_dir / "workspaces"
        assert (root / doomed / "mine.txt").read_text() == "x"
        assert (root / kept_id / "mine.txt").read_text() == "x"

        deleted = http.delete(f"/v1/sessions/{doomed}")
        assert deleted.status_code == 200, deleted.text

        assert not (root / doomed).exists()
        assert (root / kept_id / "mine.txt").read_text() == "x"
        assert http.get(f"/v1/sessions/{doomed}/workspace").status_code == 404
        assert workspace(http, kept_id) == [("/workspace/mine.txt", "file", 1)]
