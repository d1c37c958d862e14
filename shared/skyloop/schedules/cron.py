"""Five-field cron (OpenAI's automations) to the RRULE the schedule engine evaluates, and back.

OpenAI's periodic automations take a cron ``expression`` and a ``timezone``;
skyloop's engine (:mod:`skyloop.schedules.rules`) takes one RRULE in a zone,
so an automation is stored as the RRULE its cron means and fires exactly
when cron would (the same wall times of the same zone, DST as the engine
does it).

Accepted, per field (minute 0-59, hour 0-23, day of month 1-31, month 1-12
or ``JAN``-``DEC``, day of week 0-7 or ``SUN``-``SAT``, 0 and 7 both Sunday):
``*``, ``?`` (day fields), ``n``, ``a-b``, ``*/s``, ``a-b/s``, ``a/s`` (from
``a`` to the field's end), names in any case, and comma lists of those; and the
macros ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily``
(``@midnight``), ``@hourly``.

How it maps: a minute field of ``*`` (or ``*/s`` with ``s`` dividing 60) is
``FREQ=MINUTELY`` (``INTERVAL=s``) and an hour field of ``*`` or ``*/s``
(``s`` dividing 24) with fixed minutes is ``FREQ=HOURLY``; everything else is
``FREQ=DAILY`` with the listed ``BYHOUR``/``BYMINUTE``. Day of month, month
and day of week become ``BYMONTHDAY``, ``BYMONTH`` and ``BYDAY`` filters. A
step that does not divide its unit (``*/7`` minutes) is expanded to its list,
as cron does (0,7,...,56, then 0 again at the next hour).

Refused (:class:`CronError`, naming the field): seconds or year fields
(six or seven fields), Quartz's ``L``, ``W`` and ``#``, values out of range,
and a day of month *and* a day of week both restricted: cron fires on either
(an OR), an RRULE's filters all hold (an AND), so one rule cannot say it.
The engine's own limits apply after (at most 24 values in a ``BY`` list and 24
times of day, at least a minute apart).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FIELDS = ("minute", "hour", "day_of_month", "month", "day_of_week")
_RANGES = {
    "minute": (0, 59),
    "hour": (0, 23),
    "day_of_month": (1, 31),
    "month": (1, 12),
    "day_of_week": (0, 7),
}
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_RRULE_DAYS = ("SU", "MO", "TU", "WE", "TH", "FR", "SA")
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MAX_LENGTH = 256
_PART = re.compile(r"^(\*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:/(\d+))?$")


class CronError(ValueError):
    """The expression is not a cron skyloop can schedule; ``field`` names the part at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


@dataclass(frozen=True)
class Field:
    """One parsed field: its values (sorted), whether it was ``*`` (or ``?``), and a ``*/s`` step if any."""

    values: tuple[int, ...]
    wildcard: bool
    step: int | None = None  # the step of a whole-range ``*/s``


def _value(token: str, name: str) -> int:
    upper = token.upper()
    if name == "month" and upper in _MONTHS:
        return _MONTHS.index(upper) + 1
    if name == "day_of_week" and upper in _DAYS:
        return _DAYS.index(upper)
    if not token.isdigit():
        if name in ("day_of_month", "day_of_week") and any(c in upper for c in "LW#"):
            raise CronError(f"{token!r}: L, W and # (Quartz) are not supported", name)
        raise CronError(
            f"{token!r} is not a number{' or a name' if name in ('month', 'day_of_week') else ''}", name
        )
    low, high = _RANGES[name]
    number = int(token)
    if not low <= number <= high:
        raise CronError(f"{number} is out of range {low}-{high}", name)
    return number


def _part(part: str, name: str, alone: bool) -> tuple[range, bool, int | None]:
    """One comma part: the values it spans, whether it is a bare ``*``, and its step when it is ``*/s``."""
    low, high = _RANGES[name]
    high = 6 if name == "day_of_week" else high  # 7 (Sunday) is a value; ``*`` spans 0-6
    m = _PART.match(part)
    if m is None:
        if name in ("day_of_month", "day_of_week") and any(c in part.upper() for c in "LW#"):
            raise CronError(f"{part!r}: L, W and # (Quartz) are not supported", name)
        raise CronError(f"{part!r} is not a value, a range or a step", name)
    base, step_text = m.group(1), m.group(2)
    step = int(step_text) if step_text is not None else 1
    if step < 1:
        raise CronError(f"{part!r}: a step must be at least 1", name)
    if step > _RANGES[name][1] - _RANGES[name][0] + 1:
        raise CronError(f"{part!r}: the step {step} is larger than the field's range", name)
    if base == "*":
        return range(low, high + 1, step), alone and step_text is None, step if alone and step_text else None
    if "-" in base:
        a, b = base.split("-", 1)
        start, end = _value(a, name), _value(b, name)
        if start > end:
            raise CronError(f"{part!r}: a range must go upwards ({start} > {end})", name)
    else:
        start = _value(base, name)
        end = max(start, high) if step_text is not None else start  # ``a/s``: from a to the field's end
    return range(start, end + 1, step), False, None


