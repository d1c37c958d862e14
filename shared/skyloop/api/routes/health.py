"""``/health``, the API's own description (``/openapi.json``) and omnigent's ``/v1/info`` and ``/api/version``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import __version__, deps
from skyloop.api import openapi
from skyloop.api.routes._common import json_response

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

router = Router()


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
            "branding": {
                "app_name": "skyloop",
                "heading": None,
                "logos": {"main": None, "loading": None, "favicon": None},
                "powered_by": False,
            },
        },
    )
