"""--to-datetime (Kafka's Utils.getDateTime) and --by-duration (java.time.Duration.parse)."""

from __future__ import annotations

import pytest

from coordinator.offset_reset.datetimes import (
    DateTimeFormatError,
    DurationFormatError,
    parse_datetime,
    parse_duration,
    parse_duration_nanos,
    timestamp_for_duration,
)

NOON_UTC = 1706702400000  # 2024-01-31T12:00:00Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-31T12:00:00.000", NOON_UTC),  # no zone: Z appended, UTC
        ("2024-01-31T12:00:00.000Z", NOON_UTC),
        ("2024-01-31T12:00:00.000+02:00", NOON_UTC - 2 * 3600_000),
        ("2024-01-31T12:00:00.000-05:30", NOON_UTC + 5 * 3600_000 + 30 * 60_000),
        ("2024-01-31T12:00:00.000+02", NOON_UTC - 2 * 3600_000),  # second pattern, X
        ("2024-01-31T12:00:00.000+0200", NOON_UTC - 2 * 3600_000),
        ("2024-01-31T12:00:00.000+0530", NOON_UTC - 5 * 3600_000),  # X reads +05, the rest is ignored
        ("2024-01-31T12:00:00.5", NOON_UTC + 5),  # SSS is a number of milliseconds
        ("2024-01-31T12:00:00.0500", NOON_UTC + 500),
        ("2024-1-5T1:2:3.4", 1704416523004),  # fields are not fixed-width
        ("2024-01-31T12:00:00.000Ztrailing", NOON_UTC),  # text after the zone is ignored
        ("2024-01-31T 12:00:00.000", NOON_UTC),  # spaces before a field are skipped
        ("1970-01-01T00:00:00.000", 0),
        ("1969-12-31T23:59:59.999", -1),
        ("2024-02-29T00:00:00.000", 1709164800000),
        ("12024-01-01T00:00:00.000", 1704067200000 + 25 * 146097 * 86_400_000),  # years beyond 9999
        ("1582-10-04T00:00:00.000", -12219379200000),  # Julian, the day before the cutover
        ("1582-10-15T00:00:00.000", -12219292800000),
    ],
)
def test_accepted_datetimes(text: str, expected: int) -> None:
    assert parse_datetime(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2024-01-31", "Error parsing timestamp. It does not contain a 'T' according to ISO8601 format"),
        ("2024-01-31T", "Error parsing timestamp. It does not contain a 'T' according to ISO8601 format"),
        ("", "Error parsing timestamp. It does not contain a 'T' according to ISO8601 format"),
        ("2024-01-31T12:00:00", 'Unparseable date: "2024-01-31T12:00:00Z"'),  # milliseconds are mandatory
        ("2024-01-31T12:00:00.1234", 'Unparseable date: "2024-01-31T12:00:00.1234Z"'),
        ("2023-02-29T00:00:00.000", 'Unparseable date: "2023-02-29T00:00:00.000Z"'),
        ("2024-13-01T00:00:00.000", 'Unparseable date: "2024-13-01T00:00:00.000Z"'),
        ("2024-01-31T24:00:00.000", 'Unparseable date: "2024-01-31T24:00:00.000Z"'),
        ("2024-01-31T12:60:00.000", 'Unparseable date: "2024-01-31T12:60:00.000Z"'),
        ("2024-01-31T12:00:60.000", 'Unparseable date: "2024-01-31T12:00:60.000Z"'),
        ("0000-01-01T00:00:00.000", 'Unparseable date: "0000-01-01T00:00:00.000Z"'),
        ("1582-10-10T00:00:00.000", 'Unparseable date: "1582-10-10T00:00:00.000Z"'),  # skipped by the cutover
        ("2024-01-31T12:00:00.000+24:00", 'Unparseable date: "2024-01-31T12:00:00.000+24:00"'),
        ("2024-01-31T12:00:00.000+2", 'Unparseable date: "2024-01-31T12:00:00.000+2"'),
        ("2024-01-31T12:00:00.000z", 'Unparseable date: "2024-01-31T12:00:00.000zZ"'),
        ("yesterdayT12:00:00.000", 'Unparseable date: "yesterdayT12:00:00.000Z"'),
    ],
)
def test_refused_datetimes(text: str, message: str) -> None:
    with pytest.raises(DateTimeFormatError) as caught:
        parse_datetime(text)
    assert str(caught.value) == message
    assert caught.value.java_class == "java.text.ParseException"


def test_default_zone_is_what_is_appended() -> None:
    assert parse_datetime("2024-01-31T12:00:00.000", tz_default="+01:00") == NOON_UTC - 3600_000


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("PT20.345S", 20_345_000_000),
        ("PT15M", 900 * 10**9),
        ("PT10H", 36_000 * 10**9),
        ("P2D", 172_800 * 10**9),
        ("P2DT3H4M", (2 * 86400 + 3 * 3600 + 4 * 60) * 10**9),
        ("PT-6H3M", (-6 * 3600 + 3 * 60) * 10**9),
        ("-PT6H3M", -(6 * 3600 + 3 * 60) * 10**9),
        ("-PT-6H+3M", (6 * 3600 - 3 * 60) * 10**9),
        ("pt1m", 60 * 10**9),  # case-insensitive
        ("PT1,5S", 1_500_000_000),  # comma as decimal mark
        ("PT-0.5S", -500_000_000),  # the fraction takes the seconds' sign
        ("PT1.S", 10**9),
        ("PT0.000000001S", 1),
        ("+P1D", 86400 * 10**9),
    ],
)
def test_durations(text: str, nanos: int) -> None:
    assert parse_duration_nanos(text) == nanos


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("P", "Text cannot be parsed to a Duration"),
        ("PT", "Text cannot be parsed to a Duration"),
        ("P1DT", "Text cannot be parsed to a Duration"),
        ("1H", "Text cannot be parsed to a Duration"),
        ("P1H", "Text cannot be parsed to a Duration"),  # hours belong after T
        ("P1Y", "Text cannot be parsed to a Duration"),  # no years or months in a Duration
        ("PT1.0000000001S", "Text cannot be parsed to a Duration"),  # ten fraction digits
        (" PT1S", "Text cannot be parsed to a Duration"),
        ("P106751991167301D", "Text cannot be parsed to a Duration: days"),
        ("PT9223372036854775808S", "Text cannot be parsed to a Duration: seconds"),
        ("P106751991167300DT24H", "Text cannot be parsed to a Duration: overflow"),
    ],
)
def test_refused_durations(text: str, message: str) -> None:
    with pytest.raises(DurationFormatError) as caught:
        parse_duration_nanos(text)
    assert str(caught.value) == message


def test_duration_millis_truncate_toward_zero() -> None:
    assert parse_duration("PT1.0009S") == 1000
    assert parse_duration("PT-1.0009S") == -1000


def test_timestamp_for_duration_is_now_minus_the_duration() -> None:
    assert timestamp_for_duration(1_000_000, "PT10M") == 1_000_000 - 600_000
    # Instant.toEpochMilli floors a sub-millisecond remainder.
    assert timestamp_for_duration(1_000_000, "PT0.0005S") == 999_999
    assert timestamp_for_duration(1_000_000, "-PT1S") == 1_001_000
