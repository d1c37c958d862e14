"""The store contract for seeded history, fork links and session files, on both stores.

The same cases as ``test_store_contract.py`` (whose ``backend`` fixture runs
each test on MemoryStore and on DynamoStore over moto), for what forks,
imports and ``/resources/files`` ask of the store.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid

import pytest

from skyloop.errors import (
    FileTooLargeError,
    NotFoundError,
    PayloadTooLargeError,
    SessionFileBytesError,
    SessionFileCountError,
)
from skyloop.models.session import ConversationItem, Session, SessionFile
from skyloop.store import Append, DynamoStore, FileLimits, NewItem, Store
from skyloop.store import keys as store_keys
from tests.integration.test_store_contract import _session, backend, store

__all__ = ["backend", "store"]  # the fixtures, run over both stores

LIMITS = FileLimits(max_file_bytes=10, max_files=3, max_total_bytes=20)


def _items(n: int, *, big: int | None = None) -> list[ConversationItem]:
    out = []
    for i in range(n):
        text = "x" * 40_000 if i == big else f"message {i}"
        role = "user" if i % 2 == 0 else "assistant"
        out.append(
            ConversationItem(
                id=uuid.uuid4().hex,
                type="message",
                response_id=f"resp_{i // 2}",
                created_at=1_000 + i,
                data={"role": role, "content": [{"type": "input_text", "text": text}]},
            )
        )
    return out


def _child(store: Store, parent: Session, items: list[ConversationItem] | None = None) -> Session:
    now = int(time.time())
    child = Session(
        id=uuid.uuid4().hex,
        agent_id=parent.agent_id,
        agent_name=parent.agent_name,
        created_at=now,
        updated_at=now,
        parent_session_id=parent.id,
    )
    store.create_session(child, items or [])
    return child


def _file(session: Session, data: bytes, name: str = "notes.txt") -> SessionFile:
    return SessionFile(
        id=uuid.uuid4().hex,
        session_id=session.id,
        filename=name,
        bytes=len(data),
        content_type="text/plain",
        created_at=int(time.time()),
        sha256=hashlib.sha256(data).hexdigest(),
    )


# ------------------------------------------------------------------------ seeded history
def test_a_session_created_with_items_holds_them_in_order_below_every_later_append(store: Store) -> None:
    # Given a session created with 30 items, one of them too large for an item row
    parent = _session(store)
    seeded = _items(30, big=7)
    child = _child(store, parent, seeded)
    # Then they read back in order, positions 1..30, timestamps and data kept, cursor at 30
    listed = store.list_items(child.id)
    assert [i.id for i in listed] == [i.id for i in seeded]
    assert [i.position for i in listed] == list(range(1, 31))
    assert [i.created_at for i in listed] == [i.created_at for i in seeded]
    assert listed[7].data == seeded[7].data
    assert store.get_session(child.id).last_seq == 30
    # When a turn appends after them
    batch = Append(child.id)
    batch.event("session.input_consumed", {})
    batch.items.append(NewItem(id="after", type="message", data={"role": "user"}, response_id="turn_x"))
    result = store.append(batch)
    # Then its seq follows the seeded history and its item sorts after every seeded one
    assert result.first_seq == 31
    assert [i.id for i in store.list_items(child.id)][-1] == "after"


def test_forks_are_listed_under_their_parent_until_deleted(store: Store) -> None:
    # Given a parent with two forks and a session with none
    parent = _session(store)
    first, second = _child(store, parent), _child(store, parent)
    lonely = _session(store)
    # Then the parent lists both, oldest first, each naming its parent
    children = store.list_child_sessions(parent.id)
    assert [c.id for c in children] == [first.id, second.id]
    assert {c.parent_session_id for c in children} == {parent.id}
    assert store.list_child_sessions(lonely.id) == []
    # When a fork is deleted, it is no longer listed
    store.delete_session(first.id)
    assert [c.id for c in store.list_child_sessions(parent.id)] == [second.id]


# ---------------------------------------------------------------------------- files
def test_a_file_reads_back_and_counts_toward_the_session(store: Store) -> None:
    session = _session(store)
    data = b"hello"
    f = _file(session, data)
    # When a file is added
    store.add_file(f, data, LIMITS)
    # Then its metadata, bytes and the session's totals read back
    assert store.get_file(session.id, f.id) == f
    assert store.read_file(f) == data
    assert store.list_files(session.id) == [f]
    assert store.file_totals(session.id) == (1, 5)
    assert store.get_file(session.id, uuid.uuid4().hex) is None
    # When it is deleted: once, and the totals are given back
    assert store.delete_file(session.id, f.id) == f
    assert store.delete_file(session.id, f.id) is None
    assert store.list_files(session.id) == []
    assert store.file_totals(session.id) == (0, 0)
    with pytest.raises(NotFoundError):
        store.read_file(f)


@pytest.mark.parametrize(
    ("sizes", "refused", "error"),
    [
        ([10], None, None),  # one file at the per-file limit
        ([], 11, FileTooLargeError),  # one byte over it
        ([1, 1, 1], None, None),  # the third file: at the count limit
        ([1, 1, 1], 1, SessionFileCountError),  # a fourth
        ([10, 10], None, None),  # at the session's byte limit
        ([10, 9], 2, SessionFileBytesError),  # one byte over it
    ],
)
def test_file_limits_hold_at_the_limit_and_refuse_one_past(
    store: Store, sizes: list[int], refused: int | None, error: type[PayloadTooLargeError] | None
) -> None:
    session = _session(store)
    for size in sizes:
        store.add_file(_file(session, b"a" * size), b"a" * size, LIMITS)
    if refused is None:
        assert store.file_totals(session.id) == (len(sizes), sum(sizes))
        return
    before = (store.list_files(session.id), store.file_totals(session.id))
    # When one more file would break a limit
    with pytest.raises(PayloadTooLargeError) as info:
        store.add_file(_file(session, b"b" * refused), b"b" * refused, LIMITS)
    # Then the error names that limit, and nothing was written
    assert type(info.value) is error
    assert info.value.status == 413
    assert (store.list_files(session.id), store.file_totals(session.id)) == before


def test_racing_uploads_never_pass_the_count_limit(store: Store) -> None:
    session = _session(store)
    limits = FileLimits(max_file_bytes=10, max_files=3, max_total_bytes=1_000)
    start = threading.Barrier(6)
    outcomes: list[str] = []

    def upload() -> None:
        start.wait()
        try:
            store.add_file(_file(session, b"abc"), b"abc", limits)
            outcomes.append("ok")
        except SessionFileCountError:
            outcomes.append("refused")

    threads = [threading.Thread(target=upload) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then exactly the limit landed, and the totals agree with the rows
    assert sorted(outcomes) == ["ok"] * 3 + ["refused"] * 3
    assert len(store.list_files(session.id)) == 3
    assert store.file_totals(session.id) == (3, 9)


def test_deleting_the_session_removes_its_files_and_their_bytes(store: Store) -> None:
    session = _session(store)
    f = _file(session, b"bytes")
    store.add_file(f, b"bytes", LIMITS)
    store.delete_session(session.id)
    assert store.get_file(session.id, f.id) is None
    assert store.list_files(session.id) == []
    with pytest.raises(NotFoundError):
        store.read_file(f)
    if isinstance(store, DynamoStore):
        assert store.blobs is not None
        s3 = store.blobs.client  # type: ignore[attr-defined]
        bucket = store.blobs.bucket  # type: ignore[attr-defined]
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=store_keys.session_blob_prefix(session.id))
        assert listed.get("KeyCount", 0) == 0


def test_a_file_for_a_missing_session_is_refused(store: Store) -> None:
    ghost = Session(id=uuid.uuid4().hex, agent_id="a", agent_name="a", created_at=1, updated_at=1)
    with pytest.raises(NotFoundError):
        store.add_file(_file(ghost, b"x"), b"x", LIMITS)
