"""Load the real handler files of ``functions/`` by name, and the context Lambda passes them.

Shared by both local Lambda runtimes (in-process threads and worker
processes); imports nothing of moto, so a worker process stays light.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skyloop import function_identity, manifest
from skyloop.local import trace

if TYPE_CHECKING:
    from collections.abc import Callable

FUNCTION_PREFIX = "skyloop-"
_handlers: dict[str, Callable[[dict[str, Any], Any], Any]] = {}
_load_lock = threading.Lock()


@dataclass
class LocalContext:
    """The attributes of a Lambda context that handlers and Powertools read."""

    function_name: str
    function_version: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    aws_request_id: str
    log_group_name: str
    log_stream_name: str
    _deadline: float

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))


def handler_for(function_name: str) -> Callable[[dict[str, Any], Any], Any]:
    """The handler callable of ``functions/<name>/`` (with or without the stack's name prefix)."""
    if not function_name.startswith(FUNCTION_PREFIX) and function_name not in manifest.NAMES:
        from skyloop.local import lambda_tools

        tool = lambda_tools.handler(function_name)
        if tool is None:
            raise KeyError(
                f"no local Lambda function '{function_name}' (is its file given to --lambda-tools?)"
            )
        return trace.wrap(function_name, tool)
    name = function_name.removeprefix(FUNCTION_PREFIX)
    with _load_lock:
        if name not in _handlers:
            spec = manifest.by_name(name)
            module_name = f"skyloop_functions_{name}"
            loader = importlib.util.spec_from_file_location(module_name, spec.handler_file)
            if loader is None or loader.loader is None:
                raise ImportError(f"cannot load {spec.handler_file}")
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
            _handlers[name] = _as_function(name, getattr(module, spec.handler.rsplit(".", 1)[1]))
        return trace.wrap(name, _handlers[name])  # the handler itself unless SKYLOOP_LOCAL_TRACE is set


def _as_function(
    name: str, handler: Callable[[dict[str, Any], Any], Any]
) -> Callable[[dict[str, Any], Any], Any]:
    """The handler, run as its function wherever it is called (a Lambda environment, a thread of the
    stack, a test): its AWS calls are checked against that function's role (:mod:`skyloop.local.iam`)."""

    @functools.wraps(handler)
    def run(event: dict[str, Any], context: Any) -> Any:
        with function_identity.acting_as(name):
            return handler(event, context)

    return run


def error_envelope(error_type: str, message: str, trace: list[str] | None = None) -> dict[str, Any]:
    """Lambda's body for a function error (``X-Amz-Function-Error: Unhandled``)."""
    return {"errorType": error_type, "errorMessage": message, "stackTrace": trace or []}
