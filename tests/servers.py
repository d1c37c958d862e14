"""Real servers for tests: an ASGI app served by uvicorn on a free port in a daemon thread."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn


class UvicornThread:
    """uvicorn on a free port (port 0) in a daemon thread, so tests get a real HTTP stack."""

    def __init__(self, app: Any, *, lifespan: str = "off") -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self.url = ""

    def __enter__(self) -> UvicornThread:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("mock LLM server did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
