"""One error family for the whole service.

Each subclass maps one-to-one onto an omnigent error code and HTTP status, so
the API renders every failure as ``{"error": {"code", "message"}}`` from a
single exception handler.
"""

from __future__ import annotations

from typing import ClassVar


class SkyloopError(Exception):
    """Root of every error skyloop raises on purpose."""

    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param  # the request field at fault, e.g. "initial_items[3]"
        self.headers: dict[str, str] = {}  # extra response headers (e.g. Retry-After)

    def to_body(self) -> dict[str, dict[str, str]]:
        error = {"code": self.code, "message": self.message}
        if self.param is not None:
            error["param"] = self.param
        return {"error": error}


class InvalidInputError(SkyloopError):
    """The request is malformed or names something it may not; nothing was written."""

    code = "invalid_input"
    status = 400


class UnsupportedFeatureError(InvalidInputError):
    """A feature of a compatible API (OpenAI's, Claude's) that skyloop does not provide; each names its API."""

    code = "unsupported_feature"
    api = "API"

    def __init__(self, feature: str, *, param: str | None = None, detail: str = "") -> None:
        super().__init__(
            f"{feature} is not supported by skyloop's {self.api}{': ' + detail if detail else ''}",
            param=param,
        )
        self.feature = feature


class SecretNotAllowedError(InvalidInputError):
    """A declared tool names a secret outside what the caller may use; nothing was written."""

    code = "secret_not_allowed"


class ImageNotSupportedError(InvalidInputError):
    """The message carries an image the agent's model cannot take; nothing was written."""

    code = "image_not_supported"


class UnauthorizedError(SkyloopError):
    """No valid bearer token came with the request."""

    code = "unauthorized"
    status = 401


class ForbiddenError(SkyloopError):
    """The caller is known but may not do this."""

    code = "forbidden"
    status = 403


class NotFoundError(SkyloopError):
    """The addressed session, agent, item or call does not exist."""

    code = "not_found"
    status = 404


class ConflictError(SkyloopError):
    """A conditional write lost a race or contradicts what is stored."""

    code = "conflict"
    status = 409


class PayloadTooLargeError(SkyloopError):
    """The body or an uploaded bundle exceeds a documented limit."""

    code = "payload_too_large"
    status = 413


class FileTooLargeError(PayloadTooLargeError):
    """One uploaded file is over the per-file limit (``SKYLOOP_FILE_MAX_BYTES``)."""

    code = "file_too_large"


class SessionFileCountError(PayloadTooLargeError):
    """The session already holds as many files as it may (``SKYLOOP_SESSION_FILES_MAX``)."""

    code = "session_file_count_exceeded"


class SessionFileBytesError(PayloadTooLargeError):
    """The upload would take the session over its total (``SKYLOOP_SESSION_FILES_MAX_BYTES``)."""

    code = "session_file_bytes_exceeded"


class QuotaExceededError(SkyloopError):
    """The caller's principal is over one of its quotas; nothing was written. Retry after the header's seconds."""

    code = "quota_exceeded"
    status = 429

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.headers["Retry-After"] = str(max(1, retry_after_s))


class UnsupportedMediaTypeError(SkyloopError):
    """The Content-Type is not one this route accepts."""

    code = "unsupported_media_type"
    status = 415


class InternalError(SkyloopError):
    """Something failed that the caller cannot fix."""

    code = "internal_error"
    status = 500


class RunnerUnavailableError(SkyloopError):
    """The session is bound to no runner, or its runner cannot start turns."""

    code = "runner_unavailable"
    status = 503


class NotConfiguredError(SkyloopError):
    """This deployment lacks what the route needs (a blob bucket for session files)."""

    code = "not_configured"
    status = 501


class ModelCallError(SkyloopError):
    """The model endpoint failed in a way retries did not fix; ends the turn."""

    code = "model_error"
    status = 502

    def __init__(self, message: str, *, code: str = "model_error", retryable: bool = False) -> None:
        super().__init__(message)
        self.error_code = code
        self.retryable = retryable
