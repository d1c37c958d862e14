"""A scheduled task's rule: an RFC 5545 RRULE evaluated in a time zone, the way EventBridge Scheduler fires it.

omnigent's scheduled tasks take one ``RRULE`` (``FREQ=DAILY;BYHOUR=9;BYMINUTE=0``)
and an IANA time zone; skyloop keeps that contract and evaluates it with
``python-dateutil``'s ``rrule`` on *wall-clock* times of the zone:

* **Anchor.** The rule starts at midnight (local) of its anchor day: the day it
  was set, or its ``starts_at``. So an hourly rule fires on the hour and a daily
  one at its ``BYHOUR``/``BYMINUTE``, as in omnigent; unlike omnigent, the anchor
  is kept with the task, so ``INTERVAL=2`` and ``COUNT`` keep their meaning
  whenever the next occurrence is computed (omnigent re-anchors at each
  query's day). To stay cheap, the search starts at the last whole period
  before the instant asked about (a period keeps every occurrence's phase).
* **DST** as EventBridge Scheduler does it: a wall time that does not exist
  (the hour skipped in spring) is skipped, one that exists twice (autumn)
  fires once, at its first instant.
* **Floor.** Occurrences must be at least :data:`MIN_INTERVAL_S` (one minute,
  EventBridge Scheduler's precision) apart, on whole minutes (``SECONDLY`` and
  ``BYSECOND`` other than 0 are refused); omnigent's floor is an hour.
* **Limits** (omnigent's): one rule of at most 4096 characters, at most 24
  values per ``BY`` field and 24 times of day, ``COUNT`` at most
  :data:`MAX_COUNT`, occurrences searched at most :data:`HORIZON_YEARS` ahead.

:func:`cron_expression` says when EventBridge Scheduler's own ``cron()`` fires
at exactly these instants (then one recurring schedule serves the task);
every other rule runs as a one-time ``at()`` schedule re-armed after each run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.relativedelta import relativedelta
from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, WEEKLY, YEARLY, rrule, rrulestr

if TYPE_CHECKING:
    from collections.abc import Iterator

MIN_INTERVAL_S = 60
MAX_RULE_LENGTH = 4096
MAX_BY_VALUES = 24
MAX_TIMES_OF_DAY = 24
MAX_COUNT = 10_000
HORIZON_YEARS = 8
FREQUENCIES = {
    "MINUTELY": MINUTELY,
    "HOURLY": HOURLY,
    "DAILY": DAILY,
    "WEEKLY": WEEKLY,
    "MONTHLY": MONTHLY,
    "YEARLY": YEARLY,
}
_UNIT_MINUTES = {MINUTELY: 1, HOURLY: 60, DAILY: 24 * 60, WEEKLY: 7 * 24 * 60}
# The checks walk occurrences from a fixed instant (deterministic: the same rule always passes or fails):
# the first day of a year that starts a 400-year Gregorian cycle (the calendar of 2000, a leap year), late
# enough that dateutil, which walks a rule that never fires to the year 9999, gives up after one cycle.
_SAMPLE_ANCHOR = datetime(9600, 1, 1)
_SAMPLE_WINDOW = timedelta(hours=25)
_SAMPLE_MAX = 2000
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_CRON_DAYS = {"MO": "MON", "TU": "TUE", "WE": "WED", "TH": "THU", "FR": "FRI", "SA": "SAT", "SU": "SUN"}
_BYDAY = re.compile(r"([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)")


class RuleError(ValueError):
    """The rule (or time zone) is not one a task may have; the message says why."""


@dataclass(frozen=True)
class Rule:
    """A parsed rule: its normalized fields (``COUNT``/``UNTIL`` kept apart)."""

    text: str
    freq: int
    interval: int
    fields: dict[str, str] = field(default_factory=dict)  # FREQ, INTERVAL, COUNT, UNTIL excluded
    count: int | None = None
    until: str | None = None  # as written: UTC if it ends with Z, else local wall time

    def by(self, key: str) -> list[str]:
        value = self.fields.get(key)
        return value.split(",") if value else []


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; RuleError if there is none of that name."""
    try:
        if not name or len(name) > 64 or name.startswith(("/", ".")) or ".." in name:
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise RuleError(
            f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin' or 'UTC'"
        ) from None


