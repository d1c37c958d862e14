"""The I/O-free turn tracker, event by event: which events are ours, which calls wait, the text, the end."""

from __future__ import annotations

from typing import Any

from skyloop.client import parse_event
from skyloop.client._tracker import TurnTracker

OURS = "resp_ours"
OTHER = "resp_other"


def ev(payload: dict[str, Any]) -> Any:
    return parse_event(payload)


def running(response_id: str) -> Any:
    return ev({"type": "session.status", "status": "running", "response_id": response_id})


def consumed(item_id: str) -> Any:
    return ev({"type": "session.input.consumed", "data": {"item_id": item_id, "type": "message"}})


def delta(text: str, response_id: str = OURS) -> Any:
    return ev({"type": "response.output_text.delta", "delta": text, "response_id": response_id})


def call(call_id: str, status: str = "action_required", response_id: str = OURS) -> Any:
    item = {
        "type": "function_call",
        "name": "Glob",
        "arguments": "{}",
        "call_id": call_id,
        "status": status,
        "response_id": response_id,
    }
    return ev({"type": "response.output_item.done", "item": item})


def message(text: str, response_id: str = OURS) -> Any:
    item = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
        "response_id": response_id,
    }
    return ev({"type": "response.output_item.done", "item": item})


def terminal(kind: str, response_id: str = OURS, **response: Any) -> Any:
    return ev({"type": f"response.{kind}", "response": {"id": response_id, **response}})


def tracking(item_id: str = "m1") -> TurnTracker:
    tracker = TurnTracker()
    tracker.item_id = item_id
    return tracker


def test_events_before_our_message_is_consumed_are_not_ours() -> None:
    # Given another turn running while our message waits in the inbox
    tracker = tracking()
    for event in (
        running(OTHER),
        consumed("someone_else"),
        delta("not ours", OTHER),
        call("c0", response_id=OTHER),
    ):
        assert tracker.observe(event) == []
    terminal_of_other = terminal("completed", OTHER)
    tracker.observe(terminal_of_other)
    # Then nothing was collected, nothing is pending, and our turn is not over
    assert not tracker.consumed
    assert tracker.next_call() is None
    assert tracker.text == ""
    assert not tracker.done


def test_our_calls_queue_once_and_stay_pending_until_taken() -> None:
    tracker = tracking()
    tracker.observe(running(OURS))
    tracker.observe(consumed("m1"))
    assert tracker.response_id == OURS
    # When two calls park, and the stream replays one after a reconnect
    assert [c.call_id for c in tracker.observe(call("c1"))] == ["c1"]
    assert [c.call_id for c in tracker.observe(call("c2"))] == ["c2"]
    assert tracker.observe(call("c1")) == []
    # Then each waits once, in order; peeking leaves it pending (a Ctrl-C in confirm asks again)
    first = tracker.next_call()
    assert first is not None
    assert first.call_id == "c1"
    assert tracker.next_call() is first
    assert tracker.take_call().call_id == "c1"
    assert [c.call_id for c in tracker.pending] == ["c2"]
    # And an interrupt forgets the calls not yet started
    tracker.drop_pending()
    assert tracker.next_call() is None
    # A completed (answered) call is an item of the turn, not a pending one
    tracker.observe(call("c1", status="completed"))
    assert tracker.next_call() is None
    assert [i.call_id for i in tracker.items] == ["c1"]


def test_text_so_far_then_the_final_message_and_the_result() -> None:
    tracker = tracking()
    tracker.observe(running(OURS))
    tracker.observe(consumed("m1"))
    tracker.observe(delta("Hel"))
    tracker.observe(delta("lo", OTHER))  # another response's delta around a join is not ours
    tracker.observe(delta("lo"))
    assert tracker.text == "Hello"
    tracker.observe(message("Hello!"))
    assert tracker.text == "Hello!"  # the finished message wins over the deltas
    assert not tracker.done
    tracker.observe(terminal("completed"))
    assert tracker.done
    result = tracker.result()
    assert (result.status, result.text, result.response_id, result.item_id) == (
        "completed",
        "Hello!",
        OURS,
        "m1",
    )
    assert result.ok
    assert len(result.events) == 7


def test_failures_end_the_turn_with_their_error() -> None:
    failed = tracking()
    failed.observe(consumed("m1"))
    failed.observe(terminal("failed", error={"code": "model_error", "message": "boom"}))
    assert failed.done
    assert failed.result().status == "failed"
    assert failed.error is not None
    assert failed.error.code == "model_error"

    # A turn that could not even start ends with a failed session status instead
    stillborn = tracking()
    stillborn.observe(consumed("m1"))
    stillborn.observe(
        ev({"type": "session.status", "status": "failed", "error": {"code": "runner_error", "message": "x"}})
    )
    assert stillborn.result().status == "failed"
    assert stillborn.result().error is not None


def test_an_unfinished_turn_reads_as_incomplete() -> None:
    tracker = tracking()
    tracker.observe(consumed("m1"))
    tracker.observe(ev({"type": "session.interrupted", "data": {"response_id": OURS}}))
    assert tracker.interrupted
    assert tracker.result().status == "incomplete"
