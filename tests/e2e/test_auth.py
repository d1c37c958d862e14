"""Bearer-token auth on the local stack started with ``--require-token``, as the cloud always runs."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.conftest import LOOPBACK, _free_port, _start, _stop, _wait_ready

SESSION = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """A dev server requiring tokens; yields (url, token, moto endpoint)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("secured") / "dev.log"
    proc = _start(
        ["dev", "--port", str(port), "--require-token", "--ephemeral"], log, {"SKYLOOP_TOKEN_CACHE_S": "0"}
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log, "/health")
        text = log.read_text()
        for _ in range(50):
            if "bearer token" in text:
                break
            text = log.read_text()
        token = re.search(r"bearer token:\s+(\S+)", text)
        moto = re.search(r"moto endpoint:\s+(\S+)", text)
        assert token, text
        assert moto, text
        yield url, token.group(1), moto.group(1)
    finally:
        _stop(proc)


def test_routes_refuse_requests_without_a_valid_token(secured: tuple[str, str, str]) -> None:
    url, token, _ = secured
    # Given no token, a malformed header, or an unknown token
    for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer sky_wrong"}):
        # When any route is called
        for method, path in (
            ("GET", "/v1/runners"),
            ("GET", "/v1/sessions"),
            ("POST", f"/v1/sessions/{SESSION}/events"),
        ):
            resp = httpx.request(method, url + path, headers=headers, json={"type": "interrupt"})
            # Then it is 401 with the error body
            assert resp.status_code == 401, (method, path, headers)
            assert resp.json()["error"]["code"] == "unauthorized"
        stream = LOOPBACK.get(f"{url}/v1/sessions/{SESSION}/stream", headers=headers)
        assert stream.status_code == 401
        assert stream.json()["error"]["code"] == "unauthorized"
    # And /health stays open for load balancers and probes
    assert LOOPBACK.get(f"{url}/health").status_code == 200
    # And the right token is let through (the session does not exist: 404, not 401)
    auth = {"Authorization": f"Bearer {token}"}
    assert LOOPBACK.get(f"{url}/v1/runners", headers=auth).status_code == 200
    assert LOOPBACK.get(f"{url}/v1/sessions/{SESSION}", headers=auth).status_code == 404
    assert LOOPBACK.get(f"{url}/v1/sessions/{SESSION}/stream", headers=auth).status_code == 404


def test_token_cli_creates_and_revokes(secured: tuple[str, str, str]) -> None:
    url, _, moto = secured
    cli = [sys.executable, "-m", "skyloop", "token"]
    common = ["--table", "skyloop-local", "--endpoint-url", moto, "--region", "us-east-1"]
    env_extra = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
    import os

    env = {**os.environ, **env_extra}
    # Given a token minted with the CLI
    out = subprocess.run(
        [*cli, "create", "--name", "ci", *common], capture_output=True, text=True, env=env, check=True
    )
    token = out.stdout.strip().splitlines()[-1]
    token_id = re.search(r"token id (\w+)", out.stdout)
    assert token_id, out.stdout
    auth = {"Authorization": f"Bearer {token}"}
    assert LOOPBACK.get(f"{url}/v1/runners", headers=auth).status_code == 200
    listed = subprocess.run(
        [*cli, "list", *common], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert token_id.group(1) in listed
    assert token not in listed
    # When it is revoked by id
    subprocess.run(
        [*cli, "revoke", token_id.group(1), *common], capture_output=True, text=True, env=env, check=True
    )
    # Then it no longer opens any route
    assert LOOPBACK.get(f"{url}/v1/runners", headers=auth).status_code == 401
    # And revoking it again is a clear error
    again = subprocess.run(
        [*cli, "revoke", token_id.group(1), *common], capture_output=True, text=True, env=env
    )
    assert again.returncode == 1
    assert "no token" in again.stderr


def test_live_channel_takes_the_token_in_a_frame(secured: tuple[str, str, str]) -> None:
    from skyloop.client import Client, SessionHeartbeat
    from tests.e2e.test_live import LiveSocket

    url, token, _ = secured
    headers = {"Authorization": f"Bearer {token}"}
    session_id = LOOPBACK.get(f"{url}/v1/sessions", headers=headers, params={"limit": 1}).json()["data"][0][
        "id"
    ]
    with LiveSocket(url) as live:  # /v1/info is open: clients find the channel before signing in
        # Given no auth frame yet, a subscribe is refused and nothing follows
        assert live.subscribe(session_id, 0)["code"] == "unauthorized"
        # And a wrong token is refused
        live.send({"action": "auth", "token": "sky_wrong"})
        assert live.read_until(lambda f: True)["code"] == "unauthorized"
        assert live.subscribe(session_id, 0)["code"] == "unauthorized"
        # When the right token is sent in a frame (never in the URL)
        live.send({"action": "auth", "token": token})
        assert live.read_until(lambda f: True) == {"type": "authenticated", "principal": "local"}
        # Then the session can be watched
        assert live.subscribe(session_id, 0)["type"] == "subscribed"
    # And the SDK does the same with its configured token
    with Client(url, token=token) as client, client.watch(session_id, after=0) as events:
        assert isinstance(next(events), SessionHeartbeat)
