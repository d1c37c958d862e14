"""Hosted tools as the cloud runs them: the Lambda-shaped handlers on moto, the real boto3
``bedrock-agentcore`` client against a loopback fake of the Code Interpreter data plane
(``tests/agentcore_fake.py``: every request validated against botocore's model, answers in AWS's
event-stream framing), snapshots in moto's S3, and every call held to the role the stack deploys
(the local IAM check the ``aws`` fixture installs).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps, sessions
from skyloop.environments import agentcore, service
from skyloop.models.agent import AgentSpec
from skyloop.store import codec, keys
from tests.agentcore_fake import PUBLIC_ID, SANDBOX_ID, AgentCoreFake

if TYPE_CHECKING:
    from collections.abc import Iterator

    from skyloop.models.session import Session
    from tests.integration.conftest import Api, MockLLM, Stack

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the fake runs commands in bubblewrap")
HOSTED = {name: {"type": "hosted"} for name in ("Bash", "Read", "Write", "Edit", "Glob", "Grep")}


@pytest.fixture
def fake(aws: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[AgentCoreFake]:
    server = AgentCoreFake().start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", server.url)
    monkeypatch.setenv("SKYLOOP_HOSTED_ENGINE", "agentcore")
    monkeypatch.setenv("SKYLOOP_CODE_INTERPRETER_ID", SANDBOX_ID)
    monkeypatch.setenv("SKYLOOP_CODE_INTERPRETER_PUBLIC_ID", PUBLIC_ID)
    deps.get_settings.cache_clear()
    deps.client.cache_clear()  # the next bedrock-agentcore client reads the endpoint
    try:
        yield server
    finally:
        server.stop()
        deps.get_settings.cache_clear()
        deps.client.cache_clear()


def hosted_session(aws: Stack, model: str, **environment: Any) -> Session:
    spec = AgentSpec.model_validate(
        {
            "name": f"cloud-{uuid.uuid4().hex[:8]}",
            "prompt": "Use your tools.",
            "executor": {
                "harness": "openai-agents",
                "model": model,
                "auth": {"api_key": "mock-key", "base_url": aws.mock_llm.base_url},
            },
            "tools": HOSTED,
            "environment": {"type": "hosted", **environment},
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


def run_turn(aws: Stack, api: Api, session_id: str, text: str = "go") -> None:
    before = aws.store.get_session(session_id).last_seq
    assert api.post_message(session_id, text).status == 202
    aws.wait_for_event(
        session_id,
        lambda e: e.seq > before and e.type == "session.status" and e.data["status"] in ("idle", "failed"),
        what="the turn's end",
    )


def manifest(aws: Stack, session_id: str) -> dict[str, Any]:
    got = deps.client("s3").get_object(
        Bucket=aws.resources.blob_bucket, Key=keys.workspace_blob_prefix(session_id) + "manifest.json"
    )
    return json.loads(got["Body"].read())  # type: ignore[no-any-return]


def test_a_hosted_turn_runs_in_an_interpreter_session_snapshots_and_resumes_after_it_is_gone(
    aws: Stack, api: Api, mock_llm: MockLLM, fake: AgentCoreFake
) -> None:
    key = mock_llm.script(
        {"tool_calls": [call("w", "Write", file_path="src/app.py", content="print('hello')\n")]},
        {"tool_calls": [call("b", "Bash", command="python3 src/app.py && ls src")]},
        {"tool_calls": [call("e", "Edit", file_path="src/app.py", old_string="hello", new_string="again")]},
        {"tool_calls": [call("r", "Read", file_path="/workspace/src/app.py")]},
        {"tool_calls": [call("g", "Grep", pattern="again", output_mode="content")]},
        {"tool_calls": [call("l", "Glob", pattern="**/*.py")]},
        {"text": "done"},
        {"tool_calls": [call("r2", "Bash", command="cat src/app.py")]},
        {"text": "still there"},
    )
    session = hosted_session(aws, key)
    run_turn(aws, api, session.id)
    seen = outputs(aws, session.id)
    assert seen["w"] == "Successfully wrote /workspace/src/app.py"
    assert seen["b"] == "hello\napp.py"
    assert seen["e"] == "Replaced 1 occurrence(s) in /workspace/src/app.py"
    assert seen["r"] == "1\tprint('again')"
    assert seen["g"] == "/workspace/src/app.py:1:print('again')"
    assert seen["l"] == "/workspace/src/app.py"
    # one interpreter session, in the SANDBOX interpreter (network: none), reused for every call
    starts = [p for op, p in fake.calls if op == "StartCodeInterpreterSession"]
    assert [p["codeInterpreterIdentifier"] for p in starts] == [SANDBOX_ID]
    assert {p["name"] for p in fake.tool_calls("executeCommand")} == {"executeCommand"}
    assert fake.tool_calls("writeFiles")
    assert fake.tool_calls("readFiles")
    # the turn's end snapshotted the workspace to the bucket
    snapshot = manifest(aws, session.id)
    assert set(snapshot) == {"src/app.py"}
    listed = api.get(f"/v1/sessions/{session.id}/workspace").body
    assert [e["path"] for e in listed["data"]] == ["/workspace/src/app.py"]
    # AgentCore stops the idle interpreter session: the next turn starts another and restores the files
    (first,) = fake.sessions
    fake.expire(first)
    run_turn(aws, api, session.id, "again")
    assert outputs(aws, session.id)["r2"] == "print('again')"
    assert len([1 for op, _ in fake.calls if op == "StartCodeInterpreterSession"]) == 2
    # a fork starts from the snapshot; a delete stops the session's interpreter session
    fork = api.post_json(f"/v1/sessions/{session.id}/fork", {})
    assert fork.status == 201, fork.body
    assert set(manifest(aws, fork.body["id"])) == {"src/app.py"}
    assert api.call("DELETE", f"/v1/sessions/{session.id}").status == 200
    assert [op for op, _ in fake.calls][-1] == "StopCodeInterpreterSession"
    assert not fake.sessions  # the only live one was the deleted session's


def test_network_public_runs_in_the_public_interpreter(
    aws: Stack, api: Api, mock_llm: MockLLM, fake: AgentCoreFake
) -> None:
    key = mock_llm.script({"tool_calls": [call("b", "Bash", command="echo hi")]}, {"text": "ok"})
    session = hosted_session(aws, key, network="public")
    run_turn(aws, api, session.id)
    assert outputs(aws, session.id)["b"] == "hi"
    starts = [p for op, p in fake.calls if op == "StartCodeInterpreterSession"]
    assert [p["codeInterpreterIdentifier"] for p in starts] == [PUBLIC_ID]


def test_an_unreachable_interpreter_is_the_calls_output_not_a_failed_turn(
    aws: Stack, api: Api, mock_llm: MockLLM, fake: AgentCoreFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLOOP_CODE_INTERPRETER_ID", "no_such_interpreter-0000000000")
    deps.get_settings.cache_clear()
    key = mock_llm.script({"tool_calls": [call("b", "Bash", command="echo hi")]}, {"text": "ok"})
    session = hosted_session(aws, key)
    run_turn(aws, api, session.id)
    output = outputs(aws, session.id)["b"]
    assert output.startswith("Error: ")
    assert "code interpreter" in output
    assert aws.store.get_session(session.id).status == "idle"


def test_a_long_command_is_a_started_task_the_state_machine_polls(
    aws: Stack, api: Api, mock_llm: MockLLM, fake: AgentCoreFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLOOP_HOSTED_SYNC_S", "1")
    monkeypatch.setenv("SKYLOOP_HOSTED_POLL_S", "1")
    deps.get_settings.cache_clear()
    key = mock_llm.script(
        {"tool_calls": [call("long", "Bash", command="sleep 3; echo ended")]},
        {"text": "ok"},
    )
    spec_tools = {**HOSTED, "Bash": {"type": "hosted", "timeout_s": 30}}
    spec = AgentSpec.model_validate(
        {
            "name": f"cloud-{uuid.uuid4().hex[:8]}",
            "executor": {
                "harness": "openai-agents",
                "model": key,
                "auth": {"api_key": "mock-key", "base_url": aws.mock_llm.base_url},
            },
            "tools": spec_tools,
            "environment": {"type": "hosted"},
        }
    )
    session = sessions.create_session(
        aws.store, sessions.register(spec), sessions.Runners(deps.get_settings().default_runner_id)
    )
    run_turn(aws, api, session.id)
    assert outputs(aws, session.id)["long"] == "ended"
    assert fake.tool_calls("startCommandExecution")
    assert fake.tool_calls("getTask")


def environment_log(aws: Stack, session_id: str) -> list[tuple[str, bool]]:
    """The session's ``session.environment`` events: (status, restored), in log order."""
    return [
        (e.data["status"], e.data["restored"])
        for e in aws.events(session_id)
        if e.type == "session.environment"
    ]


