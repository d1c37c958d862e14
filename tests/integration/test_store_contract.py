"""The store contract: every test runs against DynamoStore on moto and against MemoryStore.

Both implement ``skyloop.store.Store``; this suite is what "the same
semantics" means, so unit tests that use the fake test what production does.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from skyloop.errors import ConflictError, InvalidInputError, NotFoundError
from skyloop.models.agent import Agent, AgentSpec
from skyloop.models.session import PendingCall, Session, Turn
from skyloop.store import (
    Append,
    ApprovalResolution,
    ConditionFailedError,
    DynamoStore,
    Guard,
    MemoryStore,
    NewItem,
    SessionChange,
    Store,
    TokenRecord,
    TurnDecision,
    TurnEnd,
)

if TYPE_CHECKING:
    from tests.integration.conftest import Stack


@dataclass
class Backend:
    store: Store
    with_ttl: Callable[[int], Store]  # the same data, written with another event TTL


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        memory = MemoryStore()

        def memory_with_ttl(ttl: int) -> Store:
            class Shifted:
                def append(self, batch: Append) -> Any:
                    saved, memory.event_ttl_s = memory.event_ttl_s, ttl
                    try:
                        return memory.append(batch)
                    finally:
                        memory.event_ttl_s = saved

            return Shifted()  # type: ignore[return-value]

        yield Backend(memory, memory_with_ttl)
        return
    aws: Stack = request.getfixturevalue("aws")
    request.getfixturevalue("fresh_table")
    store = aws.store
    assert isinstance(store, DynamoStore)
    assert store.blobs is not None, "the integration stack has a blob bucket"
    yield Backend(
        store, lambda ttl: DynamoStore(store.table, store.client, event_ttl_s=ttl, blobs=store.blobs)
    )


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.store


def _session(store: Store, *, agent_name: str | None = None, owner: str = "local") -> Session:
    now = int(time.time())
    session = Session(
        id=uuid.uuid4().hex,
        agent_id=uuid.uuid4().hex,
        agent_name=agent_name or f"store-agent-{uuid.uuid4().hex[:8]}",
        created_at=now,
        updated_at=now,
        owner=owner,
    )
    store.create_session(session)
    return session


def _batch(session_id: str, *types: str, **kwargs: Any) -> Append:
    batch = Append(session_id, **kwargs)
    for t in types:
        batch.event(t, {"t": t})
    return batch


def _events(store: Store, session_id: str, after: int = 0) -> list[Any]:
    out = []
    while True:
        page, after, full = store.read_event_page(session_id, after)
        out.extend(page)
        if not full:
            return out


def _observable(store: Store, session_id: str) -> Any:
    """Everything a caller can observe of a session through the store's interface."""
    session = store.get_session(session_id)
    return (
        session.model_dump(exclude={"updated_at"}),
        [(e.seq, e.type, e.data) for e in _events(store, session_id)],
        [i.model_dump() for i in store.list_items(session_id)],
    )


def _running(store: Store, session: Session, response_id: str, *, unanswered: int = 0) -> None:
    batch = Append(
        session.id,
        change=SessionChange(status="running", active_turn=response_id),
        new_turn=Turn(
            session_id=session.id, response_id=response_id, agent_id="a", created_at=1, unanswered=unanswered
        ),
    )
    batch.event("session.status", {"status": "running"})
    store.append(batch)


def _call(session: Session, response_id: str, n: int, iteration: int = 0) -> PendingCall:
    return PendingCall(
        session_id=session.id,
        response_id=response_id,
        call_id=f"call_{n}",
        iteration=iteration,
        index=n,
        name="read_file",
        arguments="{}",
        item_id=f"item{n}",
    )


# ------------------------------------------------------------------------- event log
def test_append_assigns_increasing_seqs_across_batches(store: Store) -> None:
    # Given a new session
    session = _session(store)
    # When three batches of 2, 1 and 3 events are appended
    results = [
        store.append(_batch(session.id, "a1", "a2")),
        store.append(_batch(session.id, "b1")),
        store.append(_batch(session.id, "c1", "c2", "c3")),
    ]
    # Then each batch got the next contiguous range, and the log reads back 1..6 in order
    assert [(r.first_seq, r.last_seq, r.duplicate) for r in results] == [
        (1, 2, False),
        (3, 3, False),
        (4, 6, False),
    ]
    events = _events(store, session.id)
    assert [(e.seq, e.type) for e in events] == list(enumerate(["a1", "a2", "b1", "c1", "c2", "c3"], 1))
    assert events[0].payload() == {"t": "a1", "type": "a1", "sequence_number": 1}
    assert store.get_session(session.id).last_seq == 6


