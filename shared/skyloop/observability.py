"""Powertools logger, tracer and metrics, configured by environment, created once per container.

``POWERTOOLS_SERVICE_NAME``, ``POWERTOOLS_METRICS_NAMESPACE``, ``POWERTOOLS_LOG_LEVEL``,
``POWERTOOLS_TRACE_DISABLED`` and ``POWERTOOLS_METRICS_DISABLED`` come from the
function's environment (the CDK stack sets them; the local stack disables
tracing and metrics). Powertools' Tracer imports the X-Ray SDK even when
disabled (about half a second of cold start), so a disabled tracer is a no-op
stand-in and the real one is built only when tracing is on. Lambda's active
tracing traces every invocation either way; the Powertools tracer adds boto3
subsegments.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "skyloop")


class _NoTracer:
    """What the handlers use of Tracer, doing nothing."""

    def capture_lambda_handler(self, handler: Any = None, **_: Any) -> Any:
        return handler if handler is not None else (lambda fn: fn)


def _tracer() -> Any:
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() in ("1", "true"):
        return _NoTracer()
    from aws_lambda_powertools import Tracer  # deferred: imports the X-Ray SDK

    return Tracer(service=SERVICE)


logger = Logger(service=SERVICE)
tracer = _tracer()
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "skyloop"), service=SERVICE)


def token_metrics(agent_name: str, usage: Any) -> None:
    """One model call's tokens as ``InputTokens``/``OutputTokens`` with an ``agent`` dimension.

    Written apart from the handler's metrics (own EMF blob), so the step's
    other metrics keep their dimensions and alarms on them keep working.
    """
    from aws_lambda_powertools.metrics import single_metric
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    if is_metrics_disabled():  # single_metric writes even when metrics are off (the local stack's case)
        return
    namespace = metrics.namespace
    for name, value in (("InputTokens", usage.input_tokens), ("OutputTokens", usage.output_tokens)):
        with single_metric(
            name=name,
            unit=MetricUnit.Count,
            value=value,
            namespace=namespace,
            default_dimensions={"agent": agent_name},
        ) as metric:
            metric.add_dimension(name="service", value=SERVICE)


__all__ = ["MetricUnit", "logger", "metrics", "token_metrics", "tracer"]
