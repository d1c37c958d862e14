"""API function: HTTP API (payload v2) events -> the skyloop REST routes."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop.api import app
from skyloop.observability import logger, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict, context: LambdaContext) -> dict:
    return app.resolve(event, context)
