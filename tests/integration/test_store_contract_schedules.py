"""The store contract for scheduled tasks, their runs and how turns end, on both stores.

The same cases as ``test_store_contract.py`` (whose ``backend`` fixture runs
each test on MemoryStore and on DynamoStore over moto).
"""

from __future__ import annotations

import time
import uuid

import pytest

from skyloop.errors import ConflictError
from skyloop.models.schedule import ScheduledRun, ScheduledTask
from skyloop.models.session import Turn
from skyloop.store import Append, Store, TurnEnd
from tests.integration.test_store_contract import _session, backend, store

__all__ = ["backend", "store"]  # the fixtures, run over both stores


def _task(
    owner: str = "alice", *, next_run_at: int | None = 100, state: str = "active", **kw: object
) -> ScheduledTask:
    return ScheduledTask.model_validate(
        {
            "id": uuid.uuid4().hex,
            "owner": owner,
            "name": "nightly",
            "prompt": "summarize",
            "rrule": "FREQ=DAILY",
            "agent_id": uuid.uuid4().hex,
            "anchor": "2026-12-01T00:00:00",
            "created_at": int(time.time()),
            "next_run_at": next_run_at,
            "state": state,
            **kw,
        }
    )


def _run(task: ScheduledTask, at: int, status: str = "running") -> ScheduledRun:
    return ScheduledRun(
        id=f"{at * 1000:012x}{uuid.uuid4().hex[:20]}",
        task_id=task.id,
        owner=task.owner,
        status=status,
        scheduled_at=at,  # type: ignore[arg-type]
    )


def test_a_task_is_created_once_read_listed_per_owner_and_counted(store: Store) -> None:
    owner = f"o-{uuid.uuid4().hex[:8]}"
    first, second = _task(owner), _task(owner)
    store.create_scheduled_task(first)
    store.create_scheduled_task(second)
    store.create_scheduled_task(_task(f"other-{owner}"))
    with pytest.raises(ConflictError):
        store.create_scheduled_task(first)
    assert store.get_scheduled_task(first.id) == first
    assert store.get_scheduled_task(uuid.uuid4().hex) is None
    assert {t.id for t in store.list_scheduled_tasks(owner=owner)} == {first.id, second.id}
    assert store.count_scheduled_tasks(owner) == 2


def test_replacing_a_task_needs_the_revision_it_was_read_at(store: Store) -> None:
    task = _task()
    store.create_scheduled_task(task)
    assert store.replace_scheduled_task(task.model_copy(update={"name": "renamed"}), revision=0)
    assert not store.replace_scheduled_task(task.model_copy(update={"name": "lost"}), revision=0)
    stored = store.get_scheduled_task(task.id)
    assert stored is not None
    assert (stored.name, stored.revision) == ("renamed", 1)


def test_due_tasks_are_the_active_ones_whose_next_run_has_come(store: Store) -> None:
    now = 2_000_000_000
    due, later, paused, ended = (
        _task(next_run_at=now - 5),
        _task(next_run_at=now + 60),
        _task(next_run_at=now - 5, state="paused"),
        _task(next_run_at=None),
    )
    for task in (due, later, paused, ended):
        store.create_scheduled_task(task)
    found = {t.id for t in store.list_due_scheduled_tasks(before=now)}
    assert due.id in found
    assert not found & {later.id, paused.id, ended.id}
    # a task leaves the due index when it is paused or its rule ends, and joins it when armed
    store.replace_scheduled_task(due.model_copy(update={"state": "paused"}), revision=0)
    store.replace_scheduled_task(later.model_copy(update={"next_run_at": now}), revision=0)
    found = {t.id for t in store.list_due_scheduled_tasks(before=now)}
    assert later.id in found
    assert due.id not in found


def test_runs_are_recorded_once_moved_on_by_one_writer_and_listed_newest_first(store: Store) -> None:
    task = _task()
    store.create_scheduled_task(task)
    runs = [_run(task, 1_000 + i) for i in range(5)]
    for run in runs:
        assert store.put_scheduled_run(run)
    assert not store.put_scheduled_run(runs[0])  # the same occurrence fired again
    done = runs[0].model_copy(update={"status": "succeeded", "finished_at": 2000})
    assert store.replace_scheduled_run(done, status="running")
    assert not store.replace_scheduled_run(done.model_copy(update={"status": "failed"}), status="running")
    assert store.get_scheduled_run(task.id, runs[0].id) == done
    page, more = store.list_scheduled_runs(task.id, limit=3)
    assert [r.id for r in page] == [r.id for r in reversed(runs)][:3]
    assert more
    rest, more = store.list_scheduled_runs(task.id, limit=3, after=page[-1].id)
    assert [r.id for r in rest] == [runs[1].id, runs[0].id]
    assert not more


def test_deleting_a_task_deletes_its_runs(store: Store) -> None:
    task = _task()
    store.create_scheduled_task(task)
    for i in range(30):
        store.put_scheduled_run(_run(task, 5_000 + i))
    store.delete_scheduled_task(task.id)
    assert store.get_scheduled_task(task.id) is None
    assert store.list_scheduled_runs(task.id) == ([], False)


def test_a_turns_cost_cap_is_kept_on_its_row(store: Store) -> None:
    """A scheduled run's turn carries its task's max_cost_usd (a float: stored as a Decimal, read back as it was)."""
    session = _session(store)
    turn = Turn(
        session_id=session.id, response_id="resp_capped", agent_id="a", created_at=10, max_cost_usd=0.05
    )
    store.append(Append(session.id, new_turn=turn))
    store.append(
        Append(session.id, turn_end=TurnEnd("resp_capped", "failed", 11, {"code": "cost_cap_reached"}))
    )
    stored = store.get_turn(session.id, "resp_capped")
    assert (stored.max_cost_usd, stored.status) == (0.05, "failed")
    assert (stored.error or {}).get("code") == "cost_cap_reached"
