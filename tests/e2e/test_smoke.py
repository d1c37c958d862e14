"""``skyloop smoke`` as users run it: the real command against a real ``skyloop dev``.

Passing runs (open and token-protected stacks), and the faults the command
must report: a wrong token (exit 1, the auth step fails, nothing else runs), a
step that fails (exit 1, a FAIL line, cleanup still ran), an unreachable
endpoint (exit 2). The ``openai`` and ``webhook`` steps also run through a proxy
that falsifies what their checks rest on (a turn's text, a delivery's attempts),
and must fail then.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.e2e.conftest import LOOPBACK, _free_port
from tests.e2e.tampering_proxy import TamperingProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.e2e.conftest import DevProcess

SCENARIO_STEPS = [
    "seed",
    "resume",
    "approve",
    "decline",
    "interrupt",
    "openai",
    "webhook",
    "bad:unknown-session",
    "bad:malformed-json",
    "bad:unknown-call",
    "bad:invalid-agent",
    "bad:oversize-output",
]
ALL_STEPS = ["health", "auth", "register", *SCENARIO_STEPS, "cleanup"]
STEP_LINE = re.compile(r"^(?P<mark>[✓✗]) (?P<name>\S+)\s+(?P<ms>\d+) ms  (?P<detail>.*)$")
WEBHOOK_DETAIL = re.compile(
    r"^agent\.session\.created delivered to (?P<url>http://127\.0\.0\.1:\d+/health) [\d.]+ s after the "
    r"session's creation: attempt 1 recorded, HTTP 404$"
)
WEBHOOK_ID = re.compile(r", webhook endpoint ([0-9a-f]{32})$")


def _skyloop() -> list[str]:
    """The installed console script next to this interpreter (what a user types), else ``-m skyloop``."""
    script = Path(sys.executable).parent / "skyloop"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "skyloop"]


def smoke(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    # no token or config file of the developer's: each test says what it sends
    env_free = {"SKYLOOP_TOKEN": "", "SKYLOOP_CONFIG": "/nonexistent/skyloop-smoke-test.toml"}
    return subprocess.run(
        [*_skyloop(), "smoke", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env_free},
        check=False,
    )


def steps(stdout: str) -> tuple[dict[str, tuple[str, str]], str]:
    """``{step: (mark, detail)}`` from the step lines, and the final line; every other line is a failure."""
    lines = stdout.strip().splitlines()
    found: dict[str, tuple[str, str]] = {}
    for line in lines[:-1]:
        m = STEP_LINE.match(line)
        assert m, f"not a step line: {line!r}\n{stdout}"
        assert m["name"] not in found, f"step {m['name']} printed twice"
        found[m["name"]] = (m["mark"], m["detail"])
    return found, lines[-1]


def agent_name(found: dict[str, tuple[str, str]]) -> str:
    m = re.search(r"agent (smoke-[0-9a-f]{8}) ", found["register"][1])
    assert m, found["register"]
    return m.group(1)


def nonce(found: dict[str, tuple[str, str]]) -> str:
    return agent_name(found).removeprefix("smoke-")


def openai_text(turn: str, run: str) -> str:
    """The smoke agent's scripted answer to the openai step's turn ``one`` or ``two``."""
    return f"OpenAI Agents API turn {turn} of smoke {run}."


def webhook_gone(url: str, found: dict[str, tuple[str, str]], token: str | None = None) -> bool:
    """The webhook endpoint cleanup names was deleted (404 now)."""
    m = WEBHOOK_ID.search(found["cleanup"][1])
    assert m, found["cleanup"]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return LOOPBACK.get(f"{url}/v1/webhooks/{m.group(1)}", headers=headers, timeout=10).status_code == 404


def agent_exists(url: str, name: str, token: str | None = None) -> bool:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = LOOPBACK.get(f"{url}/v1/agents", params={"name": name}, headers=headers, timeout=10)
    resp.raise_for_status()
    return bool(resp.json()["data"])


# ------------------------------------------------------------------------------ passing
def test_smoke_passes_every_step_against_skyloop_dev(live_server: str) -> None:
    # When the command runs against the local stack
    proc = smoke("--endpoint", live_server)
    # Then it exits 0 with one passing line per step, in order, and PASS n/n
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found, last = steps(proc.stdout)
    assert list(found) == ALL_STEPS
    assert all(mark == "✓" for mark, _ in found.values()), proc.stdout
    assert last == f"PASS {len(ALL_STEPS)}/{len(ALL_STEPS)}"
    # And the details say what was proved
    assert found["seed"][1].startswith("parked on Glob, Read, Write")
    assert "= the replay, each once, no gap" in found["resume"][1]
    assert "session.interrupted, response.cancelled, idle" in found["interrupt"][1]
    assert found["bad:oversize-output"][1].startswith("413 payload_too_large")
    # And both turns went through OpenAI's SDK, and a lifecycle event reached the webhook endpoint
    run = nonce(found)
    assert f"create(stream=True) → {openai_text('one', run)!r}, idle;" in found["openai"][1]
    assert f"events.stream → {openai_text('two', run)!r}, idle;" in found["openai"][1]
    hook = WEBHOOK_DETAIL.match(found["webhook"][1])
    assert hook, found["webhook"]
    assert hook["url"] == f"{live_server}/health"
    # And it left nothing behind
    assert found["cleanup"][1].startswith("deleted 8 session(s) and agent smoke-")
    assert not agent_exists(live_server, agent_name(found))
    assert webhook_gone(live_server, found)


@pytest.fixture(scope="module")
def secured(skyloop_dev_factory: Callable[..., DevProcess]) -> tuple[str, str]:
    """A stack requiring tokens, as the cloud always runs; (url, its token)."""
    handle = skyloop_dev_factory({"SKYLOOP_TOKEN_CACHE_S": "0"}, ["--require-token"])
    url = handle.ready()
    token = re.search(r"bearer token:\s+(\S+)", handle.log_path.read_text())
    assert token, handle.log_path.read_text()
    return url, token.group(1)


def test_smoke_passes_with_the_token_of_a_stack_that_requires_one(secured: tuple[str, str]) -> None:
    url, token = secured
    proc = smoke("--endpoint", url, "--token", token)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found, last = steps(proc.stdout)
    assert found["auth"] == ("✓", "401 without the token, 200 with it; runner default online")
    assert last == f"PASS {len(ALL_STEPS)}/{len(ALL_STEPS)}"
    assert not agent_exists(url, agent_name(found), token)
    assert webhook_gone(url, found, token)


def test_json_report_and_only(live_server: str) -> None:
    proc = smoke("--endpoint", live_server, "--only", "bad-inputs", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    names = [s["name"] for s in report["steps"]]
    assert names == [
        "health",
        "auth",
        "register",
        *[s for s in SCENARIO_STEPS if s.startswith("bad:")],
        "cleanup",
    ]
    assert report["ok"] is True
    assert report["summary"] == f"PASS {len(names)}/{len(names)}"
    assert all(isinstance(s["ms"], float) and s["ok"] for s in report["steps"])


def test_keep_leaves_the_agent_and_sessions(live_server: str) -> None:
    proc = smoke("--endpoint", live_server, "--only", "decline", "--keep")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found, _ = steps(proc.stdout)
    name = agent_name(found)
    assert found["cleanup"][1].startswith(f"kept (--keep): agent {name}, sessions ")
    assert agent_exists(live_server, name)
    agent_id = LOOPBACK.get(f"{live_server}/v1/agents", params={"name": name}).json()["data"][0]["id"]
    httpx.delete(f"{live_server}/v1/agents/{agent_id}", params={"force": "true"}).raise_for_status()


# ----------------------------------------------------------------------- openai, webhook
def test_only_openai_runs_two_turns_through_the_openai_sdk(live_server: str) -> None:
    # When only the openai step runs
    proc = smoke("--endpoint", live_server, "--only", "openai")
    # Then it passes, each turn's scripted text read from the SDK's streams, and its session is deleted
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found, last = steps(proc.stdout)
    assert list(found) == ["health", "auth", "register", "openai", "cleanup"]
    assert last == "PASS 5/5"
    run = nonce(found)
    mark, detail = found["openai"]
    assert mark == "✓", detail
    assert re.fullmatch(
        rf"openai \S+: create\(stream=True\) → {re.escape(repr(openai_text('one', run)))}, idle; events\.create "
        rf"\+ events\.stream → {re.escape(repr(openai_text('two', run)))}, idle; \d+ events",
        detail,
    ), detail
    assert found["cleanup"] == ("✓", f"deleted 1 session(s) and agent {agent_name(found)}")


def _replace_in_openai_streams(old: bytes, new: bytes) -> Callable[[str, bytes], bytes]:
    def tamper(path: str, body: bytes) -> bytes:
        return body.replace(old, new) if path.startswith("/openai/v1/agents/sessions") else body

    return tamper


@pytest.mark.parametrize(
    ("turn", "which"),
    [
        ("one", "the first turn (sessions.create(stream=True))"),
        ("two", "the second turn (sessions.events.create)"),
    ],
)
def test_the_openai_step_fails_when_a_turn_answers_other_text(
    live_server: str, turn: str, which: str
) -> None:
    # Given a proxy that changes one turn's assistant text on its way through /openai/v1
    with TamperingProxy(
        live_server, _replace_in_openai_streams(f"turn {turn}".encode(), b"turn zzz")
    ) as proxy:
        proc = smoke("--endpoint", proxy.url, "--only", "openai")
    # Then the openai step fails, saying which turn answered what instead of what
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found, last = steps(proc.stdout)
    mark, detail = found["openai"]
    assert mark == "✗"
    run = nonce(found)
    assert detail == (
        f"{which}: assistant text {openai_text('zzz', run)!r}, expected {openai_text(turn, run)!r}"
    )
    assert last == "FAIL 4/5 (failed: openai)"
    # And cleanup still deleted the session the step made
    assert found["cleanup"] == ("✓", f"deleted 1 session(s) and agent {agent_name(found)}")


def test_only_webhook_sees_a_delivery_attempt_and_deletes_the_endpoint(live_server: str) -> None:
    # When only the webhook step runs
    proc = smoke("--endpoint", live_server, "--only", "webhook")
    # Then it passes: the new session's agent.session.created was attempted at the endpoint's own /health
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found, last = steps(proc.stdout)
    assert list(found) == ["health", "auth", "register", "webhook", "cleanup"]
    assert last == "PASS 5/5"
    mark, detail = found["webhook"]
    assert mark == "✓", detail
    hook = WEBHOOK_DETAIL.match(detail)
    assert hook, detail
    assert hook["url"] == f"{live_server}/health"
    # And cleanup deleted the webhook endpoint with the session and the agent
    assert re.fullmatch(
        rf"deleted 1 session\(s\) and agent {agent_name(found)}, webhook endpoint [0-9a-f]{{32}}",
        found["cleanup"][1],
    ), found["cleanup"]
    assert webhook_gone(live_server, found)


def _no_attempts(path: str, body: bytes) -> bytes:
    """Every delivery listed as never attempted."""
    if not (path.startswith("/v1/webhooks/") and "/deliveries" in path):
        return body
    page = json.loads(body)
    for delivery in page.get("data", []):
        delivery["attempts"] = []
    return json.dumps(page).encode()


def test_the_webhook_step_fails_when_no_attempt_is_recorded(live_server: str) -> None:
    # Given a proxy that shows the webhook endpoint's deliveries without their attempts
    with TamperingProxy(live_server, _no_attempts) as proxy:
        proc = smoke("--endpoint", proxy.url, "--only", "webhook", "--timeout", "8")
    # Then the step waits (running one more turn for more events), then fails saying what it saw
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found, last = steps(proc.stdout)
    mark, detail = found["webhook"]
    assert mark == "✗"
    assert re.fullmatch(
        r"expected a delivery of session [0-9a-f]{32}'s events with an attempt recorded; after \d+ s and 1 extra "
        r"turn\(s\): agent\.session\.created \w+ \(no attempt\).*",
        detail,
    ), detail
    assert last == "FAIL 4/5 (failed: webhook)"
    # And cleanup deleted the webhook endpoint after the failure too
    assert found["cleanup"][0] == "✓", found["cleanup"]
    assert webhook_gone(live_server, found)


# -------------------------------------------------------------------------------- faults
def test_a_wrong_token_fails_the_auth_step_and_nothing_else_runs(secured: tuple[str, str]) -> None:
    url, _ = secured
    proc = smoke("--endpoint", url, "--token", "sky_wrong")
    # Then exit 1 (the endpoint answered: a failed check, not a usage error)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found, last = steps(proc.stdout)
    assert found["health"][0] == "✓"
    mark, detail = found["auth"]
    assert mark == "✗"
    assert "401 unauthorized" in detail
    # And every step after the gate is reported as not run; cleanup had nothing to delete
    for name in ["register", *SCENARIO_STEPS]:
        assert found[name] == ("✗", "not run: auth failed"), name
    assert found["cleanup"] == ("✓", "nothing to delete")
    assert last.startswith(f"FAIL 2/{len(ALL_STEPS)} (failed: auth, register, seed,")


def test_a_missing_token_says_how_to_give_one(secured: tuple[str, str]) -> None:
    url, _ = secured
    proc = smoke("--endpoint", url, "--only", "seed")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found, _ = steps(proc.stdout)
    assert found["auth"] == ("✗", "the endpoint requires a token: pass --token or set SKYLOOP_TOKEN")


def test_a_token_for_an_open_endpoint_is_a_failed_auth_step(live_server: str) -> None:
    proc = smoke("--endpoint", live_server, "--token", "sky_unneeded", "--only", "seed")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found, _ = steps(proc.stdout)
    assert found["auth"][0] == "✗"
    assert "the endpoint answers without one: it is open" in found["auth"][1]


def test_a_failing_step_fails_the_run_and_cleanup_still_runs(live_server: str) -> None:
    # Given a tool function that does not exist: the approved call's output is an error, not the echo
    proc = smoke(
        "--endpoint", live_server, "--tool-function", "no_such_function", "--only", "approve,decline"
    )
    # Then exit 1, the failing step says why, the others pass, and the last line is FAIL
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found, last = steps(proc.stdout)
    assert list(found) == ["health", "auth", "register", "approve", "decline", "cleanup"]
    mark, detail = found["approve"]
    assert mark == "✗"
    assert "the tool's output is \"Error: tool 'smoke_echo' failed" in detail
    assert found["decline"][0] == "✓"  # a declined call never runs, so it cannot fail
    assert last == "FAIL 5/6 (failed: approve)"
    # And cleanup still deleted what the run made
    assert found["cleanup"] == ("✓", f"deleted 2 session(s) and agent {agent_name(found)}")
    assert not agent_exists(live_server, agent_name(found))


def test_an_unreachable_endpoint_exits_2_with_a_clear_message() -> None:
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    proc = smoke("--endpoint", url, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert f"skyloop smoke: cannot reach {url}" in proc.stderr
    assert "is the URL right and the stack up?" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--endpoint", "localhost:8080"], "--endpoint must be an http(s) URL"),
        (["--endpoint", "http://127.0.0.1:1", "--only", "everything"], "unknown --only everything"),
        (["--endpoint", "http://127.0.0.1:1", "--timeout", "0"], "--timeout must be positive"),
        ([], "the following arguments are required: --endpoint"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    proc = smoke(*args, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
