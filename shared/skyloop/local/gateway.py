"""A small stand-in for the cloud edge: one port, the stream app, the live channel and the API function.

``/v1/sessions/{id}/stream`` goes straight to the stream ASGI app (moto cannot
serve function URLs), the WebSocket ``/v1/live`` to the live channel's local
endpoint (:mod:`skyloop.live.local`); every other request becomes an API Gateway HTTP API
payload v2 event and is invoked on the API function through moto's Lambda
(its per-function funnel, as API Gateway's integration would), which runs the
real handler in the local Lambda runtime.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Mount, Route, WebSocketRoute

from skyloop.live.local import live_endpoint
from skyloop.stream.app import healthz, stream_session

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request

LIVE_PATH = "/v1/live"  # the live channel's WebSocket (the cloud serves it on API Gateway)
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


def create_gateway(invoke_api: Callable[[bytes], tuple[bytes, bool]], *, mock_app: Any = None) -> Starlette:
    """``invoke_api(payload) -> (body, failed)`` runs the API function (see ``lambda_hook.direct_invoker``)."""

    async def proxy(request: Request) -> Response:
        event = http_api_event(request, await request.body())
        raw_out, failed = await anyio.to_thread.run_sync(invoke_api, json.dumps(event).encode())
        out = json.loads(raw_out or b"{}")
        if failed:
            body = {"error": {"code": "internal_error", "message": "the API function failed"}}
            return Response(json.dumps(body), status_code=502, media_type="application/json")
        raw = out.get("body") or ""
        data = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
        headers = dict(out.get("headers") or {})
        response = Response(data, status_code=int(out.get("statusCode", 200)), headers=headers)
        for cookie in out.get("cookies") or []:
            response.headers.append("set-cookie", cookie)
        return response

    routes: list[Any] = [
        Route("/healthz", healthz),
        Route("/v1/sessions/{session_id}/stream", stream_session, methods=["GET"]),
        WebSocketRoute(LIVE_PATH, live_endpoint),
    ]
    if mock_app is not None:
        routes.append(Mount("/_mock", app=mock_app))
    routes.append(
        Route("/{path:path}", proxy, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    )
    return Starlette(routes=routes)
