"""Who is calling: the principal a request runs as, and what it may see and do.

Every agent and session records its owner. A principal sees only what it
owns: another principal's id answers 404 exactly as an unknown id does, so
ids leak nothing. The ``admin`` scope sees everything; a token without
``write`` may only read (any other method answers 403).

The API and stream functions bind the caller's principal for the length of
one request (Lambda runs one request per process at a time, and so does the
local runtime); code that runs outside a request (turn steps, the CLI) runs as
:data:`SYSTEM`. The lookups in :mod:`skyloop.sessions` are the one place that
checks ownership, so every route that names an id goes through them.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from skyloop.errors import ForbiddenError
from skyloop.ids import DEFAULT_OWNER

if TYPE_CHECKING:
    from collections.abc import Iterator

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")
DEFAULT_SCOPES: tuple[Scope, ...] = ("read", "write")
PRINCIPAL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$"


class Principal(BaseModel):
    """A caller: a token's principal, a JWT's subject, or the open local stack."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=256)
    scopes: frozenset[Scope] = frozenset(DEFAULT_SCOPES)
    via: Literal["token", "jwt", "open", "system"] = "token"

    @property
    def is_admin(self) -> bool:
        return "admin" in self.scopes

    @property
    def can_write(self) -> bool:
        return "write" in self.scopes or self.is_admin

    def owns(self, owner: str) -> bool:
        return self.is_admin or owner == self.name

    def require_write(self) -> None:
        if not self.can_write:
            raise ForbiddenError(f"principal '{self.name}' holds a read-only token")


# Without required tokens (``skyloop dev`` by default) every caller is the one local user.
OPEN = Principal(name=DEFAULT_OWNER, scopes=frozenset(SCOPES), via="open")
# Turn steps, the reconciler and the operator's CLI act for whoever owns what they touch.
SYSTEM = Principal(name=DEFAULT_OWNER, scopes=frozenset(SCOPES), via="system")

_current: ContextVar[Principal] = ContextVar("skyloop_principal", default=SYSTEM)


def current() -> Principal:
    return _current.get()


@contextlib.contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    """Run the block as ``principal`` (one request)."""
    token = _current.set(principal)
    try:
        yield principal
    finally:
        _current.reset(token)


def list_owner(requested: str | None) -> str:
    """Whose agents or sessions a list shows: one's own; an admin may name another owner."""
    me = current()
    if requested is None or requested == me.name:
        return me.name
    if not me.is_admin:
        raise ForbiddenError("only an admin token may list another principal's resources")
    return requested
