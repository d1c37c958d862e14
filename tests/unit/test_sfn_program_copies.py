"""Each local Step Functions execution gets its own copy of the parsed program, made ahead of it."""

from __future__ import annotations

import pickle
import time

from skyloop.local import moto_stepfunctions as sfn


def _wait_for_spare(definition: str) -> None:
    deadline = time.monotonic() + 5
    while not sfn._spares.get(definition):
        assert time.monotonic() < deadline, "no spare copy was made"
        time.sleep(0.01)


def test_each_execution_gets_its_own_copy_and_the_next_one_is_made_ahead() -> None:
    # Given a parsed program, frozen as the stack keeps it
    program = {"states": [{"name": "CallModel", "visits": []}]}
    frozen = pickle.dumps(program)
    definition = f"test-definition-{time.monotonic_ns()}"
    try:
        # When two executions start, the first changing its copy as it runs
        first = sfn._copy_of(definition, frozen)
        first["states"][0]["visits"].append("ran")
        _wait_for_spare(definition)
        spare = sfn._spares[definition][0]
        second = sfn._copy_of(definition, frozen)

        # Then the second got the copy made ahead of it, untouched by the first
        assert second is spare
        assert second == program
        assert second is not first
        # And another is made for the next execution
        _wait_for_spare(definition)
        assert sfn._spares[definition][0] is not second
    finally:
        sfn._spares.pop(definition, None)
