"""What the web console reads from the API, and how ``skyloop dev`` serves the console's files.

Against a real ``skyloop dev`` over HTTP: the waiting counts and calls behind the inbox and
its badge, the list filters, the usage report, ``/v1/me``, ``/v1/info``'s console block,
``/v1/tool_sets``, and ``/`` (files, the single-page fallback, the API's 404s kept).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.e2e.conftest import (
    ECHO_TOOL,
    LOOPBACK,
    StreamWatcher,
    configure_mock_llm,
    is_call_frame,
    is_type,
    message_event,
    new_mock_agent_session,
    output_event,
    unique,
    upload_agent,
    wait_status,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.e2e.conftest import DevProcess

pytestmark = pytest.mark.e2e


def listed(client: httpx.Client, **params: Any) -> dict[str, dict[str, Any]]:
    resp = client.get("/v1/sessions", params={"limit": 1000, **params})
    assert resp.status_code == 200, resp.text
    return {row["id"]: row for row in resp.json()["data"]}


def test_a_parked_client_call_is_counted_listed_in_the_inbox_and_answerable(
    http_client: httpx.Client, mock_llm_server_url: str, live_runner_id: str
) -> None:
    calls = [{"call_id": "call_inbox", "name": "Echo", "arguments": {"text": "x"}}]
    _, _, sid = new_mock_agent_session(
        http_client, mock_llm_server_url, "inbox", [{"tool_calls": calls}, {"text": "done"}]
    )
    assert sid not in listed(http_client, waiting="true")
    with StreamWatcher(str(http_client.base_url).rstrip("/"), sid) as stream:
        http_client.post(
            f"/v1/sessions/{sid}/events", json=message_event("go", [ECHO_TOOL])
        ).raise_for_status()
        stream.wait_for(lambda f: is_call_frame(f, "action_required", "call_inbox"), what="the parked call")
        inbox = listed(http_client, waiting="true")
        assert inbox[sid]["pending_client_calls"] == 1
        assert inbox[sid]["pending_elicitations_count"] == 0
        snap = http_client.get(f"/v1/sessions/{sid}").json()
        assert snap["waiting"] == [
            {
                "call_id": "call_inbox",
                "name": "Echo",
                "arguments": '{"text": "x"}',
                "response_id": snap["active_response_id"],
                "kind": "client",
                "elicitation_id": None,
            }
        ]
        http_client.post(
            f"/v1/sessions/{sid}/events", json=output_event("call_inbox", "ok")
        ).raise_for_status()
        stream.wait_terminal()
    wait_status(http_client, sid, "idle")
    assert sid not in listed(http_client, waiting="true")
    row = listed(http_client)[sid]
    assert (row["pending_client_calls"], row["pending_elicitations_count"]) == (0, 0)
    assert http_client.get(f"/v1/sessions/{sid}").json()["waiting"] == []


def test_an_approval_is_counted_as_an_elicitation_with_its_id(
    http_client: httpx.Client, mock_llm_server_url: str, live_runner_id: str
) -> None:
    tool = {"type": "lambda", "function": "smoke_echo", "description": "echo", "approval": "required"}
    calls = [{"call_id": "call_ok", "name": "smoke_echo", "arguments": {"text": "y"}}]
    _, _, sid = new_mock_agent_session(
        http_client,
        mock_llm_server_url,
        "approve",
        [{"tool_calls": calls}, {"text": "done"}],
        extra={"tools": {"smoke_echo": tool}},
    )
    with StreamWatcher(str(http_client.base_url).rstrip("/"), sid) as stream:
        http_client.post(f"/v1/sessions/{sid}/events", json=message_event("go")).raise_for_status()
        stream.wait_for(is_type("response.elicitation_request"), what="the approval request")
        row = listed(http_client, waiting="true")[sid]
        assert (row["pending_client_calls"], row["pending_elicitations_count"]) == (0, 1)
        (waiting,) = http_client.get(f"/v1/sessions/{sid}").json()["waiting"]
        assert (waiting["kind"], waiting["elicitation_id"]) == ("approval", "approve_call_ok")
        answer = {"type": "approval", "data": {"elicitation_id": "approve_call_ok", "action": "accept"}}
        http_client.post(f"/v1/sessions/{sid}/events", json=answer).raise_for_status()
        stream.wait_terminal()
    assert sid not in listed(http_client, waiting="true")


def test_list_filters_by_status_label_and_title_words_with_paging(
    http_client: httpx.Client, mock_llm_server_url: str, live_runner_id: str
) -> None:
    tag = unique("t")
    agent_id, _, first = new_mock_agent_session(http_client, mock_llm_server_url, "filters", [])
    ids = [first]
    for _ in range(4):
        created = http_client.post("/v1/sessions", json={"agent_id": agent_id})
        ids.append(created.json()["id"])
    for n, sid in enumerate(ids):
        body: dict[str, Any] = {"title": f"Report {tag} #{n}"}
        if n % 2 == 0:
            body["labels"] = {"team": "blue" if n else "red"}
        http_client.patch(f"/v1/sessions/{sid}", json=body).raise_for_status()

    assert set(listed(http_client, search_query=f"report {tag.upper()}")) == set(ids)
    assert set(listed(http_client, search_query=tag, label="team")) == {ids[0], ids[2], ids[4]}
    assert set(listed(http_client, search_query=tag, label="team=blue")) == {ids[2], ids[4]}
    assert set(listed(http_client, search_query=tag, status="idle")) == set(ids)
    assert listed(http_client, search_query=tag, status="running") == {}
    # paging over a filtered listing: every match once
    seen: list[str] = []
    after = None
    while True:
        params = {"search_query": tag, "limit": 2, **({"after": after} if after else {})}
        page = http_client.get("/v1/sessions", params=params).json()
        seen += [row["id"] for row in page["data"]]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert sorted(seen) == sorted(ids)
    assert len(seen) == len(ids)
    assert http_client.get("/v1/sessions", params={"status": "asleep"}).status_code == 400


def test_usage_report_has_one_row_per_turn_matching_the_stream(
    http_client: httpx.Client, mock_llm_server_url: str, live_runner_id: str
) -> None:
    price = {"input": 2.0, "output": 8.0}  # USD per million tokens (the agent's own, skyloop.pricing)
    name = unique("usage")
    model = f"mock-{name}"
    configure_mock_llm(mock_llm_server_url, [{"text": "one two three"}, {"text": "four five"}], key=model)
    executor = {
        "harness": "openai-agents",
        "model": model,
        "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{mock_llm_server_url}/v1"},
        "pricing": price,
    }
    spec = {"name": name, "prompt": "You are a test agent.", "executor": executor}
    sid = str(upload_agent(http_client, {f"{name}.yaml": json.dumps(spec)})["session_id"])
    completed = []
    with StreamWatcher(str(http_client.base_url).rstrip("/"), sid) as stream:
        for n, text in enumerate(("first", "second")):
            http_client.post(f"/v1/sessions/{sid}/events", json=message_event(text)).raise_for_status()
            completed.append(
                stream.wait_for(is_type("response.completed"), count=n + 1, what="the turn's end").data
            )
            wait_status(http_client, sid, "idle")
    report = http_client.get(f"/v1/sessions/{sid}/usage").json()
    assert report["model"] == model
    assert [t["response_id"] for t in report["turns"]] == [c["response"]["id"] for c in completed]
    assert report["price"] == price
    for turn, done in zip(report["turns"], completed, strict=True):
        assert turn["total_tokens"] == done["response"]["usage"]["total_tokens"] > 0
        expected = (turn["input_tokens"] * 2.0 + turn["output_tokens"] * 8.0) / 1_000_000
        assert turn["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert report["usage"]["total_tokens"] == sum(t["total_tokens"] for t in report["turns"])
    assert report["cost_usd"] == pytest.approx(sum(t["cost_usd"] for t in report["turns"]))
    assert http_client.get("/v1/sessions/" + "0" * 32 + "/usage").status_code == 404


def test_me_info_and_tool_sets_on_the_open_stack(http_client: httpx.Client) -> None:
    me = http_client.get("/v1/me").json()
    assert me == {
        "principal": "local",
        "scopes": ["admin", "read", "write"],
        "admin": True,
        "can_write": True,
        "via": "open",
    }
    assert http_client.get("/v1/info").json()["console"] == {"auth_required": False, "oidc": None}
    sets = http_client.get("/v1/tool_sets").json()["data"]
    coding = next(s for s in sets if s["name"] == "coding")
    assert "Read" in {t["function"]["name"] for t in coding["tools"]}


def test_the_console_is_served_at_the_root_beside_the_api(live_server: str) -> None:
    index = LOOPBACK.get(f"{live_server}/")
    assert index.status_code == 200
    assert index.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in index.headers["content-security-policy"]
    assert index.headers["cache-control"] == "no-cache"
    asset = next(part.split('"')[0] for part in index.text.split('src="')[1:])
    script = LOOPBACK.get(f"{live_server}{asset}")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert "immutable" in script.headers["cache-control"]
    # client routes get the app; unknown files and the API's own paths keep their answers
    assert LOOPBACK.get(f"{live_server}/sessions/abc").text == index.text
    assert LOOPBACK.get(f"{live_server}/inbox").text == index.text
    assert LOOPBACK.get(f"{live_server}/nope.js").status_code == 404
    assert LOOPBACK.get(f"{live_server}/%2e%2e/%2e%2e/pyproject.toml").status_code == 404
    missing = LOOPBACK.get(f"{live_server}/v1/nothing-here")
    assert missing.status_code == 404
    assert missing.json() == {"error": {"code": "not_found", "message": "Not found"}}
    # every API prefix answers an unknown path in its own contract's error shape, never the app's page
    api_404 = LOOPBACK.get(f"{live_server}/api/nothing-here")
    assert (api_404.status_code, api_404.json()["error"]["code"]) == (404, "not_found")
    openai_404 = LOOPBACK.get(f"{live_server}/openai/v1/nothing-here")
    assert (openai_404.status_code, openai_404.json()["error"]["type"]) == (404, "not_found_error")
    claude_404 = LOOPBACK.get(f"{live_server}/anthropic/v1/nothing-here")
    assert claude_404.status_code == 404
    assert claude_404.json()["type"] == "error"
    assert claude_404.json()["error"]["type"] == "not_found_error"
    assert LOOPBACK.get(f"{live_server}/openapi.json").json()["openapi"].startswith("3.1")
    assert LOOPBACK.get(f"{live_server}/health").json() == {"status": "ok"}
    assert httpx.head(f"{live_server}/").status_code == 200


def test_without_a_built_console_the_root_says_how_to_build_it(
    skyloop_dev_factory: Callable[..., DevProcess], tmp_path
) -> None:
    dev = skyloop_dev_factory({"SKYLOOP_CONSOLE_DIR": str(tmp_path / "absent")})
    url = dev.ready()
    resp = LOOPBACK.get(f"{url}/")
    assert resp.status_code == 503
    assert "make console" in resp.text
    assert "make console" in dev.log_path.read_text()  # the banner says it too
    assert LOOPBACK.get(f"{url}/v1/sessions").status_code == 200
    assert json.loads(LOOPBACK.get(f"{url}/v1/nope").text)["error"]["code"] == "not_found"


def test_the_snapshot_says_when_older_items_exist(
    http_client: httpx.Client, mock_llm_server_url: str, live_runner_id: str
) -> None:
    agent_id, _, _ = new_mock_agent_session(http_client, mock_llm_server_url, "history", [])

    def imported(n: int) -> dict[str, Any]:
        items = [
            {
                "type": "message",
                "data": {"role": "user", "content": [{"type": "input_text", "text": f"m{i}"}]},
            }
            for i in range(n)
        ]
        body = {"agent_id": agent_id, "initial_items": items, "host_type": "external"}
        created = http_client.post("/v1/sessions", json=body)
        assert created.status_code == 201, created.text
        return dict(http_client.get(f"/v1/sessions/{created.json()['id']}").json())

    long, short, exact = imported(150), imported(3), imported(100)
    assert long["has_more_items"] is True
    assert [i["data"]["content"][0]["text"] for i in long["items"]] == [f"m{i}" for i in range(50, 150)]
    assert short["has_more_items"] is False
    assert len(short["items"]) == 3
    assert exact["has_more_items"] is False
    assert len(exact["items"]) == 100
