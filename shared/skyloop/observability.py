"""Powertools logger, tracer and metrics, configured by environment, created once per container.

``POWERTOOLS_SERVICE_NAME``, ``POWERTOOLS_METRICS_NAMESPACE``, ``POWERTOOLS_LOG_LEVEL``,
``POWERTOOLS_TRACE_DISABLED`` and ``POWERTOOLS_METRICS_DISABLED`` come from the
function's environment (the CDK stack sets them; the local stack disables
tracing and metrics). The tracer loads the X-Ray SDK lazily, only when enabled.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "skyloop")

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "skyloop"), service=SERVICE)

__all__ = ["MetricUnit", "logger", "metrics", "tracer"]
