"""Agents over real HTTP: the session's agent, the agents API, versions, bundles and untrusted uploads."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.conftest import (
    create_runner_bound_session,
    lookup_agent_id,
    unique,
    upload_agent,
)

if TYPE_CHECKING:
    import httpx

SECRET = "mock-key"


def _spec(name: str, model: str = "m-agents", **extra: Any) -> dict[str, Any]:
    executor = {
        "harness": "openai-agents",
        "model": model,
        "profile": "",
        "auth": {"type": "api_key", "api_key": SECRET, "base_url": "http://127.0.0.1:9/v1"},
    }
    return {"name": name, "prompt": "You help.", "executor": executor, **extra}


def _member(name: str, data: bytes = b"", *, kind: bytes = tarfile.REGTYPE, **attrs: Any) -> tuple:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    for key, value in attrs.items():
        setattr(info, key, value)
    return info, data


def _tar(members: list[tuple], *, gz: bool = True) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    raw = buf.getvalue()
    return gzip.compress(raw, compresslevel=6) if gz else raw


def _yaml_member(name: str = "agent.yaml", spec: dict[str, Any] | None = None) -> tuple:
    return _member(name, json.dumps(spec or _spec(unique("bundle"))).encode())


def _post_bundle(
    http_client: httpx.Client, bundle: bytes | None, metadata: str | None = "{}"
) -> httpx.Response:
    files: dict[str, Any] = {}
    if metadata is not None:
        files["metadata"] = (None, metadata)
    if bundle is not None:
        files["bundle"] = ("agent.tar.gz", bundle, "application/gzip")
    return http_client.post("/v1/sessions", files=files)


def _newest(http_client: httpx.Client) -> tuple[str | None, str | None]:
    """The newest agent id and the newest session id: any write would change one of them."""
    agents = http_client.get("/v1/agents", params={"limit": 1}).json()
    sessions = http_client.get("/v1/sessions", params={"limit": 1, "include_archived": "true"}).json()
    return agents["first_id"], sessions["first_id"]


def _agent_count(http_client: httpx.Client) -> int:
    count, after = 0, None
    while True:
        params: dict[str, Any] = {"limit": 1000, **({"after": after} if after else {})}
        page = http_client.get("/v1/agents", params=params).json()
        count += len(page["data"])
        if not page["has_more"]:
            return count
        after = page["last_id"]


def _assert_agent_object(agent: dict[str, Any]) -> None:
    assert len(agent["id"]) == 32
    assert int(agent["id"], 16) >= 0
    assert agent["name"]
    assert agent["harness"] == "openai-agents"
    assert agent["model"]
    assert isinstance(agent["created_at"], int)


def test_session_agent_is_returned_without_secrets(http_client: httpx.Client) -> None:
    # Given an uploaded agent whose spec holds an api_key
    name = unique("secretive")
    created = upload_agent(http_client, {f"{name}.yaml": json.dumps(_spec(name, "m-secret"))})
    session_id = created["session_id"]

    # When the session's agent is read
    resp = http_client.get(f"/v1/sessions/{session_id}/agent")

    # Then it is the agent, with its public fields
    assert resp.status_code == 200, resp.text
    agent = resp.json()
    _assert_agent_object(agent)
    assert agent["id"] == created["agent_id"]
    assert agent["name"] == name == created["agent_name"]
    assert agent["model"] == "m-secret"
    # And the api_key value appears nowhere, there or in the agents API
    assert SECRET not in resp.text
    assert "api_key" not in resp.text
    for path in (f"/v1/agents/{agent['id']}", "/v1/agents?limit=1000"):
        other = http_client.get(path)
        assert other.status_code == 200, path
        assert SECRET not in other.text, path


def test_agents_api_creates_lists_and_gets(http_client: httpx.Client) -> None:
    # Given three agents posted as JSON specs
    created = []
    for n in range(3):
        resp = http_client.post("/v1/agents", json=_spec(unique(f"json{n}"), f"m-json-{n}"))
        # Then each is 201 with the agent object and without the secret
        assert resp.status_code == 201, resp.text
        assert SECRET not in resp.text
        _assert_agent_object(resp.json())
        created.append(resp.json())
    ids = [a["id"] for a in created]

    # When the agents are listed (newest first by default), two per page
    page = http_client.get("/v1/agents", params={"limit": 2}).json()
    # Then the newest come first and has_more/after page on
    assert page["object"] == "list"
    assert [a["id"] for a in page["data"]] == ids[:0:-1]
    assert page["has_more"] is True
    assert page["first_id"] == ids[2]
    assert page["last_id"] == ids[1]
    nxt = http_client.get("/v1/agents", params={"limit": 1, "after": page["last_id"]}).json()
    assert [a["id"] for a in nxt["data"]] == [ids[0]]
    assert SECRET not in json.dumps(page) + json.dumps(nxt)
    # And oldest first ends with them in creation order
    asc = [
        a["id"] for a in http_client.get("/v1/agents", params={"order": "asc", "limit": 1000}).json()["data"]
    ]
    assert asc[-3:] == ids

    # When one is fetched by id
    got = http_client.get(f"/v1/agents/{ids[1]}")
    # Then it is the same agent
    assert got.status_code == 200
    assert got.json() == created[1]
    # And unknown ids are 404 error bodies
    for missing in ("0" * 32, "nope"):
        resp = http_client.get(f"/v1/agents/{missing}")
        assert resp.status_code == 404, resp.text
        assert resp.json()["error"]["code"] == "not_found", resp.text
    # And a session can be created for it
    session = http_client.post("/v1/sessions", json={"agent_id": ids[1]})
    assert session.status_code == 201, session.text
    assert session.json()["agent_id"] == ids[1], session.text
    unknown = http_client.post("/v1/sessions", json={"agent_id": "0" * 32})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"prompt": "no name", "executor": {"model": "m"}}, "name", id="missing-name"),
        pytest.param({"name": "bad name!", "executor": {"model": "m"}}, "name", id="bad-name"),
        pytest.param({"name": "x-noexec"}, "executor", id="missing-executor"),
        pytest.param({"name": "x-nomodel", "executor": {"harness": "openai-agents"}}, "model", id="no-model"),
        pytest.param(
            {"name": "x-h", "executor": {"model": "m", "harness": "bogus"}}, "harness", id="harness"
        ),
        pytest.param(
            {"name": "x-url", "executor": {"model": "m", "auth": {"api_key": SECRET, "base_url": "ftp://x"}}},
            "base_url",
            id="base-url",
        ),
        pytest.param(
            {"name": "x-lim", "executor": {"model": "m"}, "limits": {"max_iterations": 0}},
            "max_iterations",
            id="limits",
        ),
        pytest.param(["not", "an", "object"], "object", id="not-an-object"),
    ],
)
def test_bad_agent_spec_is_a_400_naming_the_field(http_client: httpx.Client, body: Any, field: str) -> None:
    # Given the agents as they are
    before = _newest(http_client)
    # When a bad spec is posted
    resp = http_client.post("/v1/agents", json=body)
    # Then it is a 400 naming the field, echoing no secret, and nothing is written
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_input", error
    assert field in error["message"], error
    assert SECRET not in resp.text
    assert _newest(http_client) == before


def test_reuploading_a_name_creates_a_newer_version(http_client: httpx.Client, live_runner_id: str) -> None:
    # Given an agent uploaded twice under one name, with different models
    name = unique("versioned")
    v1 = upload_agent(http_client, {f"{name}.yaml": json.dumps(_spec(name, "m-v1"))})
    v2 = upload_agent(http_client, {f"{name}.yaml": json.dumps(_spec(name, "m-v2"))})

    # Then each upload is its own agent version with its own session
    assert v1["agent_id"] != v2["agent_id"]
    assert v1["agent_name"] == v2["agent_name"] == name
    for created, model in ((v1, "m-v1"), (v2, "m-v2")):
        agent = http_client.get(f"/v1/sessions/{created['session_id']}/agent").json()
        assert agent["id"] == created["agent_id"]
        assert agent["model"] == model
    # When sessions are listed by agent name
    listed = http_client.get("/v1/sessions", params={"agent_name": name}).json()["data"]
    # Then the newest version's session comes first
    assert [(s["id"], s["agent_id"]) for s in listed] == [
        (v2["session_id"], v2["agent_id"]),
        (v1["session_id"], v1["agent_id"]),
    ]
    assert lookup_agent_id(http_client, name) == v2["agent_id"]
    # And a session created by name runs the newest version
    session_id = create_runner_bound_session(http_client, agent_name=name, runner_id=live_runner_id)
    assert http_client.get(f"/v1/sessions/{session_id}/agent").json()["model"] == "m-v2"


CONFIG_YAML = """\
# a directory bundle's config
name: {name}
description: Directory bundle agent
prompt: |
  You are a directory-bundle agent.
  Keep answers short.
