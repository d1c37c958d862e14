"""Many sessions at once on one local stack: correctness under load, no timing.

20 sessions run 3 client-tool turns each, all at once, each watched by its own
live stream. The client answers every ``action_required`` call the instant
its frame arrives (the post goes out from the stream's own thread, before the
next frame is read). Every answer must be accepted (no ``404 No pending
call``: a published call is answerable at once), every turn must complete,
and every stream must have delivered each of its session's events exactly
once, in order, with no gap.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ECHO_TOOL, message_event, new_mock_agent_session, output_event
from tests.e2e.sse import iter_frames

pytestmark = pytest.mark.e2e

SESSIONS = 20
TURNS = 3
TURN_TIMEOUT_S = 60.0


@dataclass
class SessionRun:
    session_id: str
    posts: list[tuple[str, int, str]] = field(default_factory=list)  # (what, status, body)
    ids: list[int] = field(default_factory=list)
    completed: int = 0
    answered: list[str] = field(default_factory=list)
    error: str | None = None


def _script(turns: int, tag: str) -> list[dict[str, Any]]:
    responses: list[dict[str, Any]] = []
    for turn in range(turns):
        call = {"call_id": f"call_{tag}_{turn}", "name": "Echo", "arguments": {"text": f"{tag}-{turn}"}}
        responses += [{"tool_calls": [call]}, {"text": f"done {tag} {turn}"}]
    return responses


def _drive(base_url: str, run: SessionRun, turns: int) -> None:  # noqa: C901  (one client's reaction to every frame type)
    """Stream the session; post each message after the previous turn completed, each output at once."""
    timeout = httpx.Timeout(30.0, read=TURN_TIMEOUT_S)
    with (
        httpx.Client(base_url=base_url, timeout=timeout) as poster,
        httpx.Client(base_url=base_url, timeout=timeout) as streamer,
    ):

        def post(what: str, body: dict[str, Any]) -> bool:
            resp = poster.post(f"/v1/sessions/{run.session_id}/events", json=body)
            run.posts.append((what, resp.status_code, resp.text[:300]))
            if resp.status_code != 202:  # a refused answer leaves the turn parked: stop at once
                run.error = f"{what} answered {resp.status_code} {resp.text[:300]}"
            return resp.status_code == 202

        with streamer.stream("GET", f"/v1/sessions/{run.session_id}/stream") as resp:
            resp.raise_for_status()
            for frame in iter_frames(resp):
                if frame.id is not None:
                    run.ids.append(int(frame.id))
                kind = frame.data.get("type")
                item = frame.data.get("item") or {}
                if kind == "session.heartbeat" and not run.posts:
                    if not post("message 0", message_event("Echo turn 0", [ECHO_TOOL])):
                        return
                elif item.get("type") == "function_call" and item.get("status") == "action_required":
                    run.answered.append(item["call_id"])
                    if not post(f"output {item['call_id']}", output_event(item["call_id"], "echoed")):
                        return
                elif kind == "response.completed":
                    run.completed += 1
                    if run.completed == turns:
                        return
                    text = f"Echo turn {run.completed}"
                    if not post(f"message {run.completed}", message_event(text, [ECHO_TOOL])):
                        return
                elif kind in ("response.failed", "response.cancelled"):
                    run.error = f"turn ended with {kind}: {frame.data}"
                    return


def test_twenty_sessions_at_once_lose_nothing_and_every_output_is_accepted(
    http_client: httpx.Client, live_server: str, mock_llm_server_url: str
) -> None:
    # GIVEN 20 sessions, each with its own scripted model (3 tool-call turns)
    runs = []
    for n in range(SESSIONS):
        _, _, session_id = new_mock_agent_session(
            http_client, mock_llm_server_url, "load", _script(TURNS, f"s{n}")
        )
        runs.append(SessionRun(session_id))

    # WHEN all of them run at once, answering every call the instant it is published
    def guarded(run: SessionRun) -> None:
        try:
            _drive(live_server, run, TURNS)
        except Exception as exc:
            run.error = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=guarded, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TURN_TIMEOUT_S * 2)

    # THEN nothing failed, every answer was accepted, every turn completed ...
    assert not any(t.is_alive() for t in threads), "a session never finished"
    for run in runs:
        assert run.error is None, f"{run.session_id}: {run.error}"
        rejected = [p for p in run.posts if p[1] != 202]
        assert not rejected, f"{run.session_id}: rejected posts {rejected}"
        assert run.completed == TURNS
        assert len(run.answered) == TURNS

    # ... and each stream saw each of its session's events once, in order, with no gap
    for run in runs:
        assert run.ids == list(range(run.ids[0], run.ids[0] + len(run.ids))), run.ids
        last = http_client.get(f"/v1/sessions/{run.session_id}").json()["last_event_id"]
        replay = _replay_ids(live_server, run.session_id, after=run.ids[0] - 1, last=last)
        assert run.ids == replay[: len(run.ids)]
        assert run.ids[-1] >= replay[-1] - 2, "the stream stopped well before the session's last event"


def _replay_ids(base_url: str, session_id: str, *, after: int, last: int) -> list[int]:
    """Every stored event id after ``after`` through ``last``, as a reconnecting client reads them."""
    ids: list[int] = []
    with (
        httpx.Client(base_url=base_url, timeout=30) as client,
        client.stream(
            "GET", f"/v1/sessions/{session_id}/stream", headers={"Last-Event-ID": str(after)}
        ) as resp,
    ):
        for frame in iter_frames(resp):
            if frame.id is not None:
                ids.append(int(frame.id))
                if int(frame.id) >= last:
                    return ids
    return ids