def test_a_stale_seq_hint_costs_a_retry_not_a_wrong_number(store: Store) -> None:
    # Given a session whose last seq moved after the caller read it
    session = _session(store)
    store.append(_batch(session.id, "a", "b"))
    # When the caller appends with its stale hint
    result = store.append(_batch(session.id, "c", after_seq=0))
    # Then the append still takes the next number
    assert (result.first_seq, result.last_seq) == (3, 3)


def test_dedupe_key_applied_twice_writes_once(store: Store) -> None:
    session = _session(store)
    store.append(_batch(session.id, "first"))
    first = store.append(_batch(session.id, "x", "y", dedupe_key="step-1"))
    before = _observable(store, session.id)
    second = store.append(_batch(session.id, "x", "y", dedupe_key="step-1", after_seq=0))
    assert (first.first_seq, first.last_seq, first.duplicate) == (2, 3, False)
    assert second.duplicate is True
    assert _observable(store, session.id) == before
    assert store.dedupe_exists(session.id, "step-1")
    assert not store.dedupe_exists(session.id, "step-9")
    assert store.append(_batch(session.id, "z", dedupe_key="step-2")).first_seq == 4


def test_concurrent_appends_are_gapless_and_unique(store: Store) -> None:
    session = _session(store)
    writers, batches_each = 4, 6
    errors: list[BaseException] = []
    start = threading.Barrier(writers)

    def writer(w: int) -> None:
        try:
            start.wait()
            for b in range(batches_each):
                batch = Append(session.id)
                for k in range(1 + (w + b) % 2):
                    batch.event("e", {"w": w, "b": b, "k": k})
                store.append(batch)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    events = _events(store, session.id)
    expected = sum(1 + (w + b) % 2 for w in range(writers) for b in range(batches_each))
    assert [e.seq for e in events] == list(range(1, expected + 1))
    assert len({(e.data["w"], e.data["b"], e.data["k"]) for e in events}) == expected
    for w in range(writers):
        mine = [(e.seq, e.data["b"]) for e in events if e.data["w"] == w]
        for b in range(batches_each):
            seqs = [s for s, bb in mine if bb == b]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


@pytest.mark.parametrize(
    "guard",
    [Guard(running=True), Guard(active_turn="resp_other"), Guard(input_seen_through=-1)],
    ids=["running", "active-turn", "input-seen"],
)
def test_a_failed_guard_writes_nothing(store: Store, guard: Guard) -> None:
    # Given an idle session with some history
    session = _session(store)
    store.append(_batch(session.id, "a", "b"))
    before = _observable(store, session.id)
    # When a keyed batch with events, items, a session change and a new turn requires what does not hold
    batch = _batch(session.id, "c", "d", dedupe_key="guarded", guard=guard)
    batch.change = SessionChange(status="running", active_turn="resp_guarded", mark_input=True)
    batch.items.append(NewItem(id=uuid.uuid4().hex, type="message", data={"role": "user"}, response_id=None))
    batch.new_turn = Turn(session_id=session.id, response_id="resp_guarded", agent_id="a", created_at=1)
    with pytest.raises(ConditionFailedError):
        store.append(batch)
    # Then nothing at all was written
    assert _observable(store, session.id) == before
    assert not store.dedupe_exists(session.id, "guarded")
    with pytest.raises(NotFoundError):
        store.get_turn(session.id, "resp_guarded")
    # And the same key lands once the guard is dropped (the failed attempt claimed nothing)
    batch.guard = None
    assert store.append(batch).first_seq == 3
    assert store.get_session(session.id).active_response_id == "resp_guarded"


def test_guards_hold_on_the_session_as_it_is(store: Store) -> None:
    session = _session(store)
    _running(store, session, "resp_1")
    store.append(_batch(session.id, "input", change=SessionChange(mark_input=True)))
    assert store.get_session(session.id).input_seq == 2
    store.append(
        _batch(session.id, "ok", guard=Guard(running=True, active_turn="resp_1", input_seen_through=2))
    )
    with pytest.raises(ConditionFailedError):
        store.append(_batch(session.id, "no", guard=Guard(input_seen_through=1)))
    with pytest.raises(ConditionFailedError):
        store.append(_batch(session.id, "no", guard=Guard(running=False)))


