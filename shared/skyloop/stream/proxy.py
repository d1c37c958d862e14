"""The stream function's way to the API function, for the OpenAI paths CloudFront sends it whole.

CloudFront picks an origin by path only, and OpenAI's Agents API serves a
stream and plain requests on the same paths (``GET`` vs ``POST
/agents/sessions/{id}/events``; ``POST /agents/sessions`` with or without
``stream: true``). Those paths go to the stream function; it streams what is a
stream and hands everything else to the API function as the HTTP API
(payload 2.0) event API Gateway would have sent, by ``lambda:InvokeFunction``
(``SKYLOOP_API_FUNCTION``), so the API's own handler, auth and audit answer it.
``skyloop dev`` routes the same paths the same way.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.requests import Request

API_FUNCTION_ENV = "SKYLOOP_API_FUNCTION"
STREAM_AUTH_HEADER = "x-skyloop-authorization"  # where CloudFront's edge function put the viewer's token

TEXT_TYPES = ("application/json", "text/", "application/x-www-form-urlencoded")


def http_api_event(request: Request, body: bytes) -> dict[str, Any]:
    """The HTTP API (payload format 2.0) event API Gateway would send for ``request``."""
    ctype = request.headers.get("content-type", "")
    textual = not body or any(ctype.startswith(t) or t in ctype for t in TEXT_TYPES)
    try:
        text = body.decode("utf-8") if textual else None
    except UnicodeDecodeError:
        text = None
    headers: dict[str, str] = {}
    for key, value in request.headers.items():
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    query: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        query[key] = f"{query[key]},{value}" if key in query else value
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": request.url.path,
        "rawQueryString": request.url.query,
        "headers": headers,
        "queryStringParameters": query or None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": request.url.hostname or "localhost",
            "domainPrefix": "local",
            "http": {
                "method": request.method,
                "path": request.url.path,
                "protocol": "HTTP/1.1",
                "sourceIp": request.client.host if request.client else "127.0.0.1",
                "userAgent": request.headers.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": text if text is not None else base64.b64encode(body).decode(),
        "isBase64Encoded": text is None,
    }


def viewer_event(request: Request, body: bytes) -> dict[str, Any]:
    """The API event for a request that reached the stream function: the viewer's token back in
    ``authorization`` (Origin Access Control signed the request in its place), CloudFront's signing
    headers dropped."""
    event = http_api_event(request, body)
    headers = {k: v for k, v in event["headers"].items() if not k.startswith("x-amz-")}
    viewer = headers.pop(STREAM_AUTH_HEADER, None)
    if viewer:  # behind CloudFront: ``authorization`` holds its signature, not the viewer's token
        headers["authorization"] = viewer
    event["headers"] = headers
    return event


def invoke_api(event: dict[str, Any]) -> dict[str, Any]:
    """Run the API function on ``event``; its HTTP API response (a 502 if the function failed)."""
    from skyloop import deps

    name = os.environ.get(API_FUNCTION_ENV)
    if not name:
        return failure(f"{API_FUNCTION_ENV} is not set: this stream function cannot reach the API")
    out = deps.client("lambda").invoke(FunctionName=name, Payload=json.dumps(event).encode())
    payload = out["Payload"].read()
    if out.get("FunctionError"):
        return failure("the API function failed")
    result = json.loads(payload or b"{}")
    return result if isinstance(result, dict) else failure("the API function answered nothing")


def failure(message: str) -> dict[str, Any]:
    body = {"error": {"message": message, "type": "server_error", "param": None, "code": "internal_error"}}
    return {"statusCode": 502, "headers": {"content-type": "application/json"}, "body": json.dumps(body)}


def response_parts(out: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    raw = out.get("body") or ""
    data = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
    return int(out.get("statusCode", 200)), dict(out.get("headers") or {}), data
