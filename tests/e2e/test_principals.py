"""Two principals on one local stack (``skyloop dev --require-token``): neither sees nor changes the other's.

Every route of the API's own OpenAPI document is tried as another principal
with alice's ids and a valid body: each answers 404 exactly as an unknown id
does, and alice's agent, session, items and stream are unchanged afterwards. A
route added without a case here fails the suite.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from skyloop.local.dev import OFFLINE_MODEL
from tests.e2e.conftest import LOOPBACK, _free_port, _start, _stop, _wait_ready
from tests.e2e.sse import run_turn
from tests.oidc_issuer import AUDIENCE, TestIssuer

pytestmark = pytest.mark.e2e
UNKNOWN = "0123456789abcdef0123456789abcdef"


@dataclass
class Tenants:
    url: str
    moto: str
    log: Any
    tokens: dict[str, str]
    agent_id: str
    session_id: str
    issuer: TestIssuer
    file_id: str = ""
    webhook_id: str = ""
    task_id: str = ""
    automation_id: str = ""
    environment_id: str = ""

    def client(self, who: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.tokens[who]}"}, timeout=30
        )


def mint(moto: str, principal: str, *scopes: str) -> str:
    """A token from the operator's CLI, as a deployment's admin would mint it."""
    args = [sys.executable, "-m", "skyloop", "token", "create", "--name", principal, "--principal", principal]
    for scope in scopes:
        args += ["--scope", scope]
    args += ["--table", "skyloop-local", "--endpoint-url", moto, "--region", "us-east-1"]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
    out = subprocess.run(args, capture_output=True, text=True, env=env, check=True).stdout
    assert f"principal '{principal}'" in out, out
    return out.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    port = _free_port()
    log = tmp_path_factory.mktemp("tenants") / "dev.log"
    issuer = TestIssuer().__enter__()
    env = {
        "SKYLOOP_TOKEN_CACHE_S": "0",
        "POWERTOOLS_LOG_LEVEL": "INFO",  # audit lines are INFO
        "SKYLOOP_JWT_ISSUER": issuer.issuer,
        "SKYLOOP_JWT_AUDIENCE": AUDIENCE,
    }
    proc = _start(["dev", "--port", str(port), "--require-token", "--ephemeral"], log, env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log, "/health")
        moto = re.search(r"moto endpoint:\s+(\S+)", log.read_text())
        assert moto, log.read_text()
        tokens = {
            "alice": mint(moto.group(1), "alice"),
            "bob": mint(moto.group(1), "bob"),
            "alice-reader": mint(moto.group(1), "alice", "read"),
            "admin": mint(moto.group(1), "ops", "admin"),
        }
        t = Tenants(url, moto.group(1), log, tokens, "", "", issuer)
        with t.client("alice") as alice:
            spec = {
                "name": "helper",
                "prompt": "You help.",
                "executor": {
                    "harness": "openai-agents",
                    "model": OFFLINE_MODEL,
                    "auth": {"type": "api_key", "api_key": "offline", "base_url": f"{url}/_mock/v1"},
                },
            }
            agent = alice.post("/v1/agents", json=spec)
            assert agent.status_code == 201, agent.text
            t.agent_id = agent.json()["id"]
            session = alice.post("/v1/sessions", json={"agent_id": t.agent_id, "title": "alice's"})
            assert session.status_code == 201, session.text
            t.session_id = session.json()["id"]
            message = {
                "type": "message",
                "data": {"role": "user", "content": [{"type": "input_text", "text": "hello"}]},
            }
            turn = run_turn(
                alice,
                base_url=url,
                session_id=t.session_id,
                post=lambda: alice.post(
                    f"/v1/sessions/{t.session_id}/events", json=message
                ).raise_for_status(),
            )
            assert turn.status == "completed"
            upload = alice.post(
                f"/v1/sessions/{t.session_id}/resources/files", files={"file": ("notes.txt", b"alice's")}
            )
            assert upload.status_code == 201, upload.text
            t.file_id = upload.json()["id"]
            hook = alice.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/alice"})
            assert hook.status_code == 201, hook.text
            t.webhook_id = hook.json()["id"]
            task = alice.post(
                "/v1/scheduled-tasks",
                json={
                    "name": "alice's",
                    "prompt": "p",
                    "rrule": "FREQ=DAILY;BYHOUR=9",
                    "agent_id": t.agent_id,
                },
            )
            assert task.status_code == 200, task.text
            t.task_id = task.json()["id"]
            automation = alice.post(
                "/openai/v1/agents/automations",
                json={
                    "type": "periodic",
                    "name": "alice's report",
                    "expression": "0 9 * * *",
                    "timezone": "UTC",
                    "target": {
                        "type": "new_session",
                        "agent_id": t.agent_id,
                        "environment": {"type": "none"},
                        "input": [
                            {
                                "type": "message",
                                "role": "user",
                                "content": [{"type": "input_text", "text": "report"}],
                            }
                        ],
                    },
                },
            )
            assert automation.status_code == 200, automation.text
            t.automation_id = automation.json()["id"]
            environment = alice.post(
                "/anthropic/v1/environments", json={"name": "alice's", "config": {"type": "self_hosted"}}
            )
            assert environment.status_code == 200, environment.text
            t.environment_id = environment.json()["id"]
        yield t
    finally:
        _stop(proc)
        issuer.__exit__(None, None, None)


def alice_state(t: Tenants) -> dict[str, Any]:
    """Everything of alice's another principal might change."""
    with t.client("alice") as alice:
        snapshot = alice.get(f"/v1/sessions/{t.session_id}").json()
        items = alice.get(f"/v1/sessions/{t.session_id}/items").json()["data"]
        agents = alice.get("/v1/agents").json()["data"]
        sessions = alice.get("/v1/sessions").json()["data"]
        children = alice.get(f"/v1/sessions/{t.session_id}/child_sessions").json()["data"]
        files = alice.get(f"/v1/sessions/{t.session_id}/resources/files").json()["data"]
        content = alice.get(f"/v1/sessions/{t.session_id}/resources/files/{t.file_id}/content").content
        webhooks = alice.get("/v1/webhooks").json()["data"]
        tasks = alice.get("/v1/scheduled-tasks").json()["scheduled_tasks"]
        runs = alice.get(f"/v1/scheduled-tasks/{t.task_id}/runs").json()["runs"]
        automation = alice.get(f"/openai/v1/agents/automations/{t.automation_id}").json()
        invocations = alice.get(f"/openai/v1/agents/automations/{t.automation_id}/invocations").json()["data"]
        endpoint = alice.get(f"/openai/v1/webhook_endpoints/{t.webhook_id}").json()
        environment = alice.get(f"/anthropic/v1/environments/{t.environment_id}").json()
    keep = ("status", "title", "labels", "archived", "last_seq", "runner_id", "agent_id", "usage")
    return {
        "session": {k: snapshot.get(k) for k in keep},
        "items": items,
        "agents": [a["id"] for a in agents],
        "sessions": [s["id"] for s in sessions],
        "children": children,
        "files": files,
        "content": content,
        "webhooks": webhooks,
        "tasks": [{k: task[k] for k in ("id", "name", "state", "rrule", "next_run_at")} for task in tasks],
        "runs": runs,
        "automation": automation,
        "invocations": invocations,
        "endpoint": endpoint,
        "environment": environment,
    }