def test_session_changes_apply_with_the_events(store: Store) -> None:
    session = _session(store)
    _running(store, session, "resp_1")
    error = {"code": "model_error", "message": "nope"}
    store.append(
        _batch(
            session.id,
            "end",
            change=SessionChange(
                status="failed", last_response_id="resp_1", end_active_turn=True, last_task_error=error
            ),
        )
    )
    failed = store.get_session(session.id)
    assert (failed.status, failed.active_response_id, failed.last_response_id) == ("failed", None, "resp_1")
    assert failed.last_task_error is not None
    assert failed.last_task_error.code == "model_error"
    store.append(_batch(session.id, "again", change=SessionChange(status="idle", clear_task_error=True)))
    assert store.get_session(session.id).last_task_error is None


def test_appending_to_a_missing_session_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        store.append(_batch(uuid.uuid4().hex, "x"))


def test_items_take_the_seq_of_their_event_and_list_in_order(store: Store) -> None:
    session = _session(store)
    store.append(_batch(session.id, "a", "b"))
    batch = _batch(session.id, "x", "y", "z")
    batch.items += [
        NewItem(id="i-last-default", type="message", data={"n": 1}, response_id="r"),
        NewItem(id="i-first", type="message", data={"n": 2}, response_id="r", event_index=0),
        NewItem(id="i-middle", type="function_call", data={"n": 3}, response_id="r", event_index=1),
    ]
    store.append(batch)
    later = _batch(session.id, "w")
    later.items.append(NewItem(id="i-later", type="function_call_output", data={"n": 4}, response_id="r"))
    later.items.append(NewItem(id="i-anchored", type="message", data={"n": 5}, response_id="r", anchor_seq=2))
    store.append(later)
    items = store.list_items(session.id)
    assert [(i.id, i.position) for i in items] == [
        ("i-anchored", 6),  # anchored before what it was published after
        ("i-first", 3),
        ("i-middle", 4),
        ("i-last-default", 5),
        ("i-later", 6),
    ]
    assert items[3].data == {"n": 1}
    assert items[3].response_id == "r"
    assert items[2].type == "function_call"
    assert [i.id for i in store.list_items(session.id, through_seq=4)] == ["i-first", "i-middle"]
    # newest=N: the last N of the same list, in the same order (a snapshot reads no more than that)
    assert [i.id for i in store.list_items(session.id, newest=2)] == ["i-last-default", "i-later"]
    assert [i.id for i in store.list_items(session.id, through_seq=4, newest=1)] == ["i-middle"]
    assert [i.id for i in store.list_items(session.id, through_seq=5, newest=10)] == [
        "i-first",
        "i-middle",
        "i-last-default",
    ]
    assert store.list_items(session.id, newest=0) == []


def test_non_ascii_text_round_trips(store: Store) -> None:
    session = _session(store)
    text = "naïve café — 你好 🚀" * 3
    batch = _batch(session.id)
    batch.event("t", {"text": text})
    batch.items.append(NewItem(id="u", type="message", data={"text": text}, response_id=None))
    store.append(batch)
    assert _events(store, session.id)[0].data == {"text": text}
    assert store.list_items(session.id)[0].data == {"text": text}


def test_read_event_page_returns_exactly_the_later_ones(store: Store) -> None:
    session = _session(store)
    store.append(_batch(session.id, *[f"e{n}" for n in range(1, 8)]))
    for cursor in range(0, 9):
        assert [e.seq for e in _events(store, session.id, cursor)] == list(range(cursor + 1, 8))
    page, covered, full = store.read_event_page(session.id, 2, limit=3)
    assert ([e.seq for e in page], covered, full) == ([3, 4, 5], 5, True)


def test_expired_events_are_skipped_but_move_the_cursor(backend: Backend) -> None:
    store = backend.store
    session = _session(store)
    store.append(_batch(session.id, "kept1"))
    old = _batch(session.id, "gone1", "gone2", "gone3")
    old.items.append(NewItem(id="item-of-expired", type="message", data={}, response_id=None))
    backend.with_ttl(-60).append(old)
    store.append(_batch(session.id, "kept2"))
    assert [(e.seq, e.type) for e in _events(store, session.id)] == [(1, "kept1"), (5, "kept2")]
    assert store.read_event_page(session.id, 1, limit=2) == ([], 3, True)
    assert [i.id for i in store.list_items(session.id)] == ["item-of-expired"]  # items never expire
    assert store.sweep_expired() >= 3
    assert [(e.seq, e.type) for e in _events(store, session.id)] == [(1, "kept1"), (5, "kept2")]