def parse(text: str) -> Rule:
    """Syntax and limits of one RRULE (no evaluation); RuleError says what is wrong."""
    fields = _split(text)
    freq, interval = _frequency(fields)
    count = None
    if "COUNT" in fields:
        count = _int(fields.pop("COUNT"), "COUNT")
        if not 1 <= count <= MAX_COUNT:
            raise RuleError(f"COUNT must be between 1 and {MAX_COUNT}")
    until = fields.pop("UNTIL", None)
    if count is not None and until is not None:
        raise RuleError("COUNT and UNTIL cannot both be given (RFC 5545)")
    if until is not None:
        _until_wall(until, ZoneInfo("UTC"))
    if any(v != "0" for v in fields.get("BYSECOND", "0").split(",")):
        raise RuleError("BYSECOND: schedules fire on whole minutes; leave it out or use BYSECOND=0")
    _check_parts(freq, fields)
    times = 1
    for key in ("BYHOUR", "BYMINUTE"):
        times *= len(fields[key].split(",")) if key in fields else 1
    if times > MAX_TIMES_OF_DAY:
        raise RuleError(f"at most {MAX_TIMES_OF_DAY} times of day (BYHOUR x BYMINUTE) are supported")
    rule = Rule(text=text, freq=freq, interval=interval, fields=fields, count=count, until=until)
    _build(rule, _SAMPLE_ANCHOR, _SAMPLE_ANCHOR, ZoneInfo("UTC"))  # what dateutil refuses, refused now
    return rule


def _check_parts(freq: int, fields: dict[str, str]) -> None:
    """Parts only some frequencies take (RFC 5545), so that evaluating a rule that never fires stays cheap."""
    if "BYEASTER" in fields:
        raise RuleError("BYEASTER is not RFC 5545")
    if freq != YEARLY and ("BYWEEKNO" in fields or "BYYEARDAY" in fields):
        raise RuleError("BYWEEKNO and BYYEARDAY are taken with FREQ=YEARLY only")
    if freq not in (MONTHLY, YEARLY) and "BYSETPOS" in fields:
        raise RuleError("BYSETPOS is taken with FREQ=MONTHLY or FREQ=YEARLY only")
    if freq not in (MONTHLY, YEARLY) and any(
        not d.isalpha() for d in fields.get("BYDAY", "").split(",") if d
    ):
        raise RuleError(
            "numbered weekdays in BYDAY (like 1MO) are taken with FREQ=MONTHLY or FREQ=YEARLY only"
        )


def _fires_some_day(rule: Rule) -> bool:
    """Whether any day passes the rule's day filters (``BYMONTH``, ``BYMONTHDAY``, ``BYDAY``).

    dateutil walks a rule whose filters never match to the year 9999, one
    period at a time: seconds for a daily or minutely rule. The day filters
    alone, as a yearly rule, are walked in milliseconds; monthly and yearly
    rules are cheap to walk themselves.
    """
    if rule.freq in (MONTHLY, YEARLY):
        return True
    days = {k: rule.fields[k] for k in ("BYMONTHDAY", "BYDAY") if k in rule.fields}
    if not days and "BYMONTH" not in rule.fields:
        return True
    months = rule.fields.get("BYMONTH") or ",".join(str(m) for m in range(1, 13))
    text = ";".join(["FREQ=YEARLY", f"BYMONTH={months}", *(f"{k}={v}" for k, v in days.items())])
    return next(iter(rrulestr(text, dtstart=_SAMPLE_ANCHOR)), None) is not None


def _split(text: str) -> dict[str, str]:
    """``NAME=VALUE;...`` as a dict of normalized values (upper case, ``BY`` lists deduplicated)."""
    if not isinstance(text, str) or not text.strip():
        raise RuleError("the rule is empty; write e.g. 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0'")
    if len(text) > MAX_RULE_LENGTH or "\n" in text or "\r" in text:
        raise RuleError(f"use one RRULE line of at most {MAX_RULE_LENGTH} characters")
    fields: dict[str, str] = {}
    for part in text.strip().upper().removeprefix("RRULE:").split(";"):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise RuleError(f"malformed part {part!r}: write NAME=VALUE pairs separated by ';'")
        if key in fields:
            raise RuleError(f"{key} is given twice")
        fields[key] = _normalized(key, value)
    return fields


