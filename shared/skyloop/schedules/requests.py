"""Request bodies of ``/v1/scheduled-tasks``: omnigent 0.19.1's, plus what skyloop adds.

omnigent's ``CreateScheduledTaskRequest`` and ``UpdateScheduledTaskRequest``
(``omnigent/server/routes/scheduled_tasks.py``): ``name``, ``prompt``,
``rrule``, ``agent_id``, ``timezone`` (default UTC), ``model_override``,
``reasoning_effort``, ``permission_mode``, ``max_cost_usd`` (> 0),
``workspace``, ``host_id``, ``execution_target``, and on update ``state``
(``active`` | ``paused``). skyloop has no hosts and no native harnesses:
``host_id``, ``permission_mode`` and ``execution_target: managed_sandbox`` are
refused (400), ``workspace`` is recorded for display. skyloop adds
``starts_at`` (no occurrence before it) and ``overlap`` (``skip``, the
default, or ``allow``). Unknown fields are a 400, as in omnigent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from skyloop.errors import InvalidInputError
from skyloop.models.overrides import parse_effort, parse_model_override

MAX_NAME_CHARS = 200
MAX_PROMPT_CHARS = 100_000  # a message's text block (api.requests.MAX_TEXT_CHARS)
MAX_PROMPT_BYTES = 256 * 1024  # the task is one DynamoDB item (400 KB)
MAX_COST_USD = 10_000.0
NO_HOSTS = "skyloop runs agents serverless: it has no hosts to pin"
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)  # instants a schedule can be asked about (starts_at, previews)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)


def _instant(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("give a time zone offset (e.g. 2027-03-28T09:00:00+02:00 or ...Z)")
    if not EARLIEST <= value < LATEST:
        raise ValueError(f"must be between {EARLIEST.date()} and {LATEST.date()}")
    return value


NO_PERMISSION_MODES = "skyloop agents have no permission modes (a native harness's setting in omnigent)"


class _Common(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("prompt", check_fields=False)
    @classmethod
    def _prompt_fits(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode()) > MAX_PROMPT_BYTES:
            raise ValueError(f"at most {MAX_PROMPT_BYTES} bytes of UTF-8")
        if value is not None and not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("reasoning_effort", check_fields=False)
    @classmethod
    def _effort(cls, value: str | None) -> str | None:
        return parse_effort(value)

    @field_validator("model_override", check_fields=False)
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return parse_model_override(value)

    @field_validator("host_id", check_fields=False)
    @classmethod
    def _no_host(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(NO_HOSTS)
        return value

    @field_validator("permission_mode", check_fields=False)
    @classmethod
    def _no_mode(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(NO_PERMISSION_MODES)
        return value

    @field_validator("execution_target", check_fields=False)
    @classmethod
    def _target(cls, value: str | None) -> str | None:
        if value not in (None, "connected_host"):
            raise ValueError(
                "skyloop runs every task serverless; only 'connected_host' (the default) is taken"
            )
        return value

    @field_validator("starts_at", check_fields=False)
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return _instant(value)


class CreateScheduledTaskRequest(_Common):
    """``POST /v1/scheduled-tasks``."""

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    rrule: str = Field(min_length=1, max_length=4096)
    agent_id: str = Field(min_length=1, max_length=64)
    timezone: str = Field(default="UTC", min_length=1, max_length=64)
    model_override: str | None = None
    reasoning_effort: str | None = None
    permission_mode: str | None = None
    max_cost_usd: float | None = Field(default=None, gt=0, le=MAX_COST_USD)
    workspace: str | None = Field(default=None, min_length=1, max_length=4096)
    host_id: str | None = Field(default=None, min_length=1)
    execution_target: str = "connected_host"
    # skyloop's
    starts_at: datetime | None = None
    overlap: Literal["skip", "allow"] = "skip"


class UpdateScheduledTaskRequest(_Common):
    """``PATCH /v1/scheduled-tasks/{id}``: fields not sent are unchanged; ``null`` clears the optional ones."""

    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS)
    prompt: str | None = Field(default=None, min_length=1, max_length=MAX_PROMPT_CHARS)
    rrule: str | None = Field(default=None, min_length=1, max_length=4096)
    agent_id: str | None = Field(default=None, min_length=1, max_length=64)
    timezone: str | None = Field(default=None, min_length=1, max_length=64)
    model_override: str | None = None
    reasoning_effort: str | None = None
    permission_mode: str | None = None
    max_cost_usd: float | None = Field(default=None, gt=0, le=MAX_COST_USD)  # null clears the cap
    workspace: str | None = Field(default=None, min_length=1, max_length=4096)
    host_id: str | None = Field(default=None, min_length=1)
    execution_target: str | None = Field(default=None, min_length=1)
    state: Literal["active", "paused"] | None = None
    starts_at: datetime | None = None
    overlap: Literal["skip", "allow"] | None = None

    @model_validator(mode="after")
    def _not_null(self) -> UpdateScheduledTaskRequest:
        for name in ("name", "prompt", "rrule", "agent_id", "timezone", "state", "overlap"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null")
        return self


class RunListQuery(BaseModel):
    """``GET /v1/scheduled-tasks/{id}/runs``: newest first, ``after`` a previous page's ``next_cursor``."""

    model_config = ConfigDict(extra="ignore")

    limit: int = Field(default=100, ge=1, le=1000)
    after: str | None = Field(default=None, pattern=r"^[0-9a-f]{32}$")


class TaskListQuery(BaseModel):
    """``GET /v1/scheduled-tasks``: an admin may name another principal."""

    model_config = ConfigDict(extra="ignore")

    owner: str | None = Field(default=None, min_length=1, max_length=256)


class OccurrencesQuery(BaseModel):
    """``GET /v1/scheduled-tasks/{id}/occurrences``: the next ``limit`` after ``after`` (default: now)."""

    model_config = ConfigDict(extra="ignore")

    after: datetime | None = None
    limit: int = Field(default=5, ge=1, le=100)

    @field_validator("after")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return _instant(value)


def parse(model: type[BaseModel], data: dict[str, Any], *, what: str) -> Any:
    """``data`` validated as ``model``; a 400 whose ``param`` names the first field at fault."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        parts = []
        for err in errors[:10]:
            loc = ".".join(str(p) for p in err.get("loc", ()))
            msg = str(err.get("msg", "")).removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc else msg)
        first = errors[0].get("loc", ()) if errors else ()
        param = str(first[0]) if first else None
        raise InvalidInputError(f"invalid {what}: " + "; ".join(parts), param=param) from None
