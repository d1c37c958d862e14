"""Scheduled function: one reconciler pass over the running sessions (see skyloop.turns.reconcile)."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop import deps
from skyloop.observability import MetricUnit, logger, metrics, tracer
from skyloop.turns.reconcile import reconcile


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:  # noqa: ARG001  (Lambda's signature)
    report = reconcile(deps.store(), deps.engine())
    metrics.add_metric(name="TurnsResumedByReconciler", unit=MetricUnit.Count, value=len(report.resumed))
    metrics.add_metric(name="TurnsResetByReconciler", unit=MetricUnit.Count, value=len(report.reset))
    logger.info(
        "reconciled", extra={"checked": report.checked, "resumed": report.resumed, "reset": report.reset}
    )
    return {"checked": report.checked, "resumed": report.resumed, "reset": report.reset}
