"""Client and AsyncClient against mock transports: request shapes, parsing, errors, auth and config."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import tarfile
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from skyloop.client import (
    Agent,
    APIConnectionError,
    APIError,
    APITimeoutError,
    AsyncClient,
    Client,
    ConfigError,
    ConflictError,
    CreatedSession,
    ForbiddenError,
    InternalServerError,
    InvalidInputError,
    Item,
    NotFoundError,
    PayloadTooLargeError,
    ResponseValidationError,
    RunnerUnavailableError,
    SessionSnapshot,
    UnauthorizedError,
    UnsupportedMediaTypeError,
    tool,
)
from skyloop.client._config import resolve_config

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

SID = "a" * 32
AID = "b" * 32
SNAPSHOT = {
    "id": SID,
    "object": "session",
    "agent_id": AID,
    "agent_name": "coder",
    "status": "idle",
    "created_at": 1,
    "updated_at": 2,
    "title": None,
    "labels": {},
    "runner_id": "default",
    "runner_online": True,
    "archived": False,
    "items": [
        {
            "id": "c" * 32,
            "type": "message",
            "status": "completed",
            "response_id": "turn_1",
            "created_at": 1,
            "data": {"role": "user", "content": [{"type": "input_text", "text": "hi"}], "model": None},
        }
    ],
    "last_task_error": {"code": "model_error", "message": "boom"},
    "active_response_id": None,
    "last_event_id": 12,
}
AGENT = {
    "id": AID,
    "object": "agent",
    "name": "coder",
    "description": None,
    "created_at": 1,
    "updated_at": 1,
    "harness": "openai-agents",
    "model": "gpt",
    "prompt": "p",
    "tools": None,
    "limits": {"client_tool_timeout_s": 3600, "max_iterations": 50},
    "base_url": None,
}


def _page(data: list[dict[str, Any]], has_more: bool = False) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


class FakeServer:
    """Answers by (method, path) and records every request."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.routes: dict[tuple[str, str], Callable[[httpx.Request], httpx.Response]] = {}

    def route(self, method: str, path: str, status: int = 200, body: Any = None) -> None:
        self.routes[(method, path)] = lambda _req: httpx.Response(status, json=body)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        handler = self.routes.get((request.method, request.url.path))
        if handler is None:
            return httpx.Response(404, json={"error": {"code": "not_found", "message": "Not found"}})
        return handler(request)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def last_json(self) -> Any:
        return json.loads(self.last.content)


@pytest.fixture(autouse=True)
def _isolated_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SKYLOOP_URL", raising=False)
    monkeypatch.delenv("SKYLOOP_TOKEN", raising=False)
    monkeypatch.setenv("SKYLOOP_CONFIG", str(tmp_path / "absent.toml"))


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
def client(server: FakeServer) -> Client:
    return Client("http://sky.test", transport=httpx.MockTransport(server))


# ------------------------------------------------------------------ request shapes
def test_health_and_runners(client: Client, server: FakeServer) -> None:
    server.route("GET", "/health", body={"status": "ok"})
    server.route(
        "GET",
        "/v1/runners",
        body={
            "object": "list",
            "data": [{"runner_id": "default", "online": True, "kind": "stepfunctions", "harnesses": ["x"]}],
        },
    )
    server.route("GET", "/v1/runners/default/status", body={"runner_id": "default", "online": True})
    assert client.health().status == "ok"
    runners = client.list_runners()
    assert runners[0].runner_id == "default"
    assert runners[0].kind == "stepfunctions"
    assert client.runner_status("default").online is True