MESSAGE = {"type": "message", "data": {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}}
FILE_UPLOAD = {"file": ("bob.txt", b"bob's")}  # a multipart upload (sent as files=, not json=)
# (method, OpenAPI path) -> a body that would succeed for the owner
CROSS_CASES: dict[tuple[str, str], dict[str, Any] | None] = {
    ("GET", "/v1/agents/{agent_id}"): None,
    ("DELETE", "/v1/agents/{agent_id}"): None,
    ("GET", "/v1/sessions/{session_id}"): None,
    ("PATCH", "/v1/sessions/{session_id}"): {"title": "bob was here", "archived": True},
    ("DELETE", "/v1/sessions/{session_id}"): None,
    ("GET", "/v1/sessions/{session_id}/items"): None,
    ("GET", "/v1/sessions/{session_id}/agent"): None,
    ("GET", "/v1/sessions/{session_id}/usage"): None,
    ("POST", "/v1/sessions/{session_id}/events"): MESSAGE,
    ("POST", "/v1/sessions/{session_id}/fork"): {},
    ("GET", "/v1/sessions/{session_id}/child_sessions"): None,
    ("GET", "/v1/sessions/{session_id}/resources/files"): None,
    ("POST", "/v1/sessions/{session_id}/resources/files"): FILE_UPLOAD,
    ("GET", "/v1/sessions/{session_id}/resources/files/{file_id}"): None,
    ("GET", "/v1/sessions/{session_id}/resources/files/{file_id}/content"): None,
    ("DELETE", "/v1/sessions/{session_id}/resources/files/{file_id}"): None,
    ("GET", "/v1/sessions/{session_id}/workspace"): None,
    ("GET", "/v1/sessions/{session_id}/workspace/content"): None,
    ("GET", "/v1/scheduled-tasks/{task_id}"): None,
    ("PATCH", "/v1/scheduled-tasks/{task_id}"): {"name": "bob's now", "state": "paused"},
    ("DELETE", "/v1/scheduled-tasks/{task_id}"): None,
    ("POST", "/v1/scheduled-tasks/{task_id}/run"): {},
    ("GET", "/v1/scheduled-tasks/{task_id}/runs"): None,
    ("GET", "/v1/scheduled-tasks/{task_id}/occurrences"): None,
    # OpenAI's Agents API (docs/openai.md): the same agents and sessions, the same owners
    ("GET", "/openai/v1/agents/{agent_id}"): None,
    ("POST", "/openai/v1/agents/{agent_id}"): {"instructions": "bob's now"},
    ("DELETE", "/openai/v1/agents/{agent_id}"): None,
    ("GET", "/openai/v1/agents/sessions/{session_id}"): None,
    ("POST", "/openai/v1/agents/sessions/{session_id}"): {"metadata": {"by": "bob"}},
    ("DELETE", "/openai/v1/agents/sessions/{session_id}"): None,
    ("POST", "/openai/v1/agents/sessions/{session_id}/events"): {
        "events": [
            {
                "type": "agent.session.input.message",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
            }
        ]
    },
    ("GET", "/openai/v1/agents/sessions/{session_id}/items"): None,
    ("GET", "/openai/v1/agents/sessions/{session_id}/turns"): None,
    ("GET", "/openai/v1/agents/sessions/{session_id}/turns/{turn_id}"): None,
    ("GET", "/openai/v1/agents/sessions/{session_id}/turns/{turn_id}/items"): None,
    ("GET", "/v1/webhooks/{webhook_id}"): None,
    ("PATCH", "/v1/webhooks/{webhook_id}"): {"url": "http://127.0.0.1:9/bob", "enabled": False},
    ("DELETE", "/v1/webhooks/{webhook_id}"): None,
    ("POST", "/v1/webhooks/{webhook_id}/rotate_secret"): {},
    ("GET", "/v1/webhooks/{webhook_id}/deliveries"): None,
    ("POST", "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"): {},
    ("POST", "/v1/webhooks/{webhook_id}/test"): {},
    # OpenAI's automations are scheduled tasks and its webhook endpoints are skyloop's: the same owners
    ("GET", "/openai/v1/agents/automations/{automation_id}"): None,
    ("POST", "/openai/v1/agents/automations/{automation_id}"): {"name": "bob's now"},
    ("DELETE", "/openai/v1/agents/automations/{automation_id}"): None,
    ("POST", "/openai/v1/agents/automations/{automation_id}/pause"): {},
    ("POST", "/openai/v1/agents/automations/{automation_id}/resume"): {},
    ("POST", "/openai/v1/agents/automations/{automation_id}/invocations"): {},
    ("GET", "/openai/v1/agents/automations/{automation_id}/invocations"): None,
    ("GET", "/openai/v1/agents/automations/{automation_id}/invocations/{invocation_id}"): None,
    ("GET", "/openai/v1/webhook_endpoints/{endpoint_id}"): None,
    ("POST", "/openai/v1/webhook_endpoints/{endpoint_id}"): {"url": "http://127.0.0.1:9/bob"},
    ("DELETE", "/openai/v1/webhook_endpoints/{endpoint_id}"): None,
    ("POST", "/openai/v1/webhook_endpoints/{endpoint_id}/rotate_secret"): {},
    ("POST", "/openai/v1/webhook_endpoints/{endpoint_id}/test"): {"event_type": "agent.session.idle"},
    # Claude Managed Agents (docs/anthropic.md): the same agents and sessions, environments of their own
    ("GET", "/anthropic/v1/agents/{agent_id}"): None,
    ("POST", "/anthropic/v1/agents/{agent_id}"): {"system": "bob's now"},
    ("POST", "/anthropic/v1/agents/{agent_id}/archive"): None,
    ("GET", "/anthropic/v1/agents/{agent_id}/versions"): None,
    ("GET", "/anthropic/v1/sessions/{session_id}"): None,
    ("POST", "/anthropic/v1/sessions/{session_id}"): {"title": "bob was here"},
    ("DELETE", "/anthropic/v1/sessions/{session_id}"): None,
    ("POST", "/anthropic/v1/sessions/{session_id}/archive"): None,
    ("POST", "/anthropic/v1/sessions/{session_id}/events"): {
        "events": [{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}]
    },
    ("GET", "/anthropic/v1/sessions/{session_id}/events"): None,
    ("GET", "/anthropic/v1/environments/{environment_id}"): None,
    ("POST", "/anthropic/v1/environments/{environment_id}"): {"name": "bob's now"},
    ("DELETE", "/anthropic/v1/environments/{environment_id}"): None,
    ("POST", "/anthropic/v1/environments/{environment_id}/archive"): None,
    ("GET", "/anthropic/v1/environments/{environment_id}/work"): None,
    ("GET", "/anthropic/v1/environments/{environment_id}/work/poll"): None,
    ("GET", "/anthropic/v1/environments/{environment_id}/work/stats"): None,
    ("GET", "/anthropic/v1/environments/{environment_id}/work/{work_id}"): None,
    ("POST", "/anthropic/v1/environments/{environment_id}/work/{work_id}"): {"metadata": {"by": "bob"}},
    ("POST", "/anthropic/v1/environments/{environment_id}/work/{work_id}/ack"): None,
    ("POST", "/anthropic/v1/environments/{environment_id}/work/{work_id}/heartbeat"): None,
    ("POST", "/anthropic/v1/environments/{environment_id}/work/{work_id}/stop"): {"force": True},
}
UNKNOWN_ENVIRONMENT = "env_" + UNKNOWN[:24]
# Routes with no id of alice's in the path: what bob can do with them is checked below.
NO_ID_ROUTES = {
    ("GET", "/health"),
    ("GET", "/v1/me"),  # the caller's own principal (the web console)
    ("GET", "/v1/tool_sets"),  # the client tool sets' schemas, the same for everyone
    ("GET", "/openapi.json"),
    ("GET", "/v1/info"),
    ("GET", "/api/version"),
    ("GET", "/v1/runners"),
    ("GET", "/v1/runners/{runner_id}/status"),
    ("GET", "/v1/agents"),
    ("POST", "/v1/agents"),
    ("GET", "/v1/sessions"),
    ("POST", "/v1/sessions"),
    ("GET", "/v1/scheduled-tasks"),
    ("POST", "/v1/scheduled-tasks"),
    ("GET", "/openai/v1/agents"),
    ("POST", "/openai/v1/agents"),
    ("GET", "/openai/v1/agents/sessions"),
    ("POST", "/openai/v1/agents/sessions"),
    ("GET", "/v1/webhooks"),
    ("POST", "/v1/webhooks"),
    ("GET", "/openai/v1/agents/automations"),
    ("POST", "/openai/v1/agents/automations"),
    ("GET", "/openai/v1/webhook_endpoints"),
    ("POST", "/openai/v1/webhook_endpoints"),
    ("GET", "/openai/v1/webhook_event_types"),
    ("GET", "/anthropic/v1/agents"),
    ("POST", "/anthropic/v1/agents"),
    ("GET", "/anthropic/v1/sessions"),
    ("POST", "/anthropic/v1/sessions"),
    ("GET", "/anthropic/v1/environments"),
    ("POST", "/anthropic/v1/environments"),
}


