"""The local stack's DynamoDB in a process of its own, beside the stack's process.

A client-tool turn makes about fifty DynamoDB requests, and moto's work on
them (with :mod:`skyloop.local.moto_dynamodb`'s patches) was 40 % of the CPU
of the stack's process, under the one interpreter lock that also runs the
gateway, the stream and Step Functions' interpreter: concurrent turns queued
for that lock while the machine's other cores had room. Here moto's DynamoDB
runs in its own process (``sl-dynamodb`` in ``ps``), so the two halves run on
two cores:

* the Lambda workers send their DynamoDB requests straight to it
  (:func:`remote_from_env`, in :mod:`skyloop.local.lambda_worker`);
* the stack's process forwards its own requests (:func:`forward_moto`: the
  stream's reads, the API's and the sweeper's), and every DynamoDB request
  that reaches its moto another way (moto's server port, moto's botocore
  hook), so there is one table and one answer for everyone.

Everything else (Step Functions, Lambda, S3, Secrets Manager) stays in the
stack's process. Requests cross a Unix socket as ``(method, url, headers,
body)`` and are served by the same code moto's in-process path uses
(:func:`skyloop.local.aws_dispatch.dispatch_aws`); a connection serves one
request at a time, so each thread that calls takes a connection of its own
from a pool. The process exits when the stack's control connection closes,
as the stack exits or dies. ``SKYLOOP_LOCAL_DYNAMODB=inline`` keeps DynamoDB
in the stack's process (what in-process tests and ``bench/turn_cost.py``, which
meters moto's handler there, use).
"""

from __future__ import annotations

import contextlib
import gc
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from skyloop.local._patch import replace

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection

ADDRESS_ENV = "SKYLOOP_LOCAL_DYNAMODB_ADDRESS"  # "<abstract socket name> <authkey>", for the workers
MODE_ENV = "SKYLOOP_LOCAL_DYNAMODB"  # "process" (default with worker processes) or "inline"
START_S = 600.0  # loading a large data directory takes a while; the process's own errors end it sooner
DATA_DIR_ENV = "SKYLOOP_LOCAL_DYNAMODB_DATA"  # the data directory, handed to the process at start
DATA_DIR_EXIT = 3  # the process's status when the data directory cannot be used (its message says why)

Response = tuple[int, dict[str, Any], bytes]


class Remote:
    """Requests to the DynamoDB process, from any number of threads (a pool of connections)."""

    def __init__(self, address: str, authkey: bytes) -> None:
        self.address = address
        self.authkey = authkey
        self._pool: queue.SimpleQueue[Connection] = queue.SimpleQueue()

    def _connect(self) -> Connection:
        from multiprocessing.connection import Client

        return Client("\0" + self.address, family="AF_UNIX", authkey=self.authkey)

    def call(self, method: str, url: str, headers: list[tuple[str, Any]], body: bytes) -> Response:
        try:
            conn = self._pool.get_nowait()
        except queue.Empty:
            conn = self._connect()
        try:
            conn.send(
                (method, url, [(k, v if isinstance(v, str | bytes) else str(v)) for k, v in headers], body)
            )
            response: Response = conn.recv()
        except BaseException:
            conn.close()  # its next answer would belong to this request: never reuse it
            raise
        self._pool.put(conn)
        return response

    def close(self) -> None:
        while True:
            try:
                self._pool.get_nowait().close()
            except queue.Empty:
                return


class DynamoDBProcessError(RuntimeError):
    """The DynamoDB process did not start (its own message, if it had one, is on stderr)."""


