"""One model call of a turn: record the outputs it resumes with, call the model, record what it decided.

Idempotent: once an iteration's result has landed, running the step again
returns the recorded decision without calling the model. A retry after a
partial attempt announces itself with ``response.retry`` and streams anew
under its own keys, so viewers never see two attempts' text spliced.
"""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from skyloop import events as ev
from skyloop.errors import ModelCallError, NotFoundError
from skyloop.harnesses.base import FunctionCall, Usage
from skyloop.ids import derived_id
from skyloop.models.session import ConversationItem, PendingCall, token_usage
from skyloop.pricing import budget_reached, price_of
from skyloop.store import ConditionFailedError, Guard, NewItem, TurnDecision
from skyloop.turns import lifecycle
from skyloop.turns.state import TurnError

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.agent import Agent, AgentSpec
    from skyloop.models.session import Session, Turn
    from skyloop.store import Append, Store
    from skyloop.store.records import NextStep
    from skyloop.tools.catalog import Catalog
    from skyloop.turns.state import TurnState

DELTA_FLUSH_S = 0.1  # at most ~10 delta appends a second per turn: live enough, and bounds write cost
DELTA_FLUSH_CHARS = 2048
MAX_ATTEMPTS = 10
COST_CAP_REACHED = "cost_cap_reached"  # the turn error code when a cost cap stops a turn
COST_UNKNOWN = "cost_unknown"  # a capped turn whose model has no price: it never calls the model
BUDGET_EXCEEDED = "session_budget_exceeded"  # the turn error code when spend control stops a turn
# The last streamed text rides in the result's append unless the response has this many calls (one
# transaction holds at most 100 items; each call is one of them).
FOLD_MAX_CALLS = 64

ModelCaller = Any  # (spec, items, tools, on_delta, *, timeout_s) -> ModelResult


UsageReport = Any  # (agent name, Usage) -> None: told once per model call whose result landed


