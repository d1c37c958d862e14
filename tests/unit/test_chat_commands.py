"""``skyloop sessions`` / ``skyloop agents``: argument parsing, tables, ``--json``, errors (httpx.MockTransport)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from skyloop.chat._api import find_agent
from skyloop.chat._commands import agents_command, sessions_command
from skyloop.chat._tables import (
    agents_table,
    format_table,
    format_time,
    session_details,
    sessions_table,
)
from skyloop.cli import _parser
from skyloop.client import Agent, Client, NotFoundError, SessionSnapshot, SessionSummary

BASE = "http://sky.test"
T0 = 1_700_000_000
SID = "5" * 32
AID = "a" * 32

SESSIONS_PAGE = {
    "object": "list",
    "data": [
        {
            "id": SID,
            "agent_id": AID,
            "agent_name": "coder",
            "status": "idle",
            "created_at": T0,
            "updated_at": T0 + 60,
            "title": "example session",
            "labels": {},
            "runner_id": "default",
            "archived": False,
        },
        {
            "id": "6" * 32,
            "agent_id": AID,
            "agent_name": "coder",
            "status": "running",
            "created_at": T0,
            "updated_at": T0,
            "title": None,
            "labels": {},
            "runner_id": "default",
            "archived": False,
        },
    ],
    "first_id": SID,
    "last_id": "6" * 32,
    "has_more": False,
}
AGENT = {
    "id": AID,
    "object": "agent",
    "name": "coder",
    "description": None,
    "created_at": T0,
    "updated_at": T0,
    "harness": "openai-agents",
    "model": "gpt-4.1-mini",
    "prompt": "You are a coding assistant.",
    "tools": None,
    "limits": {},
    "base_url": None,
}
SNAPSHOT = {
    **SESSIONS_PAGE["data"][0],
    "object": "session",
    "runner_online": True,
    "items": [
        {
            "id": "i1",
            "type": "message",
            "status": "completed",
            "data": {"role": "user", "content": [{"type": "input_text", "text": "List the\nfiles"}]},
        },
        {
            "id": "i2",
            "type": "function_call",
            "status": "completed",
            "data": {"name": "Glob", "call_id": "c1", "arguments": '{"pattern": "*"}'},
        },
        {
            "id": "i3",
            "type": "function_call_output",
            "status": "completed",
            "data": {"call_id": "c1", "output": "a.py\nb.py"},
        },
    ],
    "last_task_error": {"code": "model_error", "message": "boom"},
    "active_response_id": None,
    "last_event_id": 12,
}


class Router:
    """Answers by ``(method, path)``; records each request."""

    def __init__(self, routes: dict[tuple[str, str], httpx.Response]) -> None:
        self.routes = routes
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        key = (request.method, request.url.path)
        if key in self.routes:
            return self.routes[key]
        return httpx.Response(404, json={"error": {"code": "not_found", "message": f"no route {key}"}})


def client_for(router: Router) -> Client:
    return Client(BASE, transport=httpx.MockTransport(router))


def run(command: Any, argv: list[str], router: Router) -> tuple[int, str, str]:
    args = _parser().parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    code = command(args, stdout=out, stderr=err, client=client_for(router))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("SKYLOOP_URL", raising=False)
    monkeypatch.delenv("SKYLOOP_TOKEN", raising=False)
    monkeypatch.setenv("SKYLOOP_CONFIG", str(tmp_path / "absent.toml"))


# ------------------------------------------------------------------------ parsing
def test_chat_arguments_and_defaults() -> None:
    args = _parser().parse_args(["chat"])
    assert (args.command, args.url, args.agent, args.agent_file, args.session) == (
        "chat",
        None,
        None,
        None,
        None,
    )
    assert (args.tools, args.yes) == ("coding", False)
    args = _parser().parse_args(["chat", "--url", "http://x:1", "--agent", "coder", "--tools", "none", "-y"])
    assert (args.url, args.agent, args.tools, args.yes) == ("http://x:1", "coder", "none", True)
    assert _parser().parse_args(["chat", "--session", SID]).session == SID
    assert _parser().parse_args(["chat", "--agent-file", "a.yaml"]).agent_file == "a.yaml"


@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "--agent", "a", "--session", SID],
        ["chat", "--agent", "a", "--agent-file", "a.yaml"],
        ["sessions"],
        ["sessions", "show"],
        ["agents", "register"],
        ["sessions", "ls", "--limit", "many"],
    ],
)
def test_bad_arguments_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(argv)
    assert exc.value.code == 2


def test_sessions_and_agents_arguments() -> None:
    args = _parser().parse_args(
        ["sessions", "ls", "--agent", "coder", "--limit", "5", "--json", "--url", BASE]
    )
    assert (args.action, args.agent, args.limit, args.json, args.url) == ("ls", "coder", 5, True, BASE)
    assert _parser().parse_args(["sessions", "ls"]).limit == 20
    args = _parser().parse_args(["sessions", "rm", SID])
    assert (args.action, args.session_id, args.json) == ("rm", SID, False)
    args = _parser().parse_args(["agents", "register", "agent.yaml", "--json"])
    assert (args.command, args.action, args.file, args.json) == ("agents", "register", "agent.yaml", True)


def test_the_existing_commands_parse_as_before_and_do_not_import_the_client() -> None:
    # `skyloop dev` must not pay for the chat client: parsing every command imports neither package.
    code = (
        "import sys; from skyloop.cli import _parser; p = _parser(); "
        "p.parse_args(['dev', '--port', '9']); p.parse_args(['mock-llm']); p.parse_args(['token', 'list']); "
        "p.parse_args(['chat', '--agent', 'x']); "
        "bad = [m for m in ('skyloop.chat', 'skyloop.client', 'httpx') if m in sys.modules]; "
        "assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------------- tables
def test_format_table_aligns_columns_and_marks_empty_cells() -> None:
    text = format_table(["id", "name", "note"], [("1", "alpha", None), ("22", "b", "x")])
    assert text.splitlines() == ["ID  NAME   NOTE", "1   alpha  -", "22  b      x"]


def test_sessions_table() -> None:
    sessions = [SessionSummary.model_validate(s) for s in SESSIONS_PAGE["data"]]
    lines = sessions_table(sessions).splitlines()
    assert lines[0].split() == ["ID", "AGENT", "STATUS", "UPDATED", "TITLE"]
    assert lines[1] == f"{SID}  coder  idle     {format_time(T0 + 60)}  example session"
    assert lines[2] == f"{'6' * 32}  coder  running  {format_time(T0)}  -"
    assert sessions_table([]) == "no sessions"


def test_long_titles_are_folded_and_cut() -> None:
    session = SessionSummary.model_validate({**SESSIONS_PAGE["data"][0], "title": "word\n" * 30})
    title = sessions_table([session]).splitlines()[1].split("  ")[-1]
    assert "\n" not in title
    assert len(title) == 40
    assert title.endswith("…")


def test_agents_table() -> None:
    lines = agents_table([Agent.model_validate(AGENT)]).splitlines()
    assert lines == [
        f"NAME   ID{' ' * 32}MODEL         HARNESS        CREATED",
        f"coder  {AID}  gpt-4.1-mini  openai-agents  {format_time(T0)}",
    ]
    assert agents_table([]) == "no agents"


def test_session_details_show_fields_then_items() -> None:
    text = session_details(SessionSnapshot.model_validate(SNAPSHOT))
    head, items = text.split("\n\n")
    assert head.splitlines()[:3] == [f"session     {SID}", f"agent       coder ({AID})", "status      idle"]
    assert "runner      default (online)" in head
    assert "last error  model_error: boom" in head
    assert items.splitlines() == [
        "TYPE                  WHO   STATUS     CONTENT",
        "message               user  completed  List the files",
        'function_call         Glob  completed  {"pattern": "*"}',
        "function_call_output  c1    completed  a.py b.py",
    ]


def test_format_time() -> None:
    assert format_time(None) == "-"
    assert format_time(0) == "-"
    assert len(format_time(T0)) == len("2023-11-14 22:13:20")


# ----------------------------------------------------------------------- commands
def test_sessions_ls_prints_a_table_and_passes_filters() -> None:
    router = Router({("GET", "/v1/sessions"): httpx.Response(200, json=SESSIONS_PAGE)})
    code, out, err = run(sessions_command, ["sessions", "ls", "--agent", "coder", "--limit", "5"], router)
    assert (code, err) == (0, "")
    assert out.splitlines()[0].split() == ["ID", "AGENT", "STATUS", "UPDATED", "TITLE"]
    assert len(out.splitlines()) == 3
    assert dict(router.requests[0].url.params) == {"agent_name": "coder", "limit": "5"}


def test_sessions_ls_json_prints_the_servers_answer_unchanged() -> None:
    router = Router({("GET", "/v1/sessions"): httpx.Response(200, json=SESSIONS_PAGE)})
    code, out, _ = run(sessions_command, ["sessions", "ls", "--json"], router)
    assert code == 0
    assert json.loads(out) == SESSIONS_PAGE


def test_sessions_show_table_and_json() -> None:
    router = Router({("GET", f"/v1/sessions/{SID}"): httpx.Response(200, json=SNAPSHOT)})
    code, out, _ = run(sessions_command, ["sessions", "show", SID], router)
    assert code == 0
    assert out.startswith(f"session     {SID}\n")
    assert "function_call_output  c1" in out
    code, out, _ = run(sessions_command, ["sessions", "show", SID, "--json"], router)
    assert code == 0
    assert json.loads(out) == SNAPSHOT  # items keep the server's shape


def test_sessions_rm() -> None:
    deleted = {"id": SID, "object": "conversation.deleted", "deleted": True}
    router = Router({("DELETE", f"/v1/sessions/{SID}"): httpx.Response(200, json=deleted)})
    assert run(sessions_command, ["sessions", "rm", SID], router)[:2] == (0, f"deleted session {SID}\n")
    code, out, _ = run(sessions_command, ["sessions", "rm", SID, "--json"], router)
    assert (code, json.loads(out)) == (0, deleted)


def test_api_errors_are_one_line_on_stderr_with_status_1() -> None:
    missing = {"error": {"code": "not_found", "message": f"Session not found: '{SID}'"}}
    router = Router({("GET", f"/v1/sessions/{SID}"): httpx.Response(404, json=missing)})
    assert run(sessions_command, ["sessions", "show", SID], router) == (
        1,
        "",
        f"skyloop: not_found: Session not found: '{SID}'\n",
    )
    denied = {"error": {"code": "unauthorized", "message": "missing bearer token"}}
    router = Router({("GET", "/v1/agents"): httpx.Response(401, json=denied)})
    assert run(agents_command, ["agents", "ls", "--json"], router) == (
        1,
        "",
        "skyloop: unauthorized: missing bearer token\n",
    )


def test_connection_errors_name_the_endpoint() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    args = _parser().parse_args(["sessions", "ls"])
    err = io.StringIO()
    code = sessions_command(
        args, stdout=io.StringIO(), stderr=err, client=Client(BASE, transport=httpx.MockTransport(refuse))
    )
    assert code == 1
    assert err.getvalue().startswith("skyloop: connection_error: ")
    assert f"(is the service running at {BASE}?)" in err.getvalue()


def test_agents_ls_table_and_json() -> None:
    page = {"object": "list", "data": [AGENT], "first_id": AID, "last_id": AID, "has_more": False}
    router = Router({("GET", "/v1/agents"): httpx.Response(200, json=page)})
    code, out, _ = run(agents_command, ["agents", "ls"], router)
    assert code == 0
    assert out.splitlines()[1].startswith(f"coder  {AID}  gpt-4.1-mini")
    assert router.requests[0].url.params["limit"] == "100"
    code, out, _ = run(agents_command, ["agents", "ls", "--json"], router)
    assert json.loads(out) == page


def test_agents_register_uploads_the_file_as_a_bundle(tmp_path: Any) -> None:
    spec = tmp_path / "helper.yaml"
    spec.write_text("name: helper\nprompt: hi\nexecutor: {harness: openai-agents, model: m}\n")
    router = Router({("POST", "/v1/agents"): httpx.Response(201, json={**AGENT, "name": "helper"})})
    code, out, _ = run(agents_command, ["agents", "register", str(spec)], router)
    assert code == 0
    assert out.startswith(f"registered agent helper ({AID})\n\nNAME")
    request = router.requests[0]
    assert request.headers["content-type"].startswith("multipart/form-data")
    assert b'filename="helper.tar.gz"' in request.content
    code, out, _ = run(agents_command, ["agents", "register", str(spec), "--json"], router)
    assert json.loads(out)["name"] == "helper"


def test_agents_register_of_a_missing_file_fails_before_any_request(tmp_path: Any) -> None:
    router = Router({})
    code, out, err = run(agents_command, ["agents", "register", str(tmp_path / "nope.yaml")], router)
    assert (code, out) == (1, "")
    assert err.startswith("skyloop: invalid_input: no agent file or directory at ")
    assert router.requests == []


# --------------------------------------------------------------------- find_agent
def test_find_agent_asks_the_server_for_the_newest_version_by_name() -> None:
    page = {"object": "list", "data": [AGENT], "has_more": False}
    router = Router({("GET", "/v1/agents"): httpx.Response(200, json=page)})
    with client_for(router) as client:
        assert find_agent(client, "coder").id == AID
    assert dict(router.requests[0].url.params) == {"name": "coder"}


def test_find_agent_filters_when_the_server_ignores_the_name() -> None:
    older = {**AGENT, "id": "b" * 32, "created_at": T0 - 10}
    other = {**AGENT, "id": "c" * 32, "name": "other"}
    page = {"object": "list", "data": [other, older, AGENT], "has_more": False}
    router = Router({("GET", "/v1/agents"): httpx.Response(200, json=page)})
    with client_for(router) as client:
        assert find_agent(client, "coder").id == AID
        with pytest.raises(NotFoundError, match="no agent named 'ghost'"):
            find_agent(client, "ghost")
