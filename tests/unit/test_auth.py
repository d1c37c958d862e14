"""Bearer tokens: hashing, minting, checking and revoking, on the in-memory store."""

from __future__ import annotations

import pytest

from skyloop import auth
from skyloop.errors import NotFoundError, UnauthorizedError
from skyloop.store import MemoryStore


@pytest.fixture
def store() -> MemoryStore:
    auth._cache.clear()
    return MemoryStore()


def test_bearer_token_parsing() -> None:
    assert auth.bearer_token("Bearer abc") == "abc"
    assert auth.bearer_token("bearer  abc ") == "abc"
    assert auth.bearer_token("Basic abc") is None
    assert auth.bearer_token("Bearer ") is None
    assert auth.bearer_token(None) is None


def test_created_token_is_accepted_and_only_its_hash_is_stored(store: MemoryStore) -> None:
    # Given a freshly minted token
    token, record = auth.create_token(store, "laptop")
    # Then the store holds its hash, never the token itself
    stored = store.list_tokens()
    assert token not in repr(stored)
    assert stored[0].token_hash == auth.hash_token(token)
    assert token.startswith(auth.TOKEN_PREFIX)
    assert record.name == "laptop"
    assert record.id == stored[0].token_hash[:12]
    # And the check accepts it
    auth.authenticate(store, f"Bearer {token}")


@pytest.mark.parametrize("header", [None, "", "Bearer", "Basic x", "Bearer sky_not-a-real-token"])
def test_missing_or_unknown_tokens_are_refused(store: MemoryStore, header: str | None) -> None:
    with pytest.raises(UnauthorizedError):
        auth.authenticate(store, header)


def test_revoked_token_is_refused(store: MemoryStore) -> None:
    # Given two tokens, one revoked by id and one by value
    first, rec1 = auth.create_token(store, "a")
    second, _ = auth.create_token(store, "b")
    auth.authenticate(store, f"Bearer {first}")
    assert auth.revoke_token(store, rec1.id).name == "a"
    assert auth.revoke_token(store, second).name == "b"
    # Then neither is accepted (the warm cache is dropped on revoke), and the listing is empty
    for token in (first, second):
        with pytest.raises(UnauthorizedError):
            auth.authenticate(store, f"Bearer {token}")
    assert auth.list_tokens(store) == []
    with pytest.raises(NotFoundError):
        auth.revoke_token(store, rec1.id)


def test_an_accepted_token_is_cached_for_a_while(store: MemoryStore) -> None:
    token, _ = auth.create_token(store, "c")
    auth.authenticate(store, f"Bearer {token}")
    store.delete_token(auth.hash_token(token))  # revoked behind the cache's back
    auth.authenticate(store, f"Bearer {token}")  # still accepted from the cache
    auth._cache.clear()
    with pytest.raises(UnauthorizedError):
        auth.authenticate(store, f"Bearer {token}")


@pytest.mark.parametrize(
    ("authorization", "api_key", "expected"),
    [
        ("Bearer sky_a", None, "Bearer sky_a"),
        ("Bearer sky_a", "sky_b", "Bearer sky_a"),  # both sent: Authorization, as Anthropic's API
        (None, "sky_b", "Bearer sky_b"),
        ("AWS4-HMAC-SHA256 Credential=X/1/r/lambda/aws4_request, Signature=0", "sky_b", "Bearer sky_b"),
        ("AWS4-HMAC-SHA256 Credential=X/1/r/lambda/aws4_request, Signature=0", None, None),
        (None, None, None),
    ],
)
def test_claude_credential_is_authorization_unless_a_sigv4_signature(
    authorization: str | None, api_key: str | None, expected: str | None
) -> None:
    """CloudFront's Origin Access Control signs in Authorization: then x-api-key is the client's key."""
    assert auth.claude_authorization(authorization, api_key) == expected
