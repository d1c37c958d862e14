"""A real webhook receiver on loopback for tests: records every request, answers as scripted.

It can be stopped and started again on the same port (a receiver that is
down), and told to answer given status codes before answering 200.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Received:
    at: float
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        return dict(json.loads(self.body))

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


class WebhookReceiver:
    """``with WebhookReceiver() as r: r.url``; ``r.fail_next(500, 500)``; ``r.stop()`` / ``r.start()``."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.received: list[Received] = []
        self._answers: list[int] = []
        self._cond = threading.Condition()
        self._server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def fail_next(self, *codes: int) -> None:
        with self._cond:
            self._answers.extend(codes)

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver._cond:
                    receiver.received.append(
                        Received(time.time(), {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    code = receiver._answers.pop(0) if receiver._answers else 200
                    receiver._cond.notify_all()
                self.send_response(code)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        class Server(http.server.ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

        self._server = Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def events(self, type_: str | None = None, session_id: str | None = None) -> list[Received]:
        with self._cond:
            return [
                r
                for r in self.received
                if (type_ is None or r.event["type"] == type_)
                and (session_id is None or r.event["data"].get("id") == session_id)
            ]

    def wait_for(
        self, type_: str, *, session_id: str | None = None, count: int = 1, timeout: float = 30.0
    ) -> Received:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [
                    r
                    for r in self.received
                    if r.event["type"] == type_
                    and (session_id is None or r.event["data"].get("id") == session_id)
                ]
                if len(found) >= count:
                    return found[count - 1]
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [r.event["type"] for r in self.received]
                    raise AssertionError(f"no {type_} (x{count}) within {timeout}s; received {seen}")
                self._cond.wait(min(left, 0.5))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
