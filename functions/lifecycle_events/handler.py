"""Lifecycle events: new events and sessions from the table's stream -> EventBridge and webhook deliveries (skyloop.webhooks.publisher)."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop.observability import logger, tracer
from skyloop.webhooks.publisher import handle_stream


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict, context: LambdaContext) -> dict:  # noqa: ARG001  (Lambda's signature)
    return handle_stream(event)
