"""The turn machine's tasks, one per state, named alike end to end (the ``turn`` function runs them all).

=============  ==================  ===========================  ===================
ASL state      ``Payload.step``    this module                  ``next`` that routes
=============  ==================  ===========================  ===================
CallModel      ``call_model``      :func:`call_model`           ``call_model`` (start)
AwaitClient    ``await_client``    :func:`await_client`         ``await_client``
FinishTurn     ``finish_turn``     :func:`finish_turn`          ``finish_turn``
FailTurn       ``fail_turn``       :func:`fail_turn`            (Catch)
=============  ==================  ===========================  ===================

A turn has no prepare step: the API's append that starts it announces it
(``response.in_progress``), and the execution begins with the model call. A
model call whose answer ends the turn completes it in the same write
(:func:`skyloop.turns.model_step.finish_with_result`); ``FinishTurn`` runs
only when input arrived meanwhile.

Each task reads the turn's state, does its part through
:mod:`skyloop.turns.lifecycle` (transitions) or :mod:`skyloop.turns.model_step`
(the model call), and returns the next state; ``next == "stop"`` ends the
execution. A step of a turn that is no longer active stops quietly.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from skyloop.errors import NotFoundError
from skyloop.turns import lifecycle, model_step
from skyloop.turns.lifecycle import TurnInactiveError
from skyloop.turns.state import TurnError, error_from_catch

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future

    from skyloop.models.agent import Agent
    from skyloop.models.session import Session, Turn
    from skyloop.secrets import SecretStore
    from skyloop.store import Store
    from skyloop.tools.catalog import Catalog
    from skyloop.turns.engine import TurnEngine
    from skyloop.turns.state import TurnState


class _AgentCache:
    """Agent versions are immutable, so a warm container keeps them (the most recently used few)."""

    def __init__(self, size: int = 256) -> None:
        self._cache: OrderedDict[str, Agent] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()  # steps may run on several threads of one environment (locally)

    def get(self, store: Store, agent_id: str) -> Agent:
        with self._lock:
            agent = self._cache.get(agent_id)
            if agent is not None:
                self._cache.move_to_end(agent_id)
                return agent
        agent = store.get_agent(agent_id)
        with self._lock:
            self._cache[agent_id] = agent
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return agent


_AGENTS = _AgentCache()


def agent_of(store: Store, turn: Turn) -> Agent:
    return _AGENTS.get(store, turn.agent_id)


def agent_for(store: Store, state: TurnState) -> Agent:
    """The turn's agent: by the id its state carries (no read of the turn row), else the row's."""
    if state.agent_id is not None:
        return _AGENTS.get(store, state.agent_id)
    return agent_of(store, store.get_turn(state.session_id, state.response_id))


def _stops_when_inactive(step: Callable[..., TurnState]) -> Callable[..., TurnState]:
    @functools.wraps(step)
    def run(store: Store, state: TurnState, *args: Any, **kwargs: Any) -> TurnState:
        try:
            return step(store, state, *args, **kwargs)
        except TurnInactiveError:
            return state.model_copy(update={"next": "stop"})

    return run


START_WAIT_S = 10.0  # how long a turn's first step waits for the append its post made alongside its start
START_POLL_S = 0.005


def started_meanwhile(store: Store, state: TurnState, session: Session) -> Session | None:
    """The session once the append that starts this turn landed, or None if it did not land.

    A post without an idempotency key starts its turn's execution while its
    append is on its way (:func:`skyloop.turns.lifecycle._append_starting`), so
    the first step may read the session before the append. Where the append
    would end is in the state (``last_seq``); while the session has not reached
    it, the append may still land: the step reads again. A session past it and
    still not running this turn means the append did not land, or the turn has
    ended already: the step stops, having written nothing.
    """
    if state.iteration != 0 or state.last_seq is None or state.created_at is None:
        return None
    deadline = time.monotonic() + START_WAIT_S
    while session.last_seq < state.last_seq and time.monotonic() < deadline:
        time.sleep(START_POLL_S)
        session = store.get_session(state.session_id)
        if lifecycle.is_active(session, state.response_id):
            return session
    return None


def _turn_read(store: Store, state: TurnState, read: Future[Turn]) -> Turn:
    """The turn row read alongside the session; read again if that read came before the post's append
    landed (the execution started alongside it) while the session read after it says the turn runs."""
    try:
        return read.result()
    except NotFoundError:
        if state.iteration != 0 or state.created_at is None:
            raise
        return store.get_turn(state.session_id, state.response_id)


STEP_MARGIN_S = 30.0  # what the model step keeps after the model call: recording its result


def model_budget_s(remaining_ms: int) -> float:
    """Seconds the model call may take, retries included: the configured bound, within the invocation."""
    from skyloop.settings import get_settings

    return max(1.0, min(get_settings().model_timeout_s, remaining_ms / 1000 - STEP_MARGIN_S))


# What a model call needs left of the invocation for the step to go on in it after a hot wait.
MIN_MODEL_S = 60.0


def call_model(
    store: Store,
    state: TurnState,
    model_caller: model_step.ModelCaller = None,
    *,
    timeout_s: float = 600.0,
    secrets: SecretStore | None = None,
    report_usage: model_step.UsageReport = None,
    hot_wait_s: float = 0.0,
    remaining_s: Callable[[], float] | None = None,
) -> TurnState:
    """The ``CallModel`` state: one model call, and more while client tools answer fast.

    With ``hot_wait_s`` a model call that asks for client tools publishes them
    and waits for their outputs itself (:mod:`skyloop.turns.hot_wait`); when
    they arrive in time, the next model call runs in this same invocation, so
    a fast client round trip costs no state transition. ``remaining_s`` is the
    invocation's time left (Lambda's), bounding both the waits and each model
    call's ``timeout_s``.
    """
    from skyloop.turns import hot_wait

    ready: list[Turn] = []  # the turn row a hot wait ended on: the next model call's read of it
    while True:
        if remaining_s is not None:
            timeout_s = max(1.0, min(timeout_s, remaining_s() - STEP_MARGIN_S))
        result = _call_model_once(
            store,
            state,
            model_caller,
            timeout_s=timeout_s,
            secrets=secrets,
            report_usage=report_usage,
            publish_waits=hot_wait_s > 0,
            turn=ready.pop() if ready else None,
        )
        if result.next != "await_client" or hot_wait_s <= 0:
            return result
        left = remaining_s() if remaining_s is not None else float("inf")
        window = hot_wait.window_s(result, hot_wait_s, left - STEP_MARGIN_S - MIN_MODEL_S)
        if window <= 0:
            return result
        waited = hot_wait.wait_for_outputs(store, result, window, ready=ready)
        if waited.next != "call_model" or (
            remaining_s is not None and remaining_s() < STEP_MARGIN_S + MIN_MODEL_S
        ):
            return waited  # parked, stopped, or the next model call in a fresh invocation
        state = waited


@_stops_when_inactive
def _call_model_once(
    store: Store,
    state: TurnState,
    model_caller: model_step.ModelCaller = None,
    *,
    timeout_s: float = 600.0,
    secrets: SecretStore | None = None,
    report_usage: model_step.UsageReport = None,
    publish_waits: bool = False,
    turn: Turn | None = None,
) -> TurnState:
    # The session and the turn are read together (two reads' latency, once); a turn whose session says it
    # is no longer active is left alone whatever its row says. ``turn``: the row a hot wait just read
    # (its outputs all in), which nothing else writes before this step's own appends.
    turn_read = (
        None
        if turn is not None
        else model_step.background(store.get_turn, state.session_id, state.response_id)
    )
    session = store.get_session(state.session_id)
    if not lifecycle.is_active(session, state.response_id):
        started = started_meanwhile(store, state, session)
        if started is None:
            if turn_read is not None:
                turn_read.cancel()
            return state.model_copy(update={"next": "stop"})
        session, turn_read = started, None
        turn = store.get_turn(state.session_id, state.response_id)
    row = turn if turn_read is None else _turn_read(store, state, turn_read)
    assert row is not None  # one of the two
    agent = with_api_key(agent_of(store, row), secrets)
    caller = model_caller or model_step.default_caller(agent.spec.executor.harness)
    catalog = server_tools(store, agent, secrets)
    return model_step.run(
        store,
        state,
        session,
        row,
        agent,
        caller,
        timeout_s=timeout_s,
        report_usage=report_usage,
        catalog=catalog,
        publish_waits=publish_waits,
    )


def server_tools(store: Store, agent: Agent, secrets: SecretStore | None) -> Catalog | None:
    """The agent's server tools (None when it declares none: no import, no listing)."""
    from skyloop.models.tools import declared_tools

    if declared_tools(agent.spec.tools).empty:
        return None
    from skyloop.tools.catalog import ToolSetupError, catalog_for

    try:
        return catalog_for(agent, store, secrets)
    except ToolSetupError as exc:
        raise TurnError(exc.code, exc.message) from exc