def error_code(body: dict[str, Any]) -> str:
    """skyloop's and OpenAI's ``error.code``; Anthropic's shape has it as ``error.details.error_code``."""
    error = body["error"]
    return str(error.get("code") or (error.get("details") or {}).get("error_code"))


def test_every_route_with_another_principals_id_is_not_found(tenants: Tenants) -> None:
    before = alice_state(tenants)
    with tenants.client("bob") as bob:
        doc = bob.get("/openapi.json").json()
    routes = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    # Every route of the API is covered by a case (a new route must say what bob gets)
    assert routes == set(CROSS_CASES) | NO_ID_ROUTES
    turn = f"resp_{UNKNOWN[:24]}"  # alice's turns are behind her session's id either way
    ids = {
        "agent_id": tenants.agent_id,
        "session_id": tenants.session_id,
        "file_id": tenants.file_id,
        "task_id": tenants.task_id,
        "turn_id": turn,
        "webhook_id": tenants.webhook_id,
        "delivery_id": "evt_" + UNKNOWN,
        "automation_id": tenants.automation_id,
        "invocation_id": UNKNOWN,
        "endpoint_id": tenants.webhook_id,
        "environment_id": tenants.environment_id,
        "work_id": "work_" + UNKNOWN,
    }
    with tenants.client("bob") as bob:
        for (method, path), body in CROSS_CASES.items():
            real = path.format(**ids)
            unknown = path.format(
                agent_id=UNKNOWN,
                session_id=UNKNOWN,
                file_id=UNKNOWN,
                turn_id=turn,
                webhook_id=UNKNOWN,
                delivery_id=UNKNOWN,
                task_id=UNKNOWN,
                automation_id=UNKNOWN,
                invocation_id=UNKNOWN,
                endpoint_id=UNKNOWN,
                environment_id=UNKNOWN_ENVIRONMENT,
                work_id="work_" + UNKNOWN,
            )
            sent: dict[str, Any] = {"files": body} if body is FILE_UPLOAD else {"json": body}
            # When bob names alice's id
            theirs = bob.request(method, real, **sent)
            mine = bob.request(method, unknown, **sent)
            # Then it is 404, exactly as an id that does not exist (nothing tells them apart)
            assert theirs.status_code == 404, (method, path, theirs.text)
            assert error_code(theirs.json()) in ("not_found", "environment_not_found"), theirs.text
            assert mine.status_code == theirs.status_code
            assert (
                theirs.json()["error"]["message"]
                .replace(tenants.agent_id, UNKNOWN)
                .replace(tenants.session_id, UNKNOWN)
                .replace(tenants.file_id, UNKNOWN)
                .replace(tenants.webhook_id, UNKNOWN)
                .replace(tenants.task_id, UNKNOWN)
                .replace(tenants.automation_id, UNKNOWN)
                .replace(tenants.environment_id, UNKNOWN_ENVIRONMENT)
                == mine.json()["error"]["message"]
            )
        # And a task of alice's agent cannot be scheduled: the agent is as unknown as one that does not exist
        task = {"name": "n", "prompt": "p", "rrule": "FREQ=DAILY"}
        theirs = bob.post("/v1/scheduled-tasks", json={**task, "agent_id": tenants.agent_id})
        mine = bob.post("/v1/scheduled-tasks", json={**task, "agent_id": UNKNOWN})
        assert (theirs.status_code, theirs.json()["error"]["param"]) == (400, "agent_id")
        assert (
            theirs.json()["error"]["message"].replace(tenants.agent_id, UNKNOWN)
            == mine.json()["error"]["message"]
        )
        assert bob.get("/v1/scheduled-tasks").json()["scheduled_tasks"] == []
        assert bob.get("/v1/scheduled-tasks", params={"owner": "alice"}).status_code == 403
        # And the stream too, with or without a cursor
        for headers in ({}, {"Last-Event-ID": "1"}):
            stream = bob.get(f"/v1/sessions/{tenants.session_id}/stream", headers=headers)
            assert stream.status_code == 404, stream.text
        # And a session of alice's agent cannot be opened
        opened = bob.post("/v1/sessions", json={"agent_id": tenants.agent_id})
        assert opened.status_code == 404, opened.text
        # And bob's lists show nothing of alice's
        assert bob.get("/v1/sessions").json()["data"] == []
        assert bob.get("/v1/agents").json()["data"] == []
        assert bob.get("/v1/agents", params={"scope": "user"}).json()["data"] == []
        assert bob.get("/v1/agents", params={"name": "helper"}).json()["data"] == []
        assert bob.get("/v1/webhooks").json()["data"] == []
        assert bob.get("/openai/v1/agents/automations").json()["data"] == []
        assert bob.get("/openai/v1/webhook_endpoints").json()["data"] == []
        for listing in ("agents", "sessions", "environments"):
            assert bob.get(f"/anthropic/v1/{listing}").json()["data"] == [], listing
        claude_stream = bob.get(f"/anthropic/v1/sessions/{tenants.session_id}/events/stream")
        assert claude_stream.status_code == 404, claude_stream.text
        opened_here = bob.post(
            "/anthropic/v1/sessions",
            json={"agent": tenants.agent_id, "environment_id": tenants.environment_id},
        )
        assert opened_here.status_code == 404, opened_here.text
        assert bob.get("/v1/webhooks", params={"owner": "alice"}).status_code == 403
        # And naming alice as the owner to list is refused to a non-admin
        refused = bob.get("/v1/sessions", params={"owner": "alice"})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "forbidden"
    # And nothing of alice's was written
    assert alice_state(tenants) == before


