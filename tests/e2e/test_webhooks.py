"""Webhooks end to end on ``skyloop dev``: real receivers on loopback, real turns, signatures checked
with the ``standardwebhooks`` library and the ``openai`` SDK's ``webhooks.unwrap``.

One stack for the module, with tokens (two principals and an admin) and a
fast retry schedule (1, 2, 4, 8, 16 s), so the fault cases take seconds.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from skyloop.local.dev import OFFLINE_MODEL
from tests.e2e.conftest import (
    _free_port,
    _start,
    _stop,
    _wait_ready,
    configure_mock_llm,
    release_gate,
    wait_for_gate,
)
from tests.e2e.test_principals import mint
from tests.webhook_receiver import WebhookReceiver, free_port

pytestmark = pytest.mark.e2e
GLOB = {
    "type": "function",
    "function": {
        "name": "Glob",
        "description": "Find files",
        "parameters": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}},
            "required": ["pattern"],
        },
    },
}


@dataclass
class Stack:
    url: str
    tokens: dict[str, str]
    moto: str = ""

    def client(self, who: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.tokens[who]}"}, timeout=30
        )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    port = _free_port()
    log = tmp_path_factory.mktemp("webhooks") / "dev.log"
    env = {"SKYLOOP_WEBHOOK_RETRY_SCHEDULE": "1,2,4,8,16", "SKYLOOP_TOKEN_CACHE_S": "0", "OPENAI_API_KEY": ""}
    proc = _start(["dev", "--port", str(port), "--require-token", "--ephemeral"], log, env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log, "/health")
        moto = re.search(r"moto endpoint:\s+(\S+)", log.read_text())
        assert moto, log.read_text()
        tokens = {
            "alice": mint(moto.group(1), "alice"),
            "bob": mint(moto.group(1), "bob"),
            "admin": mint(moto.group(1), "ops", "admin"),
        }
        yield Stack(url, tokens, moto.group(1))
    finally:
        _stop(proc)


def offline_agent(client: httpx.Client, url: str) -> str:
    spec = {
        "name": f"hooked-{time.monotonic_ns()}",
        "prompt": "You help.",
        "executor": {
            "harness": "openai-agents",
            "model": OFFLINE_MODEL,
            "auth": {"type": "api_key", "api_key": "offline", "base_url": f"{url}/_mock/v1"},
        },
    }
    created = client.post("/v1/agents", json=spec)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def new_session(client: httpx.Client, agent_id: str) -> str:
    created = client.post("/v1/sessions", json={"agent_id": agent_id})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def post_message(
    client: httpx.Client, session_id: str, text: str, tools: list[dict[str, Any]] | None = None
) -> None:
    body: dict[str, Any] = {
        "type": "message",
        "data": {"role": "user", "content": [{"type": "input_text", "text": text}]},
    }
    if tools:
        body["tools"] = tools
    answer = client.post(f"/v1/sessions/{session_id}/events", json=body)
    assert answer.status_code == 202, answer.text


def add_endpoint(client: httpx.Client, url: str, **extra: Any) -> dict[str, Any]:
    created = client.post("/v1/webhooks", json={"url": url, **extra})
    assert created.status_code == 201, created.text
    body = dict(created.json())
    assert body["secret"].startswith("whsec_")
    return body


def wait_idle(client: httpx.Client, session_id: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while client.get(f"/v1/sessions/{session_id}").json()["status"] != "idle":
        assert time.monotonic() < deadline, f"session {session_id} never went idle"
        time.sleep(0.05)


def verify_both_ways(received: Any, secret: str) -> dict[str, Any]:
    """The delivery verifies with standardwebhooks and unwraps with openai's SDK into its typed event."""
    from openai import OpenAI
    from standardwebhooks.webhooks import Webhook

    payload = Webhook(secret).verify(received.body, received.headers)
    unwrapped = OpenAI(api_key="unused", webhook_secret=secret).webhooks.unwrap(
        received.body, received.headers
    )
    assert unwrapped.type == payload["type"]
    assert unwrapped.id == payload["id"] == received.webhook_id
    return dict(payload)


