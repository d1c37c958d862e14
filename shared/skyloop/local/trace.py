"""A timeline of what a turn does in AWS terms, from every process of the local stack (off by default).

``bench/cloud_latency.py`` turns a real local turn into expected latency on
AWS, so it needs to know what the turn did, not what it is assumed to do:
each Lambda invocation (function, payload sizes, start and end) and each AWS
SDK call made inside it (service, operation, request and response bytes,
thread, start and end). Handlers run in worker processes, so each process of
the stack appends its own records, one JSON line per ``write`` to the file
named by ``SKYLOOP_LOCAL_TRACE`` (``O_APPEND``: lines from several processes
never interleave). Times are ``time.time()``, one clock for every process and
for Step Functions' execution history.

Off (the variable unset) nothing is registered and :func:`wrap` returns the
handler itself: the cost is one environment lookup per handler lookup.
"""

from __future__ import annotations

import contextvars
import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

ENV = "SKYLOOP_LOCAL_TRACE"
# Client-visible moments a latency model waits for: a write whose request carries one of these
# published it (the event types are the wire contract, not an implementation detail).
MARKERS = (
    "response.completed",
    "response.failed",
    "response.cancelled",
    "action_required",
    "response.elicitation_request",
)
_CONTEXT_KEY = "skyloop_trace"
_fd: dict[str, int] = {}  # path -> this process's descriptor for it
# the invocation the calling thread runs; a context variable, so work a handler hands to a pool with its
# context (contextvars.copy_context().run: the turn steps' background writes) is its invocation's too
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "skyloop_trace_invocation", default=None
)
_active: dict[str, int] = {}  # request id -> the thread running it, to attribute calls of a handler's threads
_lock = threading.Lock()


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def _emit(record: dict[str, Any]) -> None:
    path = os.environ.get(ENV)
    if not path:  # turned off since (tests): the hooks stay registered and do nothing
        return
    if path not in _fd:
        _fd[path] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    record["pid"] = os.getpid()
    os.write(_fd[path], (json.dumps(record, separators=(",", ":")) + "\n").encode())


def install() -> None:
    """Record this process's future boto3 calls (clients built from now on), when tracing is on.

    The start is taken at ``before-parameter-build``, which every call emits to
    every handler: ``before-call`` stops at the first handler that answers, and
    the local stack's shortcuts answer DynamoDB and Lambda calls there.
    """
    if not enabled():
        return
    import botocore.handlers

    for spec in HOOKS:
        if spec not in botocore.handlers.BUILTIN_HANDLERS:
            botocore.handlers.BUILTIN_HANDLERS.append(spec)


def uninstall() -> None:
    """Clients built from now on record nothing (tests)."""
    import botocore.handlers

    for spec in HOOKS:
        while spec in botocore.handlers.BUILTIN_HANDLERS:
            botocore.handlers.BUILTIN_HANDLERS.remove(spec)


def _invocation() -> str | None:
    """The invocation the calling thread works for.

    A thread a handler started belongs to that handler's invocation when the
    process is a Lambda worker: one invocation at a time, run on the main
    thread. Elsewhere (handlers run on threads of a bigger process) a thread
    that is no handler's belongs to no invocation.
    """
    rid = _current.get()
    if rid is None and len(_active) == 1:
        only, tid = next(iter(_active.items()))
        if tid == threading.main_thread().ident:
            rid = only
    return rid


def _before_call(model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    if not enabled():
        return
    body = json.dumps(params, default=str)  # about the request's size (the JSON protocols send this)
    markers = [m for m in MARKERS if m in body]
    detail = None
    if model.name == "Invoke":  # which function, and how (Step Functions' tasks and handlers alike)
        detail = {
            "function": params.get("FunctionName"),
            "type": params.get("InvocationType", "RequestResponse"),
        }
    context[_CONTEXT_KEY] = (time.time(), len(body), markers, detail, _invocation())


def _after_call(http_response: Any, model: Any, context: dict[str, Any], **_: Any) -> None:
    started = context.pop(_CONTEXT_KEY, None)
    if started is None:
        return
    t0, size, markers, detail, invocation = started
    out = 0
    if http_response is not None:
        length = http_response.headers.get("content-length")
        if length is not None and str(length).isdigit():
            out = int(length)
        elif not model.has_streaming_output:
            out = len(http_response.content or b"")
    _emit(
        {
            "kind": "sdk",
            "service": model.service_model.service_id.hyphenize(),
            "op": model.name,
            "t0": t0,
            "t1": time.time(),
            "tid": threading.get_ident(),
            "inv": invocation,
            "req_bytes": size,
            "resp_bytes": out,
            "status": getattr(http_response, "status_code", None),
            "markers": markers,
            "detail": detail,
        }
    )


def wrap(function: str, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``handler`` itself when tracing is off; else one that records each invocation of ``function``."""
    if not enabled():
        return handler

    def traced(event: Any, context: Any) -> Any:
        rid = str(getattr(context, "aws_request_id", "") or f"local-{time.time_ns()}")
        http = isinstance(event, dict) and event.get("version") == "2.0" and "requestContext" in event
        record: dict[str, Any] = {
            "kind": "invoke",
            "function": function,
            "request_id": rid,
            "trigger": "http_api" if http else "other",
            "bytes_in": len(json.dumps(event, default=str)),
            "tid": threading.get_ident(),
            "t0": time.time(),
        }
        token = _current.set(rid)
        with _lock:
            _active[rid] = threading.get_ident()
        try:
            result = handler(event, context)
            record["bytes_out"] = len(json.dumps(result, default=str))
            return result
        except Exception as exc:
            record["error"] = type(exc).__name__
            raise
        finally:
            record["t1"] = time.time()
            _current.reset(token)
            with _lock:
                _active.pop(rid, None)
            _emit(record)

    return traced


HOOKS = (("before-parameter-build", _before_call), ("after-call", _after_call))