def idle_later(times: int = 1) -> int:
    """A time at which every interpreter session used until now counts as idle (``times`` over)."""
    return int(time.time()) + times * (deps.get_settings().hosted_idle_s + 1)


def test_an_idle_interpreter_session_is_stopped_after_a_snapshot_and_comes_back_as_it_was_left(
    aws: Stack, api: Api, mock_llm: MockLLM, fake: AgentCoreFake
) -> None:
    # Given a session whose environment has a file and a setup, and a turn that changes the workspace
    # (a mode, a link, an empty directory, the environment's file) and then fails (no end-of-turn snapshot)
    key = mock_llm.script(
        {
            "tool_calls": [
                call(
                    "b",
                    "Bash",
                    command=(
                        "printf 'echo run\\n' > run.sh && chmod 750 run.sh && ln -s run.sh link "
                        "&& mkdir -p empty && echo v2 > notes.txt"
                    ),
                )
            ]
        },
        {"error": "boom", "status_code": 400},
        {
            "tool_calls": [
                call(
                    "c",
                    "Bash",
                    command="stat -c %a run.sh; readlink link; test -d empty && echo dir; cat notes.txt setup.log",
                )
            ]
        },
        {"text": "ok"},
    )
    session = hosted_session(
        aws,
        key,
        files=[{"path": "notes.txt", "content": "v1\n"}],
        setup=["echo ran >> setup.log"],
    )
    run_turn(aws, api, session.id)
    assert aws.store.get_session(session.id).status == "failed"
    (first,) = fake.sessions
    starts = [p for op, p in fake.calls if op == "StartCodeInterpreterSession"]
    assert [p["sessionTimeoutSeconds"] for p in starts] == [agentcore.LIFETIME_S]  # a lifetime, not idle time

    # When the reconciler's pass runs before the session has been idle long enough, nothing stops
    engine = service.engine()
    assert session.id not in engine.stop_idle()  # type: ignore[attr-defined]
    assert first in fake.sessions
    # and once it has been idle that long, the interpreter session is snapshotted, then stopped: the
    # reconciler's pass (service.stop_idle) records it as the environment suspended, once
    assert environment_log(aws, session.id) == [("pending", False), ("ready", False)]
    stopped = service.stop_idle(store=aws.store, now=idle_later())
    assert stopped is not None
    assert session.id in stopped
    assert first not in fake.sessions
    assert environment_log(aws, session.id)[-1] == ("suspended", False)
    snapshot = manifest(aws, session.id)
    assert snapshot["run.sh"]["mode"] == 0o750
    assert snapshot["link"] == {"link": "run.sh"}
    assert snapshot["empty"]["dir"] is True
    assert session.id not in engine.stop_idle(now=idle_later())  # type: ignore[attr-defined]  # once

    # Then the next turn gets its workspace back as it was left, with the setup run again in the new
    # interpreter session and the environment's file not written over
    run_turn(aws, api, session.id, "again")
    assert outputs(aws, session.id)["c"] == "750\nrun.sh\ndir\nv2\nran\nran"
    # (made again from the snapshot: pending, then ready, both restored)
    assert environment_log(aws, session.id) == [
        ("pending", False),
        ("ready", False),
        ("suspended", False),
        ("pending", True),
        ("ready", True),
    ]
    assert len(fake.sessions) == 1
    assert first not in fake.sessions


