"""Sign-in: a Cognito user pool and app client (``cognito``), or an existing OIDC issuer (``jwtIssuer``).

Either way the API and the stream functions verify the JWTs themselves
(``skyloop.oidc``: issuer, audience, signature against the issuer's JWKS), so
bearer tokens from ``skyloop token create`` keep working beside them. With
``jwtAuthorizerOnApi`` the HTTP API also checks every request's JWT before the
function runs: then only JWTs reach the API (the stream is not behind the HTTP
API and keeps its own check).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_cognito as cognito
from constructs import Construct

from infra.constructs._common import removal_policy

if TYPE_CHECKING:
    from infra.config import StackConfig


class SignIn(Construct):
    """The issuer and audience every JWT is checked against; ``user_pool`` only with ``cognito``."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig) -> None:
        super().__init__(scope, construct_id)
        self.user_pool: cognito.UserPool | None = None
        self.client: cognito.UserPoolClient | None = None
        self.jwks_url = config.jwt_jwks_url
        if config.cognito:
            self.user_pool = cognito.UserPool(
                self,
                "UserPool",
                self_sign_up_enabled=False,  # an operator invites users
                sign_in_aliases=cognito.SignInAliases(email=True),
                password_policy=cognito.PasswordPolicy(
                    min_length=12,
                    require_lowercase=True,
                    require_uppercase=True,
                    require_digits=True,
                    require_symbols=True,
                ),
                mfa=cognito.Mfa.REQUIRED,
                mfa_second_factor=cognito.MfaSecondFactor(sms=False, otp=True),
                account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
                feature_plan=cognito.FeaturePlan.ESSENTIALS,
                removal_policy=removal_policy(config),
            )
            self.client = self.user_pool.add_client(
                "Client",
                auth_flows=cognito.AuthFlow(user_srp=True),
                generate_secret=False,  # a public client: the terminal and browser clients
                disable_o_auth=True,  # no hosted UI: tokens come from InitiateAuth (SRP)
                prevent_user_existence_errors=True,
                id_token_validity=cdk.Duration.hours(1),
                access_token_validity=cdk.Duration.hours(1),
                refresh_token_validity=cdk.Duration.days(30),
            )
            # Cognito's ID tokens carry the app client id as "aud" (access tokens do not).
            # The tokens' "iss", as CDK's own HttpUserPoolAuthorizer builds it (the pool's
            # ProviderURL attribute has no scheme).
            self.issuer: str | None = (
                f"https://cognito-idp.{cdk.Aws.REGION}.{cdk.Aws.URL_SUFFIX}/{self.user_pool.user_pool_id}"
            )
            self.audience: str | None = self.client.user_pool_client_id
        else:
            self.issuer = config.jwt_issuer
            self.audience = config.jwt_audience

    @property
    def enabled(self) -> bool:
        return self.issuer is not None

    def environment(self) -> dict[str, str]:
        """``SKYLOOP_JWT_*`` for the functions that accept JWTs (skyloop.settings)."""
        if self.issuer is None or self.audience is None:
            return {}
        env = {"SKYLOOP_JWT_ISSUER": self.issuer, "SKYLOOP_JWT_AUDIENCE": self.audience}
        if self.jwks_url:
            env["SKYLOOP_JWT_JWKS_URL"] = self.jwks_url
        return env
