"""The two time arguments of ``--reset-offsets``: ``--to-datetime`` and ``--by-duration``.

Both follow the Java code kafka-consumer-groups runs, quirks included, because an operator's
script written against Kafka must pick the same offsets here:

* ``--to-datetime`` is ``org.apache.kafka.common.utils.Utils.getDateTime``
  (https://github.com/apache/kafka/blob/3.9.0/clients/src/main/java/org/apache/kafka/common/utils/Utils.java):
  the text must hold a ``T``; when the part after the first ``T`` holds none of ``+ - Z`` a ``Z``
  is appended (no zone means UTC); then a strict (non-lenient) ``SimpleDateFormat`` reads
  ``yyyy-MM-dd'T'HH:mm:ss.SSSXXX``, and on failure ``yyyy-MM-dd'T'HH:mm:ss.SSSX``.
  SimpleDateFormat's rules that follow from it: every numeric field takes as many digits as are
  there (``.5`` is 5 ms, not 500), spaces or tabs before a field are skipped, the milliseconds are
  mandatory, the zone is ``Z``, ``+hh:mm`` or (second pattern) ``+hh`` — so ``+0530`` reads as
  ``+05`` — and text after the zone is ignored. Dates before the Gregorian cutover
  (1582-10-15) are Julian, as in ``java.util.GregorianCalendar``.
* ``--by-duration`` is ``java.time.Duration.parse``
  (https://docs.oracle.com/en/java/javase/21/docs/api/java.base/java/time/Duration.html#parse(java.lang.CharSequence)):
  ISO-8601 ``PnDTnHnMn.nS``, case-insensitive, a sign before the whole and before each number,
  up to nine fraction digits after ``.`` or ``,``.

Nothing here reads the clock: ``timestamp_for_duration`` takes "now" from the caller.
"""

from __future__ import annotations

import re

__all__ = [
    "DateTimeFormatError",
    "DurationFormatError",
    "parse_datetime",
    "parse_duration",
    "parse_duration_nanos",
    "timestamp_for_duration",
]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_NANOS_PER_SECOND = 1_000_000_000


class DateTimeFormatError(ValueError):
    """Kafka's ``java.text.ParseException`` for ``--to-datetime``; ``str()`` is Kafka's message."""

    java_class = "java.text.ParseException"


class DurationFormatError(ValueError):
    """``java.time.format.DateTimeParseException`` for ``--by-duration``; ``str()`` is Java's message."""

    java_class = "java.time.format.DateTimeParseException"


# --- --to-datetime ---------------------------------------------------------------------------

def _java_split_t(text: str) -> list[str]:
    """``String.split("T")``: trailing empty strings are dropped."""
    parts = text.split("T")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if parts == [""] and text:
        return []
    return parts