def test_create_get_update_delete_session(client: Client, server: FakeServer) -> None:
    server.route("POST", "/v1/sessions", 201, SNAPSHOT)
    snap = client.create_session(AID, title="t", labels={"k": "v"})
    assert server.last_json() == {"agent_id": AID, "title": "t", "labels": {"k": "v"}}
    assert server.last.headers["content-type"] == "application/json"
    assert isinstance(snap, SessionSnapshot)
    assert snap.last_event_id == 12
    assert snap.items[0].text == "hi"
    assert snap.last_task_error is not None
    assert snap.last_task_error.code == "model_error"

    server.route("GET", f"/v1/sessions/{SID}", body=SNAPSHOT)
    assert client.get_session(SID).agent_name == "coder"

    server.route("PATCH", f"/v1/sessions/{SID}", body={**SNAPSHOT, "items": [], "title": "new"})
    updated = client.update_session(SID, title="new", runner_id="", archived=True)
    assert server.last_json() == {"runner_id": "", "title": "new", "archived": True}
    assert updated.title == "new"

    server.route(
        "DELETE", f"/v1/sessions/{SID}", body={"id": SID, "object": "conversation.deleted", "deleted": True}
    )
    assert client.delete_session(SID).deleted is True


def test_list_sessions_sends_only_given_filters(client: Client, server: FakeServer) -> None:
    server.route("GET", "/v1/sessions", body=_page([{"id": SID, "agent_id": AID, "agent_name": "coder"}]))
    page = client.list_sessions(agent_name="coder", limit=5, order="asc", include_archived=True)
    assert dict(server.last.url.params) == {
        "agent_name": "coder",
        "limit": "5",
        "order": "asc",
        "include_archived": "true",
    }
    assert page.data[0].agent_name == "coder"
    assert page.last_id == SID
    client.list_sessions(agent_id=AID, after="x")
    assert dict(server.last.url.params) == {"agent_id": AID, "after": "x"}


def test_list_items_flat_items_fold_into_data_and_pages_follow(client: Client, server: FakeServer) -> None:
    # Given two pages of flattened items
    first = [
        {
            "id": "i1",
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_text", "text": "a"}],
        },
        {"id": "i2", "type": "function_call", "name": "Glob", "arguments": "{}", "call_id": "c1"},
    ]
    second = [{"id": "i3", "type": "function_call_output", "call_id": "c1", "output": "x.py"}]

    def items(request: httpx.Request) -> httpx.Response:
        after = request.url.params.get("after")
        return httpx.Response(200, json=_page(second) if after == "i2" else _page(first, has_more=True))

    server.routes[("GET", f"/v1/sessions/{SID}/items")] = items
    # When listing one page, and iterating all
    page = client.list_items(SID, limit=2, order="asc")
    assert dict(server.last.url.params) == {"limit": "2", "order": "asc"}
    assert page.has_more is True
    assert page.data[0].text == "a"
    assert page.data[1].data["name"] == "Glob"
    every = list(client.iter_items(SID, page_size=2))
    # Then the helper followed last_id
    assert [i.id for i in every] == ["i1", "i2", "i3"]
    assert server.requests[-1].url.params["after"] == "i2"
    assert all(isinstance(i, Item) for i in every)
    assert every[2].data == {"call_id": "c1", "output": "x.py"}


def test_agents(client: Client, server: FakeServer) -> None:
    server.route("POST", "/v1/agents", 201, AGENT)
    spec = {"name": "coder", "executor": {"model": "gpt"}}
    agent = client.create_agent(spec)
    assert server.last_json() == spec
    assert isinstance(agent, Agent)
    assert agent.limits == {"client_tool_timeout_s": 3600, "max_iterations": 50}
    server.route("GET", "/v1/agents", body=_page([AGENT]))
    assert client.list_agents(limit=1).data[0].name == "coder"
    assert [a.id for a in client.iter_agents()] == [AID]
    server.route("GET", f"/v1/agents/{AID}", body=AGENT)
    assert client.get_agent(AID).model == "gpt"
    server.route("GET", f"/v1/sessions/{SID}/agent", body=AGENT)
    assert client.get_session_agent(SID).harness == "openai-agents"


