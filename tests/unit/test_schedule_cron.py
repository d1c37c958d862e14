"""Cron (OpenAI's automations) to RRULE and back: every field form, and the times checked against cron's own
semantics minute by minute."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from skyloop.schedules import cron, rules


def _naive_fires(expression: str, start: datetime, minutes: int) -> list[datetime]:
    """Cron's meaning, minute by minute, straight from the parsed fields (the reference)."""
    f = cron.parse(expression)
    out = []
    for n in range(minutes):
        t = start + timedelta(minutes=n)
        dow = (t.weekday() + 1) % 7  # cron: 0 = Sunday
        if (
            t.minute in f["minute"].values
            and t.hour in f["hour"].values
            and t.day in f["day_of_month"].values
            and t.month in f["month"].values
            and dow in f["day_of_week"].values
        ):
            out.append(t)
    return out


def _rule_fires(rrule: str, start: datetime, minutes: int, tz: str = "UTC") -> list[datetime]:
    zone = rules.zone(tz)
    rule = rules.parse(rrule)
    anchor = rules.anchor_for(start, zone)
    end = start + timedelta(minutes=minutes)
    out = []
    current = start - timedelta(seconds=1)
    while True:
        found = rules.next_after(rule, current, zone, anchor)
        if found is None or found >= end:
            return out
        out.append(found.astimezone(UTC))
        current = found


