"""Edge: one CloudFront distribution, the deployment's single HTTPS endpoint.

``/v1/sessions/*/stream`` and the OpenAI Agents API's stream paths
(``C.OPENAI_STREAM_PATH_PATTERNS``: the stream function hands their plain
requests on to the API function) go to the stream function URL, everything
else to the HTTP API. Nothing is cached; every method and viewer header except Host is
forwarded, so ``Authorization`` and ``Last-Event-ID`` reach the functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from constructs import Construct

from infra import constants as C
from infra.constructs._common import regional_name

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

# Origin Access Control signs CloudFront's request to the function URL in the Authorization
# header, replacing the viewer's. Keep the viewer's bearer token in a header of its own, and
# drop any value a viewer sent under that name so only CloudFront can set it.
COPY_AUTHORIZATION_JS = f"""\
function handler(event) {{
  var headers = event.request.headers;
  delete headers['{C.STREAM_AUTH_HEADER}'];
  if (headers.authorization) {{
    headers['{C.STREAM_AUTH_HEADER}'] = {{ value: headers.authorization.value }};
  }}
  return event.request;
}}
"""


class Edge(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api_domain_name: str,
        stream_url: lambda_.IFunctionUrl,
    ) -> None:
        super().__init__(scope, construct_id)
        api_origin = origins.HttpOrigin(
            api_domain_name,
            protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
            origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
            read_timeout=cdk.Duration.seconds(C.API_ORIGIN_READ_TIMEOUT_S),
        )
        # CloudFront names are global to the account: each carries the stack and its region.
        self.origin_access_control = cloudfront.FunctionUrlOriginAccessControl(
            self,
            "StreamAccess",
            origin_access_control_name=regional_name(self, C.OAC_NAME_PURPOSE, C.OAC_NAME_MAX_LENGTH),
            signing=cloudfront.Signing.SIGV4_ALWAYS,
        )
        stream_origin = origins.FunctionUrlOrigin.with_origin_access_control(
            stream_url,
            origin_access_control=self.origin_access_control,
            read_timeout=cdk.Duration.seconds(C.STREAM_ORIGIN_READ_TIMEOUT_S),
        )
        self.copy_authorization = cloudfront.Function(
            self,
            "StreamAuthorization",
            function_name=regional_name(self, C.EDGE_FUNCTION_NAME_PURPOSE, C.EDGE_FUNCTION_NAME_MAX_LENGTH),
            code=cloudfront.FunctionCode.from_inline(COPY_AUTHORIZATION_JS),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            comment=f"Copy the viewer's Authorization into {C.STREAM_AUTH_HEADER}",
        )
        uncached: dict[str, Any] = {
            "viewer_protocol_policy": cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
            "cache_policy": cloudfront.CachePolicy.CACHING_DISABLED,
            "origin_request_policy": cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            "compress": False,  # SSE frames must leave as they are written
        }
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment="skyloop: REST API and session streams",
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            default_behavior=cloudfront.BehaviorOptions(
                origin=api_origin,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
                **uncached,
            ),
            additional_behaviors={
                pattern: cloudfront.BehaviorOptions(
                    origin=stream_origin,
                    allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
                    function_associations=[
                        cloudfront.FunctionAssociation(
                            function=self.copy_authorization,
                            event_type=cloudfront.FunctionEventType.VIEWER_REQUEST,
                        )
                    ],
                    **uncached,
                )
                for pattern in (C.STREAM_PATH_PATTERN, *C.OPENAI_STREAM_PATH_PATTERNS)
            },
        )

    @property
    def endpoint_url(self) -> str:
        return f"https://{self.distribution.distribution_domain_name}"
