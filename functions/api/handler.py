"""API function: HTTP API (payload v2) events -> the skyloop REST routes."""

from skyloop import prewarm

prewarm.start()  # first, so the turn function starts while this one imports the routes

from aws_lambda_powertools.utilities.typing import LambdaContext  # noqa: E402

from skyloop.api import app  # noqa: E402
from skyloop.observability import logger, tracer  # noqa: E402


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def _handle(event: dict, context: LambdaContext) -> dict:
    return app.resolve(event, context)


def handler(event: dict, context: LambdaContext) -> dict:
    if prewarm.is_warmup(event):
        return prewarm.WARM_REPLY
    return _handle(event, context)