def run(
    store: Store,
    state: TurnState,
    session: Session,
    turn: Turn,
    agent: Agent,
    model_caller: ModelCaller,
    *,
    timeout_s: float,
    report_usage: UsageReport = None,
    catalog: Catalog | None = None,
    publish_waits: bool = False,
) -> TurnState:
    """The CallModel step for an active turn (the caller read ``session`` and ``turn`` and checked it is).

    ``publish_waits``: when the model asks only for client tools, publish them
    as ``action_required`` in the result's own append (the caller then waits for
    their outputs itself, :mod:`skyloop.turns.hot_wait`), claiming the key the
    parking step publishes under, so parking later publishes nothing twice.

    The model is offered the message's client tools and the agent's server
    tools (``catalog``); what it calls decides where the turn goes next.
    The step's appends run on one :class:`~skyloop.turns.lifecycle.SeqChain`
    from the caller's read, so none of them reads ``last_seq`` first.
    """
    i = state.iteration
    result_key = f"{state.response_id}:{i}:result"
    # The result's append records its decision on the turn row, so the row just read tells whether
    # this iteration's result landed (no read of the result's dedupe marker).
    if turn.decided_iteration is not None and turn.decided_iteration >= i:
        return recorded_decision(store, state, last_seq=session.last_seq)
    if i >= state.max_iterations:
        raise TurnError("max_iterations", f"the turn reached its limit of {state.max_iterations} model calls")
    chain = lifecycle.SeqChain(session.last_seq)
    session, items, outputs = model_input(store, state, agent, session, chain)
    cutoff = session.last_seq
    consumed = max(state.consumed_seq, session.input_seq)
    check_budget(session)
    _check_endpoint(agent.spec)
    spec = effective_spec(agent.spec, session, turn)
    check_cost_cap(spec, turn)
    # The outputs' append and the attempt's number are written while the model call starts (writes
    # the model's time hides); the first streamed batch, or the result, waits for both (the outputs
    # precede the answer they led to, a retry's announcement precedes its text).
    attempt = background(_publish_then_claim, store, state, chain, outputs)
    deltas = DeltaWriter(store, state, attempt, chain)
    spec = effective_spec(agent.spec, session, turn)
    started = time.time()
    try:
        offered = turn.tools + (catalog.definitions() if catalog else [])
        result = model_caller(spec, items, offered, deltas.add, timeout_s=timeout_s)
    except ModelCallError as exc:
        deltas.flush()
        raise TurnError(exc.error_code, exc.message) from exc
    finally:
        attempt.result()  # no append of this step may overlap the attempt's claim

    batch = lifecycle.turn_append(state, result_key)
    deltas.finish(batch, result.text, len(result.calls))
    if result.text:
        msg_id = derived_id(state.response_id, i, "message")
        idx = batch.event(
            ev.RESPONSE_ITEM_DONE,
            ev.item_done(
                ev.assistant_message_item(
                    item_id=msg_id, text=result.text, model=agent.name, response_id=state.response_id
                )
            ),
        )
        batch.items.append(
            NewItem(
                id=msg_id,
                type="message",
                data={
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": result.text}],
                    "model": agent.name,
                },
                response_id=state.response_id,
                event_index=idx,
                anchor_seq=cutoff,
            )
        )
    calls = pending_calls(state, result.calls, turn, catalog, anchor_seq=cutoff)
    unanswered = sum(1 for c in calls if c.output is None and (c.kind == "client" or c.approval == "pending"))
    nxt, route = next_step(calls)
    iteration = i if nxt == "finish_turn" else i + 1
    if calls and iteration >= state.max_iterations:
        raise TurnError("max_iterations", f"the turn reached its limit of {state.max_iterations} model calls")
    batch.new_calls = calls
    tokens = Usage.of(result.usage)
    price = price_of(spec.executor)
    capped = nxt != "finish_turn" and cost_cap_reached(spec, turn, tokens)
    cost = price.cost_micros(tokens.input_tokens, tokens.output_tokens) if price else 0
    batch.event(
        ev.SESSION_USAGE,
        ev.session_usage(
            session,
            spec.executor.model,
            tokens.input_tokens,
            tokens.output_tokens,
            cost_micros=cost if price else None,
            response_id=state.response_id,
            iteration=i,
            started_at=started,
        ),
    )
    if publish_waits and nxt == "await_client" and not capped:
        publish_client_calls(batch, calls, agent.name, lifecycle.await_key(state.response_id, i))
    batch.decision = TurnDecision(
        response_id=state.response_id,
        iteration=i,
        next=nxt,
        consumed_seq=consumed,
        unanswered=unanswered,
        input_tokens=tokens.input_tokens,
        output_tokens=tokens.output_tokens,
        cost_micros=cost,
    )
    if nxt == "finish_turn":
        keep_workspace(store, turn.session_id, agent)  # a cloud workspace is kept before its turn ends
    finished = nxt == "finish_turn" and finish_with_result(store, batch, chain, agent, turn, tokens, consumed)
    if not finished:
        chain.append(store, batch)
    _usage_landed(report_usage, agent, spec, turn, tokens, capped=capped)
    return state.model_copy(
        update={
            "next": "stop" if finished else nxt,
            "finished": finished,
            "wait_timeout_s": state.client_tool_timeout_s,
            "iteration": iteration,
            "consumed_seq": consumed,
            "last_seq": chain.seq,
            **route,
        }
    )


def keep_workspace(store: Store, session_id: str, agent: Agent) -> None:
    """The end of a turn: a cloud workspace that changed is snapshotted (the local engine's is on disk)."""
    from skyloop import deps
    from skyloop.environments import service
    from skyloop.models.tools import environment_of

    settings = deps.get_settings()
    if settings.hosted_engine != "agentcore":
        return
    try:
        session = store.get_session(session_id)
        if environment_of(agent.spec, session.environment) is not None:
            service.snapshot(session_id, settings)
    except Exception:  # the turn is done; its workspace is still in its interpreter session
        from skyloop.observability import logger

        logger.exception("the workspace could not be snapshotted", extra={"session": session_id})