# ------------------------------------------------------------------------ the client-tool turn
def test_a_client_tool_turn_is_driven_from_webhooks_alone(stack: Stack, mock_llm_server_url: str) -> None:
    # GIVEN alice's endpoint and a session whose model asks for Glob (held at the mock's gate)
    with WebhookReceiver() as receiver, stack.client("alice") as alice:
        secret = add_endpoint(alice, receiver.url)["secret"]
        model = f"mock-hooked-{time.monotonic_ns()}"
        configure_mock_llm(
            mock_llm_server_url,
            [
                {
                    "block": True,
                    "tool_calls": [
                        {"call_id": "call_glob1", "name": "Glob", "arguments": '{"pattern": "*.py"}'}
                    ],
                },
                {"text": "Found a.py."},
            ],
            key=model,
        )
        spec = {
            "name": f"gated-{time.monotonic_ns()}",
            "prompt": "You help.",
            "executor": {
                "harness": "openai-agents",
                "model": model,
                "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{mock_llm_server_url}/v1"},
            },
        }
        agent_id = alice.post("/v1/agents", json=spec).json()["id"]
        session_id = new_session(alice, agent_id)
        # WHEN a turn starts with no stream open
        post_message(alice, session_id, "list the python files", [GLOB])
        started = receiver.wait_for("agent.session.in_progress", session_id=session_id, timeout=15)
        wait_for_gate(mock_llm_server_url)
        released = time.time()
        release_gate(mock_llm_server_url)  # the model answers now: the result's append parks the turn
        # THEN action_required arrives within a second of it, carrying the call
        action = receiver.wait_for("agent.session.action_required", session_id=session_id, timeout=10)
        assert action.at - released < 1.0, (
            f"action_required {action.at - released:.3f}s after the model answered"
        )
        event = verify_both_ways(action, secret)
        (call,) = event["data"]["required_action"]["calls"]
        assert event["data"]["required_action"]["type"] == "function_call"
        assert call == {"call_id": "call_glob1", "name": "Glob", "arguments": '{"pattern": "*.py"}'}
        assert event["data"]["turn_id"] == verify_both_ways(started, secret)["data"]["turn_id"]
        # WHEN the test answers the call from the webhook alone
        answered = alice.post(
            f"/v1/sessions/{session_id}/events",
            json={"type": "function_call_output", "data": {"call_id": call["call_id"], "output": "a.py"}},
        )
        assert answered.status_code == 202, answered.text
        # THEN the turn completes and says so
        idle = verify_both_ways(
            receiver.wait_for("agent.session.idle", session_id=session_id, timeout=30), secret
        )
        assert idle["data"]["status"] == "completed"
        assert idle["data"]["turn_id"] == event["data"]["turn_id"]
        order = [r.event["type"] for r in receiver.events(session_id=session_id)]
        assert order == [
            "agent.session.created",
            "agent.session.in_progress",
            "agent.session.action_required",
            "agent.session.idle",
        ], order


# ------------------------------------------------------------------------------- faults
def test_a_failing_receiver_gets_the_event_again_under_one_id(stack: Stack) -> None:
    # GIVEN a receiver that answers 500 twice, then 200, subscribed to in_progress only
    with WebhookReceiver() as receiver, stack.client("alice") as alice:
        endpoint = add_endpoint(alice, receiver.url, events=["agent.session.in_progress"])
        agent_id = offline_agent(alice, stack.url)
        session_id = new_session(alice, agent_id)
        receiver.fail_next(500, 500)
        # WHEN a turn starts
        post_message(alice, session_id, "hello")
        # THEN the event comes three times under one webhook-id, each signed
        third = receiver.wait_for("agent.session.in_progress", session_id=session_id, count=3, timeout=20)
        tries = receiver.events("agent.session.in_progress", session_id)
        assert len(tries) == 3
        assert {t.webhook_id for t in tries} == {third.webhook_id}
        assert len({t.headers["webhook-signature"] for t in tries}) >= 1
        verify_both_ways(third, endpoint["secret"])
        # AND the deliveries show three attempts: two failed with their next retry, one that succeeded
        deadline = time.monotonic() + 10
        while True:
            page = alice.get(f"/v1/webhooks/{endpoint['id']}/deliveries").json()["data"]
            (delivery,) = [d for d in page if d["id"] == third.webhook_id]
            if delivery["status"] == "succeeded" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        attempts = delivery["attempts"]
        assert [(a["attempt"], a["status"], a["response_code"]) for a in attempts] == [
            (1, "failed", 500),
            (2, "failed", 500),
            (3, "succeeded", 200),
        ]
        assert attempts[0]["next_retry_at"]
        assert attempts[1]["next_retry_at"]
        assert not attempts[2]["next_retry_at"]
        assert all(a["latency_ms"] >= 0 for a in attempts)
        # no other type reached this endpoint
        assert {r.event["type"] for r in receiver.received} == {"agent.session.in_progress"}


