"""The model step waits for fast client tools itself, instead of parking the turn at once.

Parking a turn on its client calls costs a ``Route`` and an ``AwaitClient``
state, one more Lambda invocation, a callback resume and the next
``CallModel`` invocation: on AWS about a quarter second and five state
transitions ($0.000125) per client round trip. Most client tools answer in
well under a second (a file read, a grep). So when a model call asks only for
client tools, its step publishes the calls in the result's own append
(``action_required``), then polls the turn row for the outputs: if they all
arrive within ``SKYLOOP_HOT_WAIT_S`` (and the invocation has time left), the
same invocation goes on with the next model call. Otherwise it returns
``await_client`` and the turn parks as before, with what is left of its
deadline; parking publishes nothing twice (the result's append claimed its key)
and resumes the turn itself if the last output arrived in between.

No wake-up is lost between the two: an output that completes the set while
nobody holds a task token resumes nothing (``lifecycle.resume`` needs the
token of this iteration), and the step that parks stores its token *before*
it lists the calls. A hot wait writes nothing: polling is a strongly
consistent read of the turn row (and, every so often, of the session, so an
interrupt or a delete ends the wait at once). Where an output's notification
reaches the step's process (the local stack forwards it to its Lambda
environments) the pause before the next poll ends then, not ~5 ms later.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from skyloop.errors import NotFoundError
from skyloop.store import notifier
from skyloop.turns import lifecycle
from skyloop.turns.state import TurnError

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from skyloop.models.session import Turn
    from skyloop.store import Store
    from skyloop.turns.state import TurnState

# Fast tools answer within a second or two of being published (the client sees the call, runs it,
# posts): read often then, so the output is noticed within ~5 ms (at most 200 reads: $0.000025, a fifth
# of what parking's transitions cost); after that, ten reads a second. Where the output's notification
# reaches the step (the local stack), a read is only the safety net for a lost one: half as often (the
# reads of a burst's ten waits are the local DynamoDB process's work, on the same two cores).
FAST_POLL_S = 0.01
NOTIFIED_FAST_POLL_S = 0.02
FAST_FOR_S = 2.0
SLOW_POLL_S = 0.1
SESSION_CHECK_S = 0.5  # how stale an interrupt or a delete may be before the wait notices it


def window_s(state: TurnState, configured_s: float, remaining_s: float) -> float:
    """How long this wait may run: the setting, within the deadline and the invocation's own time.

    An agent that wants heartbeats waits hot at most one heartbeat period and
    keeps more than one of its deadline for the parked wait (Step Functions
    requires the heartbeat below the timeout).
    """
    deadline = float(state.wait_timeout_s or state.client_tool_timeout_s)
    if state.client_heartbeat_s is not None:
        # and a vanished client is still noticed within about two heartbeat periods
        deadline = min(deadline - state.client_heartbeat_s - 1, state.client_heartbeat_s)
    return max(0.0, min(configured_s, deadline, remaining_s))


def wait_for_outputs(
    store: Store,
    state: TurnState,
    window: float,
    *,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    ready: list[Turn] | None = None,
) -> TurnState:
    """Poll until the iteration's calls all have outputs (``call_model``), the window ends
    (``await_client``, with the rest of the deadline) or the turn is no longer active (``stop``).

    Between polls it waits for the next poll or an output's notification, whichever is first
    (``sleep``, for tests, replaces that wait). ``ready`` receives the turn row the wait ended on
    (``call_model``), so the next model call need not read it again.
    """
    with notifier.answers_of(state.session_id) as answered:
        return _wait(store, state, window, answered, sleep or answered.wait, clock, ready)


def _wait(
    store: Store,
    state: TurnState,
    window: float,
    answered: threading.Event,
    pause: Callable[[float], object],
    clock: Callable[[], float],
    ready: list[Turn] | None = None,
) -> TurnState:
    iteration = state.iteration - 1
    started = last_check = clock()
    while True:
        answered.clear()  # before the read: an output recorded after it ends the pause at once
        try:
            turn = store.get_turn(state.session_id, state.response_id)
        except NotFoundError:  # the session was deleted
            return state.model_copy(update={"next": "stop"})
        if turn.decided_iteration == iteration and turn.unanswered == 0:
            if ready is not None:
                ready.append(turn)
            return state.model_copy(update={"next": "call_model"})
        now = clock()
        if now - last_check >= SESSION_CHECK_S:
            last_check = now
            try:
                session = store.get_session(state.session_id)
            except NotFoundError:
                return state.model_copy(update={"next": "stop"})
            if not lifecycle.is_active(session, state.response_id):
                return state.model_copy(update={"next": "stop"})
        waited = now - started
        if waited >= window:
            left = (state.wait_timeout_s or state.client_tool_timeout_s) - math.ceil(waited)
            if left < 1:
                raise TurnError(
                    "client_tool_timeout", "no output arrived for a client-side tool call before its deadline"
                )
            return state.model_copy(update={"next": "await_client", "wait_timeout_s": left})
        fast = NOTIFIED_FAST_POLL_S if notifier.answers_reach_this_process() else FAST_POLL_S
        pause(min(fast if waited < FAST_FOR_S else SLOW_POLL_S, window - waited))
