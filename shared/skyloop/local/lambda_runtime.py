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
import itertools
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from skyloop.local.aws_dispatch import dispatch_aws, name_process  # noqa: F401  (their old home; callers import them here)
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
            handler = handler_for(name)  # runs as its function (its AWS calls checked against its role)
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
class _Pending:
    """One invocation in flight in an environment: its answer, once there."""

    def __init__(self) -> None:
        self.result: tuple[bytes, bool] | None = None
        self.done = threading.Event()


class _Worker:
    """This process's handle on one execution environment (serving up to ``capacity`` invocations at once)."""

    def __init__(self, function_name: str, pid: int, conn: Connection, capacity: int = 1) -> None:
        self.function_name = function_name
        self.pid = pid
        self.conn = conn
        self.capacity = capacity
        self.active = 0  # invocations handed to it and not released (the runtime's lock guards it)
        self.send_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count()
        self.alive = True
        self.idle_since = time.monotonic()
        self.reader = threading.Thread(target=self._read, name=f"lambda-{function_name}", daemon=True)
        self.reader.start()

    def _send(self, message: tuple[Any, ...]) -> None:
        with self.send_lock:
            self.conn.send(message)

    def notify(self, session_id: str, kind: str) -> None:
        self._send(("notify", session_id, kind))

    def _answer_aws(self, call_id: int, request: tuple[Any, ...]) -> None:
        with contextlib.suppress(OSError, ValueError):  # the environment is gone
            self._send(("aws", call_id, dispatch_aws(*request)))

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "aws":
                if self.capacity == 1:  # one invocation: its calls come one after another
                    self._answer_aws(message[1], message[2:])
                else:  # several: one's slow call must not hold up the others'
                    _AWS_POOL.submit(self._answer_aws, message[1], message[2:])
            elif kind == "notify":
                notifier.deliver(*message[1:])
            elif kind == "result":
                pending = self._pending.pop(message[1], None)
                if pending is not None:
                    pending.result = (message[2], message[3])
                    pending.done.set()
        self.alive = False
        for pending in list(self._pending.values()):
            pending.done.set()

    def invoke(self, invocation: Invocation) -> tuple[bytes, bool]:
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
        invocation_id = next(self._ids)
        pending = self._pending[invocation_id] = _Pending()
        try:
            self._send(("invoke", invocation_id, invocation.payload, fields))
        except (OSError, ValueError):
            self.alive = False
            self._pending.pop(invocation_id, None)
            return _exit_error(ctx.aws_request_id), True
        if not pending.done.wait(invocation.timeout_s):
            # Lambda stops the timed-out environment; here that also ends the invocations it
            # served beside this one (they fail as a crashed environment's do)
            self.kill()
            message = f"{ctx.aws_request_id} Task timed out after {invocation.timeout_s:.2f} seconds"
            return json.dumps(error_envelope("Sandbox.Timedout", message)).encode(), True
        if pending.result is None:  # the environment died during the invocation
            return _exit_error(ctx.aws_request_id), True
        return pending.result

    def kill(self) -> None:
        self.alive = False
        with contextlib.suppress(OSError):  # already gone
            os.kill(self.pid, signal.SIGKILL)
        self.conn.close()


def _exit_error(request_id: str) -> bytes:
    message = f"RequestId: {request_id} Error: Runtime exited without providing a reason"
    return json.dumps(error_envelope("Runtime.ExitError", message)).encode()