def test_claims_are_had_once(store: Store) -> None:
    session = _session(store)
    assert store.claim(session.id, "attempt:0") is True
    assert store.claim(session.id, "attempt:0") is False
    assert store.dedupe_exists(session.id, "attempt:0")
    # a claim inside an append fails the whole append when it is held already
    with pytest.raises(ConditionFailedError):
        store.append(_batch(session.id, "x", claims=["attempt:0"]))
    assert store.get_session(session.id).last_seq == 0
    store.append(_batch(session.id, "x", claims=["outputs:0"]))
    assert store.claim(session.id, "outputs:0") is False


# ----------------------------------------------------------------------- turns and calls
def test_calls_are_answered_once_and_counted_down(store: Store) -> None:
    session = _session(store)
    calls = [_call(session, "resp_x", n) for n in range(2)]
    _running(store, session, "resp_x")
    batch = Append(session.id, new_calls=calls, guard=Guard(active_turn="resp_x"))
    batch.decision = TurnDecision(
        response_id="resp_x", iteration=0, next="await_client", consumed_seq=1, unanswered=2
    )
    store.append(batch)
    assert [c.call_id for c in store.list_calls(session.id, "resp_x")] == ["call_0", "call_1"]
    assert store.get_turn(session.id, "resp_x").unanswered == 2
    assert store.answer_call(calls[0], "out-0") is True
    stored = store.get_call(session.id, "resp_x", "call_0")
    assert stored is not None
    assert stored.output == "out-0"
    assert stored.answered_at is not None
    assert store.get_turn(session.id, "resp_x").unanswered == 1
    assert store.answer_call(calls[0], "out-0") is False
    assert store.answer_call(calls[0], "other") is False
    assert store.answer_call(calls[1], "out-1") is True
    assert store.get_turn(session.id, "resp_x").unanswered == 0
    assert [c.output for c in store.list_calls(session.id, "resp_x", iteration=0)] == ["out-0", "out-1"]
    assert store.list_calls(session.id, "resp_x", iteration=1) == []
    assert store.get_call(session.id, "resp_x", "call_missing") is None


def test_only_the_active_turn_takes_answers(store: Store) -> None:
    session = _session(store)
    call = _call(session, "resp_old", 0)
    _running(store, session, "resp_old", unanswered=1)
    store.append(Append(session.id, new_calls=[call]))
    store.append(_batch(session.id, "ended", change=SessionChange(status="idle", end_active_turn=True)))
    assert store.answer_call(call, "late") is False
    assert store.get_call(session.id, "resp_old", "call_0").output is None  # type: ignore[union-attr]


def test_cancelling_calls_gives_only_unanswered_ones_the_output(store: Store) -> None:
    session = _session(store)
    calls = [_call(session, "resp_c", n) for n in range(2)]
    _running(store, session, "resp_c", unanswered=2)
    store.append(Append(session.id, new_calls=calls))
    assert store.answer_call(calls[0], "done") is True
    with pytest.raises(ConditionFailedError):  # an answered call cannot be cancelled
        store.append(_batch(session.id, "cancel", cancel_calls=[(calls[0], "[cancelled]")]))
    store.append(_batch(session.id, "cancel", cancel_calls=[(calls[1], "[cancelled]")]))
    stored = store.get_call(session.id, "resp_c", "call_1")
    assert stored is not None
    assert stored.output == "[cancelled]"
    assert stored.cancelled


def test_server_outputs_are_recorded_once_without_counting_the_wait_down(store: Store) -> None:
    session = _session(store)
    client, server = (
        _call(session, "resp_s", 0),
        _call(session, "resp_s", 1).model_copy(update={"kind": "server"}),
    )
    _running(store, session, "resp_s", unanswered=1)
    store.append(Append(session.id, new_calls=[client, server]))
    assert store.answer_call(server, "tool says hi", count_down=False) is True
    assert store.answer_call(server, "again", count_down=False) is False  # a retried branch writes nothing
    assert store.get_turn(session.id, "resp_s").unanswered == 1  # still waiting for the client
    stored = store.get_call(session.id, "resp_s", "call_1")
    assert stored is not None
    assert (stored.kind, stored.output) == ("server", "tool says hi")


