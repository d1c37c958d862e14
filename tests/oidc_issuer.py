"""A local OIDC issuer for tests: RSA keys, a real JWKS endpoint over HTTP, and signed tokens."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.servers import UvicornThread

AUDIENCE = "skyloop-tests"


class TestIssuer:
    """Serves ``/.well-known/jwks.json`` with its current keys; counts fetches (the cache is checked)."""

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.jwks_fetches = 0
        self.rotate()
        self._server = UvicornThread(Starlette(routes=[Route("/.well-known/jwks.json", self._jwks)]))

    def __enter__(self) -> TestIssuer:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)

    @property
    def issuer(self) -> str:
        return self._server.url

    def rotate(self, *, drop_old: bool = False) -> str:
        """A new signing key (the newest signs from now on); returns its kid."""
        kid = uuid.uuid4().hex[:8]
        if drop_old:
            self.keys.clear()
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = kid
        return kid

    async def _jwks(self, _: Any) -> JSONResponse:
        self.jwks_fetches += 1
        keys = []
        for kid, key in self.keys.items():
            jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
            keys.append({**jwk, "kid": kid, "alg": "RS256", "use": "sig"})
        return JSONResponse({"keys": keys})

    def token(self, sub: str = "alice", **overrides: Any) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300, **overrides}
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, self.keys[self.kid], algorithm="RS256", headers={"kid": self.kid})
