"""A small stand-in for the cloud edge: one port, the stream app, the live channel and the API function.

``/v1/sessions/{id}/stream`` and GET of the OpenAI Agents API's events stream
go straight to the stream ASGI app (moto cannot serve function URLs), as
CloudFront's behaviours and their viewer-request function send them to the
stream function (a request with a body goes to the API, as there), the WebSocket
``/v1/live`` to the live channel's local endpoint (:mod:`skyloop.live.local`);
every other request becomes an API Gateway HTTP API
payload v2 event and is invoked on the API function through moto's Lambda
(its per-function funnel, as API Gateway's integration would), which runs the
real handler in the local Lambda runtime.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Mount, Route, WebSocketRoute, request_response

from skyloop import function_identity
from skyloop.live.local import live_endpoint
from skyloop.stream.app import STREAM_METHODS, anthropic_routes, healthz, openai_routes, stream_session
from skyloop.stream.proxy import http_api_event

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from starlette.requests import Request

LIVE_PATH = "/v1/live"  # the live channel's WebSocket (the cloud serves it on API Gateway)


class AsFunction:
    """An endpoint served as one of the stack's functions: its AWS calls are checked against that
    function's role (:mod:`skyloop.local.iam`) for the whole request, a streamed body included."""

    def __init__(self, function: str, endpoint: Callable[[Request], Any]) -> None:
        self.function = function
        self.app = request_response(endpoint)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        with function_identity.acting_as(self.function):
            await self.app(scope, receive, send)


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
        Route("/v1/sessions/{session_id}/stream", AsFunction("stream", stream_session), methods=["GET"]),
        WebSocketRoute(LIVE_PATH, live_endpoint),
        # as CloudFront's behaviours: GET (and HEAD) of the OpenAI stream path go to the stream function,
        # a request with a body to the API (the catch-all below)
        *(Route(r.path, AsFunction("stream", r.endpoint), methods=STREAM_METHODS) for r in openai_routes()),
        *(
            Route(r.path, AsFunction("stream", r.endpoint), methods=STREAM_METHODS)
            for r in anthropic_routes()
        ),
    ]
    if mock_app is not None:
        routes.append(Mount("/_mock", app=mock_app))
    routes.append(
        Route("/{path:path}", proxy, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    )
    return Starlette(routes=routes)