def _to_java_int(digits: str) -> int:
    """``Number.intValue()`` of what DecimalFormat parsed: a Long narrowed to 32 bits, or a
    Double (beyond a long) saturated."""
    value = int(digits)
    if value > _LONG_MAX:
        return _INT_MAX
    return (value - _INT_MIN) % 2**32 + _INT_MIN


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _days_from_julian(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a Julian-calendar date."""
    a = (14 - month) // 12
    y = year + 4800 - a
    m = month + 12 * a - 3
    jdn = day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32083
    return jdn - 2440588


def _month_length(year: int, month: int, julian: bool) -> int:
    if month == 2:
        leap = year % 4 == 0 if julian else (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0))
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _epoch_day(year: int, month: int, day: int) -> int | None:
    """The epoch day of a valid date under GregorianCalendar's default cutover, None if invalid."""
    if not (1 <= year <= 292278994 and 1 <= month <= 12 and day >= 1):
        return None
    if (year, month, day) >= (1582, 10, 15):
        return _days_from_civil(year, month, day) if day <= _month_length(year, month, False) else None
    if (year, month, day) <= (1582, 10, 4):
        return _days_from_julian(year, month, day) if day <= _month_length(year, month, True) else None
    return None  # the ten days the cutover skipped


class _Cursor:
    """SimpleDateFormat.parse over ``yyyy-MM-dd'T'HH:mm:ss.SSS`` + zone; fails with ``_NoMatch``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def number(self) -> int:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1
        start = self.pos
        while self.pos < len(self.text) and "0" <= self.text[self.pos] <= "9":
            self.pos += 1
        if self.pos == start:
            raise _NoMatch
        return _to_java_int(self.text[start:self.pos])

    def literal(self, ch: str) -> None:
        if self.pos >= len(self.text) or self.text[self.pos] != ch:
            raise _NoMatch
        self.pos += 1

    def zone_minutes(self, with_colon_minutes: bool) -> int:
        """``XXX`` (``Z`` or ``±hh:mm``) or ``X`` (``Z`` or ``±hh``): the offset in minutes."""
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1
        if self.pos >= len(self.text):
            raise _NoMatch
        sign_char = self.text[self.pos]
        if sign_char == "Z":
            return 0
        if sign_char not in "+-":
            raise _NoMatch
        rest = self.text[self.pos + 1:]
        pattern = r"([0-9]{2}):([0-9]{2})" if with_colon_minutes else r"([0-9]{2})"
        m = re.match(pattern, rest)
        if m is None:
            raise _NoMatch
        hours = int(m.group(1))
        minutes = int(m.group(2)) if with_colon_minutes else 0
        if hours > 23 or minutes > 59:
            raise _NoMatch
        return (hours * 60 + minutes) * (1 if sign_char == "+" else -1)


class _NoMatch(Exception):
    pass


def _parse_with(text: str, colon_zone: bool) -> int:
    cur = _Cursor(text)
    year = cur.number()
    cur.literal("-")
    month = cur.number()
    cur.literal("-")
    day = cur.number()
    cur.literal("T")
    hour = cur.number()
    cur.literal(":")
    minute = cur.number()
    cur.literal(":")
    second = cur.number()
    cur.literal(".")
    millis = cur.number()
    offset_minutes = cur.zone_minutes(colon_zone)
    # Non-lenient Calendar: every field within its range, the date real.
    epoch_day = _epoch_day(year, month, day)
    if epoch_day is None or not (0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= second <= 59 and 0 <= millis <= 999):
        raise _NoMatch
    local_ms = ((epoch_day * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
    return local_ms - offset_minutes * 60_000


def parse_datetime(text: str, tz_default: str = "Z") -> int:
    """Epoch milliseconds of a ``--to-datetime`` value, by Kafka's ``Utils.getDateTime`` rules.

    ``tz_default`` is what is appended when the text names no zone; Kafka always appends ``Z``
    (UTC), so the tool leaves it alone. Raises ``DateTimeFormatError`` with Kafka's message.
    """
    parts = _java_split_t(text)
    if len(parts) < 2:
        raise DateTimeFormatError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    if not any(c in parts[1] for c in "+-Z"):
        text = text + tz_default
    for colon_zone in (True, False):
        try:
            return _parse_with(text, colon_zone)
        except _NoMatch:
            continue
    raise DateTimeFormatError(f'Unparseable date: "{text}"')


# --- --by-duration ----------------------------------------------------------------------------

# java.time.Duration's own pattern (group 3 is the "T..." part, checked for emptiness below).
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)
_NOT_A_DURATION = "Text cannot be parsed to a Duration"


def _duration_number(text: str | None, multiplier: int, what: str) -> int:
    if text is None:
        return 0
    value = int(text)
    if not (_LONG_MIN <= value <= _LONG_MAX) or not (_LONG_MIN <= value * multiplier <= _LONG_MAX):
        raise DurationFormatError(f"{_NOT_A_DURATION}: {what}")
    return value * multiplier


def parse_duration_nanos(text: str) -> int:
    """``Duration.parse(text)`` in nanoseconds; ``DurationFormatError`` with Java's message."""
    m = _DURATION.fullmatch(text)
    if m is None or (m.group(3) is not None and m.group(3).upper() == "T"):
        raise DurationFormatError(_NOT_A_DURATION)
    if m.group(2) is None and m.group(4) is None and m.group(5) is None and m.group(6) is None:
        raise DurationFormatError(_NOT_A_DURATION)
    days = _duration_number(m.group(2), 86400, "days")
    hours = _duration_number(m.group(4), 3600, "hours")
    minutes = _duration_number(m.group(5), 60, "minutes")
    seconds = _duration_number(m.group(6), 1, "seconds")
    fraction = m.group(7) or ""
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    if m.group(6) is not None and m.group(6).startswith("-"):
        nanos = -nanos
    total_seconds = days + hours + minutes + seconds
    # Math.addExact on the sum of the sections, then ofSeconds/negated, as Duration.create does.
    if not (_LONG_MIN <= total_seconds <= _LONG_MAX) or any(
        not (_LONG_MIN <= s <= _LONG_MAX) for s in (minutes + seconds, hours + minutes + seconds)
    ):
        raise DurationFormatError(f"{_NOT_A_DURATION}: overflow")
    total = total_seconds * _NANOS_PER_SECOND + nanos
    if m.group(1) == "-":
        total = -total
    # A Duration holds a long of seconds: ofSeconds/negated overflow is Java's ArithmeticException.
    if not (_LONG_MIN <= total // _NANOS_PER_SECOND <= _LONG_MAX):
        raise DurationFormatError(f"{_NOT_A_DURATION}: overflow")
    return total


def parse_duration(text: str) -> int:
    """``Duration.parse(text).toMillis()``: whole milliseconds, truncated toward zero."""
    nanos = parse_duration_nanos(text)
    return nanos // 1_000_000 if nanos >= 0 else -((-nanos) // 1_000_000)


def timestamp_for_duration(now_ms: int, text: str) -> int:
    """``Instant.now().minus(Duration.parse(text)).toEpochMilli()`` with ``now_ms`` for the clock
    (``toEpochMilli`` floors, sub-millisecond parts of the duration included)."""
    return (now_ms * 1_000_000 - parse_duration_nanos(text)) // 1_000_000
