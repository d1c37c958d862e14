"""Where the local stack runs Lambda invocations: worker processes, or threads of this process.

Lambda runs each invocation in an execution environment that serves one
invocation at a time, and adds environments as concurrency grows. Code that
keeps per-request state in module globals relies on that; Powertools' event
handler does (its resolver keeps the current event on the class), so two API
requests served at once in one process read each other's bodies. That is
what made an output posted the instant its call was published answer
``404 No pending call``: the request was parsed from another request's body.

:class:`ProcessRuntime` (what ``skyloop dev`` uses) therefore runs every
invocation in a worker process bound to one function, one invocation at a
time, as Lambda does; it keeps warm environments per function and forks new
ones from a pre-loaded fork server when all have been busy for a moment. Workers reach moto
through a pipe to this process (see :mod:`skyloop.local.lambda_worker`), and
with several processes the stack also uses more than one core. A function
that outlives its timeout is killed, like Lambda's ``Task timed out``.

:class:`ThreadRuntime` runs handlers in the calling thread (in-process tests
that patch handlers use it); it serializes the API function, whose framework
keeps request state process-wide, and runs the turn steps concurrently.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from skyloop.local.handlers import FUNCTION_PREFIX, LocalContext, error_envelope, handler_for
from skyloop.store import notifier

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

log = logging.getLogger("skyloop.local")

SERIALIZED_FUNCTIONS = frozenset({"api"})
ZYGOTE_START_S = 60.0  # the fork server imports boto3, openai and Powertools once
SPAWN_S = 30.0  # how long a new environment may take to connect
# how long an invocation waits for a busy environment of its function before a new one starts
SPAWN_AFTER_S = float(os.environ.get("SKYLOOP_LAMBDA_SPAWN_AFTER_S", "0.25"))


@dataclass
class Invocation:
    """One invocation's input, as the local Lambda service hands it to a runtime."""

    function_name: str
    payload: bytes
    context: LocalContext
    timeout_s: float
    environment: dict[str, str] = field(default_factory=dict)


class Runtime(Protocol):
    def invoke(self, invocation: Invocation) -> tuple[bytes, bool]:
        """The response body, and whether it is a function error."""
        ...

    def close(self) -> None: ...


class ThreadRuntime:
    """Handlers called in the invoking thread of this process."""

    def __init__(self) -> None:
        self._locks = {name: threading.Lock() for name in SERIALIZED_FUNCTIONS}

    def invoke(self, invocation: Invocation) -> tuple[bytes, bool]:
        name = invocation.function_name.removeprefix(FUNCTION_PREFIX)
        lock = self._locks.get(name)
        try:
            event = json.loads(invocation.payload) if invocation.payload else {}
            handler = handler_for(name)
            if lock is None:
                result = handler(event, invocation.context)
            else:
                with lock:
                    result = handler(event, invocation.context)
            return json.dumps(result).encode(), False
        except Exception as exc:
            envelope = error_envelope(type(exc).__name__, str(exc), traceback.format_tb(exc.__traceback__))
            return json.dumps(envelope).encode(), True

    def close(self) -> None:
        return None


# ------------------------------------------------------------------------------ processes
def dispatch_aws(
    method: str, url: str, headers: list[tuple[str, Any]], body: bytes
) -> tuple[int, Any, bytes]:
    """Serve one AWS request from this process's moto backends (moto's own in-process path)."""
    from botocore.awsrequest import AWSPreparedRequest, HeadersDict
    from moto.core.models import botocore_stubber

    from skyloop.local import aws_shortcut
    from skyloop.local.moto_dynamodb import dispatch_fast

    try:
        response = None
        if aws_shortcut.is_dynamodb(method, url):
            response = dispatch_fast(url, dict(headers), body)  # most requests: DynamoDB's data plane
        if response is None:
            request = AWSPreparedRequest(
                method=method, url=url, headers=HeadersDict(headers), body=body, stream_output=False
            )
            response = botocore_stubber.process_request(request)
    except Exception as exc:  # moto failed in a way it does not map to an AWS error
        log.exception("local AWS request failed: %s %s", method, url)
        return 500, {}, json.dumps({"__type": "InternalFailure", "message": str(exc)}).encode()
    if response is None:
        return 404, {}, f"{url} is not served by the local stack".encode()
    status, out_headers, out_body = response
    if isinstance(out_body, str):
        out_body = out_body.encode()
    return int(status), dict(out_headers or {}), out_body or b""