def test_a_receiver_down_for_ten_seconds_gets_every_event_after_it_comes_back(stack: Stack) -> None:
    port = free_port()
    receiver = WebhookReceiver(port)
    with stack.client("alice") as alice:
        endpoint = add_endpoint(alice, receiver.url)
        agent_id = offline_agent(alice, stack.url)
        # GIVEN the receiver is down while a session is created and runs a turn
        session_id = new_session(alice, agent_id)
        post_message(alice, session_id, "hello")
        wait_idle(alice, session_id)
        time.sleep(10)  # down for ten seconds and more
        # WHEN it comes back
        receiver.start()
        try:
            # THEN every event of the session arrives, each once, in order
            receiver.wait_for("agent.session.idle", session_id=session_id, timeout=30)
            time.sleep(1)
            types = [r.event["type"] for r in receiver.events(session_id=session_id)]
            assert types == ["agent.session.created", "agent.session.in_progress", "agent.session.idle"], (
                types
            )
            page = alice.get(f"/v1/webhooks/{endpoint['id']}/deliveries").json()["data"]
            ours = {d["event_type"]: d for d in page if d["session_id"] == session_id}
            assert all(d["status"] == "succeeded" for d in ours.values())
            # the first event was retried while the receiver was down; the later ones waited behind it
            created = ours["agent.session.created"]["attempts"]
            assert len(created) > 2
            assert all(a["response_code"] is None for a in created[:-1])
        finally:
            receiver.stop()


def test_twenty_turns_over_five_sessions_deliver_each_event_once_to_its_owner_only(stack: Stack) -> None:
    with (
        WebhookReceiver() as mine,
        WebhookReceiver() as only_idle,
        WebhookReceiver() as bobs,
        WebhookReceiver() as admins,
        stack.client("alice") as alice,
        stack.client("bob") as bob,
        stack.client("admin") as admin,
    ):
        # GIVEN alice's endpoint for everything, alice's for idle only, bob's, and an admin's for all sessions
        add_endpoint(alice, mine.url)
        add_endpoint(alice, only_idle.url, events=["agent.session.idle"])
        add_endpoint(bob, bobs.url)
        assert alice.post("/v1/webhooks", json={"url": mine.url, "all_sessions": True}).status_code == 403
        add_endpoint(admin, admins.url, all_sessions=True)
        agent_id = offline_agent(alice, stack.url)
        sessions = [new_session(alice, agent_id) for _ in range(5)]

        # WHEN 20 turns run, four per session, the sessions side by side
        def four_turns(session_id: str) -> None:
            with stack.client("alice") as client:
                for n in range(4):
                    post_message(client, session_id, f"hello {n}")
                    wait_idle(client, session_id, timeout=60)

        threads = [threading.Thread(target=four_turns, args=(s,)) for s in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        # THEN each session delivers created, then in_progress and idle per turn: 45 events, each id once
        for session_id in sessions:
            mine.wait_for("agent.session.idle", session_id=session_id, count=4, timeout=30)
            only_idle.wait_for("agent.session.idle", session_id=session_id, count=4, timeout=30)
        time.sleep(1.5)  # anything extra would come now
        ours = [r for r in mine.received if r.event["data"]["id"] in sessions]
        assert Counter(r.event["type"] for r in ours) == {
            "agent.session.created": 5,
            "agent.session.in_progress": 20,
            "agent.session.idle": 20,
        }
        assert max(Counter(r.webhook_id for r in ours).values()) == 1, "an event was delivered twice"
        for session_id in sessions:
            types = [r.event["type"] for r in mine.events(session_id=session_id)]
            assert (
                types == ["agent.session.created"] + ["agent.session.in_progress", "agent.session.idle"] * 4
            )
        # the idle-only endpoint got nothing else; bob's got none of alice's; the admin's got them all
        assert {r.event["type"] for r in only_idle.received} == {"agent.session.idle"}
        assert not [r for r in bobs.received if r.event["data"]["id"] in sessions]
        assert sorted(r.webhook_id for r in admins.received if r.event["data"]["id"] in sessions) == sorted(
            r.webhook_id for r in ours
        )


# ------------------------------------------------------------------------------ the API
@pytest.mark.parametrize(
    "body",
    [
        {"url": "not a url"},
        {"url": "ftp://example.com/hook"},
        {"url": "http://"},
        {"url": "http://example.com:99999/hook"},
        {"url": "http://10.0.0.8/hook"},
        {"url": "http://169.254.169.254/latest"},
        {"url": "http://127.0.0.1:9/hook", "events": ["agent.session.nope"]},
        {"url": "http://127.0.0.1:9/hook", "extra": 1},
    ],
)
def test_bad_endpoints_are_400_and_nothing_is_written(stack: Stack, body: dict[str, Any]) -> None:
    with stack.client("alice") as alice:
        before = alice.get("/v1/webhooks").json()["data"]
        answer = alice.post("/v1/webhooks", json=body)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] in ("invalid_input", "url_not_allowed")
        assert alice.get("/v1/webhooks").json()["data"] == before


