"""OIDC sign-in: a JWT from the configured issuer is a bearer token whose principal is one claim.

Verified with PyJWT against the issuer's JWKS (fetched once, kept five
minutes; an unknown ``kid`` refetches the set, at most once per
``JWKS_REFRESH_COOLDOWN_S``, so a rotated key works within seconds and a flood
of made-up kids cannot hammer the issuer).
Only asymmetric algorithms are accepted (``none`` and HMAC never are), the
issuer and audience must match, ``exp`` is required and clock skew is bounded
by ``SKYLOOP_JWT_LEEWAY_S``. Cognito access tokens carry ``client_id``
instead of ``aud``; either may name the audience, as API Gateway's JWT
authorizer also accepts.

Scopes come from the token's ``scope`` (or ``scp``) claim: ``skyloop:admin``
grants admin, ``skyloop:read`` without ``skyloop:write`` is read-only, and a
token naming neither may read and write its principal's own resources.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from skyloop.errors import UnauthorizedError
from skyloop.principals import Principal, Scope

if TYPE_CHECKING:
    from skyloop.settings import Settings

ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "EdDSA"]
JWKS_LIFESPAN_S = 300
JWKS_TIMEOUT_S = 5
JWKS_REFRESH_COOLDOWN_S = 10.0


class JwtVerifier:
    """Checks tokens of one issuer for one audience."""

    def __init__(
        self, issuer: str, audience: str, jwks_url: str, *, claim: str = "sub", leeway_s: int = 60
    ) -> None:
        import jwt  # deferred: only a deployment with an issuer pays for PyJWT and cryptography

        self.issuer = issuer
        self.audience = audience
        self.claim = claim
        self.leeway_s = leeway_s
        self._jwks = jwt.PyJWKClient(
            jwks_url,
            cache_jwk_set=True,
            lifespan=JWKS_LIFESPAN_S,
            timeout=JWKS_TIMEOUT_S,
            cooldown_duration=JWKS_REFRESH_COOLDOWN_S,
        )

    def claims(self, token: str) -> dict[str, Any]:
        """The token's verified claims; ``UnauthorizedError`` saying why it is refused."""
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise UnauthorizedError(f"malformed JWT: {exc}") from None
        if header.get("alg") not in ALGORITHMS:
            raise UnauthorizedError(f"JWT algorithm '{header.get('alg')}' is not accepted")
        try:
            key = self._jwks.get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError as exc:
            raise UnauthorizedError(f"the issuer's keys could not be fetched: {exc}") from None
        except jwt.PyJWTError as exc:
            raise UnauthorizedError(f"JWT signing key not found at the issuer: {exc}") from None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss"], "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise UnauthorizedError("JWT has expired") from None
        except jwt.InvalidIssuerError:
            raise UnauthorizedError("JWT issuer is not the one this deployment trusts") from None
        except jwt.PyJWTError as exc:
            raise UnauthorizedError(f"invalid JWT: {exc}") from None
        audiences = claims.get("aud")
        named = {audiences} if isinstance(audiences, str) else set(audiences or [])
        if self.audience not in named and claims.get("client_id") != self.audience:
            raise UnauthorizedError("JWT audience is not this deployment")
        return claims

    def principal(self, token: str) -> Principal:
        claims = self.claims(token)
        name = claims.get(self.claim)
        if not isinstance(name, str) or not name:
            raise UnauthorizedError(f"JWT has no '{self.claim}' claim to name its principal")
        return Principal(name=name, scopes=scopes_of(claims), via="jwt")


def scopes_of(claims: dict[str, Any]) -> frozenset[Scope]:
    raw = claims.get("scope", claims.get("scp", ""))
    granted = set(raw.split() if isinstance(raw, str) else raw or [])
    if "skyloop:admin" in granted:
        return frozenset({"read", "write", "admin"})
    if "skyloop:read" in granted and "skyloop:write" not in granted:
        return frozenset({"read"})
    return frozenset({"read", "write"})


def verifier(settings: Settings) -> JwtVerifier:
    if not settings.jwt_issuer or not settings.jwt_audience:
        raise UnauthorizedError("this deployment accepts no JWTs (no issuer and audience configured)")
    issuer = settings.jwt_issuer.rstrip("/")
    jwks = settings.jwt_jwks_url or f"{issuer}/.well-known/jwks.json"
    return _verifier(
        settings.jwt_issuer, settings.jwt_audience, jwks, settings.jwt_principal_claim, settings.jwt_leeway_s
    )


@lru_cache(maxsize=4)
def _verifier(issuer: str, audience: str, jwks_url: str, claim: str, leeway_s: int) -> JwtVerifier:
    return JwtVerifier(issuer, audience, jwks_url, claim=claim, leeway_s=leeway_s)
