"""API function: HTTP API (payload v2) events -> the skyloop REST routes."""

from skyloop import prewarm

prewarm.start()  # first, so the turn function starts while this one imports the routes

from aws_lambda_powertools.logging import correlation_paths  # noqa: E402
from aws_lambda_powertools.utilities.typing import LambdaContext  # noqa: E402

from skyloop.api import app  # noqa: E402
from skyloop.observability import logger, tracer  # noqa: E402


# the HTTP API's request id: on every log line, and the X-Request-Id (Claude's request-id) of every answer
@logger.inject_lambda_context(clear_state=True, correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler(capture_response=False)
def _handle(event: dict, context: LambdaContext) -> dict:
    return app.resolve(event, context)


def handler(event: dict, context: LambdaContext) -> dict:
    if prewarm.is_warmup(event):
        return prewarm.WARM_REPLY
    return _handle(event, context)
