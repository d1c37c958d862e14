"""A small stand-in for the cloud edge: one port, the stream app, the live channel and the API function.

``/v1/sessions/{id}/stream`` and the OpenAI Agents API paths that carry a
stream go straight to the stream ASGI app (moto cannot serve function URLs),
as CloudFront's behaviours send them to the stream function, the WebSocket
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
from starlette.routing import Mount, Route, WebSocketRoute

from skyloop.live.local import live_endpoint
from skyloop.stream.app import healthz, openai_routes, stream_session
from skyloop.stream.proxy import http_api_event

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request

LIVE_PATH = "/v1/live"  # the live channel's WebSocket (the cloud serves it on API Gateway)


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
        *openai_routes(),  # as CloudFront's behaviours: these paths go to the stream function whole
    ]
    if mock_app is not None:
        routes.append(Mount("/_mock", app=mock_app))
    routes.append(
        Route("/{path:path}", proxy, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    )
    return Starlette(routes=routes)