def test_an_interpreter_session_is_not_stopped_while_its_session_runs_or_a_call_changed_it_since_the_snapshot(
    aws: Stack, api: Api, mock_llm: MockLLM, fake: AgentCoreFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a session whose turn runs a command that takes a while
    key = mock_llm.script(
        {"tool_calls": [call("slow", "Bash", command="sleep 4; echo slept")]},
        {"text": "ok"},
    )
    session = hosted_session(aws, key)
    before = aws.store.get_session(session.id).last_seq
    assert api.post_message(session.id, "go").status == 202
    deadline = time.monotonic() + 60
    while not any("sleep 4" in p["arguments"]["command"] for p in fake.tool_calls("executeCommand")):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    engine = service.engine()
    # When the reconciler's pass finds it due while the turn runs, Then it is not stopped
    assert session.id not in engine.stop_idle(now=idle_later())  # type: ignore[attr-defined]
    (first,) = fake.sessions
    aws.wait_for_event(
        session.id,
        lambda e: e.seq > before and e.type == "session.status" and e.data["status"] == "idle",
        what="the turn's end",
    )
    assert outputs(aws, session.id)["slow"] == "slept"

    # And when a call counts a change between the stop's snapshot and the stop, the session goes on
    snapshot = engine.snapshot  # type: ignore[attr-defined]

    def snapshot_then_a_call(session_id: str) -> int:
        done = snapshot(session_id)
        assert engine.count_change(session_id, first)  # type: ignore[attr-defined]
        return done

    monkeypatch.setattr(engine, "snapshot", snapshot_then_a_call)
    # (the pass during the turn moved its idle time on: later passes are past that)
    assert session.id not in engine.stop_idle(now=idle_later(3))  # type: ignore[attr-defined]
    assert first in fake.sessions
    monkeypatch.setattr(engine, "snapshot", snapshot)
    assert session.id in engine.stop_idle(now=idle_later(3))  # type: ignore[attr-defined]
    assert first not in fake.sessions


def aged_session(aws: Stack, api: Api, mock_llm: MockLLM, fake: AgentCoreFake) -> tuple[Session, str]:
    """A session whose turn wrote a file in an interpreter session (returned) started longer ago than
    skyloop keeps using one; its next turn reads the file back."""
    key = mock_llm.script(
        {"tool_calls": [call("w", "Bash", command="echo kept > a.txt")]},
        {"text": "ok"},
        {"tool_calls": [call("r", "Bash", command="cat a.txt")]},
        {"text": "ok"},
    )
    session = hosted_session(aws, key)
    run_turn(aws, api, session.id)
    (first,) = fake.sessions
    deps.client("dynamodb").update_item(
        TableName=aws.table_name,
        Key=codec.to_item(keys.environment_key(session.id)),
        UpdateExpression="SET started_at = :t",
        ExpressionAttributeValues={":t": codec.attr(int(time.time()) - agentcore.ROTATE_AFTER_S - 1)},
    )
    return session, first


def test_a_session_near_its_interpreters_lifetime_moves_to_a_new_one_with_its_files(
    aws: Stack, api: Api, mock_llm: MockLLM, fake: AgentCoreFake
) -> None:
    # Given an interpreter session started longer ago than skyloop keeps using one
    session, first = aged_session(aws, api, mock_llm, fake)
    # When the next call runs, Then it runs in a new one, with the workspace, and the old one is stopped
    run_turn(aws, api, session.id, "again")
    assert outputs(aws, session.id)["r"] == "kept"
    assert first not in fake.sessions
    assert len(fake.sessions) == 1


def test_a_session_that_cannot_be_moved_off_an_aged_interpreter_session_runs_its_call_where_it_is(
    aws: Stack, api: Api, mock_llm: MockLLM, fake: AgentCoreFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an aged interpreter session whose snapshot fails (S3 unreachable, say)
    session, first = aged_session(aws, api, mock_llm, fake)

    def unreachable(session_id: str) -> int:
        raise ConnectionError("S3 unreachable")

    monkeypatch.setattr(service.engine(), "snapshot", unreachable)
    # When the next call runs, Then it runs in the session it has, which is left running
    run_turn(aws, api, session.id, "again")
    assert outputs(aws, session.id)["r"] == "kept"
    assert list(fake.sessions) == [first]
