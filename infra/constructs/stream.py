"""Stream: the SSE function behind the Lambda Web Adapter, on a streaming function URL."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import constants as C

if TYPE_CHECKING:
    from infra.config import StackConfig


def lwa_layer_arn(stack: cdk.Stack, version: int) -> str:
    """The Lambda Web Adapter layer for arm64 in the stack's region (published by AWS)."""
    return (
        f"arn:{stack.partition}:lambda:{stack.region}:{C.LWA_LAYER_ACCOUNT}:"
        f"layer:{C.LWA_LAYER_NAME_ARM64}:{version}"
    )


def _cors(config: StackConfig) -> lambda_.FunctionUrlCorsOptions | None:
    """With ``corsOrigins``, the function URL answers preflights and adds the CORS headers
    (CloudFront forwards Origin and lets OPTIONS through); without it, no CORS at all.
    """
    if not config.cors_origins:
        return None
    return lambda_.FunctionUrlCorsOptions(
        allowed_origins=list(config.cors_origins),
        allowed_methods=[lambda_.HttpMethod(m) for m in C.CORS_STREAM_METHODS],
        allowed_headers=list(C.CORS_STREAM_HEADERS),
        max_age=cdk.Duration.seconds(C.CORS_MAX_AGE_S),
        allow_credentials=False,
    )


class Stream(Construct):
    """Python has no native response streaming: ``run.sh`` starts uvicorn with the ASGI app and
    the adapter (``/opt/bootstrap``) relays it in ``response_stream`` mode.

    The URL uses ``AWS_IAM`` auth and is only reachable through CloudFront
    (Origin Access Control signs CloudFront's requests; see ``edge.py``).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, function: lambda_.Function, config: StackConfig
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = function
        self.adapter = lambda_.LayerVersion.from_layer_version_arn(
            self, "WebAdapter", lwa_layer_arn(cdk.Stack.of(self), config.lwa_layer_version)
        )
        function.add_layers(self.adapter)
        for key, value in {
            "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
            "AWS_LWA_INVOKE_MODE": "response_stream",  # must match the URL's invoke mode
            "AWS_LWA_PORT": str(C.LWA_PORT),
            "AWS_LWA_READINESS_CHECK_PATH": C.LWA_READINESS_CHECK_PATH,
        }.items():
            function.add_environment(key, value)
        self.url = function.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.AWS_IAM,
            invoke_mode=lambda_.InvokeMode.RESPONSE_STREAM,
            cors=_cors(config),
        )