def with_api_key(agent: Agent, secrets: SecretStore | None) -> Agent:
    """The agent with its model key read back from the secret store, in memory only."""
    auth = agent.spec.executor.auth
    if agent.api_key_secret is None or auth is None or secrets is None:
        return agent
    key = SecretStr(secrets.get(agent.api_key_secret))
    executor = agent.spec.executor.model_copy(update={"auth": auth.model_copy(update={"api_key": key})})
    return agent.model_copy(update={"spec": agent.spec.model_copy(update={"executor": executor})})


def await_client(store: Store, engine: TurnEngine, state: TurnState, task_token: str) -> None:
    if state.agent_id is not None:
        agent = _AGENTS.get(store, state.agent_id)
    else:
        try:
            agent = agent_of(store, store.get_turn(state.session_id, state.response_id))
        except NotFoundError:  # the session was deleted
            engine.wake(task_token)
            return
    lifecycle.park(store, engine, state, task_token, agent_name=agent.name)


def finish_turn(store: Store, state: TurnState) -> TurnState:
    try:
        turn = store.get_turn(state.session_id, state.response_id)
    except NotFoundError:
        return state.model_copy(update={"next": "stop"})
    agent = agent_of(store, turn)
    model_step.keep_workspace(
        store, state.session_id, agent
    )  # before the turn ends: its files are kept when it has
    return lifecycle.finish_or_continue(
        store, state, model=agent.name, created_at=turn.created_at, usage=turn.usage()
    )


def fail_turn(store: Store, state: TurnState) -> TurnState:
    code, message = error_from_catch(state.error)
    error = {"code": code, "message": message}
    try:
        turn = store.get_turn(state.session_id, state.response_id)
        model, created, usage = agent_of(store, turn).name, turn.created_at, turn.usage()
    except NotFoundError:
        model, created, usage = "unknown", None, None
    lifecycle.fail(
        store, state.session_id, state.response_id, error, model=model, created_at=created, usage=usage
    )
    return state.model_copy(update={"next": "stop", "error": error})
