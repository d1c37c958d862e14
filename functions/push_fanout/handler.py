"""Fan-out function: new events from the table's stream -> PostToConnection to their watchers (skyloop.live.fanout)."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop.live.fanout import handle
from skyloop.observability import logger, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict, context: LambdaContext) -> dict:  # noqa: ARG001  (Lambda's signature)
    return handle(event)