def _bundle_members(request: httpx.Request) -> tuple[dict[str, str], dict[str, bytes]]:
    """Parse the multipart body the client sent: form fields and the bundle's files."""
    from email.parser import BytesParser
    from email.policy import HTTP

    ctype = request.headers["content-type"]
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + request.content)
    fields: dict[str, str] = {}
    files: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if name == "bundle":
            with tarfile.open(fileobj=io.BytesIO(gzip.decompress(payload)), mode="r:") as tar:
                for member in tar.getmembers():
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    files[member.name] = extracted.read()
        else:
            fields[str(name)] = payload.decode()
    return fields, files


def test_register_agent_from_dict_file_and_directory(
    client: Client, server: FakeServer, tmp_path: Path
) -> None:
    server.route("POST", "/v1/sessions", 201, {"session_id": SID, "agent_id": AID, "agent_name": "coder"})
    spec = {"name": "coder", "prompt": "hi", "executor": {"model": "m"}}

    # a dict becomes <name>.yaml (JSON is YAML)
    created = client.register_agent(spec, title="first", labels={"a": "b"})
    assert isinstance(created, CreatedSession)
    assert created.session_id == SID
    assert server.last.headers["content-type"].startswith("multipart/form-data")
    fields, files = _bundle_members(server.last)
    assert json.loads(fields["metadata"]) == {"title": "first", "labels": {"a": "b"}}
    assert json.loads(files["coder.yaml"]) == spec

    # a YAML file is packed under its own name
    path = tmp_path / "coder.yaml"
    path.write_text("name: coder\nexecutor: {model: m}\n")
    client.register_agent(path)
    fields, files = _bundle_members(server.last)
    assert fields["metadata"] == "{}"
    assert files == {"coder.yaml": path.read_bytes()}

    # a directory keeps its layout, without links or tool folders
    root = tmp_path / "agent"
    (root / "prompts").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "config.yaml").write_text("name: coder\n")
    (root / "prompts" / "system.md").write_text("be nice")
    (root / ".git" / "HEAD").write_text("ref")
    (root / "link.yaml").symlink_to(root / "config.yaml")
    client.register_agent(str(root))
    _, files = _bundle_members(server.last)
    assert sorted(files) == ["config.yaml", "prompts/system.md"]

    with pytest.raises(FileNotFoundError):
        client.register_agent(tmp_path / "missing.yaml")


def test_create_agent_from_file_uses_multipart(client: Client, server: FakeServer, tmp_path: Path) -> None:
    server.route("POST", "/v1/agents", 201, AGENT)
    path = tmp_path / "coder.yaml"
    path.write_text("name: coder\n")
    client.create_agent(path)
    _, files = _bundle_members(server.last)
    assert files == {"coder.yaml": b"name: coder\n"}