def _frequency(fields: dict[str, str]) -> tuple[int, int]:
    """``FREQ`` and ``INTERVAL``, taken out of ``fields``."""
    name = fields.pop("FREQ", None)
    if name is None:
        raise RuleError("FREQ is required (MINUTELY, HOURLY, DAILY, WEEKLY, MONTHLY or YEARLY)")
    if name == "SECONDLY":
        raise RuleError("FREQ=SECONDLY: schedules fire at minute precision; use FREQ=MINUTELY")
    if name not in FREQUENCIES:
        raise RuleError(f"unknown FREQ {name!r}")
    interval = _int(fields.pop("INTERVAL", "1"), "INTERVAL")
    limit = {"MINUTELY": 366 * 24 * 60, "HOURLY": 366 * 24}.get(name, 366)
    if not 1 <= interval <= limit:
        raise RuleError(f"INTERVAL must be between 1 and {limit}")
    return FREQUENCIES[name], interval


def validate(text: str, anchor: datetime | None = None) -> Rule:
    """:func:`parse`, then: it fires at least twice, never more often than once a minute.

    The gaps are sampled over 25 hours from the rule's ``anchor`` (in UTC, as
    omnigent does; without one, a fixed day), moved by whole 400-year cycles of
    the calendar to the last one dateutil can walk: a rule that never fires is
    found out in a few hundred years' walk, not in eight thousand. A tight pair
    of occurrences recurs at least daily for any rule that has one.
    """
    start = _SAMPLE_ANCHOR if anchor is None else _late_cycle(anchor)
    rule = parse(text)
    if not _fires_some_day(rule):
        raise RuleError("the rule never fires: no day passes its BYMONTH, BYMONTHDAY and BYDAY")
    # UNTIL is left out of the sample (whether the rule still fires is asked of the real clock: next_after)
    walls = _walls(Rule(rule.text, rule.freq, rule.interval, rule.fields, rule.count), start, start, None)
    previous: datetime | None = None
    end: datetime | None = None
    seen = 0
    for wall in walls:
        seen += 1
        if previous is None:
            end = wall + _SAMPLE_WINDOW
        else:
            gap = (wall - previous).total_seconds()
            if gap < MIN_INTERVAL_S:
                raise RuleError(
                    f"the rule fires {int(gap)} s apart at times; the minimum interval is {MIN_INTERVAL_S} s"
                )
        previous = wall
        if (end is not None and wall >= end) or seen >= _SAMPLE_MAX:
            break
    if seen == 0:
        raise RuleError("the rule never fires")
    if seen == 1:
        raise RuleError("the rule fires only once; a scheduled task repeats (use run now for a single run)")
    return rule


def anchor_for(instant: datetime, tz: ZoneInfo) -> datetime:
    """The anchor a rule set at ``instant`` gets: midnight (local, naive) of that day."""
    local = instant.astimezone(tz)
    return datetime(local.year, local.month, local.day)


def next_after(
    rule: Rule, after: datetime, tz: ZoneInfo, anchor: datetime, *, not_before: datetime | None = None
) -> datetime | None:
    """The first occurrence strictly after ``after`` (and not before ``not_before``), in ``tz``; None if none.

    ``anchor`` is the rule's naive local start (:func:`anchor_for`). The
    result is timezone-aware in ``tz``, at its real instant.
    """
    floor = after.timestamp()
    if not_before is not None and not_before.timestamp() - 1e-6 > floor:
        floor = not_before.timestamp() - 1e-6
    start = datetime.fromtimestamp(floor, tz).replace(tzinfo=None)
    horizon = start + relativedelta(years=HORIZON_YEARS)
    for wall in _walls(rule, anchor, start, tz, horizon=horizon):
        instant = _instant(wall, tz)
        if instant is not None and instant.timestamp() > floor:
            return instant
    return None


def upcoming(
    rule: Rule,
    after: datetime,
    tz: ZoneInfo,
    anchor: datetime,
    *,
    limit: int,
    not_before: datetime | None = None,
) -> list[datetime]:
    """The next ``limit`` occurrences after ``after`` (a preview of the schedule)."""
    out: list[datetime] = []
    current = after
    while len(out) < limit:
        found = next_after(rule, current, tz, anchor, not_before=not_before)
        if found is None:
            break
        out.append(found)
        current = found
    return out