def _usage_landed(
    report_usage: UsageReport, agent: Agent, spec: AgentSpec, turn: Turn, tokens: Usage, *, capped: bool
) -> None:
    """After the result's append: report the call's tokens; a capped turn goes no further than this call."""
    if report_usage is not None:
        report_usage(agent.name, tokens)
    if capped:
        check_cost_cap(spec, turn, tokens)


def publish_client_calls(batch: Append, calls: list[PendingCall], agent_name: str, await_key: str) -> None:
    """The open client calls as ``action_required`` in the result's append, under the parking step's key too."""
    for call in calls:
        if call.output is None and call.kind == "client":
            batch.event(ev.RESPONSE_ITEM_DONE, lifecycle.call_event(call, "action_required", agent_name))
    batch.claims.append(await_key)


def finish_with_result(
    store: Store,
    batch: Append,
    chain: lifecycle.SeqChain,
    agent: Agent,
    turn: Turn,
    tokens: Usage,
    consumed: int,
) -> bool:
    """End the turn in the same append as its last model call's result; False if that cannot be.

    A text answer used to take one more Lambda invocation and two state
    transitions (the ``FinishTurn`` state) to append ``response.completed``.
    Here the result's events, the decision and the end of the turn are one
    write, guarded as ``FinishTurn``'s is: on the turn being active and on no
    user input newer than what the model saw. If input arrived meanwhile (or
    the turn stopped), nothing was written: the caller appends the result
    alone and ``FinishTurn`` continues the turn (or stops) as before.
    """
    finishing = replace(
        batch,
        events=list(batch.events),
        guard=Guard(active_turn=turn.response_id, input_seen_through=consumed),
    )
    lifecycle.end_turn(
        finishing,
        turn.session_id,
        turn.response_id,
        status="completed",
        model=agent.name,
        created_at=turn.created_at,
        usage=token_usage(turn.input_tokens + tokens.input_tokens, turn.output_tokens + tokens.output_tokens),
    )
    finishing.after_seq = chain.seq
    try:
        result = store.append(finishing)
    except (ConditionFailedError, NotFoundError):
        return False
    chain.seq = None if result.duplicate else result.last_seq
    return True


def turn_cost_usd(spec: AgentSpec, turn: Turn, tokens: Usage | None = None) -> float | None:
    """What the turn's model calls cost so far (the spend recorded with each landed call; with ``tokens``,
    one more), or None when the model has no price (skyloop.pricing)."""
    price = price_of(spec.executor)
    if price is None:
        return None
    more = price.cost_micros(tokens.input_tokens, tokens.output_tokens) if tokens else 0
    return (turn.spend_micros + more) / 1_000_000


def cost_cap_reached(spec: AgentSpec, turn: Turn, tokens: Usage | None = None) -> bool:
    if turn.max_cost_usd is None:
        return False
    cost = turn_cost_usd(spec, turn, tokens)
    return cost is None or cost >= turn.max_cost_usd


def check_cost_cap(spec: AgentSpec, turn: Turn, tokens: Usage | None = None) -> None:
    """A capped turn stops between model calls once its cost reaches the cap (or cannot be known).

    Checked before each model call and after each one whose answer would
    continue the turn (its result, usage included, is recorded first), so a
    turn never makes a model call once the cap is reached, and never parks on
    a client or runs server tools past it. A model without a price fails the
    turn (``cost_unknown``) rather than run it without a cap (skyloop.pricing).
    """
    if turn.max_cost_usd is None:
        return
    cost = turn_cost_usd(spec, turn, tokens)
    if cost is None:
        raise TurnError(
            COST_UNKNOWN,
            f"the turn has a cost cap of {turn.max_cost_usd} USD but model {spec.executor.model!r} has no price "
            "(SKYLOOP_MODEL_PRICES)",
        )
    if cost >= turn.max_cost_usd:
        raise TurnError(
            COST_CAP_REACHED,
            f"the turn's model calls cost {cost:.6f} USD, reaching its cap of {turn.max_cost_usd} USD",
        )


