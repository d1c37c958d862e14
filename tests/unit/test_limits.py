"""What the API accepts it can store and serve: byte-bounded pages, depth-bounded bodies."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from skyloop import sessions
from skyloop.api.body import MAX_JSON_DEPTH, RequestBody
from skyloop.errors import InvalidInputError
from skyloop.models.session import Session
from skyloop.store import Append, MemoryStore, NewItem

LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024


def _session_with_big_items(count: int, chars: int) -> tuple[MemoryStore, Session]:
    store = MemoryStore()
    now = int(time.time())
    session = Session(id=uuid.uuid4().hex, agent_id="a", agent_name="n", created_at=now, updated_at=now)
    store.create_session(session)
    for n in range(count):
        batch = Append(session.id)
        batch.event("session.input.consumed", {})
        batch.items.append(
            NewItem(
                id=f"item{n:03d}",
                type="message",
                data={"role": "user", "text": "é" * chars},
                response_id=None,
            )
        )
        store.append(batch)
    return store, store.get_session(session.id)


def test_a_snapshot_of_huge_items_stays_under_lambdas_response_limit() -> None:
    # Given 66 messages of 99,000 characters (6.5 MB of items: more than one response can carry)
    store, session = _session_with_big_items(66, 99_000)
    # When the snapshot is built
    snap = sessions.snapshot(store, session, sessions.Runners("default"))
    # Then it fits, holds the newest items, and they are in order
    assert len(json.dumps(snap, ensure_ascii=False).encode()) < LAMBDA_RESPONSE_LIMIT
    ids = [i["id"] for i in snap["items"]]
    assert ids == sorted(ids)
    assert ids[-1] == "item065"
    assert len(ids) < 66


def test_item_pages_are_bounded_by_bytes_and_paging_reaches_every_item() -> None:
    store, session = _session_with_big_items(66, 99_000)
    seen: list[str] = []
    after = None
    while True:
        page, has_more = sessions.page_items(store, session, limit=100, after=after, descending=False)
        assert len(json.dumps(page, ensure_ascii=False).encode()) < LAMBDA_RESPONSE_LIMIT
        seen += [i["id"] for i in page]
        if not has_more:
            break
        after = page[-1]["id"]
    assert seen == [f"item{n:03d}" for n in range(66)]


def test_small_items_are_not_cut() -> None:
    store, session = _session_with_big_items(30, 10)
    page, has_more = sessions.page_items(store, session, limit=100, after=None, descending=False)
    assert (len(page), has_more) == (30, False)


class _Event:
    def __init__(self, body: str) -> None:
        self.body = body
        self.is_base64_encoded = False
        self.headers = {"content-type": "application/json"}


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5_000, 100_000])
def test_a_deeply_nested_body_is_400_not_500(depth: int) -> None:
    body = '{"a":' * depth + "1" + "}" * depth
    with pytest.raises(InvalidInputError, match="nests deeper"):
        RequestBody(_Event(body)).json_object()  # type: ignore[arg-type]


def test_a_body_at_the_depth_limit_is_read() -> None:
    depth = MAX_JSON_DEPTH
    body: Any = '{"a":' * (depth - 1) + "1" + "}" * (depth - 1)
    assert RequestBody(_Event(body)).json_object()["a"]  # type: ignore[arg-type]
