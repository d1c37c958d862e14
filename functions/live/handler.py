"""Live channel function: API Gateway WebSocket routes ($connect, $disconnect, $default) -> skyloop.live.cloud."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop.live.cloud import handle
from skyloop.observability import logger, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict, context: LambdaContext) -> dict:
    logger.append_keys(connection_id=event.get("requestContext", {}).get("connectionId"))
    return handle(event, lambda: context.get_remaining_time_in_millis() / 1000)