def test_post_event_helpers(client: Client, server: FakeServer) -> None:
    calls: list[Any] = []

    def events(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(body)
        if body["type"] == "message":
            return httpx.Response(202, json={"queued": True, "item_id": "m1"})
        if body["type"] == "function_call_output":
            return httpx.Response(202, json={"queued": True, "item_id": body["data"]["call_id"]})
        return httpx.Response(202, json={"queued": False})

    server.routes[("POST", f"/v1/sessions/{SID}/events")] = events

    @tool
    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    assert client.send_message(SID, "hello", tools=["coding", add]) == "m1"
    message = calls[-1]
    assert message["data"] == {"role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    names = [t["function"]["name"] for t in message["tools"]]
    assert "Glob" in names
    assert names[-1] == "add"
    assert all(t["type"] == "function" for t in message["tools"])
    assert message["tools"][-1]["function"]["parameters"]["required"] == ["a"]

    assert client.send_message(SID, "no tools") == "m1"
    assert "tools" not in calls[-1]

    accepted = client.submit_tool_output(SID, "call_1", "out")
    assert calls[-1] == {"type": "function_call_output", "data": {"call_id": "call_1", "output": "out"}}
    assert accepted.item_id == "call_1"

    assert client.interrupt(SID).queued is False
    assert calls[-1] == {"type": "interrupt", "data": {}}

    client.post_event(SID, "message", {"role": "user", "content": []}, model_override="m2")
    assert calls[-1]["model_override"] == "m2"


def test_session_ids_cannot_reshape_the_path(client: Client, server: FakeServer) -> None:
    with pytest.raises(NotFoundError):
        client.get_session("../../health")
    assert server.last.url.raw_path == b"/v1/sessions/..%2F..%2Fhealth"


# ------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_input", InvalidInputError),
        (401, "unauthorized", UnauthorizedError),
        (403, "forbidden", ForbiddenError),
        (404, "not_found", NotFoundError),
        (409, "conflict", ConflictError),
        (413, "payload_too_large", PayloadTooLargeError),
        (415, "unsupported_media_type", UnsupportedMediaTypeError),
        (500, "internal_error", InternalServerError),
        (503, "runner_unavailable", RunnerUnavailableError),
    ],
)
def test_error_bodies_become_typed_errors(
    client: Client, server: FakeServer, status: int, code: str, cls: type[APIError]
) -> None:
    server.route("GET", "/health", status, {"error": {"code": code, "message": f"because {code}"}})
    with pytest.raises(cls) as info:
        client.health()
    assert info.value.code == code
    assert info.value.status == status
    assert info.value.message == f"because {code}"
    assert code in str(info.value)


def test_unknown_codes_and_non_json_errors_still_type(client: Client, server: FakeServer) -> None:
    server.route("GET", "/health", 502, {"error": {"code": "model_error", "message": "upstream"}})
    with pytest.raises(APIError) as info:
        client.health()
    assert type(info.value) is APIError
    assert (info.value.code, info.value.status) == ("model_error", 502)

    server.routes[("GET", "/health")] = lambda _r: httpx.Response(
        503, text="<html>Service Unavailable</html>"
    )
    with pytest.raises(RunnerUnavailableError) as unavailable:
        client.health()
    assert "Service Unavailable" in unavailable.value.message

    server.routes[("GET", "/health")] = lambda _r: httpx.Response(418, content=b"")
    with pytest.raises(APIError) as teapot:
        client.health()
    assert teapot.value.code == "http_418"


def test_bad_success_bodies_raise_response_validation_error(client: Client, server: FakeServer) -> None:
    server.routes[("GET", f"/v1/sessions/{SID}")] = lambda _r: httpx.Response(200, text="not json")
    with pytest.raises(ResponseValidationError):
        client.get_session(SID)
    server.route("GET", f"/v1/sessions/{SID}", body={"no": "id"})
    with pytest.raises(ResponseValidationError):
        client.get_session(SID)
    server.route("GET", "/v1/runners", body={"data": "nope"})
    with pytest.raises(ResponseValidationError):
        client.list_runners()


def test_transport_errors_map_at_one_boundary() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(APIConnectionError) as refused:
        Client("http://x", transport=httpx.MockTransport(refuse)).health()
    assert isinstance(refused.value.__cause__, httpx.ConnectError)
    with pytest.raises(APITimeoutError):
        Client("http://x", transport=httpx.MockTransport(slow)).health()


# ------------------------------------------------------------------- auth & config
def _auth_seen(**kwargs: Any) -> str | None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"status": "ok"})

    with Client(transport=httpx.MockTransport(handler), **kwargs) as c:
        c.health()
    return seen[0]


def test_token_argument_is_sent_as_bearer() -> None:
    assert _auth_seen(token="sky_arg") == "Bearer sky_arg"


def test_no_token_sends_no_authorization() -> None:
    assert _auth_seen() is None


