"""The data directory when something is wrong with it: damage, other versions, a second stack, ``--reset``.

Damage never crashes the stack and never drops data silently: every readable
record is loaded, the rest is reported with the file's name, and the damaged
file is copied under ``damaged/``. A directory from another version is loaded
(an older table schema is brought up to date) or refused with a message that
says what to do, without a traceback.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from skyloop.local.persistence.journal import frame, iter_files, read_records
from tests.e2e.conftest import (
    ECHO_TOOL,
    StreamWatcher,
    is_call_frame,
    message_event,
    output_event,
    wait_status,
)
from tests.e2e.restarts import Stack, echo_call, no_traceback, scripted_agent

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


def coder_id(stack: Stack) -> str:
    with stack.client() as http:
        return str(
            http.get("/v1/sessions", params={"agent_name": "coder", "limit": 1}).json()["data"][0]["agent_id"]
        )


def new_sessions(stack: Stack, count: int) -> list[str]:
    agent_id = coder_id(stack)
    with stack.client() as http:
        return [http.post("/v1/sessions", json={"agent_id": agent_id}).json()["id"] for _ in range(count)]


def exists(stack: Stack, session_id: str) -> bool:
    with stack.client() as http:
        return http.get(f"/v1/sessions/{session_id}").status_code == 200


def journals(stack: Stack) -> list[Path]:
    return [path for _, path in iter_files(stack.data_dir / "dynamodb", "journal")]


def refused(stack: Stack, *extra: str) -> str:
    """Start a stack that must refuse its directory; returns what it said."""
    proc = stack.launch(*extra)
    assert proc.wait(timeout=60) == 2, stack.log()
    stack.proc = None
    said = stack.log()
    assert "Traceback" not in said, said
    return said


def test_a_damaged_record_costs_that_record_only_and_is_reported(stack: Stack) -> None:
    # Given three sessions, each created by its own acknowledged request
    stack.start()
    first, damaged, last = new_sessions(stack, 3)
    stack.stop(signal.SIGTERM)

    # When the bytes of the record that created the second one are damaged on disk
    (journal,) = journals(stack)
    data = bytearray(journal.read_bytes())
    at = data.index(damaged.encode())
    data[at : at + 8] = b"\x00garbage"
    journal.write_bytes(bytes(data))

    # Then the stack starts, loads every other record, names the damage and keeps the damaged file
    stack.start()
    said = stack.log()
    assert "DAMAGED" in said, said
    assert str(journal) in said
    kept = list((stack.data_dir / "damaged").iterdir())
    assert len(kept) == 1
    assert kept[0].read_bytes() == bytes(data)
    assert str(kept[0]) in said
    assert exists(stack, first)
    assert exists(stack, last)
    assert not exists(stack, damaged)
    no_traceback(stack)


def test_an_incomplete_last_write_is_dropped_with_a_note(stack: Stack) -> None:
    # Given acknowledged sessions, then a record cut short at the end (a write that never finished)
    stack.start()
    sessions = new_sessions(stack, 3)
    stack.stop(signal.SIGKILL)
    (journal,) = journals(stack)
    torn = frame({"k": "items", "t": "skyloop-local", "p": [], "d": []})
    with journal.open("ab") as out:
        out.write(torn[: len(torn) // 2])

    # When the stack starts
    stack.start()

    # Then everything acknowledged is there and the log says what was dropped
    assert all(exists(stack, s) for s in sessions)
    assert "incomplete last record" in stack.log(), stack.log()
    assert not (stack.data_dir / "damaged").exists()
    no_traceback(stack)


def test_snapshots_taken_while_serving_keep_everything(tmp_path: Path) -> None:
    # Given a stack that folds its journal into a snapshot every ~20 KB of changes
    stack = Stack(tmp_path, env={"SKYLOOP_SNAPSHOT_BYTES": "20000"})
    try:
        stack.start()
        sessions = new_sessions(stack, 60)
        stack.stop(signal.SIGKILL)
        snapshots = list(iter_files(stack.data_dir / "dynamodb", "snapshot"))
        assert snapshots, "no snapshot was taken"
        records, damage = read_records(snapshots[-1][1])
        assert records[-1]["k"] == "end"
        assert not damage.damaged

        # When it starts again from the snapshot and the journal after it
        stack.start()

        # Then every session is there
        assert [s for s in sessions if not exists(stack, s)] == []
    finally:
        if stack.proc is not None:
            stack.stop(signal.SIGKILL)


def test_a_directory_of_an_older_format_is_refused_with_what_to_do(stack: Stack) -> None:
    stack.data_dir.mkdir()
    (stack.data_dir / "FORMAT.json").write_text(json.dumps({"format": 0, "written_by": "skyloop 0.0.9"}))
    (stack.data_dir / "tables.db").write_bytes(b"an older layout")
    said = refused(stack)
    assert "data format 0 (written by skyloop 0.0.9)" in said
    assert "--reset" in said
    assert "--data-dir" in said
    assert (stack.data_dir / "tables.db").read_bytes() == b"an older layout"  # nothing touched


def test_a_directory_of_a_newer_format_asks_for_an_upgrade(stack: Stack) -> None:
    stack.data_dir.mkdir()
    (stack.data_dir / "FORMAT.json").write_text(json.dumps({"format": 99, "written_by": "skyloop 9.0.0"}))
    said = refused(stack)
    assert "newer than this skyloop reads" in said
    assert "upgrade skyloop" in said


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("{not json", "FORMAT.json is unreadable", id="corrupt-format-file"),
        pytest.param(None, "is not a skyloop data directory", id="not-a-data-directory"),
    ],
)
def test_a_directory_that_is_not_ours_is_refused(stack: Stack, content: str | None, expected: str) -> None:
    stack.data_dir.mkdir()
    if content is None:
        (stack.data_dir / "notes.txt").write_text("mine")
    else:
        (stack.data_dir / "FORMAT.json").write_text(content)
    said = refused(stack)
    assert expected in said, said
    assert "--reset" in said


def test_a_table_from_an_older_schema_is_brought_up_to_date(stack: Stack, mock_llm_server_url: str) -> None:
    # Given a turn parked on a client call in a directory whose table lacks the running-sessions index
    # (the index the restart looks turns up in), as an older skyloop would have left it
    stack.start()
    with stack.client() as http:
        _, _, session_id = scripted_agent(
            http, mock_llm_server_url, [echo_call("call_old"), {"text": "upgraded"}]
        )
        with StreamWatcher(stack.url, session_id) as watch:
            http.post(f"/v1/sessions/{session_id}/events", json=message_event("go", [ECHO_TOOL]))
            watch.wait_for(lambda f: is_call_frame(f, "action_required"), what="the parked call")
    stack.stop(signal.SIGTERM)
    for journal in journals(stack):
        records, _ = read_records(journal)
        for record in records:
            if record.get("k") == "table":
                create = record["create"]
                create["GlobalSecondaryIndexes"] = [
                    i for i in create["GlobalSecondaryIndexes"] if i["IndexName"] != "running_sessions"
                ]
                create["AttributeDefinitions"] = [
                    a for a in create["AttributeDefinitions"] if a["AttributeName"] != "running_key"
                ]
        journal.write_bytes(b"".join(frame(r) for r in records))

    # When this version starts on it
    stack.start()

    # Then the index is added, the parked turn is found through it, and it completes
    assert "recovered       turn" in stack.log(), stack.log()
    with stack.client() as http:
        assert (
            http.post(f"/v1/sessions/{session_id}/events", json=output_event("call_old", "ok")).status_code
            == 202
        )
        wait_status(http, session_id, "idle")
    no_traceback(stack)


def test_one_stack_per_directory_and_reset_starts_empty(stack: Stack) -> None:
    # Given a stack with sessions
    stack.start()
    sessions = new_sessions(stack, 2)

    # When a second stack starts on the same directory, it is refused while the first runs
    other = Stack(stack.tmp_path / "second")
    other.data_dir = stack.data_dir
    (stack.tmp_path / "second").mkdir()
    said = refused(other)
    assert f"another skyloop dev uses {stack.data_dir}" in said, said
    assert all(exists(stack, s) for s in sessions)

    # And --reset, once the first has stopped, starts from an empty directory
    stack.stop(signal.SIGTERM)
    stack.start("--reset")
    assert not any(exists(stack, s) for s in sessions)
    with stack.client() as http:
        listed = http.get("/v1/sessions").json()["data"]
    assert [s["title"] for s in listed] == ["example session"]


def test_ephemeral_and_reset_exclude_each_other(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "skyloop", "dev", "--ephemeral", "--reset"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--ephemeral has none" in done.stderr