def parse_field(text: str, name: str) -> Field:
    """One field's values; ``day_of_week`` 7 is folded onto 0 (Sunday)."""
    if text == "?" and name in ("day_of_month", "day_of_week"):
        text = "*"
    if not text:
        raise CronError("is empty", name)
    parts = text.split(",")
    values: set[int] = set()
    wildcard, step = False, None
    for part in parts:
        span, wildcard, step = _part(part, name, alone=len(parts) == 1)
        values.update(span)
    if name == "day_of_week" and 7 in values:
        values.discard(7)
        values.add(0)
    return Field(tuple(sorted(values)), wildcard, step)


def parse(expression: str) -> dict[str, Field]:
    """The five fields of ``expression`` (a macro expanded)."""
    if not isinstance(expression, str) or not expression.strip():
        raise CronError("the expression is empty; write five fields, e.g. '0 9 * * 1-5'")
    if len(expression) > MAX_LENGTH:
        raise CronError(f"at most {MAX_LENGTH} characters")
    text = expression.strip()
    if text.startswith("@"):
        if text.lower() not in MACROS:
            raise CronError(f"unknown macro {text!r}; known: {', '.join(MACROS)}")
        text = MACROS[text.lower()]
    parts = text.split()
    if len(parts) != 5:
        raise CronError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}"
            + ("; seconds and years are not supported" if len(parts) in (6, 7) else "")
        )
    return {name: parse_field(part, name) for name, part in zip(FIELDS, parts, strict=True)}


def _join(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def to_rrule(expression: str) -> str:
    """The RRULE firing at the cron's times (read in the same time zone); CronError if none can."""
    f = parse(expression)
    minute, hour, dom, month, dow = (f[n] for n in FIELDS)
    if not dom.wildcard and not dow.wildcard:
        raise CronError(
            "a day of month and a day of week both restricted fire on either day in cron; "
            "one schedule cannot say that: restrict one of them (or make two automations)",
            "day_of_week",
        )
    parts: list[str]
    if minute.wildcard or (minute.step is not None and 60 % minute.step == 0):
        interval = 1 if minute.wildcard else minute.step
        parts = ["FREQ=MINUTELY"] + ([f"INTERVAL={interval}"] if interval != 1 else [])
        if not hour.wildcard:
            parts.append(f"BYHOUR={_join(hour.values)}")
    elif hour.wildcard or (hour.step is not None and 24 % hour.step == 0):
        interval = 1 if hour.wildcard else hour.step
        parts = ["FREQ=HOURLY"] + ([f"INTERVAL={interval}"] if interval != 1 else [])
        parts.append(f"BYMINUTE={_join(minute.values)}")
    else:
        parts = ["FREQ=DAILY", f"BYHOUR={_join(hour.values)}", f"BYMINUTE={_join(minute.values)}"]
    if not dom.wildcard:
        parts.append(f"BYMONTHDAY={_join(dom.values)}")
    if not month.wildcard:
        parts.append(f"BYMONTH={_join(month.values)}")
    if not dow.wildcard:
        parts.append("BYDAY=" + ",".join(_RRULE_DAYS[d] for d in dow.values))
    return ";".join(parts)


def _rule_fields(rrule: str) -> dict[str, str] | None:
    fields: dict[str, str] = {}
    for part in rrule.strip().upper().removeprefix("RRULE:").split(";"):
        key, sep, value = part.partition("=")
        if not sep:
            return None
        fields[key.strip()] = value.strip()
    return fields


def _cron_times(freq: str, interval: int, minutes: str | None, hours: str | None) -> tuple[str, str] | None:
    if freq == "MINUTELY" and minutes is None and not 60 % interval:
        return ("*" if interval == 1 else f"*/{interval}"), hours or "*"
    if freq == "HOURLY" and hours is None and not 24 % interval:
        return minutes or "0", "*" if interval == 1 else f"*/{interval}"
    if freq == "DAILY" and interval == 1:
        return minutes or "0", hours or "0"
    return None


def from_rrule(rrule: str) -> str | None:
    """The five-field cron of an RRULE :func:`to_rrule` can write, or None when cron cannot say it."""
    fields = _rule_fields(rrule)
    if fields is None:
        return None
    freq = fields.pop("FREQ", "")
    interval = int(fields.pop("INTERVAL", "1") or "1")
    known = {"BYMINUTE", "BYHOUR", "BYMONTHDAY", "BYMONTH", "BYDAY"}
    if set(fields) - known or ("BYMONTHDAY" in fields and "BYDAY" in fields):
        return None
    if any(v.startswith("-") for v in fields.get("BYMONTHDAY", "").split(",")):
        return None
    try:
        days = [_RRULE_DAYS.index(d) for d in fields["BYDAY"].split(",")] if "BYDAY" in fields else None
    except ValueError:
        return None  # numbered weekdays (1MO) have no cron field
    times = _cron_times(freq, interval, fields.get("BYMINUTE"), fields.get("BYHOUR"))
    if times is None:
        return None
    dow = ",".join(str(d) for d in days) if days is not None else "*"
    return f"{times[0]} {times[1]} {fields.get('BYMONTHDAY', '*')} {fields.get('BYMONTH', '*')} {dow}"
