"""A name that answers a public address to the outbound check and a refused one to the connection
reaches nothing (DNS rebinding): model endpoints, MCP servers and webhook deliveries connect to the
address their check passed.

The resolver here answers ``rebind.test`` with a public address on its first lookup and with
127.0.0.1, where a real HTTP server counts what reaches it, on every later one; loopback is refused,
as in the cloud. Before the pinned transports the check passed on the first answer and the HTTP
client's own lookup took the second: the server saw the request.
"""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import settings as settings_module

if TYPE_CHECKING:
    from collections.abc import Iterator

NAME = "rebind.test"
PUBLIC = "93.184.216.34"


class Inward:
    """A server on 127.0.0.1 that records every request reaching it."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                hits.append(f"{self.command} {self.path}")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = _any

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def inward() -> Iterator[Inward]:
    server = Inward()
    yield server
    server.close()


@pytest.fixture
def rebinding(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``rebind.test``: a public address the first time, loopback after; loopback refused."""
    real = socket.getaddrinfo
    answers: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if (host.decode() if isinstance(host, bytes) else host) != NAME:  # anyio asks in bytes
            return real(host, port, *args, **kwargs)
        answer = PUBLIC if not answers else "127.0.0.1"
        answers.append(answer)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (answer, int(port or 80)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setenv("SKYLOOP_OUTBOUND_ALLOW_LOOPBACK", "false")
    monkeypatch.setenv("SKYLOOP_OUTBOUND_ALLOW", "")
    settings_module.get_settings.cache_clear()
    yield answers
    settings_module.get_settings.cache_clear()


def test_a_webhook_delivery_does_not_follow_a_rebound_name(inward: Inward, rebinding: list[str]) -> None:
    from skyloop.webhooks import delivery as webhook_delivery
    from skyloop.webhooks.delivery import new_secret
    from skyloop.webhooks.models import Delivery, Endpoint

    webhook_delivery._client = None  # a client built with this test's settings
    now = int(time.time())
    endpoint = Endpoint(
        id="ep", owner="alice", url=f"http://{NAME}:{inward.port}/hook", secret=new_secret(),
        created_at=now, updated_at=now,
    )  # fmt: skip
    sent = Delivery(id="evt_1", endpoint_id="ep", event_type="agent.session.idle", body="{}", created_at=now)
    try:
        code, error = webhook_delivery.post(endpoint, sent, settings_module.get_settings(), at=time.time())
    finally:
        webhook_delivery._client = None
    assert code is None
    assert error is not None
    assert "loopback" in error, error
    assert inward.hits == []
    assert rebinding[:2] == [PUBLIC, "127.0.0.1"]  # the check, then the connection's own lookup


def test_a_model_endpoint_does_not_follow_a_rebound_name(inward: Inward, rebinding: list[str]) -> None:
    import openai

    from skyloop.harnesses import _openai_common
    from skyloop.outbound import check_url

    base_url = f"http://{NAME}:{inward.port}/v1"
    check_url(base_url, settings_module.get_settings(), what="executor.auth.base_url")  # passes: public
    _openai_common._client.cache_clear()
    client = _openai_common._client("k", base_url).with_options(max_retries=0, timeout=5)
    with pytest.raises(openai.APIConnectionError):
        client.models.list()
    _openai_common._client.cache_clear()
    assert inward.hits == []


def test_an_mcp_server_does_not_follow_a_rebound_name(inward: Inward, rebinding: list[str]) -> None:
    from skyloop.models.tools import McpServer
    from skyloop.tools.mcp_client import McpError, list_tools

    server = McpServer(type="mcp", url=f"http://{NAME}:{inward.port}/mcp", timeout_s=10)
    with pytest.raises(McpError, match="loopback"):
        list_tools(server, {})
    assert inward.hits == []
    assert rebinding[:2] == [PUBLIC, "127.0.0.1"]
