"""Scheduled tasks' target: EventBridge Scheduler invokes it when a task's occurrence comes due.

The event is the schedule's input, ``{"task_id", "scheduled_at"}`` (the
occurrence, filled in by EventBridge Scheduler). The function arms the next
occurrence (re-arming a one-time schedule) and starts the run (see
skyloop.schedules.runs.fire). An error makes EventBridge Scheduler retry the
invocation, then send it to the dead-letter queue; a retry starts nothing twice.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field

from skyloop import deps
from skyloop.observability import MetricUnit, logger, metrics, tracer
from skyloop.schedules import engine as schedule_engine
from skyloop.schedules import runs
from skyloop.turns import engine as turn_engine


class Fire(BaseModel):
    task_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    scheduled_at: str | int


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    fire = Fire.model_validate(event)
    scheduled_at = runs.parse_scheduled_time(fire.scheduled_at)
    logger.append_keys(scheduled_task_id=fire.task_id, scheduled_at=scheduled_at)
    # its own ARN re-arms a one-time schedule (its environment cannot name the function itself)
    target = context.invoked_function_arn.split(":function:")[0] + ":function:" + context.function_name
    run = runs.fire(
        deps.store(),
        turn_engine.deployed(),
        schedule_engine.deployed(target),
        fire.task_id,
        scheduled_at,
        settings=deps.get_settings(),
    )
    if run is None:
        return {"run": None}
    metrics.add_metric(name=f"ScheduledRuns{run.status.capitalize()}", unit=MetricUnit.Count, value=1)
    logger.info("scheduled run", extra={"run_id": run.id, "status": run.status, "error_code": run.error_code})
    return {"run": run.id, "status": run.status, "conversation_id": run.conversation_id}
