"""``skyloop dev`` keeps its data: real stacks on a data directory, stopped with SIGTERM or SIGKILL, started again.

Each test owns a data directory under ``tmp_path`` and restarts the stack on
the same port, as a developer would. What a 2xx acknowledged must be there
after any stop; a turn parked on a client call or an approval waits again
(with its deadline); a turn whose model call was in flight continues; a
stream resumed with ``Last-Event-ID`` across the restart sees every event
exactly once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.e2e.conftest import (
    ECHO_TOOL,
    StreamWatcher,
    get_mock_requests,
    is_call_frame,
    is_type,
    message_event,
    output_event,
    wait_status,
)
from tests.e2e.restarts import (
    RESTART_TURN_S,
    STOPS,
    Stack,
    echo_call,
    no_traceback,
    scripted_agent,
    state_of,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path)
    try:
        yield running
    finally:
        if running.proc is not None and running.proc.poll() is None:
            running.stop(signal.SIGKILL)


# ------------------------------------------------------------------------------------------ data
@pytest.mark.parametrize("how", STOPS)
def test_acknowledged_agents_sessions_items_files_and_tokens_survive_a_stop(
    tmp_path: Path, mock_llm_server_url: str, how: signal.Signals
) -> None:
    # Given a stack that requires tokens, with a token made at start and one made later with the CLI
    stack = Stack(tmp_path, "--require-token")
    try:
        stack.start()
        token = stack.banner("bearer token")
        created = subprocess.run(
            [sys.executable, "-m", "skyloop", "token", "create", "--table", "skyloop-local", "--name", "later",
             "--endpoint-url", stack.banner("moto endpoint"), "--region", "us-east-1"],
            capture_output=True, text=True, check=True,
            env={**stack.env, "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"},
        )  # fmt: skip
        later = created.stdout.strip().splitlines()[-1]
        with stack.client(token) as http:
            assert http.get("/v1/sessions").status_code == 200
            with stack.client(later) as other:
                assert other.get("/v1/sessions").status_code == 200, created.stdout
            # and an agent (its model key goes to Secrets Manager), sessions, a finished turn, a file
            agent_id, _model, session_id = scripted_agent(
                http, mock_llm_server_url, [{"text": "before the stop"}, {"text": "after the stop"}]
            )
            assert (
                http.post(f"/v1/sessions/{session_id}/events", json=message_event("hello")).status_code == 202
            )
            wait_status(http, session_id, "idle")
            second = http.post("/v1/sessions", json={"agent_id": agent_id}).json()["id"]
            upload = http.post(
                f"/v1/sessions/{second}/resources/files",
                files={"file": ("notes.txt", b"kept across restarts\n" * 100, "text/plain")},
            )
            assert upload.status_code == 201, upload.text
            before = state_of(http)
        assert before["sessions"][session_id]["items"], before

        # When the stack is stopped and started again on the same directory
        stack.stop(how)
        stack.start()

        # Then everything acknowledged is there, both tokens still work, and a forged one does not
        with stack.client(token) as http:
            assert state_of(http) == before
            with stack.client(later) as other:
                assert other.get("/v1/sessions").status_code == 200
            with stack.client("sk-forged") as forged:
                assert forged.get("/v1/sessions").status_code == 401
            # and the agent's model key survived too: its next turn calls the model with it
            last = before["sessions"][session_id]["last_event_id"]
            assert (
                http.post(f"/v1/sessions/{session_id}/events", json=message_event("again")).status_code == 202
            )
            snap = wait_status(http, session_id, "idle")
            assert snap["last_event_id"] > last
            assert [i["data"]["content"][0]["text"] for i in snap["items"] if i["type"] == "message"][-1] == (
                "after the stop"
            )
        no_traceback(stack)
    finally:
        if stack.proc is not None:
            stack.stop(signal.SIGKILL)


def test_kill_9_right_after_2xx_loses_nothing(stack: Stack) -> None:
    # Given four clients creating sessions as fast as the stack answers
    stack.start()
    with stack.client() as http:
        agent_id = http.get("/v1/sessions", params={"agent_name": "coder", "limit": 1}).json()["data"][0][
            "agent_id"
        ]
    acknowledged: list[str] = []
    stop = threading.Event()

    def create() -> None:
        with stack.client() as http:
            while not stop.is_set():
                try:
                    r = http.post("/v1/sessions", json={"agent_id": agent_id})
                except httpx.HTTPError:
                    return
                if r.status_code == 201:
                    acknowledged.append(r.json()["id"])

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(3)

    # When the stack is killed in the middle of it
    stack.stop(signal.SIGKILL)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert len(acknowledged) > 10, acknowledged

    # Then every session whose creation was answered 201 is there after a restart
    stack.start()
    with stack.client() as http:
        missing = [sid for sid in acknowledged if http.get(f"/v1/sessions/{sid}").status_code != 200]
    assert missing == [], f"{len(missing)} of {len(acknowledged)} acknowledged sessions are gone"


# ------------------------------------------------------------------------------------------ turns
@pytest.mark.parametrize("how", STOPS)
def test_a_parked_call_is_answered_after_a_restart_and_the_resumed_stream_sees_each_event_once(
    stack: Stack, mock_llm_server_url: str, how: signal.Signals
) -> None:
    # Given a turn parked on a client call, watched by a stream
    stack.start()
    with stack.client() as http:
        _, _, session_id = scripted_agent(
            http, mock_llm_server_url, [echo_call("call_kept"), {"text": "done"}]
        )
        with StreamWatcher(stack.url, session_id) as before:
            assert (
                http.post(
                    f"/v1/sessions/{session_id}/events", json=message_event("go", [ECHO_TOOL])
                ).status_code
                == 202
            )
            before.wait_for(
                lambda f: is_call_frame(f, "action_required", "call_kept"), what="the parked call"
            )
            seen_before = [(f.id, f.data["type"]) for f in before.stored()]

    # When the stack stops and starts again
    stack.stop(how)
    ready = stack.start()

    # Then the call is still answerable, the turn completes, and the stream resumed with Last-Event-ID
    # after the restart shows every later event once
    last = seen_before[-1][0]
    with (
        stack.client() as http,
        StreamWatcher(stack.url, session_id, headers={"Last-Event-ID": str(last)}) as after,
    ):
        snap = http.get(f"/v1/sessions/{session_id}").json()
        assert snap["status"] == "running", snap
        answer = http.post(f"/v1/sessions/{session_id}/events", json=output_event("call_kept", "echoed"))
        assert answer.status_code == 202, answer.text
        terminal = after.wait_terminal(timeout=30)
        assert terminal.data["type"] == "response.completed", after.types()
        assert time.monotonic() - ready < 30
        seen_after = [(f.id, f.data["type"]) for f in after.stored()]
        wait_status(http, session_id, "idle")
    with StreamWatcher(stack.url, session_id, params={"after": "0"}) as replay:
        replay.wait_terminal()
        full = [(f.id, f.data["type"]) for f in replay.stored()]
    ids = [i for i, _ in seen_before + seen_after]
    assert ids == list(range(1, len(ids) + 1)), ids
    assert seen_before + seen_after == full[: len(ids)]
    assert [t for _, t in full].count("response.completed") == 1
    parked = [f for f in replay.stored() if is_call_frame(f, "action_required")]
    assert len(parked) == 1, "the restart published the parked call a second time"
    no_traceback(stack)


def test_a_parked_turn_keeps_its_deadline_across_a_restart(stack: Stack, mock_llm_server_url: str) -> None:
    # Given a turn parked on a client call that is due in 12 s
    stack.start()
    with stack.client() as http:
        _, _, session_id = scripted_agent(
            http, mock_llm_server_url, [echo_call("call_late")], limits={"client_tool_timeout_s": 12}
        )
        with StreamWatcher(stack.url, session_id) as watch:
            http.post(f"/v1/sessions/{session_id}/events", json=message_event("go", [ECHO_TOOL]))
            watch.wait_for(lambda f: is_call_frame(f, "action_required"), what="the parked call")
            parked_at = time.monotonic()

    # When the stack is killed, stays down past that deadline, and is started again
    stack.stop(signal.SIGKILL)
    time.sleep(max(0.0, parked_at + 13 - time.monotonic()))
    stack.start()
    up = time.monotonic()

    # Then the turn fails at its original deadline (at once: it passed while the stack was down), not
    # 12 s after the restart (nor after the recovery, a second or two before the stack answers). (What is left of a deadline still ahead is counted from the call too:
    # tests/unit/test_recovery.py; measuring that here timed the restart under load, not the product.)
    with stack.client() as http:
        snap = wait_status(http, session_id, "failed", timeout_s=40)
    assert snap["last_task_error"]["code"] == "client_tool_timeout", snap
    assert time.monotonic() - up < 6, "the restart gave the parked call a new deadline"


def test_an_approval_waits_across_a_restart(stack: Stack, mock_llm_server_url: str) -> None:
    # Given a turn parked on the approval of a server tool
    stack.start()
    tools = {
        "smoke_echo": {
            "type": "lambda",
            "function": "smoke_echo",
            "description": "Echo",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
            "approval": "required",
        }
    }
    call = {
        "call_id": "call_approve",
        "name": "smoke_echo",
        "arguments": json.dumps({"text": "approved later"}),
    }
    with stack.client() as http:
        _, model, session_id = scripted_agent(
            http, mock_llm_server_url, [{"tool_calls": [call]}, {"text": "ran it"}], tools=tools
        )
        with StreamWatcher(stack.url, session_id) as watch:
            http.post(f"/v1/sessions/{session_id}/events", json=message_event("run it"))
            watch.wait_for(is_type("response.elicitation_request"), what="the approval request")

    # When the stack is killed and started again, and the approval arrives then
    stack.stop(signal.SIGKILL)
    stack.start()
    with stack.client() as http:
        answer = {"type": "approval", "data": {"elicitation_id": "approve_call_approve", "action": "accept"}}
        assert http.post(f"/v1/sessions/{session_id}/events", json=answer).status_code == 202

        # Then the tool runs and the turn completes, the model seeing the tool's output
        snap = wait_status(http, session_id, "idle", timeout_s=30)
    assert snap["last_task_error"] is None
    outputs = [
        i["output"]
        for i in get_mock_requests(mock_llm_server_url, key=model)[-1]["input"]
        if i.get("type") == "function_call_output"
    ]
    assert outputs == ["smoke_echo: approved later"], outputs


@pytest.mark.parametrize("how", STOPS)
def test_a_model_call_in_flight_continues_after_a_restart(
    stack: Stack, mock_llm_server_url: str, how: signal.Signals
) -> None:
    # Given a turn whose model takes 8 s to answer, stopped while it is thinking
    stack.start()
    with stack.client() as http:
        _, model, session_id = scripted_agent(
            http,
            mock_llm_server_url,
            [{"text": "too late", "delay_ms": 8000}, {"text": "answered after the restart", "stream": True}],
        )
        http.post(f"/v1/sessions/{session_id}/events", json=message_event("think"))
        deadline = time.monotonic() + 15
        while not get_mock_requests(mock_llm_server_url, key=model):
            assert time.monotonic() < deadline, "the model was never called"
            time.sleep(0.05)
    stack.stop(how)

    # When the stack starts again
    ready = stack.start()

    # Then within seconds the turn is continued from its last step: the model is called again
    # (viewers are told the attempt is a retry) and the turn completes, never left running
    with stack.client() as http:
        snap = wait_status(http, session_id, "idle", timeout_s=RESTART_TURN_S)
    assert time.monotonic() - ready <= RESTART_TURN_S
    texts = [i["data"]["content"][0]["text"] for i in snap["items"] if i["type"] == "message"]
    assert texts[-1] == "answered after the restart", texts
    with StreamWatcher(stack.url, session_id, params={"after": "0"}) as replay:
        replay.wait_terminal()
        types = [f.data["type"] for f in replay.stored()]
    assert types.count("response.retry") == 1, types
    assert types[-2:] == ["response.completed", "session.status"], types
    no_traceback(stack)