@pytest.mark.parametrize(
    ("expression", "rrule"),
    [
        ("* * * * *", "FREQ=MINUTELY"),
        ("*/5 * * * *", "FREQ=MINUTELY;INTERVAL=5"),
        ("*/15 9-17 * * *", "FREQ=MINUTELY;INTERVAL=15;BYHOUR=9,10,11,12,13,14,15,16,17"),
        ("0 * * * *", "FREQ=HOURLY;BYMINUTE=0"),
        ("30 */2 * * *", "FREQ=HOURLY;INTERVAL=2;BYMINUTE=30"),
        ("0 9 * * *", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0"),
        ("0 9 * * 1-5", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYDAY=MO,TU,WE,TH,FR"),
        ("0 9 * * MON-FRI", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYDAY=MO,TU,WE,TH,FR"),
        ("0 9 * * sun,sat", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYDAY=SU,SA"),
        ("0 9 * * 7", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYDAY=SU"),
        ("0 9 * * 5-7", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYDAY=SU,FR,SA"),
        ("0 0 1 * *", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1"),
        ("0 0 1,15 JAN,jul *", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1,15;BYMONTH=1,7"),
        ("0 0 ? * MON", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYDAY=MO"),
        ("0 0 1 */3 ?", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1;BYMONTH=1,4,7,10"),
        ("5,35 8,20 * * *", "FREQ=DAILY;BYHOUR=8,20;BYMINUTE=5,35"),
        ("*/7 * * * *", "FREQ=HOURLY;BYMINUTE=0,7,14,21,28,35,42,49,56"),
        ("10-50/20 * * * *", "FREQ=HOURLY;BYMINUTE=10,30,50"),
        ("15/20 3 * * *", "FREQ=DAILY;BYHOUR=3;BYMINUTE=15,35,55"),
        ("0 */5 * * *", "FREQ=DAILY;BYHOUR=0,5,10,15,20;BYMINUTE=0"),
        ("@hourly", "FREQ=HOURLY;BYMINUTE=0"),
        ("@daily", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0"),
        ("@midnight", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0"),
        ("@weekly", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYDAY=SU"),
        ("@monthly", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1"),
        ("@yearly", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1;BYMONTH=1"),
        ("@annually", "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1;BYMONTH=1"),
        ("  0   9 * *   *  ", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0"),
    ],
)
def test_each_field_form_becomes_the_rrule_it_means(expression: str, rrule: str) -> None:
    assert cron.to_rrule(expression) == rrule


@pytest.mark.parametrize(
    "expression",
    [
        "* * * * *",
        "*/5 * * * *",
        "*/7 * * * *",
        "*/15 9-17 * * 1-5",
        "30 */2 * * *",
        "0 */5 * * *",
        "0 9 * * MON-FRI",
        "0 9 * * 0",
        "0 12 1,15 * *",
        "0 0 28-31 * *",
        "45 23 * 2 *",
        "0 6 ? * 6,7",
        "10-50/20 1-3 * * *",
        "0 0 1 */2 ?",
    ],
)
def test_the_rrule_fires_exactly_when_cron_does(expression: str) -> None:
    """Minute by minute against cron's meaning: a month and a bit, across a month's end and a leap day."""
    start = datetime(2028, 1, 20, tzinfo=UTC)
    span = 45 * 24 * 60 if not expression.startswith(("* ", "*/5", "*/7", "*/15")) else 3 * 24 * 60
    assert _rule_fires(cron.to_rrule(expression), start, span) == _naive_fires(expression, start, span)


def test_the_engine_accepts_every_converted_rule() -> None:
    for expression in ("* * * * *", "*/7 * * * *", "0 9 * * 1-5", "0 0 1 */3 ?", "@yearly"):
        rules.validate(cron.to_rrule(expression))


def test_a_time_zone_gives_the_same_wall_times() -> None:
    """The rule is read in the automation's zone: 9:00 in Berlin is 8:00 UTC in winter, 7:00 in summer."""
    rrule = cron.to_rrule("0 9 * * *")
    winter = _rule_fires(rrule, datetime(2027, 1, 10, tzinfo=UTC), 24 * 60, tz="Europe/Berlin")
    summer = _rule_fires(rrule, datetime(2027, 7, 10, tzinfo=UTC), 24 * 60, tz="Europe/Berlin")
    assert [t.hour for t in winter] == [8]
    assert [t.hour for t in summer] == [7]


@pytest.mark.parametrize(
    ("expression", "field", "words"),
    [
        ("60 * * * *", "minute", "out of range 0-59"),
        ("* 24 * * *", "hour", "out of range 0-23"),
        ("* * 0 * *", "day_of_month", "out of range 1-31"),
        ("* * 32 * *", "day_of_month", "out of range"),
        ("* * * 13 *", "month", "out of range 1-12"),
        ("* * * * 8", "day_of_week", "out of range 0-7"),
        ("* * * FOO *", "month", "not a number or a name"),
        ("* * * * FUNDAY", "day_of_week", "not a number or a name"),
        ("x * * * *", "minute", "not a number"),
        ("*/0 * * * *", "minute", "at least 1"),
        ("5-1 * * * *", "minute", "upwards"),
        ("1-2-3 * * * *", "minute", "not a value, a range or a step"),
        ("1,,2 * * * *", "minute", "not a value"),
        ("0 0 L * *", "day_of_month", "Quartz"),
        ("0 0 15W * *", "day_of_month", "Quartz"),
        ("0 0 * * 5L", "day_of_week", "Quartz"),
        ("0 0 * * MON#2", "day_of_week", "Quartz"),
        ("0 0 1 * MON", "day_of_week", "either day"),
        ("*/99 * * * *", "minute", "larger than the field's range"),
    ],
)
def test_invalid_fields_are_refused_naming_the_field(expression: str, field: str, words: str) -> None:
    with pytest.raises(cron.CronError) as err:
        cron.to_rrule(expression)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")
    assert words in str(err.value)


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("* * * *", "expected 5 fields"),
        ("0 * * * * *", "seconds and years are not supported"),
        ("0 0 * * * * 2027", "seconds and years"),
        ("@reboot", "unknown macro"),
        ("0 " * 200, "at most"),
    ],
)
def test_malformed_expressions_are_refused(expression: str, words: str) -> None:
    with pytest.raises(cron.CronError) as err:
        cron.to_rrule(expression)
    assert err.value.field is None
    assert words in str(err.value)


@pytest.mark.parametrize(
    "expression",
    [
        "* * * * *",
        "*/5 * * * *",
        "*/15 9,10 * * *",
        "0 * * * *",
        "30 */2 * * *",
        "0 9 * * 1,2,3,4,5",
        "0 0 1,15 1,7 *",
        "5,35 8,20 * * *",
        "0 9 * * 0,6",
    ],
)
def test_back_to_cron_round_trips(expression: str) -> None:
    rrule = cron.to_rrule(expression)
    back = cron.from_rrule(rrule)
    assert back is not None
    assert cron.to_rrule(back) == rrule


@pytest.mark.parametrize(
    "rrule",
    [
        "FREQ=WEEKLY;BYDAY=MO",  # weekly from the anchor's day: no day in cron
        "FREQ=DAILY;INTERVAL=2;BYHOUR=9;BYMINUTE=0",  # every other day
        "FREQ=MINUTELY;INTERVAL=7",  # 7 does not divide the hour
        "FREQ=HOURLY;INTERVAL=5;BYMINUTE=0",  # nor 5 the day
        "FREQ=MONTHLY;BYDAY=1MO",
        "FREQ=DAILY;BYMONTHDAY=1;BYDAY=MO",  # an AND: cron's would be an OR
        "FREQ=DAILY;BYMONTHDAY=-1",
        "FREQ=DAILY;COUNT=3",
    ],
)
def test_rules_cron_cannot_say_have_no_cron(rrule: str) -> None:
    assert cron.from_rrule(rrule) is None


def test_from_rrule_accepts_the_rrule_prefix() -> None:
    assert cron.from_rrule("RRULE:FREQ=DAILY;BYHOUR=9;BYMINUTE=0") == "0 9 * * *"
