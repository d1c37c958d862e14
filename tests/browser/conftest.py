"""Browser tests of the web console: real ``skyloop dev`` processes, real Chromium, real SSE.

The browser is Debian's ``chromium`` driven by Playwright for Python (no browser download;
``make test`` installs the package when it is missing). The console is the built
``console/dist`` that ``skyloop dev`` serves at ``/``. Between the browser and the stack sits
:class:`CutProxy`, a TCP relay a test can cut, so a dropped connection is a real one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.e2e.conftest import LOOPBACK
from tests.oidc_issuer import AUDIENCE, TestIssuer

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser, Page

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONSOLE_DIST = PROJECT_ROOT / "console" / "dist"
AXE_JS = PROJECT_ROOT / "console" / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_CHROMIUM = (
    "apt-get update && apt-get install -y chromium   (make test does it when chromium is missing)"
)
STARTUP_TIMEOUT_S = 180.0  # a deadline, not a measure: two stacks and Chromium start at once on 2 cores
# where screenshots of each screen go when asked (docs/console holds the committed ones)
SCREENSHOTS_ENV = "SKYLOOP_CONSOLE_SCREENSHOTS"


def chromium_executable() -> str:
    """Debian's Chromium, or a failure that says how to install it (never a skip)."""
    found = os.environ.get("SKYLOOP_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(found).is_file():
        pytest.fail(f"Chromium is not installed; the console's browser tests need it: {INSTALL_CHROMIUM}")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CutProxy:
    """A TCP relay in front of the stack whose connections a test can drop (a real network cut).

    ``cut(hold=True)`` closes every open connection and refuses new ones until ``resume()``,
    so events happen while the browser is disconnected.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._held = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._held.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
                with self._lock:
                    self._open.discard(s)

    def cut(self, *, hold: bool = False) -> int:
        """Drop every open connection (RST-free shutdown); returns how many were open."""
        if hold:
            self._held.set()
        with self._lock:
            sockets = list(self._open)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        return len(sockets)

    def resume(self) -> None:
        self._held.clear()

    def close(self) -> None:
        self._listener.close()
        self.cut()


@dataclass
class Stack:
    """A running ``skyloop dev``: ``url`` through the proxy (the browser's), ``direct`` without."""

    url: str
    direct: str
    token: str | None
    moto_url: str
    proxy: CutProxy | None
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, token: str | None = None) -> httpx.Client:
        bearer = token if token is not None else self.token
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        return httpx.Client(base_url=self.direct, headers=headers, timeout=30)

    def mock(self, model: str, responses: list[dict[str, Any]]) -> None:
        """Script the stack's built-in mock model (``/_mock``) for requests naming ``model``."""
        body = {"key": model, "responses": responses}
        LOOPBACK.post(f"{self.direct}/_mock/mock/configure", json=body, timeout=5).raise_for_status()

    def release_gate(self) -> None:
        with contextlib.suppress(httpx.HTTPError):
            LOOPBACK.post(f"{self.direct}/_mock/gate/release", timeout=5)

    def agent(self, name: str, model: str, **extra: Any) -> str:
        """Register an agent answered by the built-in mock model under ``model``; returns its id."""
        spec = {
            "name": name,
            "prompt": "You are a test agent.",
            "executor": {
                "harness": "openai-agents",
                "model": model,
                "auth": {"type": "api_key", "api_key": "mock", "base_url": f"{self.direct}/_mock/v1"},
            },
            **extra,
        }
        with self.client() as c:
            r = c.post("/v1/agents", json=spec)
            assert r.status_code == 201, r.text
            return str(r.json()["id"])

    def session(self, agent_id: str, title: str) -> str:
        with self.client() as c:
            r = c.post("/v1/sessions", json={"agent_id": agent_id})
            assert r.status_code == 201, r.text
            sid = str(r.json()["id"])
            c.patch(f"/v1/sessions/{sid}", json={"title": title}).raise_for_status()
            return sid

    def snapshot(self, session_id: str) -> dict[str, Any]:
        with self.client() as c:
            r = c.get(f"/v1/sessions/{session_id}")
            r.raise_for_status()
            return dict(r.json())

    def wait_status(self, session_id: str, status: str, timeout_s: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            snap = self.snapshot(session_id)
            if snap["status"] == status:
                return snap
            if time.monotonic() > deadline:
                raise AssertionError(f"session {session_id} is {snap['status']}, not {status}")
            time.sleep(0.1)


def _start_dev(tmp: Path, args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = free_port()
    log = tmp / "dev.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "skyloop", "dev", "--port", str(port), "--data-dir", str(tmp / "data"), *args],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "OPENAI_API_KEY": "", **env},
    )
    return proc, f"http://127.0.0.1:{port}", log


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"skyloop dev exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if LOOPBACK.get(f"{url}/health", timeout=1).status_code == 200 and "serving" in log.read_text():
                return
        time.sleep(0.1)
    raise RuntimeError(f"skyloop dev not ready after {STARTUP_TIMEOUT_S}s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _banner(log: Path, label: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        match = re.search(rf"{label}:\s+(\S+)", log.read_text())
        if match:
            return match.group(1)
        time.sleep(0.1)
    raise AssertionError(f"`{label}` not in the banner:\n{log.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def console_dist() -> Path:
    if not (CONSOLE_DIST / "index.html").is_file():
        pytest.fail("the console is not built: run `make console` (make test builds it)")
    return CONSOLE_DIST


@pytest.fixture(scope="session")
def issuer() -> Iterator[TestIssuer]:
    with TestIssuer() as server:
        yield server


@pytest.fixture(scope="session")
def open_stack_process(tmp_path_factory: pytest.TempPathFactory, console_dist: Path) -> Iterator[Any]:
    """A stack without ``--require-token``, started early and waited for only where needed."""
    proc, url, log = _start_dev(tmp_path_factory.mktemp("open-stack"), [], {})
    try:
        yield proc, url, log
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def open_stack(open_stack_process: Any) -> Stack:
    proc, url, log = open_stack_process
    _wait_ready(proc, url, log)
    return Stack(url=url, direct=url, token=None, moto_url=_banner(log, "moto endpoint"), proxy=None, log=log)


@pytest.fixture(scope="session")
def stack(
    tmp_path_factory: pytest.TempPathFactory, console_dist: Path, issuer: TestIssuer, open_stack_process: Any
) -> Iterator[Stack]:
    """``skyloop dev --require-token`` that also accepts the test issuer's JWTs, behind a CutProxy."""
    env = {
        "SKYLOOP_JWT_ISSUER": issuer.issuer,
        "SKYLOOP_JWT_AUDIENCE": AUDIENCE,
        "SKYLOOP_CONSOLE_CLIENT_ID": AUDIENCE,  # the issuer's public client for the console
    }
    proc, url, log = _start_dev(tmp_path_factory.mktemp("token-stack"), ["--require-token"], env)
    proxy = None
    try:
        _wait_ready(proc, url, log)
        moto_url = _banner(log, "moto endpoint")
        token = _banner(log, "bearer token")
        create = [
            "token",
            "create",
            "--table",
            "skyloop-local",
            "--endpoint-url",
            moto_url,
            "--region",
            "us-east-1",
        ]
        out = subprocess.run(
            [sys.executable, "-m", "skyloop", *create, "--principal", "local", "--scope", "read"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
            env={**os.environ, "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"},
        )
        read_token = re.search(r"\bsky_\S+", out.stdout)
        assert read_token, out.stdout + out.stderr
        proxy = CutProxy(int(url.rsplit(":", 1)[1]))
        yield Stack(
            url=proxy.url,
            direct=url,
            token=token,
            moto_url=moto_url,
            proxy=proxy,
            log=log,
            tokens={"write": token, "read": read_token.group(0)},
        )
    finally:
        if proxy is not None:
            proxy.close()
        _stop(proc)


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One Chromium for this package only: Playwright's sync API keeps an event loop
    running on the main thread while it is open, and every later ``asyncio.run`` in the
    same pytest process (the async client and stream tests) would fail."""
    from playwright.sync_api import sync_playwright

    executable = chromium_executable()
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context per test; any uncaught page error fails the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    context.set_default_timeout(15_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield pg
    finally:
        context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def sign_in(page: Page, stack: Stack, token: str | None = None) -> None:
    """Open the console and sign in with a bearer token (the write token unless given)."""
    page.goto(stack.url + "/")
    page.get_by_label("Bearer token").fill(token or stack.tokens["write"])
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.get_by_role("heading", name="Sessions").wait_for()


def axe(page: Page) -> list[dict[str, Any]]:
    """axe-core from the console's node_modules (no CDN), run in the page: serious and critical findings."""
    if not AXE_JS.is_file():
        pytest.fail(f"{AXE_JS} is missing: run `make console` (npm ci in console/)")
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(
            AXE_JS.read_text()
        )  # evaluated, not a <script>: the console's CSP allows no inline script
    result = page.evaluate(
        "async () => { const r = await axe.run(document, {resultTypes: ['violations']});"
        " return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)})); }"
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


def screenshot(page: Page, name: str) -> None:
    """With SKYLOOP_CONSOLE_SCREENSHOTS=<dir>, keep a picture of this screen (docs/console)."""
    folder = os.environ.get(SCREENSHOTS_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def offer_echo() -> dict[str, Any]:
    return {"type": "function", "function": {"name": "Echo", "parameters": {"type": "object"}}}


def post_message(stack: Stack, session_id: str, text: str, tools: list[dict[str, Any]] | None = None) -> None:
    body: dict[str, Any] = {
        "type": "message",
        "data": {"role": "user", "content": [{"type": "input_text", "text": text}]},
    }
    if tools:
        body["tools"] = tools
    with stack.client() as c:
        r = c.post(
            f"/v1/sessions/{session_id}/events",
            content=json.dumps(body),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 202, r.text