def test_env_token_and_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLOOP_TOKEN", "sky_env")
    monkeypatch.setenv("SKYLOOP_URL", "https://env.example/")
    assert _auth_seen() == "Bearer sky_env"
    assert _auth_seen(token="sky_arg") == "Bearer sky_arg"
    assert Client().base_url == "https://env.example"


def test_config_file_supplies_url_and_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('url = "https://file.example"\ntoken = "sky_file"\n')
    monkeypatch.setenv("SKYLOOP_CONFIG", str(path))
    assert _auth_seen() == "Bearer sky_file"
    assert Client().base_url == "https://file.example"
    # env beats the file; the argument beats both
    monkeypatch.setenv("SKYLOOP_TOKEN", "sky_env")
    assert _auth_seen() == "Bearer sky_env"
    assert _auth_seen(token="sky_arg") == "Bearer sky_arg"


def test_file_token_is_not_sent_to_another_endpoint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('url = "https://file.example"\ntoken = "sky_file"\n')
    monkeypatch.setenv("SKYLOOP_CONFIG", str(path))
    assert _auth_seen(base_url="https://other.example") is None
    assert _auth_seen(base_url="https://file.example/") == "Bearer sky_file"
    # a file with only a token applies wherever the client points
    path.write_text('token = "sky_any"\n')
    assert _auth_seen(base_url="https://other.example") == "Bearer sky_any"


def test_config_precedence_and_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert (
        resolve_config(env={"SKYLOOP_CONFIG": str(tmp_path / "none.toml")}).base_url
        == "http://127.0.0.1:8080"
    )
    path = tmp_path / "c.toml"
    path.write_text('url = "http://file"\n')
    env = {"SKYLOOP_CONFIG": str(path)}
    assert resolve_config(env=env).base_url == "http://file"
    assert resolve_config(env={**env, "SKYLOOP_URL": "http://env"}).base_url == "http://env"
    assert resolve_config("http://arg", env={**env, "SKYLOOP_URL": "http://env"}).base_url == "http://arg"
    # XDG_CONFIG_HOME locates the default file
    xdg = tmp_path / "xdg"
    (xdg / "skyloop").mkdir(parents=True)
    (xdg / "skyloop" / "config.toml").write_text('url = "http://xdg"\n')
    assert resolve_config(env={"XDG_CONFIG_HOME": str(xdg)}).base_url == "http://xdg"


def test_broken_config_file_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("url = \n")
    monkeypatch.setenv("SKYLOOP_CONFIG", str(path))
    with pytest.raises(ConfigError, match="not valid TOML"):
        Client()
    path.write_text("token = 5\n")
    with pytest.raises(ConfigError, match="must be a string"):
        Client()


def test_client_is_a_context_manager_and_repr_hides_the_token() -> None:
    with Client(
        "http://h", token="sky_secret", transport=httpx.MockTransport(lambda r: httpx.Response(200))
    ) as c:
        assert "sky_secret" not in repr(c)
    assert c.is_closed


