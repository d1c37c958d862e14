"""omnigent's interactive CLI (0.19.1) on a pseudo-terminal against ``skyloop dev``.

``omnigent run --server URL`` (the REPL, agent picked by name), its ``/effort``
and ``/model`` commands, ``omnigent attach`` and ``omnigent run --fork``: each
test types what a user types and checks both what the REPL printed and what
skyloop stored or sent the model, so a broken flow fails here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.conftest import (
    configure_mock_llm,
    get_mock_requests,
    input_texts,
    message_event,
    new_mock_agent_session,
    release_gate,
    unique,
    wait_for_gate,
    wait_status,
)

if TYPE_CHECKING:
    import httpx

    from tests.compat.conftest import Omnigent
    from tests.compat.tty import Tty

pytestmark = pytest.mark.e2e


READY = r"ready\s+/help"  # the REPL's toolbar (redrawn in part: no leading "·"), once it reads input


def say(tty: Tty, text: str) -> None:
    """Type a line once the REPL reads input again (keys typed while it prints are lost)."""
    tty.expect(READY)
    tty.line(text)


def pick_agent(tty: Tty, name: str) -> None:
    """Answer omnigent's agent picker by name (it skips the picker when one agent has sessions)."""
    found = tty.expect(r"Agent \[1\]: |Agent: (\S+)")
    if found.group(1) is None:
        tty.line(name)
    else:
        assert found.group(1) == name


def the_new_session(http_client: httpx.Client, agent_id: str, skip: set[str], timeout: float = 20) -> str:
    """The id of the session the CLI created for ``agent_id`` (any not in ``skip``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = http_client.get("/v1/sessions", params={"agent_id": agent_id, "limit": 10}).json()["data"]
        fresh = [s["id"] for s in listed if s["id"] not in skip]
        if fresh:
            return str(fresh[0])
        time.sleep(0.1)
    raise AssertionError(f"no new session of agent {agent_id}")


def test_repl_runs_turns_and_its_effort_and_model_commands_reach_the_model(
    omnigent: Omnigent, http_client: httpx.Client, live_server: str, mock_llm_server_url: str
) -> None:
    # Given an agent (its session the newest, so the picker lists it) and a second scripted model
    agent_id, model, upload_sid = new_mock_agent_session(
        http_client, mock_llm_server_url, "repl", [{"text": "hello from the repl"}]
    )
    override = f"mock-{unique('repl-override')}"
    configure_mock_llm(mock_llm_server_url, [{"text": "the override answers"}], key=override)
    name = http_client.get(f"/v1/sessions/{upload_sid}").json()["agent_name"]

    with omnigent.tty("run", "--server", live_server) as tty:
        # When the user picks the agent by name and sends a prompt
        pick_agent(tty, name)
        say(tty, "first prompt")
        # Then the REPL prints the model's answer
        tty.expect("hello from the repl")
        sid = the_new_session(http_client, agent_id, {upload_sid})
        wait_status(http_client, sid, "idle")

        # When the user sets the effort and the model with the REPL's commands
        say(tty, "/effort high")
        tty.expect("reasoning effort set to high")
        say(tty, f"/model {override}")
        tty.expect(f"model set to {override}")
        # Then they PATCHed the session
        snap = http_client.get(f"/v1/sessions/{sid}").json()
        assert (snap["reasoning_effort"], snap["model_override"]) == ("high", override)

        # And the next turn's model call carries both, with the first turn as history
        say(tty, "second prompt")
        tty.expect("the override answers")
        wait_status(http_client, sid, "idle")
        sent = get_mock_requests(mock_llm_server_url, key=override)[-1]
        assert sent["reasoning"] == {"effort": "high"}
        assert input_texts(sent) == ["first prompt", "hello from the repl", "second prompt"]

        # And "default" clears both
        say(tty, "/effort default")
        tty.expect("reasoning effort reset to agent default")
        say(tty, "/model default")
        tty.expect("model reset to agent default")
        snap = http_client.get(f"/v1/sessions/{sid}").json()
        assert (snap["reasoning_effort"], snap["model_override"]) == (None, None)

        # And /quit exits cleanly
        say(tty, "/quit")
        tty.expect("Goodbye")
        assert tty.wait() == 0, tty.tail()
    assert len(get_mock_requests(mock_llm_server_url, key=model)) == 1


def cli_log_says(omnigent: Omnigent, text: str, timeout: float = 20) -> None:
    """Wait for ``text`` in omnigent's CLI log (where the REPL sends its stderr)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(
            text in log.read_text(errors="replace") for log in omnigent.home.glob(".omnigent/logs/cli/*.log")
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in omnigent's CLI log after {timeout}s")


