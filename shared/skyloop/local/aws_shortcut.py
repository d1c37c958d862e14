"""DynamoDB calls of the local stack's boto3 clients, answered without botocore's HTTP layer.

Every DynamoDB request of the local stack is served by moto in the stack's
process, so botocore's transport (building and preparing an HTTP request,
the retry loop, a dozen hook emissions per call) does nothing useful there,
yet cost as much as moto's own work on the request. :func:`install` hooks
``before-call.dynamodb``, which botocore emits after it has validated and
serialized the call: the serialized request is handed to ``send`` (moto in
this process, or the pipe to the stack from a Lambda worker), and the answer
is parsed by botocore's own JSON parser, modeled error fields included, so a
caller sees the same response or the same ``ClientError`` as before (a
successful data-plane answer without binary values is its JSON body, which is
what that parser makes of it, with ``json.loads``).

Only DynamoDB takes this path (JSON protocol, no streaming bodies); other
services keep botocore's ``before-send`` seam. Real AWS is never involved.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    Send = Callable[[str, str, list[tuple[str, Any]], bytes], tuple[int, dict[str, Any], bytes]]

EVENT = "before-call.dynamodb"
_send: list[Send] = []
_parsers: list[Any] = []


class BufferedBody:
    """The minimal raw-response object botocore reads a buffered body from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self, *_: Any, **__: Any) -> bytes:
        data, self._data = self._data, b""
        return data

    def stream(self, **_: Any) -> Any:
        if self._data:
            yield self.read()


def _parser() -> Any:
    if not _parsers:
        from botocore.parsers import create_parser

        _parsers.append(create_parser("json"))
    return _parsers[0]


def answer(model: Any, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
    """botocore ``before-call``: the call's (http response, parsed response), as its endpoint would give."""
    body = params.get("body")
    if not _send or params.get("method") != "POST" or not isinstance(body, bytes | str):
        return None
    from botocore.awsrequest import AWSResponse, HeadersDict

    if isinstance(body, str):
        body = body.encode()
    url = params["url"]
    status, headers, out = _send[0](params["method"], url, list(params["headers"].items()), body)
    if isinstance(out, str):
        out = out.encode()
    http = AWSResponse(url, status, HeadersDict(headers), BufferedBody(out))
    response = {
        "headers": http.headers,
        "status_code": status,
        "context": {"operation_name": model.name},
        "body": out,
    }
    plain = _plain_answer(model.name, status, http.headers, out)
    if plain is not None:
        return http, plain
    parser = _parser()
    parsed: dict[str, Any] = parser.parse(response, model.output_shape)
    if status >= 300:  # what botocore's endpoint adds: the error's modeled fields (CancellationReasons...)
        code = parsed.get("Error", {}).get("Code")
        shape = model.service_model.shape_for_error_code(code) if code is not None else None
        if shape is not None:
            parsed.update(parser.parse(response, shape))
    if "ResponseMetadata" in parsed:
        parsed["ResponseMetadata"]["RetryAttempts"] = 0
    return http, parsed


# DynamoDB's data plane: requests moto's handler serves directly (skyloop.local.moto_dynamodb), and
# answers whose every field is plain JSON in botocore's parsed form (strings, numbers, booleans, lists,
# maps), unless an attribute value is binary, which botocore base64-decodes.
DATA_PLANE_OPERATIONS = frozenset(
    {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
     "TransactGetItems", "TransactWriteItems"}
)  # fmt: skip
BINARY_VALUE = re.compile(rb'"BS?"\s*:')  # a binary attribute value (or a map key "B"/"BS")


def is_dynamodb(method: str, url: str) -> bool:
    """Whether a request is a DynamoDB API call (all of them are JSON POSTs to the service endpoint)."""
    return method == "POST" and url.startswith(("https://dynamodb.", "http://dynamodb."))


def _plain_answer(operation: str, status: int, headers: Any, body: bytes) -> dict[str, Any] | None:
    """A successful data-plane answer as botocore's parser gives it, by ``json.loads``; None if not one.

    botocore's parser walks the output shape value by value, which for a Query
    of a long conversation cost more than moto's work on it; for these
    operations its result equals the JSON body (every member is modeled, no
    timestamps) except for binary values, which keep the parser.
    """
    if status >= 300 or operation not in DATA_PLANE_OPERATIONS or BINARY_VALUE.search(body):
        return None
    try:
        parsed = json.loads(body) if body else {}
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    from botocore.utils import lowercase_dict

    meta: dict[str, Any] = {}
    if "x-amzn-requestid" in headers:
        meta["RequestId"] = headers["x-amzn-requestid"]
    meta["HTTPStatusCode"] = status
    meta["HTTPHeaders"] = lowercase_dict(headers)
    meta["RetryAttempts"] = 0
    parsed["ResponseMetadata"] = meta
    return parsed


def install(send: Send) -> None:
    """Answer this process's future DynamoDB clients' calls through ``send(method, url, headers, body)``."""
    import botocore.handlers

    _send[:] = [send]
    if (EVENT, answer) not in botocore.handlers.BUILTIN_HANDLERS:
        botocore.handlers.BUILTIN_HANDLERS.append((EVENT, answer))


def uninstall() -> None:
    """Clients created from now on take botocore's own transport again (tests)."""
    import botocore.handlers

    _send.clear()
    while (EVENT, answer) in botocore.handlers.BUILTIN_HANDLERS:
        botocore.handlers.BUILTIN_HANDLERS.remove((EVENT, answer))
