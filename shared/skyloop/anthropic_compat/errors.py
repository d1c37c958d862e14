"""Anthropic's error shape, so the SDK raises the exception class a status means (``NotFoundError``...).

``{"type": "error", "error": {"type", "message", "details": {"error_code"}}, "request_id"}``; the
SDK picks the class by status, refined by ``details.error_code``. A conflict that will not clear
carries ``x-should-retry: false`` (the SDK retries 409s by default).
"""

from __future__ import annotations

from typing import Any

from skyloop import errors
from skyloop.errors import InvalidInputError, NotFoundError, SkyloopError

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    504: "timeout_error",
}


class UnsupportedFeatureError(errors.UnsupportedFeatureError):
    """A Claude Managed Agents feature skyloop does not provide (``docs/anthropic.md`` lists them)."""

    api = "Claude Managed Agents API"


class EnvironmentNotFoundError(NotFoundError):
    code = "environment_not_found"  # the SDK's BetaEnvironmentNotFoundError


class EnvironmentArchivedError(InvalidInputError):
    code = "environment_archived"  # the SDK's BetaEnvironmentArchivedError


class HeartbeatPreconditionFailedError(SkyloopError):
    """A work heartbeat's ``expected_last_heartbeat`` is not the stored one: another worker may hold the lease.

    The SDK's ``BetaHeartbeatPreconditionFailedError`` reads the lease as the server holds it from
    ``details.current_state``.
    """

    code = "heartbeat_precondition_failed"
    status = 412

    def __init__(self, message: str, *, current_state: dict[str, Any]) -> None:
        super().__init__(message)
        self.error_details = {"current_state": current_state}


def body(status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {"error_code": code}
    if param is not None:
        details["param"] = param
    return {
        "type": "error",
        "error": {
            "type": TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error"),
            "message": message,
            "details": details,
        },
    }


def error_body(exc: SkyloopError, request_id: str | None = None) -> dict[str, Any]:
    out = body(exc.status, exc.code, exc.message, exc.param)
    out["error"]["details"].update(getattr(exc, "error_details", None) or {})  # an error's own details
    if request_id:
        out["request_id"] = request_id
    return out


def error_headers(exc: SkyloopError) -> dict[str, str]:
    headers = dict(exc.headers)
    if exc.status == 409:
        headers["x-should-retry"] = "false"
    return headers
