"""Event-log pages as DynamoDB cuts them: a page cut at its 1 MB per Query says more follows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyloop.store import Append

if TYPE_CHECKING:
    from tests.integration.conftest import Stack

EVENT_CHARS = 30_000  # under the store's 32 KB inline limit: each event stays a table item
EVENTS = 40  # about 1.2 MB of items: more than one Query may return


def test_a_page_cut_at_one_megabyte_is_not_taken_for_the_end_of_the_log(aws: Stack) -> None:
    # Given a session whose log holds more event bytes than one Query returns (moto cuts at 1 MB too)
    session = aws.new_session("unused-model")
    start = aws.store.get_session(session.id).last_seq
    for n in range(EVENTS):
        aws.store.append(Append(session.id, events=[("big", {"n": n, "text": "x" * EVENT_CHARS})]))
    # When the first page is read, far below the item limit
    page, covered, more = aws.store.read_event_page(session.id, start, limit=500)
    assert 0 < len(page) < EVENTS  # cut by size, not by the limit
    # Then it says more follows, so a reader goes on at once instead of waiting to poll
    assert more
    # And reading on from where it stopped yields the rest, each event once, in order
    seen = [e.data["n"] for e in page]
    while more:
        page, covered, more = aws.store.read_event_page(session.id, covered, limit=500)
        seen += [e.data["n"] for e in page]
    assert seen == list(range(EVENTS))
