"""Bearer tokens: only SHA-256 hashes are stored, in the table, so a leaked table reveals no token.

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
from typing import Any

from pydantic import BaseModel

from skyloop.errors import NotFoundError, UnauthorizedError

TOKEN_PREFIX = "sky_"
CACHE_TTL_S = float(os.environ.get("SKYLOOP_TOKEN_CACHE_S", "60"))


class TokenRecord(BaseModel):
    id: str
    name: str
    created_at: int


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _key(token_hash: str) -> dict[str, Any]:
    return {"pk": {"S": f"TOKEN#{token_hash}"}, "sk": {"S": "TOKEN"}}


def create_token(client: Any, table: str, name: str) -> tuple[str, TokenRecord]:
    """Mint a token; the plain value is returned once and never stored."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    digest = hash_token(token)
    record = TokenRecord(id=digest[:12], name=name, created_at=int(time.time()))
    client.put_item(
        TableName=table,
        Item={
            **_key(digest),
            "kind": {"S": "token"},
            "id": {"S": record.id},
            "name": {"S": record.name},
            "created_at": {"N": str(record.created_at)},
            "gsi1pk": {"S": "TOKENS"},
            "gsi1sk": {"S": f"{record.created_at:020d}#{record.id}"},
        },
        ConditionExpression="attribute_not_exists(pk)",
    )
    return token, record


def list_tokens(client: Any, table: str) -> list[TokenRecord]:
    r = client.query(
        TableName=table,
        IndexName="gsi1",
        KeyConditionExpression="gsi1pk = :p",
        ExpressionAttributeValues={":p": {"S": "TOKENS"}},
    )
    return [
        TokenRecord(id=i["id"]["S"], name=i["name"]["S"], created_at=int(i["created_at"]["N"]))
        for i in r.get("Items", [])
    ]


def revoke_token(client: Any, table: str, token_or_id: str) -> TokenRecord:
    """Revoke by the token itself or by its id (the first 12 hex chars of its hash)."""
    if token_or_id.startswith(TOKEN_PREFIX):
        digest = hash_token(token_or_id)
    else:
        matches = [t for t in list_tokens(client, table) if t.id == token_or_id]
        if not matches:
            raise NotFoundError(f"no token with id '{token_or_id}'")
        item = client.query(
            TableName=table,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :p AND gsi1sk = :s",
            ExpressionAttributeValues={
                ":p": {"S": "TOKENS"},
                ":s": {"S": f"{matches[0].created_at:020d}#{matches[0].id}"},
            },
        )["Items"][0]
        digest = item["pk"]["S"].removeprefix("TOKEN#")
    r = client.delete_item(TableName=table, Key=_key(digest), ReturnValues="ALL_OLD")
    old = r.get("Attributes")
    if not old:
        raise NotFoundError("no such token")
    _cache.clear()
    return TokenRecord(id=old["id"]["S"], name=old["name"]["S"], created_at=int(old["created_at"]["N"]))


class _Cache:
    def __init__(self) -> None:
        self._ok: dict[str, float] = {}
        self._lock = threading.Lock()

    def hit(self, digest: str) -> bool:
        with self._lock:
            expires = self._ok.get(digest)
            return expires is not None and expires > time.monotonic()

    def forget(self, digest: str) -> None:
        with self._lock:
            self._ok.pop(digest, None)

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


def check_authorization(client: Any, table: str, authorization: str | None) -> None:
    """Raise ``UnauthorizedError`` unless the header carries a stored token."""
    token = bearer_token(authorization)
    if token is None:
        raise UnauthorizedError("missing bearer token: send 'Authorization: Bearer <token>'")
    digest = hash_token(token)
    if _cache.hit(digest):
        return
    r = client.get_item(TableName=table, Key=_key(digest), ConsistentRead=True)
    if "Item" not in r:
        raise UnauthorizedError("invalid or revoked token")
    if CACHE_TTL_S > 0:
        _cache.add(digest)