def test_endpoints_are_owned_rotated_tested_and_reenabled(stack: Stack) -> None:
    with WebhookReceiver() as receiver, stack.client("alice") as alice, stack.client("bob") as bob:
        created = add_endpoint(alice, receiver.url, description="ops")
        wid = created["id"]
        # another principal's endpoint is not found, on every route
        for method, path in [
            ("GET", ""),
            ("PATCH", ""),
            ("DELETE", ""),
            ("POST", "/rotate_secret"),
            ("GET", "/deliveries"),
            ("POST", "/test"),
        ]:
            kwargs = {"json": {}} if method in ("PATCH", "POST") else {}
            assert bob.request(method, f"/v1/webhooks/{wid}{path}", **kwargs).status_code == 404
        listed = alice.get("/v1/webhooks").json()["data"]
        assert [e["id"] for e in listed if e["id"] == wid] == [wid]
        assert "secret" not in listed[0]
        assert all(e["id"] != wid for e in bob.get("/v1/webhooks").json()["data"])
        # a test event is signed and reported
        tested = alice.post(f"/v1/webhooks/{wid}/test", json={}).json()
        assert tested["success"] is True
        assert tested["status_code"] == 200
        verify_both_ways(receiver.received[-1], created["secret"])
        # a rotation signs with both secrets during its grace period: either verifies
        rotated = alice.post(f"/v1/webhooks/{wid}/rotate_secret", json={"grace_period_s": 3600}).json()
        assert rotated["secret"] != created["secret"]
        alice.post(f"/v1/webhooks/{wid}/test", json={})
        last = receiver.received[-1]
        assert len(last.headers["webhook-signature"].split(" ")) == 2
        verify_both_ways(last, created["secret"])
        verify_both_ways(last, rotated["secret"])
        # disabled, then re-enabled by PATCH
        off = alice.patch(f"/v1/webhooks/{wid}", json={"enabled": False}).json()
        assert off["status"] == "disabled"
        assert off["disabled_reason"]
        on = alice.patch(f"/v1/webhooks/{wid}", json={"enabled": True}).json()
        assert on["status"] == "enabled"
        assert on["disabled_reason"] is None
        assert alice.delete(f"/v1/webhooks/{wid}").status_code == 200
        assert alice.get(f"/v1/webhooks/{wid}").status_code == 404


# ------------------------------------------------------------------------ CLI and EventBridge
def test_cli_and_events_tail(stack: Stack) -> None:
    """``skyloop webhooks`` manages endpoints; ``skyloop events tail`` prints moto's EventBridge events."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "SKYLOOP_URL": stack.url,
        "SKYLOOP_TOKEN": stack.tokens["alice"],
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "skyloop", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    with WebhookReceiver() as receiver:
        added = json.loads(cli("webhooks", "add", receiver.url, "--event", "agent.session.idle", "--json"))
        assert added["secret"].startswith("whsec_")
        assert added["id"] in cli("webhooks", "ls")
        assert "test ok: 200" in cli("webhooks", "test", added["id"])
        assert "skyloop.webhook.test" in cli("webhooks", "deliveries", added["id"])
        claude = json.loads(cli("webhooks", "add", receiver.url, "--format", "anthropic", "--json"))
        assert claude["format"] == "anthropic"
        assert "test ok: 200" in cli("webhooks", "test", claude["id"])
        cli("webhooks", "rm", claude["id"])
        # the tail runs while a session is created and runs a turn
        tail = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "skyloop",
                "events",
                "tail",
                "--endpoint-url",
                stack.moto,
                "--region",
                "us-east-1",
                "--count",
                "3",
                "--timeout",
                "60",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert tail.stderr is not None
            assert "tailing skyloop-local" in tail.stderr.readline()
            with stack.client("alice") as alice:
                session_id = new_session(alice, offline_agent(alice, stack.url))
                post_message(alice, session_id, "hello")
            out, _ = tail.communicate(timeout=60)
        finally:
            tail.kill()
        events = [json.loads(line) for line in out.splitlines()]
        assert [(e["type"], e["data"]["id"]) for e in events] == [
            ("agent.session.created", session_id),
            ("agent.session.in_progress", session_id),
            ("agent.session.idle", session_id),
        ]
        assert receiver.wait_for("agent.session.idle", session_id=session_id).event["id"] == events[2]["id"]
        assert "deleted webhook" in cli("webhooks", "rm", added["id"])
