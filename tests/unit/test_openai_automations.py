"""Unit: OpenAI automations as scheduled tasks: the once rule, the 400s naming the field, views of tasks and runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from skyloop.errors import InvalidInputError
from skyloop.models.schedule import ScheduledRun, ScheduledTask
from skyloop.openai_compat import automations as oa
from skyloop.schedules import plans, rules

NOW = int(datetime(2027, 3, 1, 12, 0, tzinfo=UTC).timestamp())


def _task(**fields: Any) -> ScheduledTask:
    base: dict[str, Any] = {
        "id": "t" * 32,
        "owner": "alice",
        "name": "n",
        "prompt": "p",
        "rrule": "FREQ=DAILY;BYHOUR=9;BYMINUTE=0",
        "agent_id": "a" * 32,
        "anchor": "2027-03-01T00:00:00",
        "created_at": NOW,
        "origin": "openai_automation",
        "target": {"type": "existing_session", "session_id": "s" * 32, "instructions": "go"},
        "automation": {"type": "periodic", "expression": "0 9 * * *", "metadata": {}},
    }
    return ScheduledTask.model_validate({**base, **fields})


def test_a_once_rule_fires_once_at_run_at_rounded_up_to_the_minute() -> None:
    run_at = NOW + 3 * 3600 + 15  # 15:00:15 UTC
    rrule, anchor, first = oa._once_rule(run_at, NOW)
    assert first == NOW + 3 * 3600 + 60
    assert rrule == "FREQ=DAILY;BYHOUR=15;BYMINUTE=1;COUNT=1"
    task = _task(rrule=rrule, anchor=anchor, timezone="UTC", starts_at=first, next_run_at=first, armed_at=NOW)
    assert plans.next_occurrence(task, after=NOW) == first
    assert plans.next_occurrence(task, after=first) is None  # nothing after it: the automation completes
    assert plans.describe(task) == "at(2027-03-01T15:01:00)"


@pytest.mark.parametrize("run_at", [NOW, NOW - 1, 0])
def test_a_once_rule_in_the_past_is_a_400_naming_run_at(run_at: int) -> None:
    with pytest.raises(InvalidInputError) as err:
        oa._once_rule(run_at, NOW)
    assert err.value.param == "run_at"


@pytest.mark.parametrize(
    ("expression", "zone", "param", "start"),
    [
        ("0 9 * * *", "Nowhere/City", "timezone", "timezone: unknown time zone"),
        ("61 9 * * *", "UTC", "expression", "expression: minute: 61 is out of range"),
        ("0 9 1 * 1", "UTC", "expression", "expression: day_of_week:"),
        ("0-30 * * * *", "UTC", "expression", "expression: BYMINUTE takes at most 24"),
    ],
)
def test_a_periodic_rule_is_refused_naming_the_field(
    expression: str, zone: str, param: str, start: str
) -> None:
    with pytest.raises(InvalidInputError) as err:
        oa._periodic_rule(expression, zone, NOW)
    assert err.value.param == param
    assert err.value.message.startswith(start), err.value.message


def test_a_periodic_rule_is_read_in_its_zone() -> None:
    rrule, _anchor, first = oa._periodic_rule("0 9 * * *", "Asia/Tokyo", NOW)
    assert rrule == "FREQ=DAILY;BYHOUR=9;BYMINUTE=0"
    assert datetime.fromtimestamp(first, rules.zone("Asia/Tokyo")).hour == 9


@pytest.mark.parametrize(
    ("state", "kind", "next_run_at", "status"),
    [
        ("active", "periodic", NOW + 60, "active"),
        ("paused", "periodic", None, "paused"),
        ("active", "once", NOW + 60, "active"),
        ("active", "once", None, "completed"),
        ("paused", "once", None, "paused"),
    ],
)
def test_status(state: str, kind: str, next_run_at: int | None, status: str) -> None:
    task = _task(state=state, next_run_at=next_run_at, automation={"type": kind, "run_at": NOW + 60})
    assert oa.status_of(task) == status


@pytest.mark.parametrize(
    ("run", "status", "error", "skip"),
    [
        ({"status": "scheduled"}, "queued", None, None),
        ({"status": "running", "fired_at": NOW}, "completed", None, None),
        ({"status": "succeeded", "fired_at": NOW}, "completed", None, None),
        ({"status": "failed", "fired_at": NOW, "error_code": "model_error"}, "completed", None, None),
        (
            {"status": "failed", "error_code": "agent_not_found", "error": "gone"},
            "failed",
            "agent_not_found",
            None,
        ),
        (
            {"status": "skipped", "error_code": "overlap", "error": "busy"},
            "skipped",
            None,
            "pending_delivery",
        ),
        ({"status": "missed", "error_code": "missed"}, "skipped", None, None),
    ],
)
def test_an_invocation_says_how_delivery_went(
    run: dict[str, Any], status: str, error: str | None, skip: str | None
) -> None:
    record = ScheduledRun.model_validate(
        {
            "id": "r" * 32,
            "task_id": "t" * 32,
            "owner": "alice",
            "scheduled_at": NOW,
            "trigger": "manual",
            **run,
        }
    )
    out = oa.invocation_view(None, _task(), record)  # type: ignore[arg-type]  (manual: no snapshot read)
    assert out["status"] == status
    assert (out["error"] or {}).get("code") == error
    assert out["skip_reason"] == skip
    assert (out["source"], out["scheduled_at"]) == ({"type": "manual"}, None)


def test_a_scheduled_invocation_carries_the_automation_and_its_time() -> None:
    record = ScheduledRun(id="r" * 32, task_id="t" * 32, owner="alice", scheduled_at=NOW, status="scheduled")
    out = oa.invocation_view(None, _task(), record)  # type: ignore[arg-type]
    assert out["scheduled_at"] == NOW
    assert out["source"]["type"] == "automation"
    assert out["source"]["automation"]["expression"] == "0 9 * * *"
    assert out["source"]["automation"]["target"] == {
        "type": "existing_session",
        "session_id": "s" * 32,
        "instructions": "go",
    }


def test_nested_numbers_come_back_as_numbers_from_dynamodb() -> None:
    from decimal import Decimal

    task = _task(automation={"type": "once", "run_at": Decimal(NOW), "metadata": {}})
    assert task.automation is not None
    assert task.automation["run_at"] == NOW
    assert type(task.automation["run_at"]) is int