# ------------------------------------------------------------------- raw responses
def test_raw_responses_keep_status_headers_and_the_body_as_sent(client: Client, server: FakeServer) -> None:
    # Given a server answering with a flat item the SDK would fold
    flat = [
        {"id": "i1", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]
    server.routes[("GET", f"/v1/sessions/{SID}/items")] = lambda _r: httpx.Response(
        200, json=_page(flat), headers={"x-request-id": "req-1"}
    )
    # When the caller asks for the raw answer, with the typed method's own arguments
    raw = client.with_raw_response.list_items(SID, limit=1, order="desc")
    # Then the same request went out, and the answer is there as sent and as the typed model
    assert dict(server.last.url.params) == {"limit": "1", "order": "desc"}
    assert (raw.status_code, raw.headers["x-request-id"]) == (200, "req-1")
    assert (raw.method, raw.path) == ("GET", f"/v1/sessions/{SID}/items")
    assert raw.json() == _page(flat)
    assert json.loads(raw.content) == _page(flat)
    page = raw.parse()
    assert page.data[0].id == "i1"
    assert page.data[0].text == "hi"

    server.route("POST", "/v1/sessions", 201, SNAPSHOT)
    created = client.with_raw_response.create_session(AID, title="t")
    assert created.status_code == 201
    assert server.last_json() == {"agent_id": AID, "title": "t"}
    assert created.parse().last_event_id == 12


def test_raw_responses_raise_the_typed_errors(client: Client, server: FakeServer) -> None:
    with pytest.raises(NotFoundError):
        client.with_raw_response.get_session(SID)
    server.routes[("GET", f"/v1/sessions/{SID}")] = lambda _r: httpx.Response(200, text="not json")
    with pytest.raises(ResponseValidationError):
        client.with_raw_response.get_session(SID)
    # A JSON body the contract does not allow is still readable raw; only parsing it fails
    server.route("GET", f"/v1/sessions/{SID}", body={"no": "id"})
    raw = client.with_raw_response.get_session(SID)
    assert raw.json() == {"no": "id"}
    with pytest.raises(ResponseValidationError):
        raw.parse()


def test_raw_message_post_carries_the_idempotency_key(client: Client, server: FakeServer) -> None:
    server.route("POST", f"/v1/sessions/{SID}/events", 202, {"queued": True, "item_id": "m1"})
    raw = client.with_raw_response.send_message(SID, "hi", tools="coding", idempotency_key="k1")
    assert server.last.headers["idempotency-key"] == "k1"
    assert "tools" in server.last_json()
    assert raw.status_code == 202
    assert raw.parse().item_id == "m1"


def test_async_raw_responses() -> None:
    server = FakeServer()
    server.route("GET", "/v1/agents", body=_page([AGENT]))

    async def handler(request: httpx.Request) -> httpx.Response:
        return server(request)

    async def main() -> None:
        async with AsyncClient("http://sky.test", transport=httpx.MockTransport(handler)) as client:
            raw = await client.with_raw_response.list_agents(limit=3)
            assert dict(server.last.url.params) == {"limit": "3"}
            assert raw.status_code == 200
            assert raw.json()["data"][0]["id"] == AID
            assert raw.parse().data[0].name == "coder"
            with pytest.raises(NotFoundError):
                await client.with_raw_response.get_agent("nope")

    asyncio.run(main())


# -------------------------------------------------------------------------- async
def test_async_client_endpoints_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLOOP_TOKEN", "sky_async")
    server = FakeServer()
    server.route("GET", "/health", body={"status": "ok"})
    server.route("POST", "/v1/sessions", 201, SNAPSHOT)
    server.route("GET", f"/v1/sessions/{SID}", 404, {"error": {"code": "not_found", "message": "gone"}})
    server.route(
        "GET", f"/v1/sessions/{SID}/items", body=_page([{"id": "i1", "type": "message", "role": "user"}])
    )
    server.route("POST", f"/v1/sessions/{SID}/events", 202, {"queued": True, "item_id": "m1"})
    server.route("GET", "/v1/runners", body={"data": [{"runner_id": "default", "online": True}]})

    async def handler(request: httpx.Request) -> httpx.Response:
        return server(request)

    async def main() -> None:
        async with AsyncClient("http://sky.test", transport=httpx.MockTransport(handler)) as client:
            assert (await client.health()).status == "ok"
            assert server.last.headers["authorization"] == "Bearer sky_async"
            snap = await client.create_session(AID)
            assert snap.id == SID
            with pytest.raises(NotFoundError) as info:
                await client.get_session(SID)
            assert info.value.code == "not_found"
            assert [i.id async for i in client.iter_items(SID)] == ["i1"]
            assert await client.send_message(SID, "hi", tools="coding") == "m1"
            assert "tools" in server.last_json()
            assert (await client.list_runners())[0].online is True
        assert client.is_closed

    asyncio.run(main())