def check_budget(session: Session) -> None:
    """Spend control: once the session's spend reached its limit, no model call is made; the turn ends.

    Checked before every model call of a turn (the first included), with the
    spend every landed model call added to the session row in its result's
    write, so a turn stops at the first model call past its budget, whichever
    API started it. The turn fails with ``session_budget_exceeded`` (the
    OpenAI Agents API's code; its view shows the session as ``budget_reached``).
    """
    if budget_reached(session.spend_limit_cents, session.spend_micros):
        raise TurnError(
            BUDGET_EXCEEDED,
            f"the session's spend ({session.spend_micros / 1_000_000:.6f} USD) reached its limit of "
            f"{session.spend_limit_cents} cents",
        )


def _check_endpoint(spec: AgentSpec) -> None:
    """The model endpoint must still be callable (its name may point elsewhere since registration)."""
    auth = spec.executor.auth
    if auth is None or not auth.base_url:
        return
    from skyloop.outbound import OutboundUrlError, check_url
    from skyloop.settings import get_settings

    try:
        check_url(auth.base_url, get_settings(), what="executor.auth.base_url")
    except OutboundUrlError as exc:
        raise TurnError(exc.code, exc.message) from None


def effective_spec(spec: AgentSpec, session: Session, turn: Turn) -> AgentSpec:
    """The spec this model call runs with: the message's model, else the session's, else the agent's;
    the session's reasoning effort over the agent's (harnesses without one ignore it)."""
    model = turn.model_override or session.model_override
    effort = session.reasoning_effort
    if not model and not effort:
        return spec
    update: dict[str, Any] = {}
    if model:
        update["model"] = model
    if effort:
        update["reasoning_effort"] = effort
    return spec.model_copy(update={"executor": spec.executor.model_copy(update=update)})


def pending_calls(
    state: TurnState, calls: list[FunctionCall], turn: Turn, catalog: Catalog | None, *, anchor_seq: int
) -> list[PendingCall]:
    """The response's calls as the turn records them: who runs each, and what it waits for.

    The message's client tools win a name clash (the API refuses one up front
    anyway); a tool nobody offers is answered at once with an error the model reads.
    """
    client_names = {t.name for t in turn.tools}
    out = []
    for n, call in enumerate(calls):
        server = catalog.get(call.name) if catalog and call.name not in client_names else None
        offered = call.name in client_names or server is not None
        out.append(
            PendingCall(
                session_id=state.session_id,
                response_id=state.response_id,
                call_id=call.call_id,
                iteration=state.iteration,
                index=n,
                name=call.name,
                arguments=call.arguments,
                item_id=derived_id(state.response_id, state.iteration, "call", n),
                anchor_seq=anchor_seq,
                kind="server" if server is not None else "client",
                approval="pending" if server is not None and server.approval == "required" else None,
                output=None if offered else f"Error: tool '{call.name}' is not available in this session",
                answered_at=None if offered else int(time.time()),
            )
        )
    return out


def next_step(calls: list[PendingCall]) -> tuple[NextStep, dict[str, Any]]:
    """Where the turn goes after a model call, and what the ``Act`` state needs to know.

    * no calls: ``finish_turn``;
    * server calls to run or approvals to wait for: ``act`` (server tools run
      while client calls and approvals park);
    * only client calls still open: ``await_client``;
    * every call answered already (unknown tools): ``call_model`` again.
    """
    run_calls = [c.call_id for c in calls if c.kind == "server" and c.approval is None and c.output is None]
    approval_calls = [c.call_id for c in calls if c.approval == "pending"]
    waits = any(c.output is None and (c.kind == "client" or c.approval == "pending") for c in calls)
    route = {"run_calls": run_calls, "approval_calls": approval_calls, "await_calls": waits}
    if not calls:
        return "finish_turn", route
    if run_calls or approval_calls:
        return "act", route
    return ("await_client" if waits else "call_model"), route


