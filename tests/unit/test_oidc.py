"""JWT sign-in against a real JWKS endpoint: what is accepted, what is refused and why."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import jwt
import pytest

from skyloop import auth, oidc
from skyloop.errors import UnauthorizedError
from skyloop.principals import Principal
from skyloop.settings import Settings
from skyloop.store import MemoryStore
from tests.oidc_issuer import AUDIENCE, TestIssuer


@pytest.fixture
def issuer() -> Iterator[TestIssuer]:
    oidc._verifier.cache_clear()
    with TestIssuer() as server:
        yield server
    oidc._verifier.cache_clear()


def settings(issuer: TestIssuer, **extra: str) -> Settings:
    return Settings.model_validate(
        {"SKYLOOP_JWT_ISSUER": issuer.issuer, "SKYLOOP_JWT_AUDIENCE": AUDIENCE, **extra}
    )


def principal_of(issuer: TestIssuer, token: str, **extra: str) -> Principal:
    return auth.authenticate(MemoryStore(), f"Bearer {token}", settings(issuer, **extra))


def refused(issuer: TestIssuer, token: str) -> str:
    with pytest.raises(UnauthorizedError) as exc:
        principal_of(issuer, token)
    return exc.value.message


def test_a_valid_token_names_its_principal_and_keys_are_fetched_once(issuer: TestIssuer) -> None:
    # Given tokens of the trusted issuer for this audience
    for sub in ("alice", "bob", "alice"):
        p = principal_of(issuer, issuer.token(sub))
        # Then the principal is the subject, reading and writing its own
        assert p.name == sub
        assert p.via == "jwt"
        assert p.can_write
        assert not p.is_admin
    # And the issuer's keys were fetched once for all three
    assert issuer.jwks_fetches == 1


def test_principal_claim_is_configurable(issuer: TestIssuer) -> None:
    token = issuer.token("abc-123", email="carol@example.com")
    p = principal_of(issuer, token, SKYLOOP_JWT_PRINCIPAL_CLAIM="email")
    assert p.name == "carol@example.com"
    with pytest.raises(UnauthorizedError, match="no 'email' claim"):
        principal_of(issuer, issuer.token("x"), SKYLOOP_JWT_PRINCIPAL_CLAIM="email")


def test_expired_token_is_refused_past_the_leeway(issuer: TestIssuer) -> None:
    now = int(time.time())
    # Within the bounded clock skew (60 s) it is still accepted...
    assert principal_of(issuer, issuer.token(exp=now - 30)).name == "alice"
    # ...beyond it, refused
    assert refused(issuer, issuer.token(exp=now - 120)) == "JWT has expired"
    # And a token without exp is refused
    assert "exp" in refused(issuer, issuer.token(exp=None))


def test_wrong_audience_and_wrong_issuer_are_refused(issuer: TestIssuer) -> None:
    assert refused(issuer, issuer.token(aud="another-app")) == "JWT audience is not this deployment"
    assert refused(issuer, issuer.token(aud=None)) == "JWT audience is not this deployment"
    assert "issuer" in refused(issuer, issuer.token(iss="https://evil.example.com"))
    # A Cognito access token names the app client in client_id instead of aud: accepted
    assert principal_of(issuer, issuer.token(aud=None, client_id=AUDIENCE)).name == "alice"


def test_unsigned_and_symmetric_tokens_are_refused(issuer: TestIssuer) -> None:
    claims = {"iss": issuer.issuer, "aud": AUDIENCE, "sub": "mallory", "exp": int(time.time()) + 300}

    def b64(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    # alg: none with an empty signature
    unsigned = f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(claims)}."
    assert refused(issuer, unsigned) == "JWT algorithm 'none' is not accepted"
    # HS256 "signed" with a guessable secret (the classic key-confusion attack)
    hmac = jwt.encode(
        claims, "secret-secret-secret-secret-1234", algorithm="HS256", headers={"kid": issuer.kid}
    )
    assert refused(issuer, hmac) == "JWT algorithm 'HS256' is not accepted"
    # A token signed by a key the issuer never published
    forged = TestIssuer()
    forged.kid = issuer.kid  # claims to be the issuer's key
    forged.keys = {issuer.kid: forged.keys[next(iter(forged.keys))]}
    assert "invalid JWT" in refused(issuer, forged.token())
    # Garbage
    assert "malformed" in refused(issuer, "a.b.c")


def test_a_rotated_key_is_picked_up_and_unknown_kids_refetch_at_most_once_per_cooldown(
    issuer: TestIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oidc, "JWKS_REFRESH_COOLDOWN_S", 0.5)
    assert principal_of(issuer, issuer.token()).name == "alice"
    # When the issuer rotates to a new key (the old one withdrawn) right away
    issuer.rotate(drop_old=True)
    # Then within the cooldown the new kid is not fetched yet (a flood of kids costs one fetch)
    assert "signing key not found" in refused(issuer, issuer.token("bob"))
    assert issuer.jwks_fetches == 1
    # And once it has passed, the new key is fetched and accepted, once
    time.sleep(0.6)
    assert principal_of(issuer, issuer.token("bob")).name == "bob"
    assert principal_of(issuer, issuer.token("carol")).name == "carol"
    assert issuer.jwks_fetches == 2


def test_an_unreachable_issuer_is_a_401_not_a_500(issuer: TestIssuer) -> None:
    token = issuer.token()
    issuer.__exit__(None, None, None)  # the issuer goes away before its keys were ever fetched
    assert "could not be fetched" in refused(issuer, token)


def test_scopes_come_from_the_scope_claim(issuer: TestIssuer) -> None:
    assert principal_of(issuer, issuer.token(scope="openid skyloop:admin")).is_admin
    reader = principal_of(issuer, issuer.token(scope="skyloop:read"))
    assert not reader.can_write
    assert principal_of(issuer, issuer.token(scp=["skyloop:read", "skyloop:write"])).can_write


def test_without_an_issuer_a_jwt_is_just_an_unknown_token(issuer: TestIssuer) -> None:
    with pytest.raises(UnauthorizedError, match="invalid or revoked token"):
        auth.authenticate(MemoryStore(), f"Bearer {issuer.token()}", Settings())
