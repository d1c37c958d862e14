"""Turn step function: park on client-side tool calls (invoked with .waitForTaskToken)."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop import deps
from skyloop.observability import MetricUnit, logger, metrics, tracer
from skyloop.turns.state import StepInput
from skyloop.turns.steps import await_client


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:  # noqa: ARG001  (Lambda's signature)
    step = StepInput.model_validate(event)
    logger.append_keys(session_id=step.state.session_id, response_id=step.state.response_id)
    await_client(deps.store(), deps.engine(), step.state, step.task_token)
    metrics.add_metric(name="TurnsParked", unit=MetricUnit.Count, value=1)
    return {"parked": True}
