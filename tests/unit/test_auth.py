"""Bearer tokens: hashing, minting, checking and revoking, on moto's DynamoDB."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from skyloop import auth
from skyloop.errors import NotFoundError, UnauthorizedError
from skyloop.store.schema import create_table_kwargs

TABLE = "auth-test"


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(**create_table_kwargs(TABLE))
        auth._cache.clear()
        yield client


def test_bearer_token_parsing() -> None:
    assert auth.bearer_token("Bearer abc") == "abc"
    assert auth.bearer_token("bearer  abc ") == "abc"
    assert auth.bearer_token("Basic abc") is None
    assert auth.bearer_token("Bearer ") is None
    assert auth.bearer_token(None) is None


def test_created_token_is_accepted_and_only_its_hash_is_stored(ddb: Any) -> None:
    # Given a freshly minted token
    token, record = auth.create_token(ddb, TABLE, "laptop")
    # Then the table holds its hash, never the token itself
    raw = str(ddb.scan(TableName=TABLE)["Items"])
    assert token not in raw and auth.hash_token(token) in raw
    assert token.startswith(auth.TOKEN_PREFIX) and record.name == "laptop"
    # And the check accepts it
    auth.check_authorization(ddb, TABLE, f"Bearer {token}")


@pytest.mark.parametrize("header", [None, "", "Bearer", "Basic x", "Bearer sky_not-a-real-token"])
def test_missing_or_unknown_tokens_are_refused(ddb: Any, header: str | None) -> None:
    with pytest.raises(UnauthorizedError):
        auth.check_authorization(ddb, TABLE, header)


def test_revoked_token_is_refused(ddb: Any) -> None:
    # Given two tokens, one revoked by id and one by value
    first, rec1 = auth.create_token(ddb, TABLE, "a")
    second, _ = auth.create_token(ddb, TABLE, "b")
    auth.check_authorization(ddb, TABLE, f"Bearer {first}")
    assert auth.revoke_token(ddb, TABLE, rec1.id).name == "a"
    assert auth.revoke_token(ddb, TABLE, second).name == "b"
    # Then neither is accepted, and the listing is empty
    for token in (first, second):
        with pytest.raises(UnauthorizedError):
            auth.check_authorization(ddb, TABLE, f"Bearer {token}")
    assert auth.list_tokens(ddb, TABLE) == []
    with pytest.raises(NotFoundError):
        auth.revoke_token(ddb, TABLE, rec1.id)
