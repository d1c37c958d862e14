"""A local OIDC issuer for tests: RSA keys, a real JWKS endpoint over HTTP, and signed tokens.

It also runs the authorization-code flow with PKCE (S256) for a public client, as Cognito's
hosted UI does, without a login page: ``/authorize`` signs in :attr:`TestIssuer.user` at once
and redirects back with a code; ``/token`` checks the code's verifier and redirect URI and
returns an access token. The web console's browser test signs in through it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import Route

from tests.servers import UvicornThread

AUDIENCE = "skyloop-tests"


class TestIssuer:
    """Serves ``/.well-known/jwks.json`` with its current keys; counts fetches (the cache is checked)."""

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.jwks_fetches = 0
        self.user = "alice"  # who /authorize signs in
        self.scope = ""  # the access token's scope claim ("" leaves it out)
        self.codes: dict[str, dict[str, str]] = {}
        self.token_requests = 0
        self.rotate()
        routes = [
            Route("/.well-known/jwks.json", self._jwks),
            Route("/.well-known/openid-configuration", self._discovery),
            Route("/authorize", self._authorize),
            Route("/token", self._token, methods=["POST"]),
        ]
        # the browser calls discovery and /token from the console's origin, as it does Cognito's
        cors = Middleware(
            CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "POST"], allow_headers=["*"]
        )
        self._server = UvicornThread(Starlette(routes=routes, middleware=[cors]))

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

    async def _discovery(self, _: Any) -> JSONResponse:
        return JSONResponse(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/.well-known/jwks.json",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def _authorize(self, request: Any) -> Any:
        q = request.query_params
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256":
            return JSONResponse({"error": "unsupported_response_type"}, status_code=400)
        if q.get("client_id") != AUDIENCE or not q.get("code_challenge") or not q.get("redirect_uri"):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(16)
        self.codes[code] = {
            "challenge": q["code_challenge"],
            "redirect_uri": q["redirect_uri"],
            "client_id": q["client_id"],
        }
        return RedirectResponse(
            f"{q['redirect_uri']}?{urlencode({'code': code, 'state': q.get('state', '')})}"
        )

    async def _token(self, request: Any) -> JSONResponse:
        self.token_requests += 1
        form = await request.form()
        grant = self.codes.pop(str(form.get("code", "")), None)
        if grant is None or form.get("grant_type") != "authorization_code":
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        digest = hashlib.sha256(str(form.get("code_verifier", "")).encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != grant["challenge"]:
            return JSONResponse({"error": "invalid_grant", "error_description": "PKCE"}, status_code=400)
        if form.get("redirect_uri") != grant["redirect_uri"] or form.get("client_id") != grant["client_id"]:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        token = self.token(sub=self.user, scope=self.scope or None)
        return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": 300})

    def token(self, sub: str = "alice", **overrides: Any) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300, **overrides}
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, self.keys[self.kid], algorithm="RS256", headers={"kid": self.kid})