def test_owner_still_sees_and_streams_its_own(tenants: Tenants) -> None:
    with tenants.client("alice") as alice:
        assert alice.get(f"/v1/sessions/{tenants.session_id}").status_code == 200
        assert alice.get(f"/v1/agents/{tenants.agent_id}").status_code == 200
        with alice.stream("GET", f"/v1/sessions/{tenants.session_id}/stream?after=0") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")


def test_bobs_agent_of_the_same_name_is_a_separate_lineage(tenants: Tenants) -> None:
    with tenants.client("bob") as bob:
        spec = {"name": "helper", "prompt": "bob's", "executor": {"harness": "openai-agents", "model": "m"}}
        created = bob.post("/v1/agents", json=spec)
        assert created.status_code == 201, created.text
        found = bob.get("/v1/agents", params={"name": "helper"}).json()["data"]
    assert [a["id"] for a in found] == [created.json()["id"]]
    with tenants.client("alice") as alice:
        mine = alice.get("/v1/agents", params={"name": "helper"}).json()["data"]
    assert [a["id"] for a in mine] == [tenants.agent_id]


def test_read_only_token_reads_but_writes_nothing(tenants: Tenants) -> None:
    before = alice_state(tenants)
    with tenants.client("alice-reader") as reader:
        # Given alice's read-only token: her session reads fine
        assert reader.get(f"/v1/sessions/{tenants.session_id}").status_code == 200
        # When it tries any write
        for method, path, body in (
            ("POST", f"/v1/sessions/{tenants.session_id}/events", MESSAGE),
            ("PATCH", f"/v1/sessions/{tenants.session_id}", {"title": "x"}),
            ("DELETE", f"/v1/sessions/{tenants.session_id}", None),
            ("POST", "/v1/sessions", {"agent_id": tenants.agent_id}),
            ("POST", f"/v1/sessions/{tenants.session_id}/fork", {}),
            ("DELETE", f"/v1/sessions/{tenants.session_id}/resources/files/{tenants.file_id}", None),
            ("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/x"}),
            ("PATCH", f"/v1/webhooks/{tenants.webhook_id}", {"enabled": False}),
            ("PATCH", f"/v1/scheduled-tasks/{tenants.task_id}", {"state": "paused"}),
            ("POST", f"/v1/scheduled-tasks/{tenants.task_id}/run", None),
            ("DELETE", f"/v1/scheduled-tasks/{tenants.task_id}", None),
        ):
            resp = reader.request(method, path, json=body)
            # Then it is 403 forbidden
            assert resp.status_code == 403, (method, path, resp.text)
            assert resp.json()["error"]["code"] == "forbidden"
    # And nothing was written
    assert alice_state(tenants) == before