def cron_expression(rule: Rule, anchor: datetime) -> str | None:
    """EventBridge Scheduler's ``cron(...)`` firing at exactly the rule's occurrences, or None.

    None for what cron cannot say: ``COUNT``, intervals that do not divide
    the next unit (every 7 minutes, every other day), ``BYSETPOS``,
    ``BYYEARDAY``, ``BYWEEKNO``, weekdays *and* month days together, ordinal
    weekdays outside ``MONTHLY``. ``UNTIL`` becomes the schedule's end date.
    """
    if rule.count is not None or any(
        k in rule.fields for k in ("BYSETPOS", "BYYEARDAY", "BYWEEKNO", "BYEASTER")
    ):
        return None
    if rule.by("BYDAY") and rule.by("BYMONTHDAY"):
        return None
    times = _cron_times(rule)
    days = _cron_days(rule, anchor)
    if times is None or days is None:
        return None
    return f"cron({times} {days} *)"


def _cron_times(rule: Rule) -> str | None:
    """The minutes and hours fields, or None when the interval does not divide the hour or day."""
    n, minutes, hours = rule.interval, rule.by("BYMINUTE"), rule.by("BYHOUR")
    if rule.freq == MINUTELY:
        if 60 % n or (minutes and n != 1):
            return None
        return f"{','.join(minutes) or ('*' if n == 1 else f'0/{n}')} {','.join(hours) or '*'}"
    if rule.freq == HOURLY:
        if 24 % n or (hours and n != 1):
            return None
        return f"{','.join(minutes) or '0'} {','.join(hours) or ('*' if n == 1 else f'0/{n}')}"
    if n != 1:
        return None
    return f"{','.join(minutes) or '0'} {','.join(hours) or '0'}"


def _cron_days(rule: Rule, anchor: datetime) -> str | None:
    """The day-of-month, month and day-of-week fields (the defaults dateutil takes from the anchor)."""
    days, month_days, months = rule.by("BYDAY"), rule.by("BYMONTHDAY"), rule.by("BYMONTH")
    ordinal = [d for d in days if not d.isalpha()]
    if ordinal and (rule.freq != MONTHLY or len(days) != 1):
        return None
    if rule.freq == WEEKLY and not days:
        days = [_WEEKDAYS[anchor.weekday()]]
    elif rule.freq in (MONTHLY, YEARLY) and not days and not month_days:
        month_days = [str(anchor.day)]
        if rule.freq == YEARLY:
            months = months or [str(anchor.month)]
    month_field = ",".join(months) or "*"
    if ordinal:
        m = _BYDAY.fullmatch(days[0])
        number = int(m.group(1)) if m else 0
        if m is None or not 1 <= number <= 5:
            return None
        return f"? {month_field} {_CRON_DAYS[m.group(2)]}#{number}"
    if days:
        return f"? {month_field} {','.join(_CRON_DAYS[d] for d in days)}"
    if any(int(d) < 0 for d in month_days):
        if month_days != ["-1"]:
            return None
        month_days = ["L"]
    return f"{','.join(month_days) or '*'} {month_field} ?"


def until_instant(rule: Rule, tz: ZoneInfo, anchor: datetime) -> datetime | None:
    """When the rule's last occurrence is at the latest: ``UNTIL``, or the ``COUNT``-th occurrence."""
    if rule.until is not None:
        wall = _until_wall(rule.until, tz)
        return _instant(wall, tz) or wall.replace(tzinfo=tz)
    if rule.count is None:
        return None
    last = None
    for wall in _walls(rule, anchor, anchor, tz):
        last = wall
    return _instant(last, tz) if last is not None else None


# ------------------------------------------------------------------------------ internals
def _normalized(key: str, value: str) -> str:
    if not key.startswith("BY"):
        return value
    values: list[str] = []
    for item in value.split(","):
        item = item.strip()
        if key == "BYDAY":
            m = _BYDAY.fullmatch(item)
            if m is None:
                raise RuleError(
                    f"BYDAY: {item!r} is not a weekday (MO..SU, optionally numbered like 1MO or -1FR)"
                )
            item = f"{int(m.group(1))}{m.group(2)}" if m.group(1) else m.group(2)
        else:
            item = str(_int(item, key))
        if item not in values:
            values.append(item)
    if len(values) > MAX_BY_VALUES:
        raise RuleError(f"{key} takes at most {MAX_BY_VALUES} distinct values")
    return ",".join(values)


