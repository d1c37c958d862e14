"""A small stand-in for the cloud edge: one port, the stream app and the API function.

``/v1/sessions/{id}/stream`` goes straight to the stream ASGI app (moto cannot
serve function URLs); every other request becomes an API Gateway HTTP API
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
from starlette.routing import Mount, Route

from skyloop.stream.app import healthz, stream_session

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from starlette.requests import Request

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


def console_response(request: Request, root: Path) -> Response:
    """A file of the web console (see :mod:`skyloop.console`), or a page saying how to build it."""
    from skyloop import console

    if not (root / "index.html").is_file():
        text = f"The web console is not built: run `{console.HOW_TO_BUILD}`, then reload.\n"
        return Response(text, status_code=503, media_type="text/plain")
    found = console.resolve(root, request.url.path)
    if found is None:
        body = {"error": {"code": "not_found", "message": "Not found"}}
        return Response(json.dumps(body), status_code=404, media_type="application/json")
    path, cache = found
    headers = {"Cache-Control": cache, "X-Content-Type-Options": "nosniff"}
    if path.name == "index.html":
        headers["Content-Security-Policy"] = console.CONTENT_SECURITY_POLICY
        headers["X-Frame-Options"] = "DENY"
        headers["Referrer-Policy"] = "no-referrer"
    data = b"" if request.method == "HEAD" else path.read_bytes()
    return Response(data, headers=headers, media_type=console.content_type(path))


def create_gateway(
    invoke_api: Callable[[bytes], tuple[bytes, bool]],
    *,
    mock_app: Any = None,
    console_dir: Path | None = None,
) -> Starlette:
    """``invoke_api(payload) -> (body, failed)`` runs the API function (see ``lambda_hook.direct_invoker``).

    With ``console_dir``, GET and HEAD of paths outside the API serve the web console, as
    the cloud's CloudFront sends them to the console's bucket.
    """
    from skyloop import console

    async def proxy(request: Request) -> Response:
        if (
            console_dir is not None
            and request.method in ("GET", "HEAD")
            and not console.is_api_path(request.url.path)
        ):
            return await anyio.to_thread.run_sync(console_response, request, console_dir)
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
    ]
    if mock_app is not None:
        routes.append(Mount("/_mock", app=mock_app))
    routes.append(
        Route("/{path:path}", proxy, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    )
    return Starlette(routes=routes)
