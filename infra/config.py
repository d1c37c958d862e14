"""Deployment switches read from CDK context (``cdk.json`` or ``-c key=value``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra import constants as C

if TYPE_CHECKING:
    from constructs import Node


def _truthy(value: object) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


# scheme://host[:port], as a browser sends it in Origin (no path, no trailing slash), or "*".
_ORIGIN = re.compile(r"^https?://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$")


def parse_origins(value: object) -> tuple[str, ...]:
    """``corsOrigins``: a comma-separated string (``-c``) or a JSON list (``cdk.json``)."""
    if value is None or value is False:
        return ()
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    origins = tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))
    bad = [o for o in origins if o != "*" and not _ORIGIN.match(o)]
    if bad:
        raise ValueError(
            f"{C.CTX_CORS_ORIGINS}: not an origin (scheme://host[:port], or *): {', '.join(bad)}"
        )
    return origins


def parse_list(value: object) -> tuple[str, ...]:
    """A list from context: a JSON list (``cdk.json``, or ``-c key='["a","b"]'``) or a comma-separated string."""
    if value is None or value is False:
        return ()
    if isinstance(value, str) and value.strip().startswith("["):
        value = json.loads(value)
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))


# Foundation models, inference profiles (cross-region ones too), imported/custom and provisioned models.
_BEDROCK_ARN = re.compile(
    r"^arn:aws[a-z-]*:bedrock:[a-z0-9-]*:[0-9]{0,12}:"
    r"(foundation-model|inference-profile|application-inference-profile|custom-model|imported-model|"
    r"provisioned-model)/[A-Za-z0-9._:/-]+$"
)
# A function, optionally with a version or alias: exactly what the turn machine may invoke.
_LAMBDA_ARN = re.compile(
    r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]+)?$"
)
_LAYER_ARN = re.compile(r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]{1,140}:[0-9]+$")
_ISSUER = re.compile(r"^https://[^\s/]+(/[^\s]*)?$")


def _arns(key: str, value: object, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
    arns = parse_list(value)
    bad = [a for a in arns if "*" in a or "?" in a or not pattern.match(a)]
    if bad:
        raise ValueError(f"{key}: not {what} (no wildcards): {', '.join(bad)}")
    return arns


def _positive(key: str, value: object) -> int | None:
    if value is None or str(value).strip() == "":
        return None
    number = int(str(value))
    if number < 1:
        raise ValueError(f"{key}: must be a positive integer, got {value}")
    return number


def _reconcile_minutes(value: object) -> int:
    if value is None:
        return C.RECONCILE_DEFAULT_MINUTES
    minutes = int(str(value))
    if not C.RECONCILE_MIN_MINUTES <= minutes <= C.RECONCILE_MAX_MINUTES:
        raise ValueError(
            f"{C.CTX_RECONCILE_MINUTES}: between {C.RECONCILE_MIN_MINUTES} and "
            f"{C.RECONCILE_MAX_MINUTES} minutes, got {minutes}"
        )
    return minutes


@dataclass(frozen=True)
class StackConfig:
    """``prod``: keep data on delete (RETAIN + deletion protection); dev stacks tear down cleanly.

    ``lwa_layer_version``: the Lambda Web Adapter layer version (its releases page lists one per
    region and architecture); ``lwa_layer_arn``: a layer to use instead, where AWS publishes none.
    ``stream_concurrency``: reserved concurrency of the SSE stream function, so streams held open for
    up to 14 minutes cannot take the concurrency the API and turn functions need (unset: no cap). ``alarm_topic_arn``: optional SNS topic the alarms notify.
    ``powertools_tracer``: also run Powertools' Tracer (boto3 subsegments) on top of Lambda's
    active X-Ray tracing; off by default because it adds about half a second of cold start.
    ``cors_origins``: browser origins allowed to call the API and the stream (CORS on the HTTP
    API and on the stream function URL); empty (the default) turns CORS off.
    ``reconcile_minutes``: the reconciler's schedule. ``bedrock_model_arns``: the Bedrock models
    and inference profiles ``call_model`` may invoke (none by default). ``lambda_tool_arns``: the
    Lambda tools the turn machine may invoke (none by default). ``cognito`` creates a user pool
    and app client; ``jwt_issuer``/``jwt_audience`` trust an existing OIDC issuer instead
    (``jwt_jwks_url`` optional); ``jwt_authorizer_on_api`` also makes the HTTP API require a JWT;
    ``console_client_id`` (with ``jwt_issuer``) lets the web console sign in there (code + PKCE).
    ``quota_*``: per-principal quotas (unset: unlimited). ``outbound_allow``: hosts/CIDRs outbound
    URLs may reach even when private.
    """

    prod: bool = False
    lwa_layer_version: int = C.LWA_DEFAULT_LAYER_VERSION
    lwa_layer_arn: str | None = None
    stream_concurrency: int | None = None
    alarm_topic_arn: str | None = None
    powertools_tracer: bool = False
    cors_origins: tuple[str, ...] = ()
    reconcile_minutes: int = C.RECONCILE_DEFAULT_MINUTES
    bedrock_model_arns: tuple[str, ...] = ()
    lambda_tool_arns: tuple[str, ...] = ()
    cognito: bool = False
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_jwks_url: str | None = None
    jwt_authorizer_on_api: bool = False
    console_client_id: str | None = None
    quota_running_turns: int | None = None
    quota_turns_per_minute: int | None = None
    quota_sessions: int | None = None
    quota_scheduled_tasks: int | None = None
    quota_scheduled_runs_per_hour: int | None = None
    outbound_allow: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.cognito and self.jwt_issuer:
            raise ValueError(f"{C.CTX_COGNITO} and {C.CTX_JWT_ISSUER}: choose one source of JWTs")
        if bool(self.jwt_issuer) != bool(self.jwt_audience):
            raise ValueError(f"{C.CTX_JWT_ISSUER} and {C.CTX_JWT_AUDIENCE} go together")
        if self.jwt_issuer and not _ISSUER.match(self.jwt_issuer):
            raise ValueError(f"{C.CTX_JWT_ISSUER}: an https:// URL, got {self.jwt_issuer}")
        if self.jwt_jwks_url and not self.jwt_issuer:
            raise ValueError(f"{C.CTX_JWT_JWKS_URL} needs {C.CTX_JWT_ISSUER}")
        if self.lwa_layer_arn and not _LAYER_ARN.match(self.lwa_layer_arn):
            raise ValueError(
                f"{C.CTX_LWA_LAYER_ARN}: a Lambda layer version ARN "
                f"(arn:<partition>:lambda:<region>:<account>:layer:<name>:<version>), got {self.lwa_layer_arn}"
            )
        if self.console_client_id and not self.jwt_issuer:
            raise ValueError(
                f"{C.CTX_CONSOLE_CLIENT_ID} needs {C.CTX_JWT_ISSUER}: the console signs in at that issuer "
                "(the stack's Cognito app client has no hosted UI)"
            )
        if self.jwt_authorizer_on_api and not (self.cognito or self.jwt_issuer):
            raise ValueError(f"{C.CTX_JWT_AUTHORIZER_ON_API} needs {C.CTX_COGNITO} or {C.CTX_JWT_ISSUER}")

    @property
    def jwt_enabled(self) -> bool:
        return self.cognito or self.jwt_issuer is not None

    @classmethod
    def from_context(cls, node: Node) -> StackConfig:
        version = node.try_get_context(C.CTX_LWA_LAYER_VERSION)
        return cls(
            prod=_truthy(node.try_get_context(C.CTX_PROD) or False),
            lwa_layer_version=int(version) if version is not None else C.LWA_DEFAULT_LAYER_VERSION,
            lwa_layer_arn=node.try_get_context(C.CTX_LWA_LAYER_ARN) or None,
            stream_concurrency=_positive(
                C.CTX_STREAM_CONCURRENCY, node.try_get_context(C.CTX_STREAM_CONCURRENCY)
            ),
            alarm_topic_arn=node.try_get_context(C.CTX_ALARM_TOPIC_ARN) or None,
            powertools_tracer=_truthy(node.try_get_context(C.CTX_POWERTOOLS_TRACER) or False),
            cors_origins=parse_origins(node.try_get_context(C.CTX_CORS_ORIGINS)),
            reconcile_minutes=_reconcile_minutes(node.try_get_context(C.CTX_RECONCILE_MINUTES)),
            bedrock_model_arns=_arns(
                C.CTX_BEDROCK_MODEL_ARNS,
                node.try_get_context(C.CTX_BEDROCK_MODEL_ARNS),
                _BEDROCK_ARN,
                "a Bedrock model or inference profile ARN",
            ),
            lambda_tool_arns=_arns(
                C.CTX_LAMBDA_TOOL_ARNS,
                node.try_get_context(C.CTX_LAMBDA_TOOL_ARNS),
                _LAMBDA_ARN,
                "a Lambda function ARN",
            ),
            cognito=_truthy(node.try_get_context(C.CTX_COGNITO) or False),
            jwt_issuer=node.try_get_context(C.CTX_JWT_ISSUER) or None,
            jwt_audience=node.try_get_context(C.CTX_JWT_AUDIENCE) or None,
            console_client_id=node.try_get_context(C.CTX_CONSOLE_CLIENT_ID) or None,
            jwt_jwks_url=node.try_get_context(C.CTX_JWT_JWKS_URL) or None,
            jwt_authorizer_on_api=_truthy(node.try_get_context(C.CTX_JWT_AUTHORIZER_ON_API) or False),
            quota_running_turns=_positive(
                C.CTX_QUOTA_RUNNING_TURNS, node.try_get_context(C.CTX_QUOTA_RUNNING_TURNS)
            ),
            quota_turns_per_minute=_positive(
                C.CTX_QUOTA_TURNS_PER_MINUTE, node.try_get_context(C.CTX_QUOTA_TURNS_PER_MINUTE)
            ),
            quota_sessions=_positive(C.CTX_QUOTA_SESSIONS, node.try_get_context(C.CTX_QUOTA_SESSIONS)),
            quota_scheduled_tasks=_positive(
                C.CTX_QUOTA_SCHEDULED_TASKS, node.try_get_context(C.CTX_QUOTA_SCHEDULED_TASKS)
            ),
            quota_scheduled_runs_per_hour=_positive(
                C.CTX_QUOTA_SCHEDULED_RUNS_PER_HOUR, node.try_get_context(C.CTX_QUOTA_SCHEDULED_RUNS_PER_HOUR)
            ),
            outbound_allow=parse_list(node.try_get_context(C.CTX_OUTBOUND_ALLOW)),
        )
