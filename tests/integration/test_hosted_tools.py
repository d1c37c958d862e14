"""Hosted tools on moto: the real handlers and state machine run Bash, Read, Write, Edit, Glob and Grep
in the session's workspace (the local engine, bubblewrap), with no client connected.

The model is the mock LLM, scripted per test; each test's session has a
workspace of its own under a temporary directory (``SKYLOOP_WORKSPACES_DIR``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps, sessions
from skyloop.models.agent import AgentSpec

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from skyloop.models.session import Session
    from skyloop.store import StoredEvent
    from tests.integration.conftest import Api, MockLLM, Stack

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture(autouse=True)
def workspaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "workspaces"
    monkeypatch.setenv("SKYLOOP_WORKSPACES_DIR", str(root))
    deps.get_settings.cache_clear()
    yield root
    deps.get_settings.cache_clear()


HOSTED = {name: {"type": "hosted"} for name in ("Bash", "Read", "Write", "Edit", "Glob", "Grep")}


def hosted_session(
    aws: Stack, model: str, *, environment: dict[str, Any] | None = None, **tools: Any
) -> Session:
    spec = AgentSpec.model_validate(
        {
            "name": f"hosted-{uuid.uuid4().hex[:8]}",
            "prompt": "Use your tools.",
            "executor": {
                "harness": "openai-agents",
                "model": model,
                "auth": {"api_key": "mock-key", "base_url": aws.mock_llm.base_url},
            },
            "tools": {**HOSTED, **tools},
            **({"environment": environment} if environment is not None else {}),
        }
    )
    agent = sessions.register(spec)
    return sessions.create_session(aws.store, agent, sessions.Runners(deps.get_settings().default_runner_id))


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"call_id": call_id, "name": name, "arguments": arguments}


def outputs(aws: Stack, session_id: str) -> dict[str, str]:
    return {
        i.data["call_id"]: i.data["output"]
        for i in aws.store.list_items(session_id)
        if i.type == "function_call_output"
    }


def run_turn(aws: Stack, api: Api, session: Session, text: str = "go") -> None:
    before = aws.store.get_session(session.id).last_seq
    assert api.post_message(session.id, text).status == 202
    aws.wait_for_event(
        session.id,
        lambda e: e.seq > before and e.type == "session.status" and e.data["status"] == "idle",
        what="the turn's end",
    )


def of_type(events: list[StoredEvent], kind: str) -> list[StoredEvent]:
    return [e for e in events if e.type == kind]


def test_a_turn_writes_runs_edits_reads_and_searches_with_no_client(
    aws: Stack, api: Api, mock_llm: MockLLM, workspaces: Path
) -> None:
    key = mock_llm.script(
        {"tool_calls": [call("w", "Write", file_path="notes/a.txt", content="hello world\nsecond line\n")]},
        {"tool_calls": [call("b", "Bash", command="cat notes/a.txt && ls notes")]},
        {
            "tool_calls": [
                call("e", "Edit", file_path="/workspace/notes/a.txt", old_string="world", new_string="there")
            ]
        },
        {"tool_calls": [call("r", "Read", file_path="notes/a.txt")]},
        {"tool_calls": [call("g", "Grep", pattern="there", output_mode="content")]},
        {"tool_calls": [call("l", "Glob", pattern="**/*.txt")]},
        {"text": "done"},
    )
    session = hosted_session(aws, key)
    run_turn(aws, api, session)
    seen = outputs(aws, session.id)
    assert seen["w"] == "Successfully wrote /workspace/notes/a.txt"
    assert seen["b"] == "hello world\nsecond line\na.txt"
    assert seen["e"] == "Replaced 1 occurrence(s) in /workspace/notes/a.txt"
    assert seen["r"] == "1\thello there\n2\tsecond line"
    assert seen["g"] == "/workspace/notes/a.txt:1:hello there"
    assert seen["l"] == "/workspace/notes/a.txt"
    # the file is in the session's workspace, on the stack's disk
    assert (workspaces / session.id / "notes" / "a.txt").read_text() == "hello there\nsecond line\n"
    # the command's result is recorded with the call: exit code and duration
    items = {
        i.data.get("call_id"): i for i in aws.store.list_items(session.id) if i.type == "function_call_output"
    }
    details = items["b"].data["details"]
    assert details["exit_code"] == 0
    assert details["kind"] == "command"
    assert isinstance(details["duration_ms"], int)
    # its output streamed while it ran, then the item: all on the session's stream
    events = aws.events(session.id)
    deltas = [
        e.data["delta"]
        for e in of_type(events, "response.function_call_output.delta")
        if e.data["call_id"] == "b"
    ]
    assert "".join(deltas).startswith("hello world")
    outputs_done = [
        e.data["item"]
        for e in of_type(events, "response.output_item.done")
        if e.data["item"]["type"] == "function_call_output"
    ]
    assert {o["call_id"] for o in outputs_done} == {"w", "b", "e", "r", "g", "l"}
    # and the model read every output
    assert json.dumps(mock_llm.requests(key)[-1]["input"]).count("function_call_output") == 6


def test_the_next_turn_a_fork_and_a_delete_see_the_workspace_as_they_should(
    aws: Stack, api: Api, mock_llm: MockLLM, workspaces: Path
) -> None:
    key = mock_llm.script(
        {"tool_calls": [call("w", "Write", file_path="kept.txt", content="from turn one")]},
        {"text": "written"},
        {"tool_calls": [call("r", "Read", file_path="kept.txt")]},
        {"text": "read"},
    )
    session = hosted_session(aws, key)
    run_turn(aws, api, session)
    # the next turn reads what the first one wrote
    run_turn(aws, api, session, "again")
    assert outputs(aws, session.id)["r"] == "1\tfrom turn one"
    # a fork carries the workspace: its own copy
    forked = api.post_json(f"/v1/sessions/{session.id}/fork", {})
    assert forked.status == 201, forked.body
    fork_id = forked.body["id"]
    assert (workspaces / fork_id / "kept.txt").read_text() == "from turn one"
    (workspaces / fork_id / "kept.txt").write_text("changed in the fork")
    assert (workspaces / session.id / "kept.txt").read_text() == "from turn one"
    # the files API lists and downloads it
    listed = api.get(f"/v1/sessions/{fork_id}/workspace")
    assert listed.status == 200
    assert [(e["path"], e["bytes"]) for e in listed.body["data"]] == [("/workspace/kept.txt", 19)]
    content = api.call(
        "GET", f"/v1/sessions/{fork_id}/workspace/content", query={"path": "/workspace/kept.txt"}
    )
    assert content.status == 200
    assert content.body == "changed in the fork"
    assert (
        api.call("GET", f"/v1/sessions/{fork_id}/workspace/content", query={"path": "missing.txt"}).status
        == 404
    )
    outside = api.call("GET", f"/v1/sessions/{fork_id}/workspace/content", query={"path": "/etc/passwd"})
    assert outside.status == 400
    assert outside.error()["code"] == "invalid_input"
    # deleting a session removes its workspace, and only its own
    assert api.call("DELETE", f"/v1/sessions/{session.id}").status == 200
    assert not (workspaces / session.id).exists()
    assert (workspaces / fork_id / "kept.txt").exists()


def test_network_none_cannot_reach_a_server_on_loopback_and_public_can(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    accepted: list[bool] = []

    def accept() -> None:
        server.settimeout(30)
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(True)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')\""
    try:
        for network, connected in (("none", False), ("public", True)):
            key = mock_llm.script({"tool_calls": [call("n", "Bash", command=probe)]}, {"text": "tried"})
            session = hosted_session(aws, key, environment={"type": "hosted", "network": network})
            run_turn(aws, api, session)
            output = outputs(aws, session.id)["n"]
            assert ("connected" in output.splitlines()) is connected, (network, output)
            if not connected:
                assert "[exit code 1]" in output  # refused: the namespace's own loopback has no server
        assert len(accepted) == 1  # only the public sandbox's connection reached the host
    finally:
        server.close()


def test_a_command_past_its_timeout_is_killed_with_every_process_it_started(
    aws: Stack, api: Api, mock_llm: MockLLM, workspaces: Path
) -> None:
    import time

    # a child that would write a file two seconds later, and a command that waits a minute
    command = "(sleep 2; echo late > late.txt) & echo started; sleep 60"
    key = mock_llm.script({"tool_calls": [call("t", "Bash", command=command)]}, {"text": "gave up"})
    session = hosted_session(aws, key, Bash={"type": "hosted", "timeout_s": 1})
    started = time.monotonic()
    run_turn(aws, api, session)
    assert time.monotonic() - started < 30  # the turn went on at the timeout, not after the command
    output = outputs(aws, session.id)["t"]
    assert output.startswith("started")
    assert "timed out after 1s and was killed" in output
    item = next(i for i in aws.store.list_items(session.id) if i.type == "function_call_output")
    assert item.data["details"]["timed_out"] is True
    assert item.data["details"]["exit_code"] is None
    time.sleep(3)  # past the child's two seconds: it died with the command
    assert not (workspaces / session.id / "late.txt").exists()


def test_paths_out_of_the_workspace_are_refused(
    aws: Stack, api: Api, mock_llm: MockLLM, workspaces: Path
) -> None:
    key = mock_llm.script(
        {"tool_calls": [call("abs", "Read", file_path="/etc/hostname")]},
        {"tool_calls": [call("up", "Write", file_path="../escape.txt", content="x")]},
        {
            "tool_calls": [
                call("ln", "Bash", command="ln -s /etc out && ln -s /etc/hostname leak && echo linked")
            ]
        },
        {"tool_calls": [call("leak", "Read", file_path="leak")]},
        {"tool_calls": [call("dir", "Write", file_path="out/planted", content="x")]},
        {"tool_calls": [call("glob", "Glob", pattern="out/*")]},
        {"tool_calls": [call("ro", "Bash", command="touch /usr/planted || echo read-only")]},
        {"text": "tried"},
    )
    session = hosted_session(aws, key)
    run_turn(aws, api, session)
    seen = outputs(aws, session.id)
    assert "outside the workspace" in seen["abs"]
    assert "leaves the workspace" in seen["up"]
    assert seen["ln"] == "linked"
    assert "leads out of the workspace" in seen["leak"]
    assert "leads out of the workspace" in seen["dir"]
    assert seen["glob"] == "No files matched."  # a link to a directory elsewhere is not followed
    assert "read-only" in seen["ro"]
    assert not (workspaces / "escape.txt").exists()
    assert not (workspaces.parent / "escape.txt").exists()


def test_an_output_over_the_tools_limit_is_cut_and_kept_whole_as_a_session_file(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    command = "python3 -c \"print('x' * 5000)\""
    key = mock_llm.script({"tool_calls": [call("big", "Bash", command=command)]}, {"text": "long"})
    session = hosted_session(aws, key, Bash={"type": "hosted", "max_output_chars": 100})
    run_turn(aws, api, session)
    output = outputs(aws, session.id)["big"]
    assert output.startswith("x" * 100 + "\n…[truncated: 4,900 more characters")
    item = next(i for i in aws.store.list_items(session.id) if i.type == "function_call_output")
    file_id = item.data["details"]["output_file_id"]
    assert file_id in output
    whole = api.get(f"/v1/sessions/{session.id}/resources/files/{file_id}/content")
    assert whole.status == 200
    assert whole.body == "x" * 5000


def test_the_environments_files_env_and_setup_make_the_workspace_once(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    deps.secrets().put("skyloop/tools/deploy-token", "s3cr3t-value")
    environment = {
        "type": "hosted",
        "files": [{"path": "docs/README.md", "content": "# hello\n"}],
        "env": {"GREETING": "hi there", "TOKEN": {"secret": "skyloop/tools/deploy-token"}},
        "setup": ["echo made-by-setup > setup.txt", "echo $GREETING >> setup.txt"],
    }
    digest = hashlib.sha256(b"s3cr3t-value").hexdigest()  # the command never names the secret itself
    command = f'cat docs/README.md setup.txt; test "$(printf %s "$TOKEN" | sha256sum | cut -c1-64)" = {digest} && echo token-set; echo $HOME'
    key = mock_llm.script(
        {"tool_calls": [call("a", "Bash", command=command)]},
        {"tool_calls": [call("b", "Bash", command="wc -l setup.txt")]},
        {"text": "ok"},
    )
    session = hosted_session(aws, key, environment=environment)
    run_turn(aws, api, session)
    seen = outputs(aws, session.id)
    assert seen["a"] == "# hello\nmade-by-setup\nhi there\ntoken-set\n/workspace"
    assert seen["b"] == "2 setup.txt"  # setup ran once, not again for the second call
    made = [e.data["status"] for e in aws.events(session.id) if e.type == "session.environment"]
    assert made == ["pending", "ready"]  # and the log says the workspace was made once
    # the secret's value is nowhere in what was stored or streamed
    assert "s3cr3t-value" not in json.dumps([e.data for e in aws.events(session.id)])
    assert (
        "s3cr3t-value"
        not in aws.store.get_agent(aws.store.get_session(session.id).agent_id).spec.model_dump_json()
    )


def test_a_failing_setup_is_the_calls_output_and_is_tried_again(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    environment = {"type": "hosted", "setup": ["test -f ready || (touch ready; echo not yet; exit 3)"]}
    key = mock_llm.script(
        {"tool_calls": [call("one", "Bash", command="echo first")]},
        {"tool_calls": [call("two", "Bash", command="echo second")]},
        {"text": "ok"},
    )
    session = hosted_session(aws, key, environment=environment)
    run_turn(aws, api, session)
    seen = outputs(aws, session.id)
    assert seen["one"].startswith("Error: the environment's setup command")
    assert "exited 3" in seen["one"]
    assert "not yet" in seen["one"]
    assert seen["two"] == "second"  # the setup ran again, succeeded, and the call ran
    # the log says so (session.environment), each call announced only once its environment was made
    steps = [
        (e.data["status"], e.data["error"] is not None)
        if e.type == "session.environment"
        else ("call", e.data["item"]["call_id"])
        for e in aws.events(session.id)
        if e.type == "session.environment"
        or (e.type == "response.output_item.done" and e.data["item"].get("status") == "in_progress")
    ]
    assert steps == [
        ("pending", False),
        ("failed", True),
        ("call", "one"),
        ("pending", False),
        ("ready", False),
        ("call", "two"),
    ]
    failed = next(e for e in aws.events(session.id) if e.type == "session.environment" and e.data["error"])
    assert "exited 3" in failed.data["error"]["message"]
    # the call that could not run is still a command (no exit code), not a bare output
    item = next(
        i
        for i in aws.store.list_items(session.id)
        if i.data.get("call_id") == "one" and i.type == "function_call_output"
    )
    assert item.data["details"]["kind"] == "command"
    assert item.data["details"]["exit_code"] is None


def test_without_bubblewrap_hosted_tools_are_refused_clearly_unless_unisolated(
    aws: Stack, api: Api, mock_llm: MockLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyloop.environments import local

    monkeypatch.setattr(local, "bwrap_problem", lambda: "bubblewrap (bwrap) is not installed")
    key = mock_llm.script({"tool_calls": [call("c", "Bash", command="echo hi")]}, {"text": "ok"})
    session = hosted_session(aws, key)
    run_turn(aws, api, session)
    output = outputs(aws, session.id)["c"]
    assert "hosted tools need bubblewrap" in output
    assert "--hosted-unisolated" in output
    # started with the explicit flag, the same call runs (without isolation)
    monkeypatch.setenv(local.ISOLATION_ENV, "none")
    key = mock_llm.script({"tool_calls": [call("c", "Bash", command="echo hi")]}, {"text": "ok"})
    session = hosted_session(aws, key)
    run_turn(aws, api, session)
    assert outputs(aws, session.id)["c"] == "hi"


def test_a_full_workspace_refuses_a_write_and_says_why(
    aws: Stack, api: Api, mock_llm: MockLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLOOP_WORKSPACE_MAX_BYTES", "1000")
    deps.get_settings.cache_clear()
    key = mock_llm.script(
        {"tool_calls": [call("small", "Write", file_path="a.txt", content="a" * 600)]},
        {"tool_calls": [call("big", "Write", file_path="b.txt", content="b" * 600)]},
        {"text": "ok"},
    )
    session = hosted_session(aws, key)
    run_turn(aws, api, session)
    seen = outputs(aws, session.id)
    assert seen["small"] == "Successfully wrote /workspace/a.txt"
    assert "more than its cap of 1,000 bytes" in seen["big"]


def test_a_hosted_tool_that_needs_approval_runs_only_once_approved(
    aws: Stack, api: Api, mock_llm: MockLLM, workspaces: Path
) -> None:
    key = mock_llm.script(
        {"tool_calls": [call("ok", "Bash", command="echo approved > done.txt")]}, {"text": "ran"}
    )
    session = hosted_session(aws, key, Bash={"type": "hosted", "approval": "required"})
    before = aws.store.get_session(session.id).last_seq
    assert api.post_message(session.id, "go").status == 202
    request = aws.wait_for_event(
        session.id, lambda e: e.seq > before and e.type == "response.elicitation_request"
    )
    assert not (workspaces / session.id / "done.txt").exists()
    approval = {
        "type": "approval",
        "data": {"elicitation_id": request.data["elicitation_id"], "action": "accept"},
    }
    assert api.post_event(session.id, approval).status < 300, "approve"
    aws.wait_for_event(
        session.id, lambda e: e.seq > before and e.type == "session.status" and e.data["status"] == "idle"
    )
    assert (workspaces / session.id / "done.txt").read_text() == "approved\n"


def test_a_spec_with_an_unknown_tool_type_or_environment_field_is_refused_and_reads_back_whole(
    api: Api,
) -> None:
    base = {"name": f"v-{uuid.uuid4().hex[:8]}", "executor": {"model": "m"}}
    cases = [
        ({**base, "tools": {"x": {"type": "weird"}}}, "tools.x.type"),
        ({**base, "tools": {"Fetch": {"type": "hosted"}}}, "tools.Fetch"),
        ({**base, "environment": {"type": "hosted", "netwrk": "none"}}, "environment.netwrk"),
        ({**base, "environment": {"type": "hosted", "network": "intranet"}}, "environment.network"),
        ({**base, "enviroment": {"type": "hosted"}}, "enviroment"),
    ]
    for spec, named in cases:
        refused = api.post_json("/v1/agents", spec)
        assert refused.status == 400, (spec, refused.body)
        assert named in refused.error()["message"], (named, refused.body)
    assert not [a for a in api.get("/v1/agents", name=base["name"]).body["data"]]
    good = {
        **base,
        "tools": {"Bash": {"type": "hosted"}},
        "environment": {"type": "hosted", "network": "public"},
    }
    created = api.post_json("/v1/agents", good)
    assert created.status == 201, created.body
    read = api.get(f"/v1/agents/{created.body['id']}").body
    assert read["environment"] == {"type": "hosted", "network": "public", "files": [], "env": {}, "setup": []}
    assert read["tool_spec"] == {"Bash": {"type": "hosted"}}


def test_a_command_longer_than_the_invocation_runs_on_while_the_state_machine_waits_for_it(
    aws: Stack, api: Api, mock_llm: MockLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the run_tool invocation waits 1 s for a command; a longer one goes on in the background
    monkeypatch.setenv("SKYLOOP_HOSTED_SYNC_S", "1")
    monkeypatch.setenv("SKYLOOP_HOSTED_POLL_S", "1")
    deps.get_settings.cache_clear()
    key = mock_llm.script(
        {"tool_calls": [call("long", "Bash", command="echo begun; sleep 3; echo ended")]},
        {"tool_calls": [call("cut", "Bash", command="echo started; sleep 60")]},
        {"text": "ok"},
    )
    session = hosted_session(aws, key, Bash={"type": "hosted", "timeout_s": 4})
    before = aws.store.get_session(session.id).last_seq
    assert api.post_message(session.id, "go").status == 202
    idle = aws.wait_for_event(
        session.id,
        lambda e: e.seq > before and e.type == "session.status" and e.data["status"] == "idle",
        timeout=60,
        what="the turn's end",
    )
    seen = outputs(aws, session.id)
    assert seen["long"] == "begun\nended"
    assert seen["cut"].startswith("started")
    assert "timed out after 4s and was killed" in seen["cut"]
    # Step Functions waited and polled: no invocation held the command
    rid = str(idle.data["response_id"])
    entered = [
        h["stateEnteredEventDetails"]["name"] for h in aws.history(rid) if "stateEnteredEventDetails" in h
    ]
    assert "WaitForTool" in entered
    assert "PollTool" in entered
    # and its output streamed meanwhile, from the background command's file
    deltas = "".join(
        e.data["delta"]
        for e in aws.events(session.id)
        if e.type == "response.function_call_output.delta" and e.data["call_id"] == "long"
    )
    assert deltas.startswith("begun")


def test_a_message_may_not_offer_a_client_tool_named_like_a_hosted_one(
    aws: Stack, api: Api, mock_llm: MockLLM
) -> None:
    session = hosted_session(aws, mock_llm.script({"text": "unused"}))
    bash = {
        "type": "function",
        "function": {"name": "Bash", "parameters": {"type": "object", "properties": {}}},
    }
    refused = api.post_message(session.id, "go", tools=[bash])
    assert refused.status == 400
    assert "Bash" in refused.error()["message"]
    assert aws.store.get_session(session.id).status == "idle"  # nothing started
