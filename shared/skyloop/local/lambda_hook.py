"""Run moto's Lambda functions as the real handlers of ``functions/`` (no Docker).

Two patches on moto 5.x (see ``shared/notes`` of the founding brief):

* ``LambdaFunction.invoke(body, request_headers, response_headers)`` is the one
  per-function funnel behind Invoke and event-source delivery; it is replaced
  by "hand the invocation to the local Lambda runtime", which runs the
  handler file named by the manifest (see :mod:`skyloop.local.lambda_runtime`).
* ``LambdaSimpleBackend.invoke`` (``use_docker=False``) normally echoes the
  payload; it is made to delegate to the function again.

Step Functions' ``lambda:invoke`` and ``.waitForTaskToken`` tasks reach Lambda
through boto3, so they run the real handlers too.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from moto.awslambda.models import LambdaBackend, LambdaFunction
from moto.awslambda_simple.models import LambdaSimpleBackend

from skyloop.local._patch import replace
from skyloop.local.handlers import FUNCTION_PREFIX, LocalContext, handler_for
from skyloop.local.lambda_runtime import Invocation, Runtime, ThreadRuntime

__all__ = [
    "FUNCTION_PREFIX",
    "LocalContext",
    "direct_invoker",
    "handler_for",
    "install",
    "runtime",
    "uninstall",
]

_runtime: list[Runtime] = [ThreadRuntime()]


def runtime() -> Runtime:
    return _runtime[0]


def invocation_for(function: LambdaFunction, body: Any) -> Invocation:
    timeout = float(function.timeout or 3)
    request_id = str(uuid.uuid4())
    context = LocalContext(
        function.function_name,
        str(function.version),
        function.function_arn,
        int(function.memory_size or 128),
        request_id,
        f"/aws/lambda/{function.function_name}",
        "local",
        time.time() + timeout,
    )
    payload = body if isinstance(body, bytes) else (body or "").encode()
    return Invocation(
        function_name=function.function_name,
        payload=payload,
        context=context,
        timeout_s=timeout,
        environment=dict(function.environment_vars or {}),
    )


def _fn_invoke(self: LambdaFunction, body: Any, request_headers: Any, response_headers: Any) -> bytes:
    invocation = invocation_for(self, body)
    if (request_headers or {}).get("X-Amz-Invocation-Type") == "Event":
        threading.Thread(target=runtime().invoke, args=(invocation,), daemon=True).start()
        return b""
    out, failed = runtime().invoke(invocation)
    if failed:
        response_headers["x-amz-function-error"] = "Unhandled"
    return out


def direct_invoker(function_arn: str) -> Any:
    """A synchronous ``invoke(payload) -> (body, failed)`` for one moto function, as API Gateway calls it.

    It enters the same per-function funnel as Lambda's Invoke API (so counts
    and the runtime are the same) without a botocore round trip through
    moto's Lambda API, which the edge never makes in the cloud either.
    """
    from moto.awslambda_simple.models import lambda_simple_backends  # moto's backend without Docker

    _, _, _, region, account_id, _, name = function_arn.split(":", 6)
    function = lambda_simple_backends[account_id][region].get_function(name)

    def invoke(payload: bytes) -> tuple[bytes, bool]:
        response_headers: dict[str, str] = {}
        body: Any = function.invoke(payload, {}, response_headers)  # type: ignore[arg-type]  # str or bytes
        out = body if isinstance(body, bytes) else str(body).encode()
        return out, bool(response_headers.get("x-amz-function-error"))

    return invoke


_saved = (LambdaFunction.invoke, LambdaSimpleBackend.invoke)


def install(with_runtime: Runtime | None = None) -> None:
    if with_runtime is not None:
        _runtime[0] = with_runtime
    replace(LambdaFunction, "invoke", _fn_invoke)
    replace(LambdaSimpleBackend, "invoke", LambdaBackend.invoke)


def uninstall() -> None:
    replace(LambdaFunction, "invoke", _saved[0])
    replace(LambdaSimpleBackend, "invoke", _saved[1])
    _runtime[0].close()
    _runtime[0] = ThreadRuntime()


INVOKE_EVENT = "before-call.lambda.Invoke"


def answer_invoke(model: Any, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
    """botocore ``before-call`` for Lambda's Invoke from this process (Step Functions' tasks).

    What moto's Invoke API does (``LambdaResponse.invoke`` over its backend),
    without its generic HTTP dispatch; the response is parsed by botocore's
    own parser. A function moto does not know takes moto's own path, which
    raises its error.
    """
    import json
    import os
    import sys
    from urllib.parse import parse_qs, unquote, urlsplit

    from botocore.awsrequest import AWSResponse, HeadersDict
    from botocore.parsers import create_parser
    from botocore.response import StreamingBody
    from moto.awslambda_simple.models import lambda_simple_backends
    from moto.core import DEFAULT_ACCOUNT_ID

    from skyloop.local.aws_shortcut import BufferedBody

    url = params["url"]
    parts = urlsplit(url)
    path = parts.path.rstrip("/").split("/")
    if params.get("method") != "POST" or len(path) < 3 or path[-1] != "invocations":
        return None
    region = parts.netloc.split(".")[1] if parts.netloc.startswith("lambda.") else ""
    headers = params["headers"]
    qualifier = (parse_qs(parts.query).get("Qualifier") or [None])[0]
    account = os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)
    try:
        function = lambda_simple_backends[account][region].get_function(unquote(path[-2]), qualifier)
    except Exception:  # unknown function or region: moto's path answers with its error
        return None
    body = params.get("body") or b""
    response_headers: dict[str, str] = {}
    payload = function.invoke(body, headers, response_headers)  # type: ignore[arg-type]  # str or bytes
    payload = payload if isinstance(payload, bytes) else str(payload).encode()
    kind = headers.get("X-Amz-Invocation-Type")
    if kind != "Event" and sys.getsizeof(payload) > 6000000:  # as moto's LambdaResponse.invoke
        response_headers["x-amz-function-error"] = "Unhandled"
        error = {
            "errorMessage": "Response payload size exceeded maximum allowed payload size (6291556 bytes).",
            "errorType": "Function.ResponseSizeTooLarge",
        }
        payload = json.dumps(error).encode("utf-8")
    response_headers["Content-Length"] = str(len(payload))
    response_headers["content-type"] = "application/json"
    status = {"Event": 202, "DryRun": 204}.get(kind or "", 200)
    if headers.get("X-Amz-Log-Type") != "Tail":
        response_headers.pop("x-amz-log-result", None)
    http = AWSResponse(url, status, HeadersDict(response_headers), BufferedBody(payload))
    response = {
        "headers": http.headers,
        "status_code": status,
        "context": {"operation_name": model.name},
        "body": StreamingBody(BufferedBody(payload), len(payload)),
    }
    parsed: dict[str, Any] = create_parser("rest-json").parse(response, model.output_shape)
    if "ResponseMetadata" in parsed:
        parsed["ResponseMetadata"]["RetryAttempts"] = 0
    return http, parsed


def install_invoke_shortcut() -> None:
    """Let this process's future Lambda clients invoke functions without moto's HTTP dispatch."""
    import botocore.handlers

    if (INVOKE_EVENT, answer_invoke) not in botocore.handlers.BUILTIN_HANDLERS:
        botocore.handlers.BUILTIN_HANDLERS.append((INVOKE_EVENT, answer_invoke))
