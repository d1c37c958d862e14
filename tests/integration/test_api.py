"""The API function's real entry point with HTTP API v2 events, on moto.

No test here starts a turn: bad input must be refused before anything is
written, which the tests check against the table itself.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps
from skyloop.bundles import build_bundle

if TYPE_CHECKING:
    from tests.integration.conftest import Api, ApiResponse, Stack

SNAPSHOT_FIELDS = {
    "id",
    "object",
    "agent_id",
    "agent_name",
    "status",
    "created_at",
    "updated_at",
    "title",
    "labels",
    "runner_id",
    "runner_online",
    "usage",
    "turn_usage",
    "last_total_tokens",
    "archived",
    "items",
    "last_task_error",
    "active_response_id",
    "last_event_id",
    # omnigent's snapshot fields
    "workspace",
    "reasoning_effort",
    "model_override",
    "external_session_id",
    "owner",
    "host_id",
    "parent_session_id",
    "pending_elicitations_count",
    # what the running turn waits on (the web console's badge and answer forms)
    "pending_client_calls",
    "waiting",
    "has_more_items",  # older items than the snapshot shows exist (page /items)
    "llm_model",
    "harness",
    "context_window",
}
USER_MESSAGE = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}


def _upload(api: Api, files: dict[str, tuple[str, bytes, str]], fields: dict[str, str]) -> ApiResponse:
    return api.post_multipart("/v1/sessions", files, fields)


def _bundle_session(aws: Stack, api: Api) -> dict[str, Any]:
    name, yaml_text = aws.agent_yaml("api-model")
    r = _upload(
        api,
        {"bundle": ("agent.tar.gz", build_bundle({f"{name}.yaml": yaml_text}), "application/gzip")},
        {"metadata": "{}"},
    )
    assert r.status == 201, r.body
    return dict(r.body)


def _written(aws: Stack, session_id: str) -> tuple[int, int, int, int]:
    """What a request could have written for a session: last_seq, input_seq, items, events."""
    session = aws.store.get_session(session_id)
    return (
        session.last_seq,
        session.input_seq,
        len(aws.store.list_items(session_id)),
        len(aws.events(session_id)),
    )


@pytest.fixture(scope="module")
def session(aws: Stack, api: Api) -> dict[str, Any]:
    """One idle session created through a bundle upload, shared by the read-only and bad-input tests."""
    return _bundle_session(aws, api)


def test_health(api: Api) -> None:
    # When the health route is called
    r = api.get("/health")
    # Then it answers OK
    assert (r.status, r.body) == (200, {"status": "ok"})


def test_unknown_route_is_a_404_error(api: Api) -> None:
    # When a path no route serves is called
    r = api.get("/v1/nothing-here")
    # Then the 404 has the error body too
    assert r.status == 404
    assert r.error()["code"] == "not_found"


@pytest.mark.parametrize("path", ["/anthropic", "/anthropic/", "/anthropic/v1"])
def test_a_bare_anthropic_prefix_is_a_404_in_anthropics_shape(api: Api, path: str) -> None:
    # the SDK (and a person probing the base URL) reads Anthropic's error, never skyloop's
    r = api.get(path)
    assert r.status == 404
    assert r.body["type"] == "error", r.body
    assert r.body["error"]["type"] == "not_found_error", r.body


@pytest.mark.parametrize("path", ["/openai", "/openai/", "/openai/v1"])
def test_a_bare_openai_prefix_is_a_404_in_openais_shape(api: Api, path: str) -> None:
    r = api.get(path)
    assert r.status == 404
    assert r.body["error"]["type"] == "not_found_error", r.body


@pytest.mark.parametrize("path", ["/v1", "/api", "/anthropicx", "/openaix/v1"])
def test_other_bare_prefixes_are_skyloops_404(api: Api, path: str) -> None:
    r = api.get(path)
    assert r.status == 404
    assert r.error()["code"] == "not_found"


def test_bundle_upload_creates_agent_and_session(aws: Stack, api: Api) -> None:
    # Given an agent YAML packed as a gzipped tar
    name, yaml_text = aws.agent_yaml("bundle-model")
    bundle = build_bundle({f"{name}.yaml": yaml_text})
    agents_before = aws.count_agents()

    # When it is uploaded as multipart (base64 body, as API Gateway delivers binary)
    r = _upload(api, {"bundle": ("a.tar.gz", bundle, "application/gzip")}, {"metadata": "{}"})

    # Then the agent and a session are created
    assert r.status == 201, r.body
    assert set(r.body) == {"session_id", "agent_id", "agent_name"}
    assert r.body["agent_name"] == name
    assert aws.count_agents() == agents_before + 1
    agent = aws.store.get_agent(r.body["agent_id"])
    assert agent.spec.executor.model == "bundle-model"
    # and its key went to Secrets Manager: the table keeps only the secret's name
    assert agent.spec.executor.auth is not None
    assert agent.spec.executor.auth.api_key is None
    assert agent.api_key_secret == f"skyloop/agents/{agent.id}/api_key"
    secret = deps.client("secretsmanager").get_secret_value(SecretId=agent.api_key_secret)
    assert secret["SecretString"] == "mock-key"
    assert "mock-key" not in str(aws.ddb.scan(TableName=aws.table_name)["Items"])
    created = aws.store.get_session(r.body["session_id"])
    assert (created.agent_id, created.agent_name, created.status) == (agent.id, name, "idle")


def test_json_create_returns_a_snapshot(aws: Stack, api: Api, session: dict[str, Any]) -> None:
    # When a session is created for an existing agent with a JSON body
    r = api.post_json(
        "/v1/sessions", {"agent_id": session["agent_id"], "title": "json", "labels": {"k": "v"}}
    )

    # Then the answer is the new session's snapshot
    assert r.status == 201, r.body
    assert set(r.body) == SNAPSHOT_FIELDS
    assert r.body["id"] != session["session_id"]
    assert (r.body["agent_id"], r.body["agent_name"]) == (session["agent_id"], session["agent_name"])
    assert (r.body["title"], r.body["labels"], r.body["status"]) == ("json", {"k": "v"}, "idle")
    assert (r.body["items"], r.body["last_event_id"], r.body["runner_id"]) == ([], 0, "default")
    assert r.body["runner_online"] is True


@pytest.mark.parametrize("agent_id", ["d771711fb12644488734ab1a0b1c3ce2", "not-an-id"])
def test_unknown_agent_is_404(api: Api, agent_id: str) -> None:
    # When a session is created for an agent that does not exist
    r = api.post_json("/v1/sessions", {"agent_id": agent_id})
    # Then it is not found
    assert r.status == 404
    err = r.error()
    assert err["code"] == "not_found"
    assert "Agent not found" in err["message"]


def test_list_sessions_by_agent_name(aws: Stack, api: Api) -> None:
    # Given two sessions of one agent, created in order
    first = _bundle_session(aws, api)
    second = api.post_json("/v1/sessions", {"agent_id": first["agent_id"]}).body

    # When listing that agent's sessions
    r = api.get("/v1/sessions", agent_name=first["agent_name"])

    # Then both come back, newest first
    assert r.status == 200
    assert r.body["object"] == "list"
    assert [s["id"] for s in r.body["data"]] == [second["id"], first["session_id"]]
    assert (r.body["first_id"], r.body["last_id"], r.body["has_more"]) == (
        second["id"],
        first["session_id"],
        False,
    )
    assert r.body["data"][0]["agent_name"] == first["agent_name"]
    # And a limit pages them
    page = api.get("/v1/sessions", agent_name=first["agent_name"], limit="1").body
    assert ([s["id"] for s in page["data"]], page["has_more"]) == ([second["id"]], True)


def test_get_session_snapshot(api: Api, session: dict[str, Any]) -> None:
    # When the session is read
    r = api.get(f"/v1/sessions/{session['session_id']}")
    # Then every snapshot field is there
    assert r.status == 200
    assert set(r.body) == SNAPSHOT_FIELDS
    assert r.body["id"] == session["session_id"]
    assert r.body["object"] == "session"
    assert (r.body["status"], r.body["last_event_id"], r.body["active_response_id"]) == ("idle", 0, None)
    assert r.body["last_task_error"] is None
    assert r.body["archived"] is False
    assert r.headers.get("cache-control") == "no-store"
    # And unknown or malformed ids are not found
    assert api.get(f"/v1/sessions/{uuid.uuid4().hex}").error()["code"] == "not_found"
    assert api.get("/v1/sessions/nope").status == 404


def test_patch_runner(aws: Stack, api: Api, session: dict[str, Any]) -> None:
    path = f"/v1/sessions/{session['session_id']}"
    before = _written(aws, session["session_id"])

    # When the runner is set to the registered one
    ok = api.patch_json(path, {"runner_id": "default"})
    # Then it is accepted
    assert ok.status == 200, ok.body
    assert ok.body["runner_id"] == "default"

    # When it is set to an unknown runner
    bad = api.patch_json(path, {"runner_id": "nope"})
    # Then it is refused with the runner named
    assert bad.status == 400
    assert bad.error() == {"code": "invalid_input", "message": "runner 'nope' is not registered"}
    assert aws.store.get_session(session["session_id"]).runner_id == "default"

    # When an unknown field is patched
    unknown = api.patch_json(path, {"color": "blue"})
    # Then it is refused
    assert unknown.status == 400
    assert unknown.error()["code"] == "invalid_input"
    assert _written(aws, session["session_id"]) == before


def test_runners_routes(api: Api) -> None:
    # When the runners are listed
    r = api.get("/v1/runners")
    # Then the deployment's one runner is online
    assert r.status == 200
    assert [(x["runner_id"], x["online"]) for x in r.body["data"]] == [("default", True)]
    # And any runner's status answers (never 404)
    assert api.get("/v1/runners/default/status").body == {"runner_id": "default", "online": True}
    x = api.get("/v1/runners/x/status")
    assert (x.status, x.body) == (200, {"runner_id": "x", "online": False})


BAD_EVENTS = {
    "unknown type": ({"type": "bogus", "data": {}}, 400),
    "string content": ({"type": "message", "data": {"role": "user", "content": "hi"}}, 400),
    "assistant role": ({"type": "message", "data": {"role": "assistant", "content": []}}, 400),
    "extra field": ({"type": "message", "data": USER_MESSAGE, "surprise": 1}, 400),
    "flat tool": (
        {"type": "message", "data": USER_MESSAGE, "tools": [{"type": "function", "name": "read_file"}]},
        400,
    ),
    "bad tool name": (
        {
            "type": "message",
            "data": USER_MESSAGE,
            "tools": [{"type": "function", "function": {"name": "read file!"}}],
        },
        400,
    ),
    "duplicate tools": (
        {
            "type": "message",
            "data": USER_MESSAGE,
            "tools": [{"type": "function", "function": {"name": "t"}}] * 2,
        },
        400,
    ),
    "tools not a list": ({"type": "message", "data": USER_MESSAGE, "tools": {"name": "t"}}, 400),
    "output without call id": ({"type": "function_call_output", "data": {"output": "x"}}, 400),
    "output for an unknown call": (
        {"type": "function_call_output", "data": {"call_id": "call_nope", "output": "x"}},
        404,
    ),
}


@pytest.mark.parametrize("case", BAD_EVENTS, ids=list(BAD_EVENTS))
def test_bad_events_are_refused_and_write_nothing(
    aws: Stack, api: Api, session: dict[str, Any], case: str
) -> None:
    # Given an idle session
    session_id = session["session_id"]
    before = _written(aws, session_id)
    event, status = BAD_EVENTS[case]

    # When a bad event is posted
    r = api.post_event(session_id, event)

    # Then it is refused with an error body and nothing was written
    assert r.status == status, r.body
    err = r.error()
    assert err["code"] == ("invalid_input" if status == 400 else "not_found")
    assert _written(aws, session_id) == before
    assert aws.store.get_session(session_id).status == "idle"


def test_unknown_event_type_lists_the_allowed_ones(api: Api, session: dict[str, Any]) -> None:
    # When an event of an unknown type is posted
    r = api.post_event(session["session_id"], {"type": "bogus"})
    # Then the error names it and lists every allowed type
    assert r.status == 400
    message = r.error()["message"]
    assert "bogus" in message
    assert "Allowed types" in message
    for allowed in ("message", "function_call_output", "interrupt"):
        assert f"'{allowed}'" in message


@pytest.mark.parametrize(
    ("body", "ctype"),
    [("{not json", "application/json"), ("[1, 2]", "application/json"), ("", "application/json")],
    ids=["malformed", "not an object", "empty"],
)
def test_bad_json_bodies_are_400(
    aws: Stack, api: Api, session: dict[str, Any], body: str, ctype: str
) -> None:
    # Given an idle session
    before = _written(aws, session["session_id"])
    # When an event body that is not a JSON object is posted
    r = api.call(
        "POST", f"/v1/sessions/{session['session_id']}/events", headers={"content-type": ctype}, body=body
    )
    # Then it is refused and nothing was written
    assert r.status == 400
    assert r.error()["code"] == "invalid_input"
    assert _written(aws, session["session_id"]) == before


def test_events_for_an_unknown_session_are_404(api: Api) -> None:
    # When a message is posted to a session that does not exist
    r = api.post_event(uuid.uuid4().hex, {"type": "message", "data": USER_MESSAGE})
    # Then it is not found
    assert r.status == 404
    assert r.error()["code"] == "not_found"


def _bad_upload(case: str, name: str, yaml_text: str) -> tuple[dict[str, Any], dict[str, str]]:
    """``(files, fields)`` of a bad upload; the agent YAML itself is valid unless the case says not."""
    good = {"bundle": ("a.tar.gz", build_bundle({f"{name}.yaml": yaml_text}), "application/gzip")}
    if case == "spec without executor":
        bad = build_bundle({f"{name}.yaml": f"name: {name}\n"})
        return {"bundle": ("a.tar.gz", bad, "application/gzip")}, {"metadata": "{}"}
    if case == "bundle not a tar":
        return {"bundle": ("a.tar.gz", b"plain bytes", "application/gzip")}, {"metadata": "{}"}
    if case == "bundle missing":
        return {}, {"metadata": "{}"}
    if case == "metadata missing":
        return good, {}
    if case == "metadata unknown key":
        return good, {"metadata": json.dumps({"colour": "red"})}
    if case == "metadata not json":
        return good, {"metadata": "{"}
    raise AssertionError(case)


BAD_UPLOADS = [
    "spec without executor",
    "bundle not a tar",
    "bundle missing",
    "metadata missing",
    "metadata unknown key",
    "metadata not json",
]


@pytest.mark.parametrize("case", BAD_UPLOADS)
def test_bad_uploads_store_no_agent(aws: Stack, api: Api, case: str) -> None:
    # Given a bad upload
    name, yaml_text = aws.agent_yaml("never-used")
    files, fields = _bad_upload(case, name, yaml_text)
    agents_before = aws.count_agents()

    # When it is uploaded
    r = _upload(api, files, fields)

    # Then it is refused, and neither an agent nor a session was stored
    assert r.status == 400, r.body
    assert r.error()["code"] == "invalid_input"
    assert aws.count_agents() == agents_before
    assert api.get("/v1/sessions", agent_name=name).body["data"] == []


def test_text_plain_create_is_415(aws: Stack, api: Api) -> None:
    # When a session create arrives as text/plain
    agents_before = aws.count_agents()
    r = api.call("POST", "/v1/sessions", headers={"content-type": "text/plain"}, body="hello")
    # Then the media type is refused and nothing was stored
    assert r.status == 415
    assert r.error()["code"] == "unsupported_media_type"
    assert aws.count_agents() == agents_before


def test_create_with_unknown_fields_is_400(api: Api, session: dict[str, Any]) -> None:
    # When a JSON create carries a field the API does not know
    r = api.post_json("/v1/sessions", {"agent_id": session["agent_id"], "colour": "red"})
    # Then it is refused
    assert r.status == 400
    assert r.error()["code"] == "invalid_input"


def test_removing_an_agent_deletes_every_versions_model_key(aws: Stack, api: Api) -> None:
    # Given two versions of one agent, each registered with its model key, and a session of it
    name = f"keyed-{uuid.uuid4().hex[:8]}"
    spec = {"name": name, "executor": {"model": "m", "auth": {"api_key": "sk-one"}}}
    first = api.post_json("/v1/agents", spec)
    second = api.post_json("/v1/agents", {**spec, "executor": {"model": "m", "auth": {"api_key": "sk-two"}}})
    assert (first.status, second.status) == (201, 201), (first.body, second.body)
    secrets = [aws.store.get_agent(r.body["id"]).api_key_secret for r in (first, second)]
    sm = deps.client("secretsmanager")
    assert [sm.get_secret_value(SecretId=s)["SecretString"] for s in secrets if s] == ["sk-one", "sk-two"]
    assert api.post_json("/v1/sessions", {"agent_id": second.body["id"]}).status == 201

    # When it is removed while a session uses it: refused, nothing deleted
    refused = api.call("DELETE", f"/v1/agents/{second.body['id']}")
    assert refused.status == 409
    assert refused.body["sessions_in_use"] == 1
    assert sm.get_secret_value(SecretId=secrets[1])["SecretString"] == "sk-two"

    # Then, forced: both versions and both keys are gone
    removed = api.call("DELETE", f"/v1/agents/{first.body['id']}", query={"force": "true"})
    assert removed.status == 200, removed.body
    assert removed.body["versions"] == 2
    for agent_id, secret in zip((first.body["id"], second.body["id"]), secrets, strict=True):
        assert api.get(f"/v1/agents/{agent_id}").status == 404
        with pytest.raises(sm.exceptions.ResourceNotFoundException):
            sm.get_secret_value(SecretId=secret)
    # and a retried removal is an ordinary 404
    assert api.call("DELETE", f"/v1/agents/{first.body['id']}").status == 404


@pytest.mark.parametrize("key", ["", "sk-" + "k" * 9000], ids=["empty", "too-long"])
def test_an_empty_or_oversized_model_key_is_400_and_never_echoed(aws: Stack, api: Api, key: str) -> None:
    # Found by tests/e2e/test_fuzz.py: an empty key reached Secrets Manager and answered 500
    before = aws.count_agents()
    spec = {"name": f"bad-key-{uuid.uuid4().hex[:8]}", "executor": {"model": "m", "auth": {"api_key": key}}}
    r = api.post_json("/v1/agents", spec)
    assert r.status == 400, r.body
    assert "api_key" in r.error()["message"]
    assert "kkkk" not in json.dumps(r.body)  # the secret is not repeated back
    assert aws.count_agents() == before


def test_every_answer_carries_the_http_apis_request_id(api: Api) -> None:
    from skyloop.local import lambda_hook
    from tests.integration.conftest import http_event

    def answer(path: str) -> tuple[str, dict[str, Any]]:
        event = http_event("GET", path)
        context = lambda_hook.LocalContext(
            "skyloop-api", "$LATEST", "arn:aws:lambda:us-east-1:123456789012:function:skyloop-api", 512,
            str(uuid.uuid4()), "/aws/lambda/skyloop-api", "local", time.time() + 29,
        )  # fmt: skip
        return event["requestContext"]["requestId"], api._handler(event, context)

    # When the API function answers a request as the HTTP API hands it over, and a Claude path's error
    rid, out = answer("/v1/agents")
    claude_rid, claude = answer("/anthropic/v1/agents/nope")
    # Then each answer says which request it was (X-Request-Id; request-id on Claude's contract, whose
    # error body names it too)
    assert out["headers"]["X-Request-Id"] == rid
    assert claude["headers"]["request-id"] == claude_rid
    assert json.loads(claude["body"])["request_id"] == claude_rid
