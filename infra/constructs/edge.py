"""Edge: one CloudFront distribution, the deployment's single HTTPS endpoint.

``/v1/sessions/*/stream`` and the stream paths of OpenAI's Agents API and Claude Managed
Agents (``C.COMPAT_STREAM_PATH_PATTERNS``) go to the stream function URL; ``/v1/*``,
``/openai/*``, ``/anthropic/*``, ``/api/*``, ``/health`` and ``/openapi.json`` to the HTTP API. Those
are uncached, with every method and viewer header except Host forwarded (so
``Authorization`` and ``Last-Event-ID`` reach the functions). Every other path is the
web console's: its S3 bucket, read through Origin Access Control, cached, with security
headers; a viewer-request function turns client routes (paths without a file
extension) into ``/index.html``. One origin for the console and the API: no CORS.

The function URL takes no request body. Origin Access Control signs CloudFront's
request to it, and Lambda refuses a signed request whose body the viewer did not hash
(``x-amz-content-sha256``), which no client sends: so the stream behaviours'
viewer-request function sends every method but ``C.STREAM_ORIGIN_METHODS`` to the
API's origin (``cf.selectRequestOriginById``), and a create with ``stream: true`` is
answered by the API with ``303 See Other`` to the session's events stream
(``skyloop.openai_compat.service``). ``infra.checks.routing`` walks every route of
every contract through the synthesized behaviours and these functions to hold it.
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
    from aws_cdk import aws_s3 as s3

# The stream behaviours' viewer-request function. A request with a body (any method but
# C.STREAM_ORIGIN_METHODS) goes to the API's origin: the function URL behind Origin Access Control
# cannot take it. For the rest: Origin Access Control signs CloudFront's request to the function URL
# in the Authorization header, replacing the viewer's, so the viewer's bearer token is kept in a
# header of its own; any value a viewer sent under that name is dropped, so only CloudFront sets it.
STREAM_VIEWER_REQUEST_JS = f"""\
import cf from 'cloudfront';

var STREAM_METHODS = {list(C.STREAM_ORIGIN_METHODS)!r};

