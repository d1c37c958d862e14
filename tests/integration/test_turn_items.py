"""A turn's model calls read only the items published since their environment's last read.

A model call used to read the session's whole history: a long session's
every turn grew slower. The turn's reads now ask only for the items anchored
at or after the last cut the environment read; these tests pin that the
result is still exactly the full history, in conversation order, including
a message that joins while the model is busy (it anchors after the reply),
and that the saving is real (the query returns only the new rows).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from skyloop.store import Append
from skyloop.store.records import NewItem

if TYPE_CHECKING:
    from collections.abc import Iterator

    from skyloop.store import DynamoStore
    from tests.integration.conftest import Stack

pytestmark = pytest.mark.usefixtures("fresh_table")


class Returned:
    """How many rows the store's item queries returned."""

    def __init__(self) -> None:
        self.rows: Counter[str] = Counter()

    def count(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "Query":
            self.rows["items"] += len(parsed.get("Items", []))


@pytest.fixture
def returned(aws: Stack) -> Iterator[Returned]:
    counter = Returned()
    events = aws.store.client.meta.events
    events.register("after-call.dynamodb", counter.count, unique_id="turn-items")
    yield counter
    events.unregister("after-call.dynamodb", unique_id="turn-items")


def _message(store: DynamoStore, session_id: str, text: str) -> int:
    item = NewItem(id=f"msg-{text}", type="message", data={"role": "user", "text": text}, response_id=None)
    return store.append(Append(session_id, events=[("test.message", {"text": text})], items=[item])).last_seq


def _reply(store: DynamoStore, session_id: str, text: str, anchor: int) -> int:
    """What a model call that read the cut ``anchor`` produced."""
    item = NewItem(
        id=f"reply-{text}",
        type="message",
        data={"role": "assistant", "text": text},
        response_id="resp",
        anchor_seq=anchor,
    )
    return store.append(Append(session_id, events=[("test.reply", {"text": text})], items=[item])).last_seq


def _texts(store: DynamoStore, session_id: str, cut: int, *, for_turn: bool) -> list[str]:
    return [i.data["text"] for i in store.list_items(session_id, through_seq=cut, for_turn=for_turn)]


def test_a_turns_reads_equal_the_full_history_and_return_only_new_rows(
    aws: Stack, returned: Returned
) -> None:
    # Given a session with a history of twenty exchanges, read once by the turn
    store = aws.store
    session = aws.new_session("unused-model")
    cut = 0
    for n in range(20):
        cut = _message(store, session.id, f"q{n}")
        cut = _reply(store, session.id, f"a{n}", anchor=cut)
    assert _texts(store, session.id, cut, for_turn=True) == _texts(store, session.id, cut, for_turn=False)
    returned.rows.clear()

    # When the model call reads the cut, and a message joins while the model is busy: the reply
    # anchors at the cut the call read, the message at its own (later) seq
    read = cut
    assert len(_texts(store, session.id, read, for_turn=True)) == 40
    joined = _message(store, session.id, "while-busy")
    reply = _reply(store, session.id, "reply", anchor=read)
    returned.rows.clear()

    # Then the next read of the turn is the full history in conversation order (the reply before
    # the message that joined while it was written)
    seen = _texts(store, session.id, reply, for_turn=True)
    assert seen[-3:] == ["a19", "reply", "while-busy"]
    assert reply > joined
    # And it returned only the rows from the last cut's anchor on, not the history again
    assert returned.rows["items"] <= 3, returned.rows
    assert seen == _texts(store, session.id, reply, for_turn=False)


def test_an_older_cut_than_the_one_held_reads_the_history(aws: Stack) -> None:
    # Given a turn's read of a session at its latest cut
    store = aws.store
    session = aws.new_session("unused-model")
    first = _message(store, session.id, "one")
    latest = _message(store, session.id, "two")
    assert _texts(store, session.id, latest, for_turn=True) == ["one", "two"]

    # When a read asks for an earlier cut (a retried step's)
    # Then it sees exactly what that cut holds
    assert _texts(store, session.id, first, for_turn=True) == ["one"]
    assert _texts(store, session.id, latest, for_turn=True) == ["one", "two"]


def test_another_environment_sees_what_this_one_did_not_write(aws: Stack) -> None:
    # Given two environments' stores, the first having read the session
    from skyloop import deps
    from skyloop.store import DynamoStore

    store = aws.store
    other = DynamoStore(store.table, deps.client("dynamodb"), blobs=store.blobs)
    session = aws.new_session("unused-model")
    cut = _message(store, session.id, "one")
    assert _texts(store, session.id, cut, for_turn=True) == ["one"]

    # When the turn's next steps run in the other environment and append
    cut = _reply(other, session.id, "two", anchor=cut)
    assert _texts(other, session.id, cut, for_turn=True) == ["one", "two"]
    cut = _message(other, session.id, "three")
    cut = _reply(other, session.id, "four", anchor=cut)

    # Then the first environment's next read has all of it
    assert _texts(store, session.id, cut, for_turn=True) == ["one", "two", "three", "four"]


def test_an_output_anchored_at_an_earlier_cut_is_read_after_this_environments_own_appends(aws: Stack) -> None:
    # Given a model call that read the cut, and whose call this environment appended itself
    from skyloop import deps
    from skyloop.store import DynamoStore

    store = aws.store
    other = DynamoStore(store.table, deps.client("dynamodb"), blobs=store.blobs)
    session = aws.new_session("unused-model")
    read = _message(store, session.id, "q")
    assert _texts(store, session.id, read, for_turn=True) == ["q"]
    _reply(store, session.id, "call", anchor=read)

    # When another writer moves the session, and then the call's output lands, anchored (like the
    # call) at the cut the model call read
    other.append(Append(session.id, events=[("test.other", {})]))
    cut = _reply(store, session.id, "output", anchor=read)

    # Then the next model call's read has the output
    assert _texts(store, session.id, cut, for_turn=True) == ["q", "call", "output"]
    assert _texts(store, session.id, cut, for_turn=False) == ["q", "call", "output"]


def test_what_is_held_stays_within_its_bytes_the_least_recently_read_going_first(
    aws: Stack, returned: Returned, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyloop.store.dynamodb.events import _TurnItems

    # Given room for one session's items (ten messages of ~35 bytes each), not two
    monkeypatch.setattr(_TurnItems, "MAX_BYTES", 500)
    store = aws.store
    first, second = aws.new_session("unused-model"), aws.new_session("unused-model")
    cuts = {}
    for session in (first, second):
        for n in range(10):
            cuts[session.id] = _message(store, session.id, f"{session.id[:4]}-{n}")

    # When the turns of both read their sessions, the first, then the second
    for session in (first, second):
        assert len(_texts(store, session.id, cuts[session.id], for_turn=True)) == 10
    returned.rows.clear()

    # Then the second is held (nothing to read again), the first was let go (read whole again)
    _texts(store, second.id, cuts[second.id], for_turn=True)
    assert returned.rows["items"] == 0
    _texts(store, first.id, cuts[first.id], for_turn=True)
    assert returned.rows["items"] == 10
    held = store._turn_items  # type: ignore[attr-defined]
    assert held._bytes <= 500