def test_approvals_resolve_once_and_count_the_wait_down(store: Store) -> None:
    session = _session(store)
    pending = [
        _call(session, "resp_a", n).model_copy(update={"kind": "server", "approval": "pending"})
        for n in range(2)
    ]
    _running(store, session, "resp_a", unanswered=2)
    store.append(Append(session.id, new_calls=pending))
    approve = Append(session.id, approvals=[ApprovalResolution(pending[0], approved=True)])
    approve.event("response.elicitation_resolved", {"action": "accept"})
    store.append(approve)
    with pytest.raises(ConditionFailedError):  # resolved already: nothing is written, no event either
        store.append(
            _batch(session.id, "x", approvals=[ApprovalResolution(pending[0], approved=False, output="no")])
        )
    store.append(
        Append(session.id, approvals=[ApprovalResolution(pending[1], approved=False, output="denied")])
    )
    calls = store.list_calls(session.id, "resp_a")
    assert [(c.approval, c.output) for c in calls] == [("approved", None), ("denied", "denied")]
    assert store.get_turn(session.id, "resp_a").unanswered == 0
    assert [e.type for e in store.read_event_page(session.id, 0)[0]][-1] == "response.elicitation_resolved"


def test_an_mcp_tool_listing_is_kept_per_agent_version_first_one_wins(store: Store) -> None:
    agent_id = uuid.uuid4().hex
    assert store.get_tool_listing(agent_id, "docs") is None
    first = [{"name": "search", "description": "Search the docs", "parameters": {"type": "object"}}]
    store.put_tool_listing(agent_id, "docs", first)
    store.put_tool_listing(agent_id, "docs", [{"name": "other"}])
    assert store.get_tool_listing(agent_id, "docs") == first
    assert store.get_tool_listing(agent_id, "other-server") is None


def test_decisions_parking_and_the_one_wake_up(store: Store) -> None:
    session = _session(store)
    _running(store, session, "resp_p")
    assert store.get_decision(session.id, "resp_p") is None
    assert store.get_turn(session.id, "resp_p").decided_iteration is None
    decision = TurnDecision(
        response_id="resp_p", iteration=0, next="await_client", consumed_seq=1, unanswered=1
    )
    store.append(Append(session.id, decision=decision))
    recorded = store.get_decision(session.id, "resp_p")
    assert recorded is not None
    # the store notes when the result landed (a turn continued after a restart keeps its deadline by it)
    assert recorded.decided_at is not None
    assert abs(recorded.decided_at - time.time()) < 60
    assert dataclasses.replace(recorded, decided_at=None) == decision
    # the turn row says which iteration's result landed (the model step reads no marker for it)
    assert store.get_turn(session.id, "resp_p").decided_iteration == 0
    store.park_turn(session.id, "resp_p", task_token="token-1", iteration=0)
    turn = store.get_turn(session.id, "resp_p")
    assert (turn.task_token, turn.await_iteration, turn.unanswered) == ("token-1", 0, 1)
    # the wake-up of an iteration is claimed once; released, it can be claimed again
    assert store.claim_resume(session.id, "resp_p", 0) is True
    assert store.claim_resume(session.id, "resp_p", 0) is False
    store.release_resume(session.id, "resp_p", 0)
    assert store.claim_resume(session.id, "resp_p", 0) is True
    assert store.get_turn(session.id, "resp_p").resumed_iteration == 0
    assert store.claim_resume(session.id, "resp_p", 1) is True  # a later iteration has its own
    store.release_resume(session.id, "resp_p", 0)  # releasing an older one changes nothing
    assert store.claim_resume(session.id, "resp_p", 1) is False
    with pytest.raises(NotFoundError):
        store.park_turn(session.id, "resp_missing", task_token="t", iteration=0)
    with pytest.raises(ConditionFailedError):  # a decision for a missing turn fails the append
        store.append(Append(session.id, decision=TurnDecision("resp_missing", 0, "stop", 0, 0)))


def test_model_call_tokens_add_up_on_the_turn_and_the_session_once_per_append(store: Store) -> None:
    session = _session(store)
    _running(store, session, "resp_u")
    first = TurnDecision("resp_u", 0, "call_model", 1, 0, input_tokens=100, output_tokens=7)
    second = TurnDecision("resp_u", 1, "finish_turn", 1, 0, input_tokens=150, output_tokens=30)
    store.append(Append(session.id, decision=first, dedupe_key="resp_u:0:result"))
    store.append(Append(session.id, decision=first, dedupe_key="resp_u:0:result"))  # a rerun: no double count
    store.append(Append(session.id, decision=second, dedupe_key="resp_u:1:result"))
    turn = store.get_turn(session.id, "resp_u")
    assert (turn.input_tokens, turn.output_tokens) == (250, 37)
    assert turn.usage() == {"input_tokens": 250, "output_tokens": 37, "total_tokens": 287}
    assert store.get_decision(session.id, "resp_u") == second
    got = store.get_session(session.id)
    assert (got.input_tokens, got.output_tokens) == (250, 37)
    store.append(Append(session.id, decision=TurnDecision("resp_u", 2, "finish_turn", 1, 0)))  # none reported
    assert store.get_session(session.id).input_tokens == 250