function handler(event) {{
  var request = event.request;
  var headers = request.headers;
  delete headers['{C.STREAM_AUTH_HEADER}'];
  if (STREAM_METHODS.indexOf(request.method) === -1) {{
    cf.selectRequestOriginById('{C.API_ORIGIN_ID}');
    return request;
  }}
  if (headers.authorization) {{
    headers['{C.STREAM_AUTH_HEADER}'] = {{ value: headers.authorization.value }};
  }}
  return request;
}}
"""

# The console is a single-page app: /sessions/<id>, /inbox, ... are client routes that get
# index.html; a path whose last segment has a dot is a file (assets/…, prices.json).
CONSOLE_ROUTES_JS = f"""\
function handler(event) {{
  var request = event.request;
  var last = request.uri.substring(request.uri.lastIndexOf('/') + 1);
  if (last.indexOf('.') === -1) {{
    request.uri = '/{C.CONSOLE_INDEX}';
  }}
  return request;
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
        console_bucket: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        api_origin = origins.HttpOrigin(
            api_domain_name,
            protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
            origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
            read_timeout=cdk.Duration.seconds(C.API_ORIGIN_READ_TIMEOUT_S),
            origin_id=C.API_ORIGIN_ID,  # named: the stream behaviours' function selects it by this id
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
            origin_id=C.STREAM_ORIGIN_ID,
        )
        self.copy_authorization = cloudfront.Function(
            self,
            "StreamAuthorization",
            function_name=regional_name(self, C.EDGE_FUNCTION_NAME_PURPOSE, C.EDGE_FUNCTION_NAME_MAX_LENGTH),
            code=cloudfront.FunctionCode.from_inline(STREAM_VIEWER_REQUEST_JS),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            comment=f"Bodies to the API; the viewer's Authorization kept in {C.STREAM_AUTH_HEADER}",
        )
        console_origin = origins.S3BucketOrigin.with_origin_access_control(
            console_bucket,
            origin_access_control=cloudfront.S3OriginAccessControl(
                self,
                "ConsoleAccess",
                origin_access_control_name=regional_name(
                    self, C.CONSOLE_OAC_NAME_PURPOSE, C.OAC_NAME_MAX_LENGTH
                ),
                signing=cloudfront.Signing.SIGV4_ALWAYS,
            ),
            origin_id=C.CONSOLE_ORIGIN_ID,
        )
        self.console_routes = cloudfront.Function(
            self,
            "ConsoleRoutes",
            function_name=regional_name(
                self, C.CONSOLE_FUNCTION_NAME_PURPOSE, C.EDGE_FUNCTION_NAME_MAX_LENGTH
            ),
            code=cloudfront.FunctionCode.from_inline(CONSOLE_ROUTES_JS),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            comment="Client routes of the web console get index.html",
        )
        security = cloudfront.ResponseSecurityHeadersBehavior(
            content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                content_security_policy=C.CONSOLE_CONTENT_SECURITY_POLICY, override=True
            ),
            content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
            frame_options=cloudfront.ResponseHeadersFrameOptions(
                frame_option=cloudfront.HeadersFrameOption.DENY, override=True
            ),
            referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True
            ),
            strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                access_control_max_age=cdk.Duration.days(365), include_subdomains=True, override=True
            ),
        )
        self.console_headers = cloudfront.ResponseHeadersPolicy(
            self,
            "ConsoleHeaders",
            response_headers_policy_name=regional_name(
                self, C.CONSOLE_HEADERS_NAME_PURPOSE, C.CONSOLE_HEADERS_NAME_MAX_LENGTH
            ),
            comment="The web console: its own scripts only, never framed",
            security_headers_behavior=security,
        )
        # Vite names these by content: a year in every cache (the bucket stores them no-cache)
        self.asset_headers = cloudfront.ResponseHeadersPolicy(
            self,
            "ConsoleAssetHeaders",
            response_headers_policy_name=regional_name(
                self, C.CONSOLE_ASSET_HEADERS_NAME_PURPOSE, C.CONSOLE_HEADERS_NAME_MAX_LENGTH
            ),
            comment="The web console's content-hashed files: immutable",
            security_headers_behavior=security,
            custom_headers_behavior=cloudfront.ResponseCustomHeadersBehavior(
                custom_headers=[
                    cloudfront.ResponseCustomHeader(
                        header="Cache-Control", value=C.CONSOLE_ASSETS_CACHE_CONTROL, override=True
                    )
                ]
            ),
        )
        console_cached: dict[str, Any] = {
            "origin": console_origin,
            "allowed_methods": cloudfront.AllowedMethods.ALLOW_GET_HEAD,
            "viewer_protocol_policy": cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
            "cache_policy": cloudfront.CachePolicy.CACHING_OPTIMIZED,
            "compress": True,
        }
        uncached: dict[str, Any] = {
            "viewer_protocol_policy": cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
            "cache_policy": cloudfront.CachePolicy.CACHING_DISABLED,
            "origin_request_policy": cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            "compress": False,  # SSE frames must leave as they are written
        }
        api_behavior = cloudfront.BehaviorOptions(
            origin=api_origin, allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL, **uncached
        )
        stream_behavior = cloudfront.BehaviorOptions(
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
        # First match wins: the stream patterns before /v1/* and /openai/*, then the API's paths,
        # then the console's hashed assets; everything else is the console (the default).
        behaviors: dict[str, cloudfront.BehaviorOptions] = {
            **dict.fromkeys((C.STREAM_PATH_PATTERN, *C.COMPAT_STREAM_PATH_PATTERNS), stream_behavior),
            **dict.fromkeys(C.API_PATH_PATTERNS, api_behavior),
            C.CONSOLE_ASSETS_PATH_PATTERN: cloudfront.BehaviorOptions(
                response_headers_policy=self.asset_headers, **console_cached
            ),
        }
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment="skyloop: web console, REST API and session streams",
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            default_root_object=C.CONSOLE_INDEX,
            default_behavior=cloudfront.BehaviorOptions(
                response_headers_policy=self.console_headers,
                **console_cached,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=self.console_routes,
                        event_type=cloudfront.FunctionEventType.VIEWER_REQUEST,
                    )
                ],
            ),
            additional_behaviors=behaviors,
        )

    @property
    def endpoint_url(self) -> str:
        return f"https://{self.distribution.distribution_domain_name}"
