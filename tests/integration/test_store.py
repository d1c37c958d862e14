"""DynamoStore on moto: sequence numbers, dedupe, conditions, items, TTL, calls and listings."""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING

import pytest

from skyloop.models.session import PendingCall, Session, Turn
from skyloop.store import Append, ConditionFailedError, DynamoStore, NewItem

if TYPE_CHECKING:
    from tests.integration.conftest import Stack

pytestmark = pytest.mark.usefixtures("fresh_table")


def _session(aws: Stack, *, agent_name: str | None = None) -> Session:
    now = int(time.time())
    session = Session(
        id=uuid.uuid4().hex,
        agent_id=uuid.uuid4().hex,
        agent_name=agent_name or f"store-agent-{uuid.uuid4().hex[:8]}",
        created_at=now,
        updated_at=now,
    )
    aws.store.create_session(session)
    return session


def _batch(session_id: str, *types: str, **kwargs: object) -> Append:
    batch = Append(session_id, **kwargs)  # type: ignore[arg-type]
    for t in types:
        batch.event(t, {"t": t})
    return batch


def _raw_rows(aws: Stack, session_id: str) -> list[str]:
    """Every sort key under the session, read straight from the table."""
    return sorted(aws.rows(session_id))


def test_append_assigns_increasing_seqs_across_batches(aws: Stack) -> None:
    # Given a new session
    session = _session(aws)
    store = aws.store

    # When three batches of 2, 1 and 3 events are appended
    results = [
        store.append(_batch(session.id, "a1", "a2")),
        store.append(_batch(session.id, "b1")),
        store.append(_batch(session.id, "c1", "c2", "c3")),
    ]

    # Then each batch got the next contiguous range
    assert [(r.first_seq, r.last_seq, r.duplicate) for r in results] == [
        (1, 2, False),
        (3, 3, False),
        (4, 6, False),
    ]
    # And the log reads back 1..6 in append order
    events = store.read_events(session.id, 0)
    assert [(e.seq, e.type) for e in events] == list(enumerate(["a1", "a2", "b1", "c1", "c2", "c3"], 1))
    assert events[0].data == {"t": "a1"}
    assert events[0].payload() == {"t": "a1", "type": "a1", "sequence_number": 1}
    assert store.get_session(session.id).last_seq == 6


def test_dedupe_key_applied_twice_writes_once(aws: Stack) -> None:
    # Given a session with one event
    session = _session(aws)
    store = aws.store
    store.append(_batch(session.id, "first"))

    # When the same keyed batch is appended twice
    first = store.append(_batch(session.id, "x", "y", dedupe_key="step-1"))
    rows = _raw_rows(aws, session.id)
    second = store.append(_batch(session.id, "x", "y", dedupe_key="step-1"))

    # Then the first wrote, the second reports a duplicate and wrote nothing
    assert (first.first_seq, first.last_seq, first.duplicate) == (2, 3, False)
    assert second.duplicate is True
    assert _raw_rows(aws, session.id) == rows
    assert [e.seq for e in store.read_events(session.id, 0)] == [1, 2, 3]
    assert store.get_session(session.id).last_seq == 3

    # And another key still appends after it
    assert store.append(_batch(session.id, "z", dedupe_key="step-2")).first_seq == 4


