"""Turn step function: fail turn."""

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from skyloop import deps
from skyloop.turns.state import TurnState
from skyloop.turns.steps import fail_turn

logger = Logger(service="skyloop-turn")


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict, context: LambdaContext) -> dict:
    state = TurnState.model_validate(event)
    logger.append_keys(session_id=state.session_id, response_id=state.response_id)
    return fail_turn(deps.store(), state).model_dump(mode="json")
