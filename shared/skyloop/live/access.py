"""Who may watch which session: exactly the REST API's and the SSE stream's rules.

Bearer tokens are checked against their hashes in the table, JWTs against
the issuer's keys; another principal's session answers ``not_found`` just
as an unknown id does; an admin sees every session. Without required tokens
(``skyloop dev`` by default) every caller is the open local principal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from skyloop import principals
from skyloop.errors import NotFoundError, SkyloopError
from skyloop.ids import is_hex32
from skyloop.live.protocol import ERROR_NOT_FOUND, ERROR_UNAUTHORIZED, ProtocolError

if TYPE_CHECKING:
    from skyloop.models.session import Session
    from skyloop.principals import Principal
    from skyloop.settings import Settings
    from skyloop.store import Store


@dataclass(frozen=True)
class Grant:
    """An accepted token: its principal, and how to check later that it still holds."""

    principal: Principal
    token_hash: str | None = None  # a bearer token: revoked when its row is gone
    expires_at: int | None = None  # a JWT: its ``exp``


def authenticate(store: Store, token: str | None, settings: Settings) -> Grant:
    """The token's grant; ``ProtocolError(unauthorized)`` unless it is valid."""
    if not settings.require_token:
        return Grant(principals.OPEN)
    from skyloop import auth

    try:
        principal = auth.authenticate(store, f"Bearer {token}" if token else None, settings)
    except SkyloopError as exc:
        raise ProtocolError(ERROR_UNAUTHORIZED, exc.message) from None
    if principal.via == "jwt":
        from skyloop import oidc

        exp = oidc.verifier(settings).claims(token or "").get("exp")
        return Grant(principal, expires_at=int(exp) if isinstance(exp, int | float) else None)
    return Grant(principal, token_hash=auth.hash_token(token or ""))


def still_valid(store: Store, grant: Grant, now: float) -> bool:
    """Whether a grant accepted earlier on a long-lived connection still holds (revocation, expiry)."""
    if grant.expires_at is not None and grant.expires_at < now:
        return False
    return grant.token_hash is None or store.get_token(grant.token_hash) is not None


def watchable_session(store: Store, principal: Principal, session_id: str) -> Session:
    """The session if ``principal`` may watch it; ``ProtocolError(not_found)`` otherwise."""
    missing = ProtocolError(ERROR_NOT_FOUND, f"Session not found: '{session_id}'", session_id=session_id)
    if not is_hex32(session_id):
        raise missing
    try:
        session = store.get_session(session_id)
    except NotFoundError:
        raise missing from None
    if not principal.owns(session.owner):  # another principal's session is "not found" too
        raise missing
    return session