def test_a_turn_is_created_once(store: Store) -> None:
    session = _session(store)
    _running(store, session, "resp_once")
    with pytest.raises(ConditionFailedError):
        store.append(
            Append(
                session.id,
                new_turn=Turn(session_id=session.id, response_id="resp_once", agent_id="a", created_at=1),
            )
        )


# ----------------------------------------------------------------------------- sessions
def test_list_sessions_by_agent_name_newest_first_with_cursors(store: Store) -> None:
    name = f"lister-{uuid.uuid4().hex[:8]}"
    ours = [_session(store, agent_name=name) for _ in range(3)]
    _session(store, agent_name=f"{name}-other")
    page, has_more = store.list_sessions(agent_name=name, limit=2)
    assert ([s.id for s in page], has_more) == ([ours[2].id, ours[1].id], True)
    rest, has_more = store.list_sessions(agent_name=name, limit=2, after=page[-1].id)
    assert ([s.id for s in rest], has_more) == ([ours[0].id], False)
    everything, has_more = store.list_sessions(agent_name=name, limit=3, descending=False)
    assert ([s.id for s in everything], has_more) == ([s.id for s in ours], False)
    assert store.list_sessions(agent_name=f"nobody-{uuid.uuid4().hex}") == ([], False)
    with pytest.raises(NotFoundError):
        store.list_sessions(agent_name=name, after=uuid.uuid4().hex)
    other = store.list_sessions(agent_name=f"{name}-other")[0][0]
    with pytest.raises(InvalidInputError):
        store.list_sessions(agent_name=name, after=other.id)


def test_sessions_are_listed_per_owner_with_archive_filters(store: Store) -> None:
    owner = f"owner-{uuid.uuid4().hex[:8]}"
    a, b = _session(store, owner=owner), _session(store, owner=owner)
    _session(store, owner=f"{owner}-x")
    store.update_session(b.id, {"archived": True})
    assert [s.id for s in store.list_sessions(owner=owner)[0]] == [a.id]
    assert [s.id for s in store.list_sessions(owner=owner, archived=True)[0]] == [b.id]
    assert {s.id for s in store.list_sessions(owner=owner, archived=None)[0]} == {a.id, b.id}
    assert [s.id for s in store.list_sessions(owner=owner, agent_id=a.agent_id, archived=None)[0]] == [a.id]


def test_update_and_delete_sessions(store: Store) -> None:
    session = _session(store)
    updated = store.update_session(session.id, {"title": "T", "labels": {"k": "v"}, "runner_id": "default"})
    assert (updated.title, updated.labels, updated.runner_id) == ("T", {"k": "v"}, "default")
    assert store.get_session(session.id).labels == {"k": "v"}
    cleared = store.update_session(session.id, {"runner_id": None})
    assert cleared.runner_id is None
    assert cleared.title == "T"
    store.append(_batch(session.id, "e", dedupe_key="k"))
    store.delete_session(session.id)
    with pytest.raises(NotFoundError):
        store.get_session(session.id)
    with pytest.raises(NotFoundError):
        store.delete_session(session.id)
    with pytest.raises(NotFoundError):
        store.update_session(session.id, {"title": "x"})
    assert store.read_event_page(session.id, 0) == ([], 0, False)
    assert store.list_items(session.id) == []
    assert not store.dedupe_exists(session.id, "k")
    fresh = _session(store)
    with pytest.raises(ConflictError):
        store.create_session(fresh)


# ------------------------------------------------------------------------------- agents
def _agent(store: Store, name: str, owner: str = "local") -> Agent:
    spec = AgentSpec.model_validate(
        {"name": name, "executor": {"model": "m", "auth": {"base_url": "http://x"}}}
    )
    agent_id = uuid.uuid4().hex
    agent = Agent(
        id=agent_id,
        name=name,
        created_at=int(time.time()),
        spec=spec,
        owner=owner,
        api_key_secret=f"skyloop/agents/{agent_id}/api_key",
    )
    store.put_agent(agent)
    return agent


