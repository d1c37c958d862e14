"""API: an HTTP API sending every route to the API function (its resolver does the routing)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from constructs import Construct

from infra import constants as C
from infra.constructs._common import new_log_group

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_logs as logs

    from infra.config import StackConfig

# One JSON line per request; $context.requestId is required by API Gateway.
ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "requestTime": "$context.requestTime",
        "method": "$context.httpMethod",
        "path": "$context.path",
        "routeKey": "$context.routeKey",
        "status": "$context.status",
        "protocol": "$context.protocol",
        "responseLength": "$context.responseLength",
        "integrationLatency": "$context.integrationLatency",
        "integrationError": "$context.integrationErrorMessage",
    }
)


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogs:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(ACCESS_LOG_FORMAT)


def _cors(config: StackConfig) -> apigwv2.CorsPreflightOptions | None:
    """With ``corsOrigins``, API Gateway answers preflights itself and adds the CORS headers to
    every response (ignoring any the function sets); without it, no CORS at all.
    """
    if not config.cors_origins:
        return None
    return apigwv2.CorsPreflightOptions(
        allow_origins=list(config.cors_origins),
        allow_methods=[apigwv2.CorsHttpMethod(m) for m in C.CORS_API_METHODS],
        allow_headers=list(C.CORS_API_HEADERS),
        expose_headers=list(C.CORS_API_EXPOSE_HEADERS),
        max_age=cdk.Duration.seconds(C.CORS_MAX_AGE_S),
        allow_credentials=False,
    )


class HttpApi(Construct):
    """``$default`` route -> the API function; one auto-deployed ``$default`` stage with
    throttling and JSON access logs. CloudFront is the public entry point.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        config: StackConfig,
        jwt: tuple[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # jwtAuthorizerOnApi: the gateway checks the JWT (issuer, audience, signature, expiry) before
        # the function runs; bearer tokens then no longer reach the API. Preflights stay open.
        self.authorizer = (
            authorizers.HttpJwtAuthorizer(
                "Jwt",
                jwt_issuer=jwt[0],
                jwt_audience=[jwt[1]],
                identity_source=["$request.header.Authorization"],
            )
            if jwt
            else None
        )
        self.api = apigwv2.HttpApi(
            self,
            "Api",
            description="skyloop REST API (served through CloudFront)",
            create_default_stage=False,
            default_authorizer=self.authorizer,
            cors_preflight=_cors(config),
            default_integration=integrations.HttpLambdaIntegration(
                "Handler",
                handler,
                payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
            ),
        )
        self.access_logs = new_log_group(self, "AccessLogs", config)
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=C.API_THROTTLE_RATE_PER_S, burst_limit=C.API_THROTTLE_BURST
            ),
            access_log_settings=_AccessLogs(self.access_logs),
        )

    @property
    def domain_name(self) -> str:
        """``<api-id>.execute-api.<region>.amazonaws.com``: the CloudFront origin."""
        return f"{self.api.api_id}.execute-api.{self.api.stack.region}.{self.api.stack.url_suffix}"
