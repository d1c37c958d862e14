"""The notifier's wake-ups for hot waits: an output recorded wakes the waits of its session only."""

from __future__ import annotations

import threading

from skyloop.store import notifier


def test_an_answer_sets_the_flags_of_its_session_and_nothing_else() -> None:
    with notifier.answers_of("s1") as mine, notifier.answers_of("s2") as other:
        notifier.deliver("s1", notifier.APPEND)  # an append is the streams' cue, not a hot wait's
        assert not mine.is_set()
        notifier.deliver("s1", notifier.ANSWERED)
        assert mine.is_set()
        assert not other.is_set()


def test_an_answer_before_the_wait_is_not_lost() -> None:
    with notifier.answers_of("s1") as flag:
        notifier.notify("s1", notifier.ANSWERED)  # lands between a read and the pause after it
        assert flag.wait(0)  # the pause ends at once


def test_a_finished_wait_leaves_nothing_registered() -> None:
    with notifier.answers_of("s1"), notifier.answers_of("s1"):
        pass
    assert "s1" not in notifier._answer_waiters


def test_answers_reach_a_wait_on_another_thread() -> None:
    woken: list[bool] = []
    ready = threading.Event()

    def wait() -> None:
        with notifier.answers_of("s1") as flag:
            ready.set()
            woken.append(flag.wait(30))

    thread = threading.Thread(target=wait)
    thread.start()
    ready.wait(5)
    notifier.notify("s1", notifier.ANSWERED)
    thread.join(10)
    assert woken == [True]