def test_agent_versions_newest_first_and_keep_no_key(store: Store) -> None:
    owner = f"o-{uuid.uuid4().hex[:8]}"
    name = f"agent-{uuid.uuid4().hex[:8]}"
    v1, v2 = _agent(store, name, owner), _agent(store, name, owner)
    other = _agent(store, f"{name}-b", owner)
    assert store.find_agent_by_name(name, owner=owner).id == v2.id  # type: ignore[union-attr]
    assert store.find_agent_by_name(name, owner="someone-else") is None
    got = store.get_agent(v1.id)
    assert got.api_key_secret == v1.api_key_secret
    assert got.spec == v1.spec
    keyed = AgentSpec.model_validate({"name": name, "executor": {"model": "m", "auth": {"api_key": "sk-x"}}})
    with pytest.raises(ValueError, match="secret store"):  # a key never reaches the table
        store.put_agent(Agent(id=uuid.uuid4().hex, name=name, created_at=1, spec=keyed))
    page, more = store.list_agents(owner=owner, limit=2)
    assert ([a.id for a in page], more) == ([other.id, v2.id], True)
    rest, more = store.list_agents(owner=owner, limit=2, after=page[-1].id)
    assert ([a.id for a in rest], more) == ([v1.id], False)
    with pytest.raises(NotFoundError):
        store.get_agent(uuid.uuid4().hex)
    with pytest.raises(NotFoundError):
        store.list_agents(owner=owner, after=uuid.uuid4().hex)


def test_an_agent_version_keeps_its_version_number_and_can_be_deleted(store: Store) -> None:
    owner = f"o-{uuid.uuid4().hex[:8]}"
    name = f"agent-{uuid.uuid4().hex[:8]}"
    v1 = _agent(store, name, owner)
    v2 = Agent(**{**store.get_agent(v1.id).model_dump(), "id": uuid.uuid4().hex, "version": 2})
    store.put_agent(v2)
    store.put_tool_listing(v2.id, "srv", [{"name": "t"}])
    assert store.get_agent(v2.id).version == 2
    assert store.get_agent(v1.id).version == 1
    store.delete_agent(v2.id)
    with pytest.raises(NotFoundError):
        store.get_agent(v2.id)
    assert store.get_tool_listing(v2.id, "srv") is None
    assert store.find_agent_by_name(name, owner=owner).id == v1.id  # type: ignore[union-attr]
    store.delete_agent(v2.id)  # deleting again is harmless


# ------------------------------------------------------------------------------- tokens
def test_tokens_by_hash_and_owner(store: Store) -> None:
    owner = f"p-{uuid.uuid4().hex[:8]}"
    token = TokenRecord(token_hash=uuid.uuid4().hex * 2, id="abc", name="laptop", created_at=1, owner=owner)
    store.put_token(token)
    with pytest.raises(ConflictError):
        store.put_token(token)
    assert store.get_token(token.token_hash) == token
    assert store.list_tokens(owner=owner) == [token]
    assert token in store.list_tokens()
    assert store.delete_token(token.token_hash) == token
    assert store.delete_token(token.token_hash) is None
    assert store.get_token(token.token_hash) is None


# ------------------------------------------------------------------------ large payloads
INLINE = 32 * 1024


@pytest.mark.parametrize(
    "text",
    [
        "a" * (INLINE - 64),  # just under the inline limit once JSON-quoted
        "a" * (INLINE + 64),  # just over: goes to the blob bucket
        "é" * 100_000,  # 200 KB of UTF-8
        "你" * 200_000,  # the API's largest tool output, 600 KB of UTF-8
        "🚀" * 200_000,  # 800 KB of UTF-8, 12 bytes a piece with \\u escapes
    ],
    ids=["under-inline", "over-inline", "accented", "cjk-200k", "emoji-200k"],
)
def test_texts_of_every_size_the_api_accepts_round_trip(store: Store, text: str) -> None:
    # Given a session with a running turn and one call
    session = _session(store)
    _running(store, session, "resp_big", unanswered=1)
    call = _call(session, "resp_big", 0).model_copy(update={"arguments": '{"t": "' + text + '"}'})
    batch = _batch(session.id, new_calls=[call])
    batch.event("response.output_item.done", {"item": {"output": text}})
    batch.items.append(NewItem(id="big", type="message", data={"content": text}, response_id="resp_big"))
    # When it is appended and the call answered with the text
    store.append(batch)
    assert store.answer_call(call, text) is True
    # Then everything reads back whole
    assert _events(store, session.id)[-1].data == {"item": {"output": text}}
    assert store.list_items(session.id)[-1].data == {"content": text}
    stored = store.get_call(session.id, "resp_big", "call_0")
    assert stored is not None
    assert stored.output == text
    assert stored.arguments == call.arguments
    # and answering again is refused whatever the size
    assert store.answer_call(call, text) is False
    assert store.answer_call(call, "other") is False