def name_process(function_name: str) -> None:
    """Show the function in ``top``/``ps -o comm`` (and let benchmarks split CPU per function)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, f"sl-{function_name}".encode()[:15], 0, 0, 0)  # PR_SET_NAME (Linux)
    except (OSError, AttributeError):
        pass


class _Worker:
    """This process's handle on one execution environment."""

    def __init__(self, function_name: str, pid: int, conn: Connection) -> None:
        self.function_name = function_name
        self.pid = pid
        self.conn = conn
        self.send_lock = threading.Lock()
        self.result: tuple[bytes, bool] | None = None
        self.done = threading.Event()
        self.alive = True
        self.idle_since = time.monotonic()
        self.reader = threading.Thread(target=self._read, name=f"lambda-{function_name}", daemon=True)
        self.reader.start()

    def _send(self, message: tuple[Any, ...]) -> None:
        with self.send_lock:
            self.conn.send(message)

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "aws":
                try:
                    self._send(dispatch_aws(*message[1:]))
                except (OSError, ValueError):
                    break
            elif kind == "notify":
                notifier.deliver(*message[1:])
            elif kind == "result":
                self.result = (message[1], message[2])
                self.done.set()
        self.alive = False
        self.done.set()

    def invoke(self, invocation: Invocation) -> tuple[bytes, bool]:
        self.result = None
        self.done.clear()
        ctx = invocation.context
        fields = (
            ctx.function_name,
            ctx.function_version,
            ctx.invoked_function_arn,
            ctx.memory_limit_in_mb,
            ctx.aws_request_id,
            ctx.log_group_name,
            ctx.log_stream_name,
            ctx._deadline,
        )
        try:
            self._send(("invoke", invocation.payload, fields))
        except (OSError, ValueError):
            self.alive = False
            return _exit_error(ctx.aws_request_id), True
        if not self.done.wait(invocation.timeout_s):
            self.kill()
            message = f"{ctx.aws_request_id} Task timed out after {invocation.timeout_s:.2f} seconds"
            return json.dumps(error_envelope("Sandbox.Timedout", message)).encode(), True
        if self.result is None:  # the environment died during the invocation
            return _exit_error(ctx.aws_request_id), True
        return self.result

    def kill(self) -> None:
        self.alive = False
        with contextlib.suppress(OSError):  # already gone
            os.kill(self.pid, signal.SIGKILL)
        self.conn.close()


def _exit_error(request_id: str) -> bytes:
    message = f"RequestId: {request_id} Error: Runtime exited without providing a reason"
    return json.dumps(error_envelope("Runtime.ExitError", message)).encode()


