"""Deployment switches read from CDK context (``cdk.json`` or ``-c key=value``)."""

from __future__ import annotations

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


@dataclass(frozen=True)
class StackConfig:
    """``prod``: keep data on delete (RETAIN + deletion protection); dev stacks tear down cleanly.

    ``lwa_layer_version``: the Lambda Web Adapter layer version (its releases page lists one per
    region and architecture). ``alarm_topic_arn``: optional SNS topic the alarms notify.
    ``powertools_tracer``: also run Powertools' Tracer (boto3 subsegments) on top of Lambda's
    active X-Ray tracing; off by default because it adds about half a second of cold start.
    ``cors_origins``: browser origins allowed to call the API and the stream (CORS on the HTTP
    API and on the stream function URL); empty (the default) turns CORS off.
    """

    prod: bool = False
    lwa_layer_version: int = C.LWA_DEFAULT_LAYER_VERSION
    alarm_topic_arn: str | None = None
    powertools_tracer: bool = False
    cors_origins: tuple[str, ...] = ()

    @classmethod
    def from_context(cls, node: Node) -> StackConfig:
        version = node.try_get_context(C.CTX_LWA_LAYER_VERSION)
        return cls(
            prod=_truthy(node.try_get_context(C.CTX_PROD) or False),
            lwa_layer_version=int(version) if version is not None else C.LWA_DEFAULT_LAYER_VERSION,
            alarm_topic_arn=node.try_get_context(C.CTX_ALARM_TOPIC_ARN) or None,
            powertools_tracer=_truthy(node.try_get_context(C.CTX_POWERTOOLS_TRACER) or False),
            cors_origins=parse_origins(node.try_get_context(C.CTX_CORS_ORIGINS)),
        )