class DynamoDBProcess:
    """The stack's handle on the DynamoDB process: started here, stopped when this closes.

    Args:
        data_dir: the stack's data directory (the process keeps the table in its
            ``dynamodb/`` folder), or None for a table that lives in memory only.
    """

    def __init__(self, data_dir: str | None = None) -> None:
        """Start the process; it loads moto while the stack does too (:meth:`connect` waits for it)."""
        self.address = f"skyloop-dynamodb-{os.getpid()}-{secrets.token_hex(8)}"
        self._authkey = secrets.token_hex(16)
        env = {**os.environ, "SKYLOOP_DYNAMODB_AUTHKEY": self._authkey, DATA_DIR_ENV: data_dir or ""}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "skyloop.local.dynamodb_process", self.address], env=env
        )
        self.remote = Remote(self.address, self._authkey.encode())
        self.env_value = f"{self.address} {self._authkey}"  # for ADDRESS_ENV
        self._control: Connection | None = None
        self._closing = False
        self.loaded: dict[str, Any] = {}  # what the process loaded from the data directory

    @property
    def pid(self) -> int:
        return self._proc.pid

    def connect(self) -> Remote:
        """Wait until the process serves; the first connection is the one it lives as long as."""
        from multiprocessing.connection import Client

        deadline = time.monotonic() + START_S
        while self._control is None:
            try:
                self._control = Client("\0" + self.address, family="AF_UNIX", authkey=self._authkey.encode())
            except (FileNotFoundError, ConnectionRefusedError):
                code = self._proc.poll()
                if code is not None or time.monotonic() > deadline:
                    self.close()
                    if code == DATA_DIR_EXIT:
                        raise DynamoDBProcessError("the data directory cannot be used (see above)") from None
                    why = (
                        f"exited with status {code} (its error is above)" if code is not None else "timed out"
                    )
                    raise DynamoDBProcessError(f"the local DynamoDB process did not start: {why}") from None
                time.sleep(0.02)
        try:
            self.loaded = dict(self._control.recv())
        except (EOFError, OSError):
            self.close()
            raise DynamoDBProcessError(
                "the local DynamoDB process ended while starting (see above)"
            ) from None
        return self.remote

    def watch(self, on_exit: Callable[[int], None]) -> threading.Thread:
        """Call ``on_exit(status)`` if the process ends before :meth:`close` (the table is gone with it)."""

        def wait() -> None:
            status = self._proc.wait()
            if not self._closing:
                on_exit(status)

        thread = threading.Thread(target=wait, name="dynamodb-watch", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self._closing = True
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
        self.remote.close()
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()


def remote_from_env(environment: dict[str, str] | os._Environ[str] | None = None) -> Remote | None:
    """A :class:`Remote` for the process named in ``SKYLOOP_LOCAL_DYNAMODB_ADDRESS``, if any."""
    value = (os.environ if environment is None else environment).get(ADDRESS_ENV, "")
    if not value:
        return None
    address, _, authkey = value.partition(" ")
    return Remote(address, authkey.encode())


_forwarding: list[Callable[[], None]] = []


def forward_moto(remote: Remote) -> Callable[[], None]:
    """Send every DynamoDB request this process's moto receives to ``remote``; returns the undo.

    Requests reach moto's DynamoDB two ways: the data-plane shortcut
    (:func:`skyloop.local.moto_dynamodb.dispatch_fast`, what this stack's own
    clients and moto's botocore hook use) and moto's generic dispatch, which
    ends in ``DynamoHandler.call_action`` with the request parsed onto the
    handler (moto's server port, the control plane). Both send the raw request
    on, so this process's moto never holds a DynamoDB item of its own.
    """
    from moto.dynamodb.responses import DynamoHandler

    from skyloop.local import moto_dynamodb

    if _forwarding:
        return lambda: None

    def dispatch_fast(url: str, headers: Any, body: bytes | str | None) -> Response:
        data = body.encode() if isinstance(body, str) else body or b""
        return remote.call("POST", url, list(headers.items()), data)

    def call_action(self: Any) -> Response:
        raw = self.raw_body
        data = raw if isinstance(raw, bytes) else str(raw or "").encode()
        headers = [(k, str(v)) for k, v in self.headers.items()]
        return remote.call("POST", f"https://dynamodb.{self.region}.amazonaws.com/", headers, data)

    previous = [
        (moto_dynamodb, "dispatch_fast", replace(moto_dynamodb, "dispatch_fast", dispatch_fast)),
        (DynamoHandler, "call_action", replace(DynamoHandler, "call_action", call_action)),
    ]

    def undo() -> None:
        for owner, name, value in reversed(previous):
            replace(owner, name, value)
        _forwarding.clear()

    _forwarding.append(undo)
    return undo


# ------------------------------------------------------------------------------ the process itself
def _serve(conn: Connection, dispatch: Callable[[str, str, list[tuple[str, Any]], bytes], Response]) -> None:
    with conn:
        while True:
            try:
                method, url, headers, body = conn.recv()
            except (EOFError, OSError):
                return
            try:
                conn.send(dispatch(method, url, headers, body))
            except (OSError, ValueError):
                return


def _exit_with(control: Connection, persistence: Any = None) -> None:
    """The stack holds the control connection: when it closes (the stack exited or died), so do we.

    Every acknowledged change is on disk already; closing the journal only
    settles what was appended but never acknowledged (it may be kept or not).
    """
    with contextlib.suppress(EOFError, OSError):
        while True:
            control.recv()
    if persistence is not None:
        with contextlib.suppress(Exception):
            persistence.close()
    os._exit(0)


def load_tables(data_dir: str) -> tuple[Any, dict[str, Any]]:
    """Lock the data directory's tables, load them into this process's moto and journal from now on.

    Returns the persistence (keep it: it holds the lock) and a summary for the stack's banner.
    """
    from pathlib import Path

    from skyloop.local.aws_dispatch import dispatch_aws
    from skyloop.local.persistence import dynamodb as tables
    from skyloop.local.persistence.datadir import lock_file

    root = Path(data_dir)
    (root / "dynamodb").mkdir(parents=True, exist_ok=True)
    held = lock_file(root / "dynamodb" / "dynamodb.lock", f"another process keeps the tables of {root}")
    persistence = tables.TablePersistence(root / "dynamodb", root, dispatch_aws)
    persistence.lock_handle = held
    started = time.monotonic()
    report = persistence.load()
    tables.install(persistence)
    summary = {
        "records": report.records,
        "items": report.items,
        "seconds": round(time.monotonic() - started, 2),
        "lines": report.lines(),
    }
    return persistence, summary


def main(address: str) -> None:
    from multiprocessing.connection import Listener

    authkey = os.environ.pop("SKYLOOP_DYNAMODB_AUTHKEY").encode()
    data_dir = os.environ.pop(DATA_DIR_ENV, "")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the stack, which closes our connection
    from skyloop.local import moto_core

    moto_core.lighten()  # first: before anything imports moto.iam or builds a botocore session
    from moto import mock_aws

    from skyloop.local import moto_dynamodb, moto_items
    from skyloop.local.aws_dispatch import dispatch_aws, name_process
    from skyloop.local.persistence import DataDirError

    name_process("dynamodb")
    mock_aws(config=moto_core.MOTO_CONFIG).start()
    moto_core.install()
    moto_dynamodb.install()
    moto_items.install()
    summary: dict[str, Any] = {}
    keep: Any = None
    if data_dir:
        try:
            keep, summary = load_tables(data_dir)
        except DataDirError as exc:
            print(f"skyloop dev: {exc}", file=sys.stderr, flush=True)
            os._exit(DATA_DIR_EXIT)
    moto_core.release_botocore_data(moto_core.REGION)
    listener = Listener("\0" + address, "AF_UNIX", authkey=authkey)
    gc.collect()
    gc.freeze()  # moto's and botocore's models live as long as the process (see skyloop.local.dev)
    control = listener.accept()
    control.send(summary)
    threading.Thread(target=_exit_with, args=(control, keep), name="control", daemon=True).start()
    while True:
        try:
            conn = listener.accept()
        except (OSError, EOFError):  # a client that failed the handshake
            continue
        threading.Thread(target=_serve, args=(conn, dispatch_aws), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1])
