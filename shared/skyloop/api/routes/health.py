"""``/health``, the API's own description (``/openapi.json``) and omnigent's ``/v1/info`` and ``/api/version``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import __version__, deps, principals
from skyloop.api import openapi
from skyloop.api.routes._common import json_response

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

router = Router()
LIVE_PROTOCOL = "skyloop.live.v1"  # the frames of skyloop.live.protocol


@openapi.operation(router, "GET", "/health", summary="Liveness (never requires a token)")
def health() -> Response:
    return json_response(200, {"status": "ok"})


@openapi.operation(router, "GET", "/openapi.json", summary="This API's OpenAPI 3.1 document")
def openapi_document() -> Response:
    return json_response(200, openapi.document(__version__))


@openapi.operation(router, "GET", "/api/version", summary="The server version (omnigent's shape)")
def api_version() -> Response:
    return json_response(200, {"version": __version__})


@openapi.operation(
    router, "GET", "/v1/info", summary="What this server supports (omnigent's ServerInfoResponse)"
)
def server_info() -> Response:
    """omnigent clients gate features on these flags: ``agent_install`` enables ``omnigent agent``.

    Everything skyloop has no counterpart for (accounts, sandboxes, sharing,
    smart routing, dictation, harness installs) is reported off.
    """
    return json_response(
        200,
        {
            "server": "skyloop",
            "server_version": __version__,
            "accounts_enabled": False,
            "single_user": not deps.get_settings().require_token,
            "login_url": None,
            "needs_setup": False,
            "databricks_features": False,
            "managed_sandboxes_enabled": False,
            "durable_initial_input": False,
            "sandbox_provider": None,
            "sandbox_providers": [],
            "sandbox_provider_capabilities": {},
            "enabled_connections": [],
            "sharing_mode": "off",
            "public_sharing_enabled": False,
            "public_sharing_max_level": "read",
            "smart_routing_enabled": False,
            "smart_routing_sources": {"external": False, "oss": False},
            "features": {},
            "harness_install_enabled": False,
            "installable_harnesses": [],
            "dictation_available": False,
            "archive_worktree_cleanup": False,
            "request_managed_sandbox_host_id": False,
            "agent_install": True,
            "agent_detail": True,
            "agent_config_edit": False,
            "console": console_config(),
            "branding": {
                "app_name": "skyloop",
                "heading": None,
                "logos": {"main": None, "loading": None, "favicon": None},
                "powered_by": False,
            },
            "live": _live_channel(),
        },
    )


def console_config() -> dict[str, Any]:
    """What the web console needs before sign-in: whether a token is required, and the OIDC issuer.

    ``oidc`` is set when the stack verifies JWTs and names the console's public client
    (``SKYLOOP_CONSOLE_CLIENT_ID``); the console then runs the authorization-code flow with
    PKCE against the issuer's discovery document.
    """
    settings = deps.get_settings()
    oidc = None
    if settings.jwt_issuer and settings.console_client_id:
        oidc = {
            "issuer": settings.jwt_issuer,
            "client_id": settings.console_client_id,
            "scopes": settings.console_scopes,
        }
    return {"auth_required": settings.require_token, "oidc": oidc}


@openapi.operation(
    router, "GET", "/v1/me", summary="Who the caller is: principal and scopes (the web console)"
)
def whoami() -> Response:
    """The console shows read-only controls for a read-only token; this says which the caller holds."""
    me = principals.current()
    return json_response(
        200,
        {
            "principal": me.name,
            "scopes": sorted(me.scopes),
            "admin": me.is_admin,
            "can_write": me.can_write,
            "via": me.via,
        },
    )


@openapi.operation(
    router, "GET", "/v1/tool_sets", summary="Client tool sets a client may offer with a message (schemas)"
)
def tool_sets() -> Response:
    """The web console offers these on a message and lets a person type each call's output."""
    from skyloop.client_tools import available_tool_sets, get_tool_set

    data = [{"name": name, "tools": get_tool_set(name).TOOLS} for name in available_tool_sets()]
    return json_response(200, {"object": "list", "data": data})


def _live_channel() -> dict[str, str] | None:
    """Where the live channel (WebSocket push, ``skyloop.live``) is, for clients to discover; None without one.

    A path (the local stack's ``/v1/live``) is on this host: answered as a
    ``ws://`` URL of the host the request reached.
    """
    url = deps.get_settings().live_url
    if not url:
        return None
    if url.startswith("/"):
        headers = {k.lower(): v for k, v in (router.current_event.headers or {}).items()}
        scheme = "wss" if headers.get("x-forwarded-proto") == "https" else "ws"
        url = f"{scheme}://{headers.get('host', '127.0.0.1')}{url}"
    return {"url": url, "protocol": LIVE_PROTOCOL}
