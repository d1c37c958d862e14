"""Bearer tokens: only SHA-256 hashes are stored, so a leaked table reveals no token.

The API and stream functions check ``Authorization: Bearer <token>`` when
``SKYLOOP_REQUIRE_TOKEN`` is true (always in the cloud stack; opt-in with
``skyloop dev --require-token``). A warm container caches accepted hashes for
a minute, so a revoked token stops working within that minute.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from typing import TYPE_CHECKING

from skyloop.errors import NotFoundError, UnauthorizedError
from skyloop.store import TokenRecord
from skyloop.store.keys import DEFAULT_OWNER

if TYPE_CHECKING:
    from skyloop.store import Store

TOKEN_PREFIX = "sky_"
CACHE_TTL_S = float(os.environ.get("SKYLOOP_TOKEN_CACHE_S", "60"))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(store: Store, name: str, *, owner: str = DEFAULT_OWNER) -> tuple[str, TokenRecord]:
    """Mint a token; the plain value is returned once and never stored."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    digest = hash_token(token)
    record = TokenRecord(
        token_hash=digest, id=digest[:12], name=name, created_at=int(time.time()), owner=owner
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
    def __init__(self) -> None:
        self._ok: dict[str, float] = {}
        self._lock = threading.Lock()

    def hit(self, digest: str) -> bool:
        with self._lock:
            expires = self._ok.get(digest)
            return expires is not None and expires > time.monotonic()

    def add(self, digest: str) -> None:
        with self._lock:
            self._ok[digest] = time.monotonic() + CACHE_TTL_S

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


def check_authorization(store: Store, authorization: str | None) -> None:
    """Raise ``UnauthorizedError`` unless the header carries a stored token."""
    token = bearer_token(authorization)
    if token is None:
        raise UnauthorizedError("missing bearer token: send 'Authorization: Bearer <token>'")
    digest = hash_token(token)
    if _cache.hit(digest):
        return
    if store.get_token(digest) is None:
        raise UnauthorizedError("invalid or revoked token")
    if CACHE_TTL_S > 0:
        _cache.add(digest)
