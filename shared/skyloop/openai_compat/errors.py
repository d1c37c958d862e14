"""OpenAI's error shape, so the SDK raises the exception class a status means (``BadRequestError``...)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyloop import errors

if TYPE_CHECKING:
    from skyloop.errors import SkyloopError

# OpenAI's ``error.type`` by status; ``code`` keeps skyloop's machine-readable code.
TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}


class UnsupportedFeatureError(errors.UnsupportedFeatureError):
    """A feature of OpenAI's Agents API that skyloop does not provide (docs/openai.md lists them)."""

    api = "OpenAI Agents API"


def body(status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }


def error_body(exc: SkyloopError) -> dict[str, Any]:
    return body(exc.status, exc.code, exc.message, exc.param)


def error_headers(exc: SkyloopError) -> dict[str, str]:
    """A conflict here is a contradiction, not a lock timeout: the SDK must not retry it."""
    headers = dict(exc.headers)
    if exc.status == 409:
        headers["x-should-retry"] = "false"
    return headers
