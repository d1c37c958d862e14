"""Webhook delivery: one signed attempt per queue message, retried on the schedule (skyloop.webhooks.queue)."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop.observability import logger, tracer
from skyloop.webhooks.queue import handle_queue


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict, context: LambdaContext) -> dict:  # noqa: ARG001  (Lambda's signature)
    return handle_queue(event)