def test_concurrent_appends_are_gapless_and_unique(aws: Stack) -> None:
    # Given a session and several writers that each append batches of one or two events
    session = _session(aws)
    store = aws.store
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

    # When they all append at once
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    # Then every event landed exactly once, numbered 1..N without a gap
    assert errors == []
    events = store.read_events(session.id, 0)
    expected = sum(1 + (w + b) % 2 for w in range(writers) for b in range(batches_each))
    assert [e.seq for e in events] == list(range(1, expected + 1))
    keys = [(e.data["w"], e.data["b"], e.data["k"]) for e in events]
    assert len(set(keys)) == expected
    assert store.get_session(session.id).last_seq == expected
    # And each batch is contiguous, and each writer's batches are in its own order
    for w in range(writers):
        mine = [(e.seq, e.data["b"], e.data["k"]) for e in events if e.data["w"] == w]
        assert [b for _, b, _ in mine] == sorted(b for _, b, _ in mine)
        for b in range(batches_each):
            seqs = [s for s, bb, _ in mine if bb == b]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_failed_session_condition_writes_nothing(aws: Stack) -> None:
    # Given an idle session with some history
    session = _session(aws)
    store = aws.store
    store.append(_batch(session.id, "a", "b"))
    rows = _raw_rows(aws, session.id)

    # When a keyed batch with events, items, session changes and raw ops requires a running session
    batch = _batch(
        session.id,
        "c",
        "d",
        dedupe_key="guarded",
        session_condition="#st = :running",
        condition_names={"#st": "status"},
        condition_values={":running": "running"},
        set_session={"title": "changed"},
        set_input_seq=True,
    )
    batch.items.append(NewItem(id=uuid.uuid4().hex, type="message", data={"role": "user"}, response_id=None))
    batch.extra.append(
        aws.store.turn_put_op(
            Turn(session_id=session.id, response_id="resp_guarded", agent_id="a", created_at=1)
        )
    )
    with pytest.raises(ConditionFailedError):
        store.append(batch)

    # Then nothing at all was written: no events, items, turn, dedupe key, or session change
    assert _raw_rows(aws, session.id) == rows
    after = store.get_session(session.id)
    assert (after.last_seq, after.input_seq, after.title) == (2, 0, None)
    assert store.list_items(session.id) == []

    # And the same key lands once the condition holds (the failed attempt claimed nothing)
    batch.session_condition = None
    batch.condition_names = {}
    batch.condition_values = {}
    assert store.append(batch).first_seq == 3


def test_items_take_the_seq_of_their_event_and_list_in_order(aws: Stack) -> None:
    # Given a session with two events already
    session = _session(aws)
    store = aws.store
    store.append(_batch(session.id, "a", "b"))

    # When a batch of three events publishes items from its first and last event (and by default)
    batch = _batch(session.id, "x", "y", "z")
    batch.items += [
        NewItem(id="i-last-default", type="message", data={"n": 1}, response_id="r"),
        NewItem(id="i-first", type="message", data={"n": 2}, response_id="r", event_index=0),
        NewItem(id="i-middle", type="function_call", data={"n": 3}, response_id="r", event_index=1),
    ]
    store.append(batch)
    later = _batch(session.id, "w")
    later.items.append(NewItem(id="i-later", type="function_call_output", data={"n": 4}, response_id="r"))
    store.append(later)

    # Then each item sits at its publishing event's seq, and items list in seq order
    items = store.list_items(session.id)
    assert [(i.id, i.position) for i in items] == [
        ("i-first", 3),
        ("i-middle", 4),
        ("i-last-default", 5),
        ("i-later", 6),
    ]
    assert items[2].data == {"n": 1} and items[2].response_id == "r" and items[1].type == "function_call"
    # And a seq bound hides items published later
    assert [i.id for i in store.list_items(session.id, through_seq=4)] == ["i-first", "i-middle"]


def test_read_events_after_returns_exactly_the_later_ones(aws: Stack) -> None:
    # Given a session with seven events
    session = _session(aws)
    store = aws.store
    store.append(_batch(session.id, *[f"e{n}" for n in range(1, 8)]))

    # When reading after each cursor
    # Then exactly the events with a larger seq come back, in order
    for cursor in range(0, 9):
        assert [e.seq for e in store.read_events(session.id, cursor)] == list(range(cursor + 1, 8))
    assert [e.seq for e in store.read_events(session.id, 2, limit=3)] == [3, 4, 5]


def test_expired_events_are_filtered(aws: Stack) -> None:
    # Given events appended normally, then with a TTL already in the past, then normally again
    session = _session(aws)
    store = aws.store
    expired = DynamoStore(aws.table_name, aws.ddb, event_ttl_s=-60)
    store.append(_batch(session.id, "kept1", "kept2"))
    old = _batch(session.id, "gone1", "gone2")
    old.items.append(NewItem(id="item-of-expired", type="message", data={}, response_id=None))
    expired.append(old)
    store.append(_batch(session.id, "kept3"))

    # When reading the log
    events = store.read_events(session.id, 0)

    # Then the expired events are skipped (moto never deletes them), the others keep their seqs
    assert [(e.seq, e.type) for e in events] == [(1, "kept1"), (2, "kept2"), (5, "kept3")]
    assert "EVENT#000000000003" in _raw_rows(aws, session.id)
    # and items never expire with their events
    assert [i.id for i in store.list_items(session.id)] == ["item-of-expired"]


