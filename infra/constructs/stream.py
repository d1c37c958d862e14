"""Stream: the SSE function behind the Lambda Web Adapter, on a streaming function URL."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import constants as C

if TYPE_CHECKING:
    from infra.config import StackConfig


def partition_of(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


class UnknownAdapterRegionError(ValueError):
    """The stack's region has no published Lambda Web Adapter layer (and no lwaLayerArn was given)."""


def lwa_layer_arn(scope: Construct, version: int, override: str | None = None) -> str:
    """The Lambda Web Adapter layer for arm64 in the stack's region, from the account that publishes it there.

    A stack whose region is known at synth gets its ARN, or synth stops with
    what to do when AWS publishes no layer there (GovCloud, a region newer
    than ``C.LWA_LAYER_ACCOUNTS``). A region-agnostic stack looks the account
    up in a mapping and carries a CloudFormation rule, so deploying it to
    such a region fails at once with the same advice instead of at the
    function's creation. ``override`` (``-c lwaLayerArn``) is used as given.
    """
    if override:
        return override
    stack = cdk.Stack.of(scope)
    name = f"{C.LWA_LAYER_NAME_ARM64}:{version}"
    advice = (
        "the Lambda Web Adapter layer (the stream function's) is not published in {region}; copy "
        "LambdaAdapterLayerArm64 into your account there and pass -c lwaLayerArn=<its version ARN> "
        "(docs/deploy.md, 'Regions')"
    )
    if not cdk.Token.is_unresolved(stack.region):
        account = C.LWA_LAYER_ACCOUNTS.get(stack.region)
        if account is None:
            raise UnknownAdapterRegionError(advice.format(region=stack.region))
        return f"arn:{partition_of(stack.region)}:lambda:{stack.region}:{account}:layer:{name}"
    mapping = cdk.CfnMapping(
        scope,
        "WebAdapterAccounts",
        mapping={region: {"account": account} for region, account in C.LWA_LAYER_ACCOUNTS.items()},
    )
    cdk.CfnRule(
        scope,
        "WebAdapterRegion",
        assertions=[
            cdk.CfnRuleAssertion(
                assert_=cdk.Fn.condition_contains(sorted(C.LWA_LAYER_ACCOUNTS), cdk.Aws.REGION),
                assert_description=advice.format(region="this region"),
            )
        ],
    )
    account = mapping.find_in_map(cdk.Aws.REGION, "account")
    return f"arn:{cdk.Aws.PARTITION}:lambda:{cdk.Aws.REGION}:{account}:layer:{name}"


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


STREAM_CONCURRENCY_WARNING = (
    "the SSE stream function has no reserved concurrency: each open stream holds one execution for up "
    "to 14 minutes, so enough open streams can take the account's concurrency from the API and turn "
    "functions (throttled requests and turns). Set -c streamConcurrency=N (docs/deploy.md, "
    "'Concurrency'); it is not set by default because accounts with a small concurrency quota cannot "
    "reserve any. The SDK and console watch idle sessions over the live channel instead."
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
            self, "WebAdapter", lwa_layer_arn(self, config.lwa_layer_version, config.lwa_layer_arn)
        )
        function.add_layers(self.adapter)
        for key, value in {
            "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
            "AWS_LWA_INVOKE_MODE": "response_stream",  # must match the URL's invoke mode
            "AWS_LWA_PORT": str(C.LWA_PORT),
            "AWS_LWA_READINESS_CHECK_PATH": C.LWA_READINESS_CHECK_PATH,
        }.items():
            function.add_environment(key, value)
        self._cap_concurrency(function, config)
        self.url = function.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.AWS_IAM,
            invoke_mode=lambda_.InvokeMode.RESPONSE_STREAM,
            cors=_cors(config),
        )

    def _cap_concurrency(self, function: lambda_.Function, config: StackConfig) -> None:
        """``streamConcurrency``: at most that many open streams; the rest of the account's concurrency
        stays for the functions that run requests and turns."""
        if config.stream_concurrency is None:
            cdk.Annotations.of(function).add_warning_v2(
                "skyloop:streamConcurrency", STREAM_CONCURRENCY_WARNING
            )
            return
        cfn = function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        cfn.reserved_concurrent_executions = config.stream_concurrency