def _int(value: str, key: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise RuleError(f"{key} must be a whole number, got {value!r}") from None


def _until_wall(until: str, tz: ZoneInfo) -> datetime:
    """UNTIL as a naive local wall time of ``tz`` (``...Z`` is UTC; a date alone is the end of that day)."""
    text = until.strip().upper()
    try:
        if re.fullmatch(r"\d{8}", text):
            return datetime.strptime(text, "%Y%m%d").replace(hour=23, minute=59, second=59)
        if re.fullmatch(r"\d{8}T\d{6}Z", text):
            utc = datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            return utc.astimezone(tz).replace(tzinfo=None)
        if re.fullmatch(r"\d{8}T\d{6}", text):
            return datetime.strptime(text, "%Y%m%dT%H%M%S")
    except ValueError:
        pass
    raise RuleError(f"UNTIL must be a date (YYYYMMDD) or a time (YYYYMMDDTHHMMSS, Z for UTC), got {until!r}")


def _build(
    rule: Rule, anchor: datetime, start: datetime, tz: ZoneInfo, horizon: datetime | None = None
) -> rrule:
    """dateutil's rule from ``start`` (the anchor moved on by whole periods, unless ``COUNT`` counts from it)."""
    text = ";".join(
        [
            f"FREQ={_name(rule.freq)}",
            f"INTERVAL={rule.interval}",
            *(f"{k}={v}" for k, v in rule.fields.items()),
        ]
    )
    dtstart = anchor if rule.count is not None else _period_start(rule, anchor, start)
    try:
        parsed = rrulestr(text, dtstart=dtstart)
    except (ValueError, TypeError, KeyError) as exc:
        raise RuleError(f"invalid rule: {exc}") from None
    if not isinstance(parsed, rrule):
        raise RuleError("use a single recurrence rule")
    # The defaults dateutil takes from dtstart (weekday, day, month) come from the anchor, not the moved start.
    f = rule.fields
    defaults: dict[str, Any] = {}
    if not any(k in f for k in ("BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY", "BYEASTER")):
        if rule.freq == YEARLY:
            defaults["bymonthday"] = anchor.day
            if "BYMONTH" not in f:
                defaults["bymonth"] = anchor.month
        elif rule.freq == MONTHLY:
            defaults["bymonthday"] = anchor.day
        elif rule.freq == WEEKLY:
            defaults["byweekday"] = anchor.weekday()
    until = _until_wall(rule.until, tz) if rule.until is not None else None
    if horizon is not None and rule.count is None:  # COUNT bounds the walk itself
        until = min(until, horizon) if until is not None else horizon
    try:
        return parsed.replace(count=rule.count, until=until, **defaults)
    except (ValueError, TypeError) as exc:
        raise RuleError(f"invalid rule: {exc}") from None


def _walls(
    rule: Rule, anchor: datetime, start: datetime, tz: ZoneInfo | None, *, horizon: datetime | None = None
) -> Iterator[datetime]:
    """The rule's wall times from ``start`` on; what dateutil finds impossible while walking is a RuleError."""
    try:
        yield from _build(rule, anchor, start, tz or ZoneInfo("UTC"), horizon)
    except ValueError as exc:
        raise RuleError(f"the rule never fires: {exc}") from None


def _period_start(rule: Rule, anchor: datetime, start: datetime) -> datetime:
    """The anchor moved on by whole periods to the last period beginning before ``start``'s (phase kept)."""
    if start <= anchor:
        return anchor
    n = rule.interval
    if rule.freq in _UNIT_MINUTES:
        period = timedelta(minutes=_UNIT_MINUTES[rule.freq] * n)
        k = (start - anchor) // period - 1
        return anchor + period * k if k > 0 else anchor
    if rule.freq == MONTHLY:
        months = (start.year - anchor.year) * 12 + start.month - anchor.month
        k = months // n - 1
        return (
            datetime.combine(date(anchor.year, anchor.month, 1), anchor.time()) + relativedelta(months=n * k)
            if k > 0
            else anchor
        )
    years = start.year - anchor.year
    k = years // n - 1
    return (
        datetime.combine(date(anchor.year, 1, 1), anchor.time()) + relativedelta(years=n * k)
        if k > 0
        else anchor
    )


def _late_cycle(anchor: datetime) -> datetime:
    """The same calendar day in the 400-year cycle starting 9600 (weekdays and leap years repeat every 400)."""
    return anchor.replace(year=9600 + (anchor.year - 2000) % 400)


def _name(freq: int) -> str:
    return next(name for name, value in FREQUENCIES.items() if value == freq)


def _instant(wall: datetime, tz: ZoneInfo) -> datetime | None:
    """The instant of a local wall time: None if the clock skips it, its first instant if it repeats."""
    first = wall.replace(tzinfo=tz, fold=0)
    if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) != wall:
        return None  # in the hour skipped by a spring-forward change
    return first
