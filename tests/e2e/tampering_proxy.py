"""A reverse proxy in front of ``skyloop dev`` that can rewrite its answers: the faults smoke must catch.

``TamperingProxy(upstream, tamper)`` forwards every request (method, path,
query, headers, body) to ``upstream`` and passes each answer back, first
through ``tamper(path, body) -> body``: whole for a JSON answer, frame by frame
(cut at blank lines) for an SSE stream, so a rewrite never straddles two
chunks. Redirects are passed on, not followed (a ``Location`` naming the
upstream is pointed back at the proxy), so a client follows them through it.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from collections.abc import Callable

    Tamper = Callable[[str, bytes], bytes]

HOP_BY_HOP = {"connection", "content-length", "transfer-encoding", "content-encoding", "date", "server"}


class TamperingProxy:
    def __init__(self, upstream: str, tamper: Tamper) -> None:
        self.upstream = upstream.rstrip("/")
        self.tamper = tamper
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.proxy = self
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="tampering-proxy", daemon=True)

    def __enter__(self) -> TamperingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: TamperingProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the answer ends when the connection closes: no chunking to redo
    server: _Server

    def forward(self) -> None:
        try:
            self.relay(self.server.proxy)
        except (BrokenPipeError, ConnectionResetError, httpx.HTTPError):
            return  # a side hung up (smoke closes a stream once it has what it needs): close the other

    def relay(self, proxy: TamperingProxy) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() not in ("host", "content-length", "connection", "accept-encoding")
        }
        timeout = httpx.Timeout(60, read=None)
        with httpx.stream(
            self.command, proxy.upstream + self.path, content=body, headers=headers, timeout=timeout
        ) as resp:
            self.send_response(resp.status_code)
            for key, value in resp.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    self.send_header(key, value.replace(proxy.upstream, proxy.url))  # a Location, say
            if resp.headers.get("content-type", "").startswith("text/event-stream"):
                self.end_headers()
                self.stream(proxy, resp)
            else:
                data = proxy.tamper(self.path, resp.read())
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

    def stream(self, proxy: TamperingProxy, resp: httpx.Response) -> None:
        pending = b""
        for chunk in resp.iter_bytes():
            pending += chunk
            cut = pending.rfind(b"\n\n")
            if cut < 0:
                continue
            frames, pending = pending[: cut + 2], pending[cut + 2 :]
            self.wfile.write(proxy.tamper(self.path, frames))
            self.wfile.flush()
        if pending:
            self.wfile.write(proxy.tamper(self.path, pending))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

    def log_message(self, format: str, *args: Any) -> None:
        return None
