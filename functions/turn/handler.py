"""The turn function: every step of a turn's state machine but server tools, chosen by ``step``.

One function rather than one per step: a warm environment serves the whole
turn (a first turn after idle meets one cold start of it, not one per step),
and the states keep their own retry policies in the ASL.
"""

import time

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop import deps, prewarm
from skyloop.observability import MetricUnit, logger, metrics, token_metrics, tracer
from skyloop.settings import get_settings
from skyloop.turns import engine as turn_engine
from skyloop.turns import steps
from skyloop.turns.state import TurnStepInput


def handler(event: dict, context: LambdaContext) -> dict:
    if prewarm.is_warmup(event):  # sent by the API or stream function as it cold-starts
        return prewarm.WARM_REPLY
    return _handle(event, context)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def _handle(event: dict, context: LambdaContext) -> dict:
    request = TurnStepInput.model_validate(event)
    state = request.state
    # per thread: the local stack runs several turn steps at once in one environment
    logger.thread_safe_clear_keys()
    logger.thread_safe_append_keys(
        step=request.step,
        session_id=state.session_id,
        response_id=state.response_id,
        iteration=state.iteration,
    )
    if request.step == "await_client":
        assert request.task_token is not None  # TurnStepInput requires it for this step
        steps.await_client(deps.store(), turn_engine.deployed(), state, request.task_token)
        metrics.add_metric(name="TurnsParked", unit=MetricUnit.Count, value=1)
        return {"parked": True}
    if request.step == "call_model":
        started = time.perf_counter()
        budget = steps.model_budget_s(context.get_remaining_time_in_millis())
        result = steps.call_model(
            deps.store(),
            state,
            timeout_s=budget,
            secrets=deps.secrets(),
            report_usage=token_metrics,
            hot_wait_s=get_settings().hot_wait_s,
            remaining_s=lambda: context.get_remaining_time_in_millis() / 1000,
        )
        metrics.add_metric(
            name="ModelStepMs", unit=MetricUnit.Milliseconds, value=(time.perf_counter() - started) * 1000
        )
        if state.iteration == 0:  # a turn's first model call (a retried invocation counts again)
            metrics.add_metric(name="TurnsStarted", unit=MetricUnit.Count, value=1)
        if result.finished:
            metrics.add_metric(name="TurnsCompleted", unit=MetricUnit.Count, value=1)
    elif request.step == "finish_turn":
        result = steps.finish_turn(deps.store(), state)
        if result.next == "stop":
            metrics.add_metric(name="TurnsCompleted", unit=MetricUnit.Count, value=1)
    else:
        result = steps.fail_turn(deps.store(), state)
        metrics.add_metric(name="TurnsFailed", unit=MetricUnit.Count, value=1)
    return result.model_dump(mode="json")
