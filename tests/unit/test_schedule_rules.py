"""Scheduled tasks' rules: RRULE occurrences in a time zone (DST as EventBridge Scheduler does it), the
refusals, and the cron expressions EventBridge Scheduler gets."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from skyloop.schedules import rules

BERLIN = rules.zone("Europe/Berlin")


def _at(
    text: str, after: datetime, tz: str = "Europe/Berlin", n: int = 3, anchor: datetime | None = None
) -> list[str]:
    zone = rules.zone(tz)
    rule = rules.validate(text)
    start = anchor or rules.anchor_for(after, zone)
    return [d.isoformat() for d in rules.upcoming(rule, after, zone, start, limit=n)]


def test_a_daily_nine_oclock_keeps_its_wall_time_across_both_dst_changes() -> None:
    # Berlin: summer time starts 2027-03-28 (02:00 -> 03:00) and ends 2026-10-25 (03:00 -> 02:00)
    spring = _at("FREQ=DAILY;BYHOUR=9;BYMINUTE=0", datetime(2027, 3, 27, 12, tzinfo=UTC))
    assert spring == ["2027-03-28T09:00:00+02:00", "2027-03-29T09:00:00+02:00", "2027-03-30T09:00:00+02:00"]
    autumn = _at("FREQ=DAILY;BYHOUR=9;BYMINUTE=0", datetime(2026, 10, 24, 12, tzinfo=UTC))
    assert autumn == ["2026-10-25T09:00:00+01:00", "2026-10-26T09:00:00+01:00", "2026-10-27T09:00:00+01:00"]
    # the instants are 23 and 25 hours apart, the wall time the same
    before = _at("FREQ=DAILY;BYHOUR=9;BYMINUTE=0", datetime(2027, 3, 26, 12, tzinfo=UTC), n=2)
    gap = datetime.fromisoformat(before[1]) - datetime.fromisoformat(before[0])
    assert gap.total_seconds() == 23 * 3600


def test_the_skipped_hour_is_skipped_and_the_repeated_hour_fires_once() -> None:
    """EventBridge Scheduler: a wall time that does not exist is skipped; one that repeats fires once."""
    spring = _at("FREQ=MINUTELY;INTERVAL=30", datetime(2027, 3, 28, 0, 15, tzinfo=UTC), n=3)
    assert spring == ["2027-03-28T01:30:00+01:00", "2027-03-28T03:00:00+02:00", "2027-03-28T03:30:00+02:00"]
    autumn = _at("FREQ=MINUTELY;INTERVAL=30", datetime(2026, 10, 24, 23, 45, tzinfo=UTC), n=4)
    assert autumn == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T03:00:00+01:00",  # 02:00 and 02:30 of the second pass do not fire again
        "2026-10-25T03:30:00+01:00",
    ]
    daily = _at("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", datetime(2027, 3, 27, 12, tzinfo=UTC), n=2)
    assert daily == ["2027-03-29T02:30:00+02:00", "2027-03-30T02:30:00+02:00"]  # no 02:30 on the 28th


def test_a_rule_keeps_its_phase_however_long_after_its_anchor_it_is_asked() -> None:
    """Unlike omnigent (which re-anchors at each query's midnight), INTERVAL counts from the task's anchor."""
    anchor = datetime(2026, 1, 1)  # a Thursday
    every_other_day = _at(
        "FREQ=DAILY;INTERVAL=2;BYHOUR=9", datetime(2029, 6, 1, 12, tzinfo=UTC), "UTC", 2, anchor
    )
    days = [(datetime.fromisoformat(d).date() - anchor.date()).days for d in every_other_day]
    assert all(d % 2 == 0 for d in days)
    assert days[1] - days[0] == 2
    started = time.perf_counter()
    every_7_min = _at("FREQ=MINUTELY;INTERVAL=7", datetime(2036, 6, 1, 12, 3, tzinfo=UTC), "UTC", 2, anchor)
    assert time.perf_counter() - started < 0.5  # the walk starts a period before, not ten years before
    minutes = [
        (datetime.fromisoformat(d).replace(tzinfo=None) - anchor).total_seconds() / 60 for d in every_7_min
    ]
    assert all(m % 7 == 0 for m in minutes)
    assert minutes[1] - minutes[0] == 7
    weekly = _at("FREQ=WEEKLY;BYHOUR=8", datetime(2030, 1, 1, tzinfo=UTC), "UTC", 2, anchor)
    assert all(datetime.fromisoformat(d).weekday() == 3 for d in weekly)  # the anchor's weekday


def test_count_and_until_end_a_rule() -> None:
    anchor = datetime(2026, 12, 1)
    rule = rules.validate("FREQ=DAILY;COUNT=3;BYHOUR=9")
    after = datetime(2026, 12, 1, 0, 30, tzinfo=UTC)
    assert len(rules.upcoming(rule, after, BERLIN, anchor, limit=10)) == 3
    assert rules.until_instant(rule, BERLIN, anchor) == datetime(2026, 12, 3, 9, tzinfo=BERLIN)
    until = rules.validate("FREQ=DAILY;BYHOUR=9;UNTIL=20261203T080000Z")
    assert [d.day for d in rules.upcoming(until, after, BERLIN, anchor, limit=10)] == [1, 2, 3]
    assert rules.next_after(until, datetime(2026, 12, 4, tzinfo=UTC), BERLIN, anchor) is None


def test_starts_at_is_the_first_possible_occurrence() -> None:
    starts = datetime(2027, 3, 27, 10, tzinfo=BERLIN)
    rule = rules.validate("FREQ=DAILY;BYHOUR=9;BYMINUTE=0")
    first = rules.next_after(
        rule, datetime(2026, 12, 4, tzinfo=UTC), BERLIN, rules.anchor_for(starts, BERLIN), not_before=starts
    )
    assert first is not None
    assert first.isoformat() == "2027-03-28T09:00:00+02:00"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("FREQ=SECONDLY", "minute precision"),
        ("FREQ=MINUTELY;BYSECOND=30", "whole minutes"),
        ("FREQ=MINUTELY;BYSECOND=0,30", "whole minutes"),
        ("FREQ=DAILY;COUNT=1", "only once"),
        ("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "never fires"),
        ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "never fires"),
        ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=6", "never fires"),
        ("FREQ=MINUTELY;INTERVAL=1440;BYHOUR=5", "never fires"),
        ("FREQ=DAILY;BYHOUR=25", "hour"),
        ("FREQ=FORTNIGHTLY", "unknown FREQ"),
        ("BYHOUR=9", "FREQ is required"),
        ("FREQ=DAILY;FREQ=DAILY", "twice"),
        ("every day at nine", "malformed"),
        ("", "empty"),
        ("FREQ=DAILY\nFREQ=DAILY", "one RRULE line"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20300101", "COUNT and UNTIL"),
        ("FREQ=DAILY;BYDAY=1MO", "numbered weekdays"),
        ("FREQ=DAILY;UNTIL=tomorrow", "UNTIL"),
        ("FREQ=DAILY;BYHOUR=" + ",".join(str(h) for h in range(24)) + ";BYMINUTE=0,30", "times of day"),
    ],
)
def test_bad_rules_are_refused_saying_why_and_quickly(text: str, says: str) -> None:
    started = time.perf_counter()
    with pytest.raises(rules.RuleError, match=says):
        rules.validate(text)
    assert time.perf_counter() - started < 1.0  # a rule that never fires is found out in a short walk


def test_a_rule_that_never_fires_for_its_anchor_is_found_out() -> None:
    every_seventh_day_a_monday = "FREQ=DAILY;INTERVAL=7;BYDAY=MO"
    rules.validate(every_seventh_day_a_monday, datetime(2026, 12, 7))  # anchored on a Monday
    with pytest.raises(rules.RuleError, match="never fires"):
        rules.validate(every_seventh_day_a_monday, datetime(2026, 12, 8))  # on a Tuesday


def test_unknown_time_zones_are_refused() -> None:
    for name in ("Mars/Olympus", "", "../etc/passwd", "Europe/Berlin "):
        with pytest.raises(rules.RuleError, match="time zone"):
            rules.zone(name)
    assert rules.zone("America/Los_Angeles").key == "America/Los_Angeles"


@pytest.mark.parametrize(
    ("text", "cron"),
    [
        ("FREQ=DAILY;BYHOUR=9;BYMINUTE=0", "cron(0 9 * * ? *)"),
        ("FREQ=MINUTELY", "cron(* * * * ? *)"),
        ("FREQ=MINUTELY;INTERVAL=15", "cron(0/15 * * * ? *)"),
        ("FREQ=MINUTELY;BYHOUR=9,10;BYDAY=MO,TU", "cron(* 9,10 ? * MON,TUE *)"),
        ("FREQ=HOURLY", "cron(0 * * * ? *)"),
        ("FREQ=HOURLY;INTERVAL=6;BYMINUTE=30", "cron(30 0/6 * * ? *)"),
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0", "cron(0 9 ? * MON,TUE,WED,THU,FRI *)"),
        ("FREQ=WEEKLY;BYHOUR=8", "cron(0 8 ? * THU *)"),  # the anchor's weekday
        ("FREQ=MONTHLY;BYMONTHDAY=1,15;BYHOUR=6", "cron(0 6 1,15 * ? *)"),
        ("FREQ=MONTHLY;BYMONTHDAY=-1", "cron(0 0 L * ? *)"),
        ("FREQ=MONTHLY;BYDAY=2TU;BYHOUR=10", "cron(0 10 ? * TUE#2 *)"),
        ("FREQ=MONTHLY", "cron(0 0 3 * ? *)"),  # the anchor's day
        ("FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1", "cron(0 0 1 1 ? *)"),
        ("FREQ=YEARLY", "cron(0 0 3 12 ? *)"),
        # what cron cannot say: a one-time schedule, re-armed after each run
        ("FREQ=MINUTELY;INTERVAL=7", None),
        ("FREQ=HOURLY;INTERVAL=5", None),
        ("FREQ=DAILY;INTERVAL=2", None),
        ("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO", None),
        ("FREQ=DAILY;COUNT=5", None),
        ("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1", None),
        ("FREQ=MONTHLY;BYDAY=-1FR", None),
        ("FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=FR", None),
        ("FREQ=MONTHLY;BYMONTHDAY=-2", None),
    ],
)
def test_cron_says_exactly_what_it_can(text: str, cron: str | None) -> None:
    assert rules.cron_expression(rules.validate(text), datetime(2026, 12, 3)) == cron