def _setting(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


# How the local stack sizes each function's pool (not the cloud's: Lambda gives every concurrent
# invocation an environment of its own). The turn function's environments serve many invocations at
# once, each on a thread: a turn step mostly waits (for the model, for DynamoDB), and a process per
# waiting step held ~20 MB of private memory each (see bench/README.md, "Where the memory goes").
# The API keeps one invocation per environment (Powertools' resolver keeps the request on its
# class) and at most a few environments: its requests take milliseconds.
CONCURRENCY = {"turn": _setting("SKYLOOP_LAMBDA_TURN_CONCURRENCY", 32)}
ENVIRONMENTS = {"api": _setting("SKYLOOP_LAMBDA_API_ENVIRONMENTS", 2), "turn": 4, "run_tool": 8}
_AWS_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lambda-aws")


class ProcessRuntime:
    """A pool of execution environments per function, in worker processes.

    Args:
        functions: function names (without the stack prefix) to keep one warm environment for.
        max_environments: the most environments alive at once, over all functions; an
            invocation beyond that waits for one to come free (Lambda would throttle).
        idle_ttl_s: how long an idle environment beyond the first of its function is kept.
        spawn_after_s: how long an invocation waits for a busy environment of its function
            before a new one is started (see :meth:`_acquire`).
        concurrency: invocations one environment of a function serves at once (default 1).
        environments: the most environments of a function (default: ``max_environments``).
    """

    def __init__(
        self,
        functions: list[str],
        *,
        max_environments: int = 64,
        idle_ttl_s: float = 300.0,
        spawn_after_s: float = SPAWN_AFTER_S,
        concurrency: dict[str, int] | None = None,
        environments: dict[str, int] | None = None,
    ) -> None:
        from multiprocessing.connection import Listener

        self._max = max_environments
        self._spawn_after_s = spawn_after_s
        self._idle_ttl_s = idle_ttl_s
        self._concurrency = dict(CONCURRENCY if concurrency is None else concurrency)
        self._per_function = dict(ENVIRONMENTS if environments is None else environments)
        self._lock = threading.Condition()
        self._envs: dict[str, list[_Worker]] = {name: [] for name in functions}
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
        threads = [threading.Thread(target=self._add, args=(name,)) for name in functions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        threading.Thread(target=self._reap, name="lambda-reaper", daemon=True).start()
        notifier.add_listener(self._forward_answered)

    def _forward_answered(self, session_id: str, kind: str) -> None:
        """An output recorded (by an API environment, or here): tell every environment, where a turn
        step may be waiting hot for it (:mod:`skyloop.turns.hot_wait`), instead of its next poll."""
        if kind != notifier.ANSWERED:
            return
        with self._lock:
            workers = [w for envs in self._envs.values() for w in envs if w.alive]
        for worker in workers:
            with contextlib.suppress(OSError, ValueError):  # the environment is gone
                worker.notify(session_id, kind)

    def capacity(self, name: str) -> int:
        return max(1, self._concurrency.get(name, 1))

    def environments(self, name: str) -> list[_Worker]:
        """The live environments of a function (for tests and benchmarks)."""
        with self._lock:
            return [w for w in self._envs.get(name, []) if w.alive]

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
            out.append(_Worker(name, int(pid), conn, self.capacity(name)))
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

    def _add(self, name: str) -> None:
        """Start one more environment of ``name`` and add it to the pool."""
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
            self._envs.setdefault(name, []).append(worker)
            self._lock.notify_all()

    def _reserve_spawn(self, name: str) -> bool:
        """Under the lock: count an environment that is about to start, if the pool has room."""
        envs = len(self._envs.get(name, [])) + self._spawning.get(name, 0)
        if self._count >= self._max or envs >= self._per_function.get(name, self._max):
            return False
        self._count += 1
        self._spawning[name] = self._spawning.get(name, 0) + 1
        return True

    def _acquire(self, name: str) -> _Worker:
        """An environment of ``name`` with room; a new one only after ``spawn_after_s`` without one.

        Most invocations take a few milliseconds, so a busy environment is
        usually free again before a new one would be ready: a forked
        environment costs tens of milliseconds of CPU to start and to warm (its
        first invocations copy the memory pages they touch), and under a burst
        of turns starting one per waiting invocation was a third of the CPU.
        Waiting up to a quarter of a second first (what a Lambda cold start
        costs too) keeps the pool as small as the load needs; a long
        invocation (a real model call) still gets a new environment after the
        wait, as Lambda scales out, up to the function's limit. An environment
        that serves several invocations at once takes the next one while it has
        room (the least busy first). ``SKYLOOP_LAMBDA_SPAWN_AFTER_S`` sets the wait.
        """
        spawn_at = time.monotonic() + self._spawn_after_s
        with self._lock:
            while True:
                if self._closed:
                    raise RuntimeError("the local Lambda runtime is closed")
                envs = self._envs.setdefault(name, [])
                for dead in [w for w in envs if not w.alive and w.active == 0]:
                    envs.remove(dead)
                    self._count -= 1
                room = [w for w in envs if w.alive and w.active < w.capacity]
                if room:
                    worker = min(room, key=lambda w: w.active)
                    worker.active += 1
                    return worker
                wait = spawn_at - time.monotonic()
                if wait <= 0 and not self._spawning.get(name) and self._reserve_spawn(name):
                    threading.Thread(target=self._add, args=(name,), daemon=True).start()
                self._lock.wait(wait if wait > 0 else 0.5)

    def _release(self, worker: _Worker) -> None:
        with self._lock:
            worker.active -= 1
            if worker.active == 0:
                worker.idle_since = time.monotonic()
            if not worker.alive and worker.active == 0 and worker in self._envs.get(worker.function_name, []):
                self._envs[worker.function_name].remove(worker)
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
                for envs in self._envs.values():
                    idle = [w for w in envs if w.active == 0]
                    stale = [w for w in idle[1:] if now - w.idle_since > self._idle_ttl_s]
                    for worker in stale:
                        envs.remove(worker)
                        worker.kill()
                        self._count -= 1

    def close(self) -> None:
        notifier.remove_listener(self._forward_answered)
        with self._lock:
            self._closed = True
            workers = [w for envs in self._envs.values() for w in envs]
            for envs in self._envs.values():
                envs.clear()
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
