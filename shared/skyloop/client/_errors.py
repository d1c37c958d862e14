"""The client's one error family.

::

    SkyloopClientError
    ├── ConfigError                  a config file that cannot be read
    ├── APIError                     the server answered with an error body (code, status, message)
    │   ├── InvalidInputError            400 invalid_input
    │   ├── UnauthorizedError            401 unauthorized
    │   ├── ForbiddenError               403 forbidden
    │   ├── NotFoundError                404 not_found
    │   ├── ConflictError                409 conflict
    │   ├── PayloadTooLargeError         413 payload_too_large
    │   ├── UnsupportedMediaTypeError    415 unsupported_media_type
    │   ├── InternalServerError          500 internal_error
    │   └── RunnerUnavailableError       503 runner_unavailable
    ├── APIConnectionError           the request never got an answer (httpx transport errors)
    │   ├── APITimeoutError              ... because it timed out
    │   └── StreamDisconnectedError      a stream could not be resumed within the retry budget
    └── ResponseValidationError      the server answered 2xx with a body the contract does not allow

httpx errors are translated at one boundary (:func:`map_transport_errors`)
and chained with ``from``, so the original is never lost.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, ClassVar

import httpx

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "ConfigError",
    "ConflictError",
    "ForbiddenError",
    "InternalServerError",
    "InvalidInputError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ResponseValidationError",
    "RunnerUnavailableError",
    "SkyloopClientError",
    "StreamDisconnectedError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "error_from_response",
    "map_transport_errors",
]


class SkyloopClientError(Exception):
    """Root of every error the skyloop client raises."""


class ConfigError(SkyloopClientError):
    """The client config file exists but cannot be parsed."""


class APIError(SkyloopClientError):
    """The server answered with an error; ``code`` is the contract's error code."""

    default_code: ClassVar[str] = "unknown_error"
    default_status: ClassVar[int] = 0

    def __init__(
        self, message: str, *, code: str | None = None, status: int | None = None, body: Any = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.status = status if status is not None else self.default_status
        self.body = body

    def __str__(self) -> str:
        return f"{self.code} ({self.status}): {self.message}"


class InvalidInputError(APIError):
    """The request was malformed or named something it may not; the server wrote nothing."""

    default_code = "invalid_input"
    default_status = 400


class UnauthorizedError(APIError):
    """No valid bearer token: set ``SKYLOOP_TOKEN``, the config file's ``token``, or ``token=``."""

    default_code = "unauthorized"
    default_status = 401


class ForbiddenError(APIError):
    """The token is valid but may not do this."""

    default_code = "forbidden"
    default_status = 403


class NotFoundError(APIError):
    """The session, agent, item or call does not exist (or was deleted)."""

    default_code = "not_found"
    default_status = 404


class ConflictError(APIError):
    """The request contradicts stored state, e.g. a different output for an answered call."""

    default_code = "conflict"
    default_status = 409


class PayloadTooLargeError(APIError):
    """A body, bundle or tool output exceeds a documented limit."""

    default_code = "payload_too_large"
    default_status = 413


class UnsupportedMediaTypeError(APIError):
    """The route does not accept the request's Content-Type."""

    default_code = "unsupported_media_type"
    default_status = 415


class InternalServerError(APIError):
    """The server failed in a way the caller cannot fix."""

    default_code = "internal_error"
    default_status = 500


class RunnerUnavailableError(APIError):
    """The session has no online runner to start turns."""

    default_code = "runner_unavailable"
    default_status = 503


class APIConnectionError(SkyloopClientError):
    """The request got no answer: refused, reset, or cut mid-body."""


class APITimeoutError(APIConnectionError):
    """The request timed out."""


class StreamDisconnectedError(APIConnectionError):
    """A stream dropped and every reconnect attempt in the budget failed."""


class ResponseValidationError(SkyloopClientError):
    """A 2xx answer whose body is not what the contract promises."""


_BY_CODE: dict[str, type[APIError]] = {
    cls.default_code: cls
    for cls in (
        InvalidInputError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        ConflictError,
        PayloadTooLargeError,
        UnsupportedMediaTypeError,
        InternalServerError,
        RunnerUnavailableError,
    )
}
_BY_STATUS: dict[int, type[APIError]] = {cls.default_status: cls for cls in _BY_CODE.values()}


def error_from_response(status: int, content: bytes) -> APIError:
    """The typed error for an error answer: by the body's ``code``, else by status.

    Bodies that are not the contract's ``{"error": {...}}`` (a proxy's HTML
    page, say) still give a typed error, with the start of the body as message.
    """
    body: Any = None
    code: str | None = None
    message = ""
    try:
        body = json.loads(content) if content else None
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code") or "") or None
        message = str(error.get("message") or "")
    if not message:
        message = content[:300].decode("utf-8", "replace").strip() or httpx.codes.get_reason_phrase(status)
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or APIError
    return cls(
        message,
        code=code or (cls.default_code if cls is not APIError else f"http_{status}"),
        status=status,
        body=body,
    )


def error_from_code(code: str, message: str, body: Any = None) -> APIError:
    """The typed error for an error the server sent without an HTTP status (a live channel frame)."""
    cls = _BY_CODE.get(code) or APIError
    return cls(message, code=code, status=cls.default_status, body=body)


@contextlib.contextmanager
def map_transport_errors() -> Iterator[None]:
    """Re-raise httpx's transport errors as this family's connection errors."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise APITimeoutError(f"request timed out: {exc}") from exc
    except httpx.TransportError as exc:
        raise APIConnectionError(f"connection failed: {exc or type(exc).__name__}") from exc


def is_retryable_status(status: int) -> bool:
    """Statuses worth retrying for idempotent requests and stream reconnects."""
    return status in (408, 425, 429) or status >= 500
