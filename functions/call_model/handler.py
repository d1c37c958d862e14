"""Turn step function: one streamed model call."""

import time

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop import deps
from skyloop.observability import MetricUnit, logger, metrics, token_metrics, tracer
from skyloop.turns.state import TurnState
from skyloop.turns.steps import call_model, model_budget_s


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    state = TurnState.model_validate(event)
    logger.append_keys(session_id=state.session_id, response_id=state.response_id, iteration=state.iteration)
    started = time.perf_counter()
    budget = model_budget_s(context.get_remaining_time_in_millis())
    result = call_model(
        deps.store(), state, timeout_s=budget, secrets=deps.secrets(), report_usage=token_metrics
    )
    metrics.add_metric(
        name="ModelStepMs", unit=MetricUnit.Milliseconds, value=(time.perf_counter() - started) * 1000
    )
    return result.model_dump(mode="json")
