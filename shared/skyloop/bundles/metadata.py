"""The ``metadata`` form field of a bundle upload: a small JSON object."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator

from skyloop.bundles import limits
from skyloop.bundles._messages import METADATA_PREFIX, format_validation_error, kind
from skyloop.errors import InvalidInputError, PayloadTooLargeError

__all__ = ["SessionMetadata", "parse_session_metadata"]

# Field limits are fixed when the model is built (import time), unlike the
# byte limit, which is read per call.
_LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_LABEL_KEY_CHARS)]
_LabelValue = Annotated[str, StringConstraints(max_length=limits.MAX_LABEL_VALUE_CHARS)]


class SessionMetadata(BaseModel):
    """The ``metadata`` form field of a bundle upload.

    Unknown keys are refused (as omnigent does). The omnigent fields skyloop
    has no use for are accepted so stock clients work, and excluded from dumps.
    """

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=limits.MAX_TITLE_CHARS)
    labels: dict[_LabelKey, _LabelValue] = Field(default_factory=dict, max_length=limits.MAX_LABELS)
    reasoning_effort: Any = Field(default=None, exclude=True)
    host_id: Any = Field(default=None, exclude=True)
    workspace: Any = Field(default=None, exclude=True)
    terminal_launch_args: Any = Field(default=None, exclude=True)
    parent_session_id: Any = Field(default=None, exclude=True)

    @field_validator("labels", mode="before")
    @classmethod
    def _null_labels(cls, value: object) -> object:
        return {} if value is None else value


def parse_session_metadata(text: str) -> SessionMetadata:
    """Parse the metadata JSON string; bad JSON or unknown keys are a 400, oversize a 413."""
    if len(text.encode("utf-8", "surrogatepass")) > limits.MAX_METADATA_BYTES:
        raise PayloadTooLargeError(f"{METADATA_PREFIX}larger than {limits.MAX_METADATA_BYTES} bytes")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{METADATA_PREFIX}not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise InvalidInputError(f"{METADATA_PREFIX}JSON nests too deeply") from None
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{METADATA_PREFIX}expected a JSON object, got {kind(raw)}")
    try:
        return SessionMetadata.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInputError(f"{METADATA_PREFIX}{format_validation_error(exc)}") from None