def test_a_turn_with_many_long_tool_descriptions_round_trips(store: Store) -> None:
    session = _session(store)
    from skyloop.models.session import ClientTool

    tools = [
        ClientTool(name=f"tool_{n}", description="ü" * 9_000, parameters={"type": "object"})
        for n in range(64)
    ]
    store.append(
        Append(
            session.id,
            new_turn=Turn(
                session_id=session.id, response_id="resp_tools", agent_id="a", created_at=1, tools=tools
            ),
        )
    )
    assert store.get_turn(session.id, "resp_tools").tools == tools


def test_an_agent_with_the_longest_prompt_round_trips(store: Store) -> None:
    name = f"long-{uuid.uuid4().hex[:8]}"
    spec = AgentSpec.model_validate({"name": name, "prompt": "ß" * 200_000, "executor": {"model": "m"}})
    agent = Agent(id=uuid.uuid4().hex, name=name, created_at=1, spec=spec)
    store.put_agent(agent)
    assert store.get_agent(agent.id).spec.prompt == spec.prompt


def test_deleting_a_session_deletes_its_blobs(backend: Backend) -> None:
    store = backend.store
    session = _session(store)
    batch = _batch(session.id)
    batch.event("big", {"text": "x" * 100_000})
    store.append(batch)
    store.delete_session(session.id)
    blobs = getattr(store, "blobs", None)
    if blobs is not None:  # the DynamoDB store keeps large texts in the bucket
        listed = blobs.client.list_objects_v2(Bucket=blobs.bucket, Prefix=f"sessions/{session.id}/")
        assert listed.get("KeyCount", 0) == 0
    assert store.read_event_page(session.id, 0) == ([], 0, False)


def test_running_sessions_are_listed_exactly_while_running(store: Store) -> None:
    session, other = _session(store), _session(store)
    assert session.id not in {s.id for s in store.list_running_sessions()}
    _running(store, session, "resp_r")
    running = {s.id for s in store.list_running_sessions()}
    assert session.id in running
    assert other.id not in running
    store.append(_batch(session.id, "end", change=SessionChange(status="idle", end_active_turn=True)))
    assert session.id not in {s.id for s in store.list_running_sessions()}


def test_turns_begun_in_one_second_list_in_the_order_they_began(store: Store) -> None:
    """``created_at`` is in seconds; the usage report and turn listings must not order by random ids."""
    session = _session(store)
    for rid in ("resp_z", "resp_m", "resp_a"):  # one second, ids sorting against the order of creation
        store.append(
            Append(
                session.id,
                events=[("response.created", {"id": rid})],
                new_turn=Turn(session_id=session.id, response_id=rid, agent_id="a", created_at=10),
            )
        )
    assert [t.response_id for t in store.list_turns(session.id)] == ["resp_z", "resp_m", "resp_a"]


def test_turns_record_their_cost_and_their_end_and_list_oldest_first(store: Store) -> None:
    """Spend (skyloop.pricing) sums like tokens; how a turn ended lands on its row with its terminal
    append, folded into the same model call's decision update or on its own (a cancel, a failure)."""
    session = _session(store)
    for n, rid in enumerate(("resp_b", "resp_a")):  # created in this order, listed by creation
        store.append(
            Append(
                session.id,
                new_turn=Turn(session_id=session.id, response_id=rid, agent_id="a", created_at=10 + n),
            )
        )
    decision = TurnDecision("resp_b", 0, "finish_turn", 1, 0, input_tokens=5, output_tokens=1, cost_micros=70)
    store.append(Append(session.id, decision=decision, turn_end=TurnEnd("resp_b", "completed", 20)))
    error = {"code": "session_budget_exceeded", "message": "over"}
    store.append(Append(session.id, turn_end=TurnEnd("resp_a", "failed", 21, error)))
    turns = store.list_turns(session.id)
    assert [t.response_id for t in turns] == ["resp_b", "resp_a"]
    assert [(t.status, t.completed_at, t.error) for t in turns] == [
        ("completed", 20, None),
        ("failed", 21, error),
    ]
    assert (turns[0].spend_micros, turns[0].input_tokens) == (70, 5)
    assert store.get_turn(session.id, "resp_a").error == error
    assert store.get_session(session.id).spend_micros == 70
    assert store.list_turns(uuid.uuid4().hex) == []