class ProcessRuntime:
    """A pool of execution environments per function, in worker processes.

    Args:
        functions: function names (without the stack prefix) to keep one warm environment for.
        max_environments: the most environments alive at once, over all functions; an
            invocation beyond that waits for one to come free (Lambda would throttle).
        idle_ttl_s: how long an idle environment beyond the first of its function is kept.
        spawn_after_s: how long an invocation waits for a busy environment of its function
            before a new one is started (see :meth:`_acquire`).
    """

    def __init__(
        self,
        functions: list[str],
        *,
        max_environments: int = 64,
        idle_ttl_s: float = 300.0,
        spawn_after_s: float = SPAWN_AFTER_S,
    ) -> None:
        from multiprocessing.connection import Listener

        self._max = max_environments
        self._spawn_after_s = spawn_after_s
        self._idle_ttl_s = idle_ttl_s
        self._lock = threading.Condition()
        self._idle: dict[str, list[_Worker]] = {name: [] for name in functions}
        self._spawning: dict[str, int] = {}
        self._count = 0
        self._closed = False
        self._pending: dict[str, tuple[str, threading.Event, list[_Worker]]] = {}
        # An abstract socket (Linux): nothing on disk, so a stack that is killed leaves nothing behind.
        name = f"skyloop-lambda-{os.getpid()}-{secrets.token_hex(8)}"
        authkey = secrets.token_hex(16)
        self._listener = Listener("\0" + name, "AF_UNIX", authkey=authkey.encode())
        self._control: Connection | None = None
        self._control_ready = threading.Event()
        self._control_lock = threading.Lock()
        threading.Thread(target=self._accept, name="lambda-accept", daemon=True).start()
        self._zygote = subprocess.Popen(
            [sys.executable, "-m", "skyloop.local.lambda_zygote", name],
            env={**os.environ, "SKYLOOP_LAMBDA_AUTHKEY": authkey},
        )
        deadline = time.monotonic() + ZYGOTE_START_S
        while not self._control_ready.wait(0.1):
            code = self._zygote.poll()
            if code is not None or time.monotonic() > deadline:
                self.close()
                why = f"exited with status {code} (its error is above)" if code is not None else "timed out"
                raise RuntimeError(f"the local Lambda fork server did not start: {why}")
        with self._lock:
            for name in functions:
                self._reserve_spawn(name)
        threads = [threading.Thread(target=self._add_idle, args=(name,)) for name in functions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        threading.Thread(target=self._reap, name="lambda-reaper", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn = self._listener.accept()
                hello = conn.recv()
            except (OSError, EOFError):
                if self._closed:
                    return
                continue
            if hello[0] == "zygote":
                self._control = conn
                self._control_ready.set()
                continue
            _, token, pid = hello
            with self._lock:
                pending = self._pending.pop(token, None)
            if pending is None:
                conn.close()
                continue
            name, ready, out = pending
            out.append(_Worker(name, int(pid), conn))
            ready.set()

    def _spawn(self, name: str) -> _Worker:
        """Fork a new environment for ``name`` from the fork server and wait until it connects."""
        token = secrets.token_hex(8)
        ready = threading.Event()
        out: list[_Worker] = []
        with self._lock:
            self._pending[token] = (name, ready, out)
        if self._control is None:
            raise RuntimeError("the local Lambda fork server is not running")
        with self._control_lock:
            self._control.send(("fork", token, name, dict(os.environ)))
        if not ready.wait(SPAWN_S):
            with self._lock:
                self._pending.pop(token, None)
            raise RuntimeError(f"a local Lambda environment for {name} did not start within {SPAWN_S:.0f}s")
        return out[0]

    def _add_idle(self, name: str) -> None:
        """Start one more environment of ``name`` and park it idle (a warm spare)."""
        try:
            worker = self._spawn(name)
        except Exception:
            log.exception("could not start a local Lambda environment for %s", name)
            with self._lock:
                self._count -= 1
                self._spawning[name] = self._spawning.get(name, 1) - 1
                self._lock.notify_all()
            return
        with self._lock:
            self._spawning[name] = self._spawning.get(name, 1) - 1
            if self._closed:
                worker.kill()
                return
            self._idle.setdefault(name, []).append(worker)
            self._lock.notify_all()

    def _reserve_spawn(self, name: str) -> bool:
        """Under the lock: count an environment that is about to start, if the pool has room."""
        if self._count >= self._max:
            return False
        self._count += 1
        self._spawning[name] = self._spawning.get(name, 0) + 1
        return True

    def _acquire(self, name: str) -> _Worker:
        """A free environment of ``name``; a new one only after ``spawn_after_s`` without one.

        Most invocations take a few milliseconds, so a busy environment is
        usually free again before a new one would be ready: a forked
        environment costs tens of milliseconds of CPU to start and to warm (its
        first invocations copy the memory pages they touch), and under a burst
        of turns starting one per waiting invocation was a third of the CPU.
        Waiting up to a quarter of a second first (what a Lambda cold start
        costs too) keeps the pool as small as the load needs; a long
        invocation (a real model call) still gets a new environment after the
        wait, as Lambda scales out. ``SKYLOOP_LAMBDA_SPAWN_AFTER_S`` sets it.
        """
        spawn_at = time.monotonic() + self._spawn_after_s
        with self._lock:
            while True:
                if self._closed:
                    raise RuntimeError("the local Lambda runtime is closed")
                idle = self._idle.setdefault(name, [])
                while idle:
                    worker = idle.pop()
                    if worker.alive:
                        return worker
                    self._count -= 1
                wait = spawn_at - time.monotonic()
                if wait <= 0 and not self._spawning.get(name) and self._reserve_spawn(name):
                    threading.Thread(target=self._add_idle, args=(name,), daemon=True).start()
                self._lock.wait(wait if wait > 0 else 0.5)

    def _release(self, worker: _Worker) -> None:
        with self._lock:
            if worker.alive and not self._closed:
                worker.idle_since = time.monotonic()
                self._idle.setdefault(worker.function_name, []).append(worker)
            else:
                self._count -= 1
            self._lock.notify_all()

    def invoke(self, invocation: Invocation) -> tuple[bytes, bool]:
        name = invocation.function_name.removeprefix(FUNCTION_PREFIX)
        worker = self._acquire(name)
        try:
            return worker.invoke(invocation)
        finally:
            self._release(worker)

    def _reap(self) -> None:
        while not self._closed:
            time.sleep(min(30.0, self._idle_ttl_s))
            now = time.monotonic()
            with self._lock:
                for idle in self._idle.values():
                    stale = [w for w in idle[1:] if now - w.idle_since > self._idle_ttl_s]
                    for worker in stale:
                        idle.remove(worker)
                        worker.kill()
                        self._count -= 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = [w for idle in self._idle.values() for w in idle]
            for idle in self._idle.values():
                idle.clear()
            self._lock.notify_all()
        for worker in workers:
            worker.kill()
        if self._control is not None:
            self._control.close()
        with contextlib.suppress(OSError):
            self._listener.close()
        if self._zygote.poll() is None:
            self._zygote.kill()
            self._zygote.wait(timeout=5)
