"""One AWS request served by this process's moto, and the process's name: what every local process needs.

Kept apart from :mod:`skyloop.local.lambda_runtime` so that the DynamoDB
process, which needs only these, imports neither the handlers nor the store
(pydantic, the models, settings: ~15 MB it never used).
"""

from __future__ import annotations

import ctypes
import json
import logging
from typing import Any

log = logging.getLogger("skyloop.local")


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