def test_admin_sees_every_principals_resources(tenants: Tenants) -> None:
    with tenants.client("admin") as admin:
        assert admin.get(f"/v1/sessions/{tenants.session_id}").status_code == 200
        listed = admin.get("/v1/sessions", params={"owner": "alice"}).json()["data"]
        assert tenants.session_id in [s["id"] for s in listed]
        assert admin.get(f"/v1/webhooks/{tenants.webhook_id}").status_code == 200
        hooks = admin.get("/v1/webhooks", params={"owner": "alice"}).json()["data"]
        assert tenants.webhook_id in [h["id"] for h in hooks]
        assert admin.get(f"/v1/scheduled-tasks/{tenants.task_id}").status_code == 200
        tasks = admin.get("/v1/scheduled-tasks", params={"owner": "alice"}).json()["scheduled_tasks"]
        # (an OpenAI automation is a scheduled task too, listed with its origin)
        assert sorted(t["id"] for t in tasks) == sorted([tenants.task_id, tenants.automation_id])
        assert admin.get(f"/openai/v1/agents/automations/{tenants.automation_id}").status_code == 200
        with admin.stream("GET", f"/v1/sessions/{tenants.session_id}/stream?after=0") as stream:
            assert stream.status_code == 200


def test_every_write_leaves_one_audit_line(tenants: Tenants) -> None:
    with tenants.client("alice") as alice:
        resp = alice.patch(f"/v1/sessions/{tenants.session_id}", json={"labels": {"audit": "yes"}})
        assert resp.status_code == 200
    with tenants.client("bob") as bob:
        assert bob.patch(f"/v1/sessions/{tenants.session_id}", json={"title": "no"}).status_code == 404
    lines = [entry for entry in map(_json_line, tenants.log.read_text().splitlines()) if entry.get("audit")]
    patches = [entry for entry in lines if entry.get("action") == "PATCH /v1/sessions/{id}"]
    by_principal = {(e["principal"], e["outcome"]) for e in patches if e["resource_id"] == tenants.session_id}
    # Then the owner's change and the other principal's refusal are both on record
    assert {("alice", 200), ("bob", 404)} <= by_principal
    # And no token or body ever reaches the log
    text = tenants.log.read_text()
    for token in tenants.tokens.values():
        assert token not in text
    assert not any("yes" in json.dumps(e) for e in lines)