def test_answer_call_sets_the_output_once_and_counts_down(aws: Stack) -> None:
    # Given the session's running turn, parked on two calls
    session = _session(aws)
    store = aws.store
    calls = [
        PendingCall(
            session_id=session.id,
            response_id="resp_x",
            call_id=f"call_{n}",
            iteration=0,
            index=n,
            name="read_file",
            arguments="{}",
            item_id=f"item{n}",
        )
        for n in range(2)
    ]
    batch = Append(session.id, set_session={"status": "running", "active_response_id": "resp_x"})
    batch.extra.append(
        store.turn_put_op(
            Turn(session_id=session.id, response_id="resp_x", agent_id="a", created_at=1, unanswered=2)
        )
    )
    batch.extra.extend(store.call_put_ops(calls))
    store.append(batch)
    assert [c.call_id for c in store.list_calls(session.id, "resp_x")] == ["call_0", "call_1"]

    # When the first call is answered
    assert store.answer_call(calls[0], "out-0") is True

    # Then its output is set and the turn has one call left
    stored = store.get_call(session.id, "resp_x", "call_0")
    assert stored is not None and stored.output == "out-0" and stored.answered_at is not None
    assert store.get_turn(session.id, "resp_x").unanswered == 1

    # When it is answered again (same or different output)
    # Then nothing changes
    assert store.answer_call(calls[0], "out-0") is False
    assert store.answer_call(calls[0], "other") is False
    stored = store.get_call(session.id, "resp_x", "call_0")
    assert stored is not None and stored.output == "out-0"
    assert store.get_turn(session.id, "resp_x").unanswered == 1

    # When the second call is answered, the count reaches zero
    assert store.answer_call(calls[1], "out-1") is True
    assert store.get_turn(session.id, "resp_x").unanswered == 0
    assert [c.output for c in store.list_calls(session.id, "resp_x")] == ["out-0", "out-1"]
    assert store.get_call(session.id, "resp_x", "call_missing") is None


def test_list_sessions_by_agent_name_newest_first(aws: Stack) -> None:
    # Given three sessions of one agent name (and one of another)
    name = f"lister-{uuid.uuid4().hex[:8]}"
    ours = [_session(aws, agent_name=name) for _ in range(3)]
    _session(aws, agent_name=f"{name}-other")
    store = aws.store

    # When listing with a limit below the count
    page, has_more = store.list_sessions(agent_name=name, limit=2)

    # Then the newest come first and more are announced
    assert [s.id for s in page] == [ours[2].id, ours[1].id]
    assert has_more is True
    # And the cursor continues after the last one seen
    rest, has_more = store.list_sessions(agent_name=name, limit=2, after=page[-1].id)
    assert ([s.id for s in rest], has_more) == ([ours[0].id], False)
    # And an exact limit has nothing more, oldest first when asked
    everything, has_more = store.list_sessions(agent_name=name, limit=3, descending=False)
    assert ([s.id for s in everything], has_more) == ([s.id for s in ours], False)
    assert store.list_sessions(agent_name=f"nobody-{uuid.uuid4().hex}") == ([], False)


def test_a_page_of_only_expired_events_still_moves_the_cursor(aws: Stack) -> None:
    # Given a log that starts with more expired events than one page holds
    session = _session(aws)
    store = aws.store
    expired = DynamoStore(aws.table_name, aws.ddb, event_ttl_s=-60)
    expired.append(_batch(session.id, "gone1", "gone2", "gone3"))
    store.append(_batch(session.id, "kept"))

    # When a reader pages through with a page smaller than the expired run
    events, covered, full = store.read_event_page(session.id, 0, limit=2)

    # Then the page yields nothing but covers seqs 1-2 and says more may follow
    assert (events, covered, full) == ([], 2, True)
    # And the next page reaches the retained event
    events, covered, full = store.read_event_page(session.id, covered, limit=2)
    assert [(e.seq, e.type) for e in events] == [(4, "kept")]
    assert (covered, full) == (4, True)
    assert store.read_event_page(session.id, covered, limit=2) == ([], 4, False)