executor:
  harness: openai-agents
  model: m-dir
  profile: ""
  auth:
    type: api_key
    api_key: {secret}
    base_url: http://127.0.0.1:9/v1
params:  # omnigent keys ride along
  kept: [1, 2]
"""


def test_directory_bundles_with_config_yaml_upload(http_client: httpx.Client) -> None:
    # Given a directory bundle (config.yaml inside one top-level folder, plus other files)
    name = unique("dirbundle")
    nested = _tar(
        [
            _member("myagent/", kind=tarfile.DIRTYPE),
            _member("myagent/config.yaml", CONFIG_YAML.format(name=name, secret=SECRET).encode()),
            _member("myagent/tools/", kind=tarfile.DIRTYPE),
            _member("myagent/tools/notes.md", b"# notes\n"),
            _member("myagent/skills/helper.yaml", b"not: the spec\n"),
        ]
    )
    # And one with config.yaml at the root
    root_name = unique("rootbundle")
    at_root = _tar(
        [
            _member("config.yaml", CONFIG_YAML.format(name=root_name, secret=SECRET).encode()),
            _member("README.md", b"readme\n"),
        ]
    )
    for bundle, expected in ((nested, name), (at_root, root_name)):
        # When it is uploaded
        resp = _post_bundle(http_client, bundle, metadata=json.dumps({"title": "from a dir"}))
        # Then the agent named in config.yaml is registered with an idle session
        assert resp.status_code == 201, resp.text
        created = resp.json()
        assert created["agent_name"] == expected
        assert set(created) == {"session_id", "agent_id", "agent_name"}
        agent = http_client.get(f"/v1/sessions/{created['session_id']}/agent")
        assert agent.status_code == 200
        assert SECRET not in agent.text
        assert agent.json()["model"] == "m-dir"
        assert agent.json()["prompt"] == "You are a directory-bundle agent.\nKeep answers short.\n"
        snap = http_client.get(f"/v1/sessions/{created['session_id']}").json()
        assert snap["status"] == "idle"
        assert snap["title"] == "from a dir"


BILLION_LAUGHS = """\
name: laughs
executor: {model: m}
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
"""
MANY_ALIASES = "name: aliased\nexecutor: {model: m}\nx: &x 1\nl: [" + ", ".join(["*x"] * 150) + "]\n"


def _untrusted_cases() -> list[Any]:
    ok = _yaml_member
    many = [ok()] + [_member(f"files/f{n:04d}.txt", b"x") for n in range(1001)]
    huge_member = [ok(), _member("blob.bin", bytes(21 * 1024 * 1024))]
    big_yaml = json.dumps(_spec("big-yaml", prompt="p" * 150_000, description="d" * 150_000)).encode()
    return [
        pytest.param(_tar([_member("/abs/agent.yaml", ok()[1])]), None, "absolute path", id="absolute-path"),
        pytest.param(_tar([_member("../agent.yaml", ok()[1])]), None, "'..'", id="dotdot"),
        pytest.param(_tar([ok(), _member("x/../../evil.txt", b"e")]), None, "'..'", id="nested-dotdot"),
        pytest.param(
            _tar([ok(), _member("link", kind=tarfile.SYMTYPE, linkname="/etc/passwd")]),
            None,
            "symbolic link",
            id="symlink",
        ),
        pytest.param(
            _tar([ok(), _member("hard", kind=tarfile.LNKTYPE, linkname="agent.yaml")]),
            None,
            "hard link",
            id="hardlink",
        ),
        pytest.param(
            _tar([ok(), _member("null", kind=tarfile.CHRTYPE, devmajor=1, devminor=3)]),
            None,
            "character device",
            id="char-device",
        ),
        pytest.param(
            _tar([ok(), _member("disk", kind=tarfile.BLKTYPE, devmajor=8, devminor=0)]),
            None,
            "block device",
            id="block-device",
        ),
        pytest.param(_tar([ok(), _member("pipe", kind=tarfile.FIFOTYPE)]), None, "FIFO", id="fifo"),
        pytest.param(_tar(many), 413, "more than 1000 members", id="too-many-files"),
        pytest.param(_tar(huge_member), 413, "expands to more than", id="oversize-expanded"),
        pytest.param(os.urandom(5 * 1024 * 1024 + 4096), 413, "limit", id="oversize-compressed"),
        pytest.param(_tar([_member("agent.yaml", big_yaml)]), 413, "agent.yaml", id="oversize-yaml"),
        pytest.param(
            _tar([_member("agent.yaml", BILLION_LAUGHS.encode())]),
            None,
            ("aliases", "too many nodes"),
            id="billion-laughs",
        ),
        pytest.param(
            _tar([_member("agent.yaml", MANY_ALIASES.encode())]), None, "aliases", id="too-many-aliases"
        ),
        pytest.param(
            _tar([_member("agent.yaml", b"name: [unclosed\nexecutor: {model: m}\n")]),
            None,
            "agent.yaml",
            id="yaml-syntax",
        ),
        pytest.param(b"definitely not a tarball", None, "tar", id="garbage"),
        pytest.param(gzip.compress(os.urandom(2048)), None, "tar", id="gzipped-garbage"),
        pytest.param(
            _tar([_member("agent.yaml", b"prompt: hi\nexecutor: {model: m}\n")]), None, "name", id="no-name"
        ),
        pytest.param(_tar([_member("README.md", b"hi")]), None, "no agent YAML", id="no-yaml"),
    ]


@pytest.mark.parametrize(("bundle", "status", "phrase"), _untrusted_cases())
def test_untrusted_bundle_is_refused_and_writes_nothing(
    http_client: httpx.Client, bundle: bytes, status: int | None, phrase: str | tuple[str, ...]
) -> None:
    # Given the agents and sessions as they are
    before = _newest(http_client)
    # When a hostile or broken bundle is uploaded
    resp = _post_bundle(http_client, bundle)
    # Then it is refused with 400 (or 413 for size limits) and a message naming the problem
    assert resp.status_code == (status or 400), resp.text[:500]
    error = resp.json()["error"]
    assert error["code"] == ("payload_too_large" if resp.status_code == 413 else "invalid_input")
    phrases = (phrase,) if isinstance(phrase, str) else phrase
    assert any(p in error["message"] for p in phrases), error
    assert SECRET not in resp.text
    # And nothing was written
    assert _newest(http_client) == before


@pytest.mark.parametrize(
    ("metadata", "with_bundle", "phrase"),
    [
        pytest.param("{}", False, "bundle", id="missing-bundle-field"),
        pytest.param(None, True, "metadata", id="missing-metadata-field"),
        pytest.param("{not json", True, "metadata", id="bad-metadata-json"),
        pytest.param('["a list"]', True, "metadata", id="metadata-not-an-object"),
        pytest.param('{"unknown_key": 1}', True, "unknown_key", id="metadata-unknown-key"),
    ],
)
def test_bad_upload_form_is_a_400_and_writes_nothing(
    http_client: httpx.Client, metadata: str | None, with_bundle: bool, phrase: str
) -> None:
    # Given the agents and sessions as they are, and an otherwise valid bundle
    before = _newest(http_client)
    bundle = _tar([_yaml_member()]) if with_bundle else None
    # When the form is missing a field or carries bad metadata
    resp = _post_bundle(http_client, bundle, metadata=metadata)
    # Then it is a 400 naming the problem, and nothing is written
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_input", error
    assert phrase in error["message"], error
    assert _newest(http_client) == before


def test_refused_uploads_leave_the_agent_count_unchanged(http_client: httpx.Client) -> None:
    # Given the number of agents
    before = _agent_count(http_client)
    # When every untrusted bundle above is uploaded
    for case in _untrusted_cases():
        bundle, status, _phrase = case.values
        # Then each is refused
        assert _post_bundle(http_client, bundle).status_code == (status or 400), case.id
    # And GET /v1/agents counts exactly as many agents as before
    assert _agent_count(http_client) == before
