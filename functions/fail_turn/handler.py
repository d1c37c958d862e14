"""Turn step function: fail turn."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop import deps
from skyloop.observability import MetricUnit, logger, metrics, tracer
from skyloop.turns.state import TurnState
from skyloop.turns.steps import fail_turn


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:  # noqa: ARG001  (Lambda's signature)
    state = TurnState.model_validate(event)
    logger.append_keys(session_id=state.session_id, response_id=state.response_id)
    result = fail_turn(deps.store(), state)
    metrics.add_metric(name="TurnsFailed", unit=MetricUnit.Count, value=1)
    return result.model_dump(mode="json")
