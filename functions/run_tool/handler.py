"""Turn step function: prepare, poll (a long hosted command) or record one server tool call of the ``RunTools`` map."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop import deps
from skyloop.observability import MetricUnit, logger, metrics, tracer
from skyloop.turns.server_tools import poll_tool, prepare_tool, record_tool
from skyloop.turns.state import ToolStepInput


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict[str, Any]:  # noqa: ARG001  (Lambda's signature)
    step = ToolStepInput.model_validate(event)
    logger.append_keys(
        session_id=step.state.session_id, response_id=step.state.response_id, call_id=step.call_id
    )
    if step.action == "prepare":
        return prepare_tool(deps.store(), step.state, step.call_id, deps.secrets())
    if step.action == "poll":
        return poll_tool(deps.store(), step.state, step.call_id, deps.secrets())
    record_tool(deps.store(), step.state, step.call_id, step.outcome or {}, deps.secrets())
    metrics.add_metric(name="ServerToolCalls", unit=MetricUnit.Count, value=1)
    return {"recorded": True}