def recorded_decision(store: Store, state: TurnState, *, last_seq: int | None = None) -> TurnState:
    """What the landed result of this iteration decided (a repeated invocation returns it again)."""
    decision = store.get_decision(state.session_id, state.response_id)
    if decision is None or decision.iteration != state.iteration:
        raise TurnError("internal_error", f"no recorded result for iteration {state.iteration}")
    iteration = state.iteration if decision.next == "finish_turn" else state.iteration + 1
    # Nothing has run yet when a model step is rerun (the turn moves on only once it returned),
    # so the calls as they are now route the same way they did.
    _, route = next_step(store.list_calls(state.session_id, state.response_id, iteration=state.iteration))
    return state.model_copy(
        update={
            "next": decision.next,
            "iteration": iteration,
            "consumed_seq": decision.consumed_seq,
            "last_seq": last_seq,
            **route,
        }
    )


def claim_attempt(store: Store, state: TurnState, chain: lifecycle.SeqChain | None = None) -> int:
    """Number this model call's attempt; any attempt after the first is announced to viewers."""
    chain = chain or lifecycle.SeqChain(None)
    for attempt in range(MAX_ATTEMPTS):
        if store.claim(state.session_id, f"{state.response_id}:{state.iteration}:attempt:{attempt}"):
            if attempt:
                batch = lifecycle.turn_append(state, f"{state.response_id}:{state.iteration}:retry:{attempt}")
                batch.event(ev.RESPONSE_RETRY, ev.retry(state.response_id, attempt, MAX_ATTEMPTS))
                chain.append(store, batch)
            return attempt
    raise TurnError("internal_error", "the model step was retried too many times")


def model_input(
    store: Store, state: TurnState, agent: Agent, session: Session, chain: lifecycle.SeqChain
) -> tuple[Session, list[ConversationItem], Append | None]:
    """What the model call sees: the items through the session's ``last_seq`` (its cut), and the
    outputs the turn resumes with, with the append that records them if it is still to be made.

    The outputs' append goes on while the model is called (``None``: nothing left to append), unless
    it must land before the items are read (:func:`follows`); the returned session is then as after it.
    """
    outputs = completed_calls(store, state, agent, state.iteration - 1) if state.iteration > 0 else None
    anchor = None if outputs is None else _anchor_of(outputs)
    items = store.list_items(
        state.session_id, through_seq=session.last_seq, for_turn=True, pending_anchor=anchor
    )
    if outputs is None:
        return session, items, None
    if follows(items, outputs, state):
        return session, items + conversation_items(outputs, after_seq=session.last_seq), outputs
    session = record_outputs(store, outputs, session, chain)
    return session, store.list_items(state.session_id, through_seq=session.last_seq, for_turn=True), None


def completed_calls(store: Store, state: TurnState, agent: Agent, iteration: int) -> Append | None:
    """The append that publishes and persists the completed calls of ``iteration``, in call order."""
    calls = store.list_calls(state.session_id, state.response_id, iteration=iteration)
    if not calls:
        return None
    missing = [c.call_id for c in calls if c.output is None]
    if missing:
        raise TurnError("internal_error", f"resumed with unanswered calls: {', '.join(missing)}")
    batch = lifecycle.turn_append(state, f"{state.response_id}:{iteration}:outputs")
    for call in calls:
        lifecycle.add_completed_call(batch, call, call.output or "", agent.name)
    return batch


def follows(items: list[ConversationItem], outputs: Append, state: TurnState) -> bool:
    """Whether the outputs' items, once appended, sort after every item already listed.

    Items sort by their anchor, then their seq. The outputs are anchored where
    the model made the calls; every item listed since then is this turn's own
    (the model's text, anchored there too and published earlier), unless input
    arrived meanwhile (anchored at its own, later seq) or the outputs' append
    already landed (a retried step): then the outputs are appended first and
    the items read after them, so the model sees them in the stored order.
    """
    anchor = _anchor_of(outputs)
    if anchor is None:
        return False
    ids = {item.id for item in outputs.items}
    return not any(
        item.id in ids or (item.position > anchor and item.response_id != state.response_id) for item in items
    )


def _anchor_of(outputs: Append) -> int | None:
    return min((item.anchor_seq for item in outputs.items if item.anchor_seq is not None), default=None)


