"""Run moto's Lambda functions as the real in-process Python handlers (no Docker).

Two patches on moto 5.x (see ``shared/notes`` of the founding brief):

* ``LambdaFunction.invoke(body, request_headers, response_headers)`` is the one
  per-function funnel behind Invoke and event-source delivery; it is replaced
  by "load ``functions/<name>/handler.py`` from the manifest and call it".
* ``LambdaSimpleBackend.invoke`` (``use_docker=False``) normally echoes the
  payload; it is made to delegate to the function again.

Step Functions' ``lambda:invoke`` and ``.waitForTaskToken`` tasks reach Lambda
through boto3, so they run the real handlers too.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moto.awslambda.models import LambdaBackend, LambdaFunction
from moto.awslambda_simple.models import LambdaSimpleBackend

from skyloop import manifest

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
            _handlers[name] = getattr(module, spec.handler.rsplit(".", 1)[1])
        return _handlers[name]


def _fn_invoke(self: LambdaFunction, body: Any, request_headers: Any, response_headers: Any) -> bytes:
    event = json.loads(body) if body else {}
    ctx = LocalContext(
        self.function_name,
        self.version,
        self.function_arn,
        int(self.memory_size or 128),
        str(uuid.uuid4()),
        f"/aws/lambda/{self.function_name}",
        "local",
        time.time() + float(self.timeout or 3),
    )
    handler = handler_for(self.function_name)

    def run() -> bytes:
        try:
            return json.dumps(handler(event, ctx)).encode()
        except Exception as exc:  # Lambda's unhandled-error envelope
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(
                {
                    "errorType": type(exc).__name__,
                    "errorMessage": str(exc),
                    "stackTrace": traceback.format_tb(exc.__traceback__),
                }
            ).encode()

    if (request_headers or {}).get("X-Amz-Invocation-Type") == "Event":
        threading.Thread(target=run, daemon=True).start()
        return b""
    return run()


_saved = (LambdaFunction.invoke, LambdaSimpleBackend.invoke)


def install() -> None:
    LambdaFunction.invoke = _fn_invoke  # type: ignore[method-assign]
    LambdaSimpleBackend.invoke = LambdaBackend.invoke  # type: ignore[method-assign]


def uninstall() -> None:
    LambdaFunction.invoke, LambdaSimpleBackend.invoke = _saved  # type: ignore[method-assign]
