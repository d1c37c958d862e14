"""Bearer tokens: only SHA-256 hashes are stored, so a leaked table reveals no token.

The API and stream functions check ``Authorization: Bearer <token>`` when
``SKYLOOP_REQUIRE_TOKEN`` is true (always in the cloud stack; opt-in with
``skyloop dev --require-token``) and run the request as the token's principal
(:mod:`skyloop.principals`). A token of three dot-separated parts is a JWT
when an OIDC issuer is configured (:mod:`skyloop.oidc`). A warm container
caches accepted hashes for a minute, so a revoked token stops working within
that minute.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading
import time
from typing import TYPE_CHECKING

from skyloop.errors import InvalidInputError, NotFoundError, UnauthorizedError
from skyloop.ids import DEFAULT_OWNER
from skyloop.principals import DEFAULT_SCOPES, PRINCIPAL_PATTERN, SCOPES, Principal
from skyloop.store import TokenRecord

if TYPE_CHECKING:
    from collections.abc import Iterable

    from skyloop.settings import Settings
    from skyloop.store import Store

TOKEN_PREFIX = "sky_"
CACHE_TTL_S = float(os.environ.get("SKYLOOP_TOKEN_CACHE_S", "60"))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(
    store: Store,
    name: str,
    *,
    owner: str = DEFAULT_OWNER,
    scopes: Iterable[str] = DEFAULT_SCOPES,
) -> tuple[str, TokenRecord]:
    """Mint a token for principal ``owner``; the plain value is returned once and never stored."""
    if not re.fullmatch(PRINCIPAL_PATTERN, owner):
        raise InvalidInputError(
            f"principal '{owner}' must be 1-128 letters, digits or . _ @ : + - (starting alphanumeric)"
        )
    chosen = tuple(s for s in SCOPES if s in set(scopes))  # canonical order, no duplicates
    unknown = set(scopes) - set(SCOPES)
    if unknown or not chosen:
        raise InvalidInputError(f"scopes must be some of {', '.join(SCOPES)}; got {sorted(set(scopes))}")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    digest = hash_token(token)
    record = TokenRecord(
        token_hash=digest,
        id=digest[:12],
        name=name,
        created_at=int(time.time()),
        owner=owner,
        scopes=chosen,
    )
    store.put_token(record)
    return token, record


def list_tokens(store: Store) -> list[TokenRecord]:
    return store.list_tokens()


def revoke_token(store: Store, token_or_id: str) -> TokenRecord:
    """Revoke by the token itself or by its id (the first 12 hex chars of its hash)."""
    if token_or_id.startswith(TOKEN_PREFIX):
        digest = hash_token(token_or_id)
    else:
        matches = [t for t in store.list_tokens() if t.id == token_or_id]
        if not matches:
            raise NotFoundError(f"no token with id '{token_or_id}'")
        digest = matches[0].token_hash
    old = store.delete_token(digest)
    if old is None:
        raise NotFoundError("no such token")
    _cache.clear()
    return old


class _Cache:
    """Accepted token hashes and their principals, for ``CACHE_TTL_S``."""

    def __init__(self) -> None:
        self._ok: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def get(self, digest: str) -> Principal | None:
        with self._lock:
            hit = self._ok.get(digest)
            return hit[1] if hit is not None and hit[0] > time.monotonic() else None

    def add(self, digest: str, principal: Principal) -> None:
        with self._lock:
            self._ok[digest] = (time.monotonic() + CACHE_TTL_S, principal)

    def clear(self) -> None:
        with self._lock:
            self._ok.clear()


_cache = _Cache()


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


SIGV4_SCHEME = "AWS4-HMAC-SHA256"  # an AWS request signature, e.g. CloudFront's Origin Access Control's


def claude_authorization(authorization: str | None, api_key: str | None) -> str | None:
    """The client's credential on a Claude Managed Agents path, as an ``Authorization`` value.

    Anthropic's clients send ``Authorization: Bearer`` or ``x-api-key``. Behind CloudFront, Origin
    Access Control signs the request to the stream function's URL in ``Authorization`` (replacing the
    viewer's), so a SigV4 signature there is never the client's token: ``x-api-key`` is.
    """
    if authorization and not authorization.lstrip().startswith(SIGV4_SCHEME):
        return authorization
    if api_key:
        return f"Bearer {api_key}"
    return None


def authenticate(store: Store, authorization: str | None, settings: Settings | None = None) -> Principal:
    """The principal of the header's token; ``UnauthorizedError`` unless it is valid."""
    token = bearer_token(authorization)
    if token is None:
        raise UnauthorizedError("missing bearer token: send 'Authorization: Bearer <token>'")
    if settings is not None and settings.jwt_issuer and token.count(".") == 2:
        from skyloop import oidc

        return oidc.verifier(settings).principal(token)
    digest = hash_token(token)
    cached = _cache.get(digest)
    if cached is not None:
        return cached
    record = store.get_token(digest)
    if record is None:
        raise UnauthorizedError("invalid or revoked token")
    principal = Principal(name=record.owner, scopes=frozenset(record.scopes), via="token")  # type: ignore[arg-type]
    if CACHE_TTL_S > 0:
        _cache.add(digest, principal)
    return principal