def run_turn(http_client: httpx.Client, sid: str, text: str) -> None:
    assert http_client.post(f"/v1/sessions/{sid}/events", json=message_event(text)).status_code == 202
    wait_status(http_client, sid, "idle")


def scripted(http_client: httpx.Client, mock_url: str, prefix: str, answers: list[str]) -> dict[str, Any]:
    agent_id, model, sid = new_mock_agent_session(
        http_client, mock_url, prefix, [{"text": a} for a in answers]
    )
    return {"agent_id": agent_id, "model": model, "sid": sid}


def test_attach_shows_the_history_follows_the_stream_and_co_drives(
    omnigent: Omnigent, http_client: httpx.Client, live_server: str, mock_llm_server_url: str
) -> None:
    # Given a session with one finished turn
    answers = [
        {"text": "first answer"},
        {"text": "answer to elsewhere", "block": True},
        {"text": "answer to attach"},
    ]
    _, _, sid = new_mock_agent_session(http_client, mock_llm_server_url, "attach", answers)
    run_turn(http_client, sid, "first question")

    # (omnigent's stream replays nothing: its adapter's debug line, in the CLI's log, says it listens)
    with omnigent.tty("attach", sid, "--server", live_server, OMNIGENT_SESSIONS_ADAPTER_DEBUG="1") as tty:
        # When omnigent attaches, then it shows the session's history
        tty.expect("first question")
        tty.expect("first answer")
        cli_log_says(omnigent, f"subscribing /stream {sid}")
        # And a turn another client starts streams into it (its model call held until attach listens)
        events = f"/v1/sessions/{sid}/events"
        assert http_client.post(events, json=message_event("asked elsewhere")).status_code == 202
        wait_for_gate(mock_llm_server_url)
        time.sleep(0.5)
        release_gate(mock_llm_server_url)
        tty.expect("answer to elsewhere")
        wait_status(http_client, sid, "idle")
        # And a prompt typed there runs on the session
        say(tty, "typed in attach")
        tty.expect("answer to attach")
        wait_status(http_client, sid, "idle")
        say(tty, "/quit")
        assert tty.wait() == 0, tty.tail()
    items = http_client.get(f"/v1/sessions/{sid}/items").json()["data"]
    texts = [b["text"] for i in items if i["type"] == "message" for b in i["content"]]
    assert texts == [
        "first question",
        "first answer",
        "asked elsewhere",
        "answer to elsewhere",
        "typed in attach",
        "answer to attach",
    ]


def test_run_fork_opens_the_repl_on_a_fork_with_the_history(
    omnigent: Omnigent, http_client: httpx.Client, live_server: str, mock_llm_server_url: str
) -> None:
    # Given a session with one finished turn
    s = scripted(http_client, mock_llm_server_url, "fork", ["before the fork", "after the fork"])
    sid = s["sid"]
    run_turn(http_client, sid, "original question")

    name = http_client.get(f"/v1/sessions/{sid}").json()["agent_name"]

    with omnigent.tty("run", "--server", live_server, "--fork", sid) as tty:
        # When `omnigent run --fork` opens (the agent picked by name), then it shows the source's history
        pick_agent(tty, name)
        tty.expect("original question")
        tty.expect("before the fork")
        say(tty, "in the fork")
        tty.expect("after the fork")
        say(tty, "/quit")
        assert tty.wait() == 0, tty.tail()

    # And the turn ran on a child of the source, with the source's turn as history
    children = http_client.get(f"/v1/sessions/{sid}/child_sessions").json()["data"]
    assert len(children) == 1, children
    sent = get_mock_requests(mock_llm_server_url, key=s["model"])[-1]
    assert input_texts(sent) == ["original question", "before the fork", "in the fork"]
    source_items = http_client.get(f"/v1/sessions/{sid}/items").json()["data"]
    assert len(source_items) == 2  # the fork's turn is not the source's
