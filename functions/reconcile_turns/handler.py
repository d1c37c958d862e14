"""Scheduled function: one reconciler pass over the running sessions (see skyloop.turns.reconcile), then
the scheduled tasks' repair pass (skyloop.schedules.repair) and, in the cloud, the stop of idle interpreter
sessions (skyloop.environments.agentcore); hourly, ``{"job": "orphan_schedules"}``
deletes the schedules whose task is gone instead."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop import deps
from skyloop.observability import MetricUnit, logger, metrics, tracer
from skyloop.schedules import ORPHAN_SCHEDULES_JOB
from skyloop.schedules import engine as schedule_engine
from skyloop.turns import engine as turn_engine
from skyloop.turns.reconcile import reconcile


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:  # noqa: ARG001  (Lambda's signature)
    if isinstance(event, dict) and event.get("job") == ORPHAN_SCHEDULES_JOB:
        return {"orphan_schedules": _delete_orphan_schedules()}
    report = reconcile(deps.store(), turn_engine.deployed())
    metrics.add_metric(name="TurnsResumedByReconciler", unit=MetricUnit.Count, value=len(report.resumed))
    metrics.add_metric(name="TurnsResetByReconciler", unit=MetricUnit.Count, value=len(report.reset))
    logger.info(
        "reconciled", extra={"checked": report.checked, "resumed": report.resumed, "reset": report.reset}
    )
    return {
        "checked": report.checked,
        "resumed": report.resumed,
        "reset": report.reset,
        "schedules": _repair_schedules(),
        "interpreters_stopped": _stop_idle_interpreters(),
    }


def _stop_idle_interpreters() -> int | None:
    """Stop the interpreter sessions idle past SKYLOOP_HOSTED_IDLE_S (None where hosted tools run locally)."""
    if deps.get_settings().hosted_engine != "agentcore":
        return None
    from skyloop.environments import service

    stopped = service.stop_idle() or []
    if stopped:
        logger.info("idle interpreter sessions stopped", extra={"sessions": stopped})
    return len(stopped)


def _repair_schedules() -> dict[str, Any] | None:
    """Re-arm the scheduled tasks whose schedule stopped firing (None where the stack keeps no schedules)."""
    schedules = schedule_engine.deployed()
    if schedules is None:
        return None
    # deferred: the rules engine (dateutil) is loaded only by a pass that has something to look at
    from skyloop.schedules import repair, runs
    from skyloop.schedules.local import lambda_invoker

    settings = deps.get_settings()
    invoke = lambda_invoker(deps.client("lambda"), schedules.target_arn or "")

    def dispatch(task: Any, occurrence: int) -> bool:
        """The run function, invoked as EventBridge Scheduler does (a retried occurrence starts nothing twice)."""
        invoke(runs.fire_event(task.id, occurrence))
        return True

    report = repair.repair(
        deps.store(), schedules, grace_s=settings.schedule_missed_grace_s, dispatch=dispatch
    )
    metrics.add_metric(name="ScheduledTasksRepaired", unit=MetricUnit.Count, value=len(report.repaired))
    metrics.add_metric(name="ScheduleRepairsFailed", unit=MetricUnit.Count, value=len(report.failed))
    metrics.add_metric(name="ScheduledRunsMissed", unit=MetricUnit.Count, value=report.missed)
    out = {
        "overdue": report.checked,
        "repaired": {k: list(v) for k, v in report.repaired.items()},
        "dispatched": report.dispatched,
        "missed": report.missed,
        "failed": report.failed,
    }
    if report.checked:
        logger.warning("scheduled tasks repaired", extra=out)
    return out


def _delete_orphan_schedules() -> dict[str, Any] | None:
    schedules = schedule_engine.deployed()
    if schedules is None:
        return None
    from skyloop.schedules import repair

    report = repair.delete_orphans(deps.store(), schedules)
    metrics.add_metric(name="OrphanSchedulesDeleted", unit=MetricUnit.Count, value=len(report.deleted))
    metrics.add_metric(name="OrphanScheduleDeletesFailed", unit=MetricUnit.Count, value=len(report.failed))
    out = {"checked": report.checked, "deleted": report.deleted, "failed": report.failed}
    logger.info("orphan schedules", extra=out)
    return out