def _json_line(line: str) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}


def test_a_jwt_from_the_issuer_signs_in_end_to_end(tenants: Tenants) -> None:
    jwt_headers = {"Authorization": f"Bearer {tenants.issuer.token('alice')}"}
    with httpx.Client(base_url=tenants.url, headers=jwt_headers, timeout=30) as alice:
        # Given alice signed in with the issuer: she is the same principal as her token's
        assert alice.get(f"/v1/sessions/{tenants.session_id}").status_code == 200
        # When she opens a session and runs a turn with the JWT alone, stream included
        session = alice.post("/v1/sessions", json={"agent_id": tenants.agent_id})
        assert session.status_code == 201, session.text
        sid = session.json()["id"]
        turn = run_turn(
            alice,
            base_url=tenants.url,
            session_id=sid,
            post=lambda: alice.post(f"/v1/sessions/{sid}/events", json=MESSAGE).raise_for_status(),
        )
        # Then it completes, and the session is hers alone
        assert turn.status == "completed"
    with tenants.client("bob") as bob:
        assert bob.get(f"/v1/sessions/{sid}").status_code == 404
    bob_jwt = {"Authorization": f"Bearer {tenants.issuer.token('bob')}"}
    assert LOOPBACK.get(f"{tenants.url}/v1/sessions/{sid}", headers=bob_jwt).status_code == 404
    # And a JWT the issuer did not mean for us is a 401 on the API and on the stream
    wrong = {"Authorization": f"Bearer {tenants.issuer.token('alice', aud='elsewhere')}"}
    for path in (f"/v1/sessions/{sid}", f"/v1/sessions/{sid}/stream"):
        resp = LOOPBACK.get(tenants.url + path, headers=wrong)
        assert resp.status_code == 401, resp.text
        assert resp.json()["error"]["code"] == "unauthorized"