def conversation_items(outputs: Append, *, after_seq: int) -> list[ConversationItem]:
    """The outputs' items as a read after their append (landing right after ``after_seq``) lists them."""
    now = int(time.time())
    return [
        ConversationItem(
            id=item.id,
            type=item.type,  # type: ignore[arg-type]
            response_id=item.response_id,
            created_at=now,
            data=item.data,
            position=after_seq + 1 + item.event_index,
        )
        for item in outputs.items
    ]


def record_outputs(store: Store, outputs: Append, session: Session, chain: lifecycle.SeqChain) -> Session:
    """Append the completed calls before the model call's cut, and return the session as it is after.

    ``session`` itself moved on by the append when the append landed right
    after it (nobody wrote in between, so nothing else of the row changed
    through the log), else read afresh.
    """
    result = chain.append(store, outputs)
    if not result.duplicate and result.first_seq == session.last_seq + 1:
        return session.model_copy(update={"last_seq": result.last_seq})
    return store.get_session(outputs.session_id)


def _publish_then_claim(
    store: Store, state: TurnState, chain: lifecycle.SeqChain, outputs: Append | None
) -> int:
    if outputs is not None:
        chain.append(store, outputs)
    return claim_attempt(store, state, chain)


_POOL: ThreadPoolExecutor | None = None


T = TypeVar("T")


def background(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Run ``fn`` on the step's small pool (the Lambda's own process: one turn at a time)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="skyloop-step")
    return _POOL.submit(contextvars.copy_context().run, fn, *args)  # with the invocation's context


class DeltaWriter:
    """Batches streamed text into appends so viewers see tokens live at a bounded write rate.

    ``attempt`` may still be being claimed (a future): the first batch waits for it.
    """

    def __init__(
        self,
        store: Store,
        state: TurnState,
        attempt: int | Future[int] = 0,
        chain: lifecycle.SeqChain | None = None,
    ) -> None:
        self.store = store
        self.state = state
        self._attempt = attempt
        self.chain = chain or lifecycle.SeqChain(None)
        self.buffer: list[str] = []
        self.batches = 0
        self.last_flush = time.monotonic()
        self.sent_any = False
        # the id the text's message item will have (so a viewer can tie deltas to the message)
        self.message_id = derived_id(state.response_id, state.iteration, "message")
        self._lock = threading.Lock()

    def add(self, delta: str) -> None:
        """Buffer streamed text; the first batch written raises what the step's writes before it raised
        (the outputs' append, the attempt's claim): the model call stops there."""
        if not delta:
            return
        with self._lock:
            self.buffer.append(delta)
            due = time.monotonic() - self.last_flush >= DELTA_FLUSH_S
            if due or sum(map(len, self.buffer)) >= DELTA_FLUSH_CHARS:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def finish(self, batch: Append, text: str, calls: int) -> None:
        """End the stream in the result's ``batch``: the text not flushed yet, or all of it if none was.

        The last streamed text rides in the result's append instead of one of
        its own: the same events in the same order, one write (and one read by
        every stream) fewer. A response with very many calls keeps the separate
        append, so the result still fits one transaction.
        """
        with self._lock:
            if calls > FOLD_MAX_CALLS:
                self._flush_locked()
            rest, self.buffer = "".join(self.buffer), []
            if rest or (text and not self.sent_any):
                batch.event(
                    ev.RESPONSE_TEXT_DELTA,
                    ev.text_delta(rest or text, response_id=self.state.response_id, item_id=self.message_id),
                )

    @property
    def attempt(self) -> int:
        return self._attempt if isinstance(self._attempt, int) else self._attempt.result()

    def _flush_locked(self) -> None:
        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        text, self.buffer = "".join(self.buffer), []
        batch = lifecycle.turn_append(
            self.state, f"{self.state.response_id}:{self.state.iteration}:delta:{self.attempt}:{self.batches}"
        )
        batch.event(
            ev.RESPONSE_TEXT_DELTA,
            ev.text_delta(text, response_id=self.state.response_id, item_id=self.message_id),
        )
        self.batches += 1
        self.chain.append(self.store, batch)
        self.sent_any = True


def default_caller(harness: str) -> Callable[..., Any]:
    """The harness the agent's executor names, imported on first use."""
    from skyloop.harnesses import caller_for

    return caller_for(harness)
