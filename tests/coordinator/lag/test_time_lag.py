"""kafka-lag-exporter's lookup table: insertion rules, interpolation, extrapolation, and the
properties a lag-in-seconds must have whatever the points."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from coordinator.lag.time_lag import LookupTable, lag_seconds_from_record


def table(*points: tuple[int, int], size: int = 60) -> LookupTable:
    t = LookupTable(size)
    for offset, time_ms in points:
        assert t.add(offset, time_ms) == "Inserted"
    return t


def test_points_out_of_order_or_going_back_are_dropped() -> None:
    t = table((100, 1_000))
    assert t.add(150, 1_000) == "OutOfOrder"  # same time
    assert t.add(150, 900) == "OutOfOrder"
    assert t.add(90, 2_000) == "NonMonotonic"
    assert t.points == ((100, 1_000),)


def test_a_flat_run_keeps_its_first_and_last_point() -> None:
    t = table((100, 1_000), (200, 2_000), (200, 3_000))
    assert t.add(200, 4_000) == "Updated"
    assert t.add(200, 5_000) == "Updated"
    assert t.points == ((100, 1_000), (200, 2_000), (200, 5_000))
    assert t.add(300, 6_000) == "Inserted"
    # Two equal points are not a run yet: the second is inserted, not an update of the first.
    t2 = table((100, 1_000))
    assert t2.add(100, 2_000) == "Inserted"


def test_the_window_slides() -> None:
    t = table((1, 1), (2, 2), (3, 3), size=3)
    assert t.add(4, 4) == "Inserted"
    assert t.points == ((2, 2), (3, 3), (4, 4))
    with pytest.raises(ValueError):
        LookupTable(0)


def test_lag_is_zero_at_the_newest_offset_and_unknown_with_too_few_points() -> None:
    assert LookupTable().lag_seconds(0, 10_000) is None
    one = table((100, 1_000))
    assert one.lag_seconds(100, 10_000) == 0.0  # LagIsZero comes before TooFewPoints
    assert one.lag_seconds(50, 10_000) is None
    assert table((100, 1_000), (200, 2_000)).lag_seconds(200, 60_000) == 0.0


def test_interpolation_between_the_bracketing_points() -> None:
    t = table((100, 1_000), (200, 2_000), (400, 3_000))
    assert t.lag_seconds(150, 10_000) == pytest.approx(8.5)   # 1_500 ms
    assert t.lag_seconds(300, 10_000) == pytest.approx(7.5)   # 2_500 ms
    assert t.lag_seconds(200, 10_000) == pytest.approx(8.0)


def test_the_newest_bracketing_pair_wins_over_an_older_flat_run() -> None:
    # 200 is in the flat pair (200@2000, 200@3000) and in (200@3000, 300@4000): the newer pair
    # puts it at 3000 ms, when the log end last stood there.
    t = table((100, 1_000), (200, 2_000), (200, 3_000), (300, 4_000))
    assert t.lag_seconds(200, 10_000) == pytest.approx(7.0)


def test_extrapolation_from_the_oldest_and_newest_points() -> None:
    t = table((100, 1_000), (200, 1_500), (300, 3_000))  # overall 100 offsets per second
    assert t.lag_seconds(0, 10_000) == pytest.approx(10.0)    # below the table: at 0 ms
    assert t.lag_seconds(400, 10_000) == pytest.approx(6.0)   # above: at 4_000 ms


def test_a_table_at_one_offset_cannot_place_another() -> None:
    t = table((100, 1_000), (100, 2_000))
    assert t.lag_seconds(50, 10_000) is None  # the exporter divides by zero there
    assert t.lag_seconds(100, 10_000) == 0.0


def test_lag_from_the_first_unconsumed_record() -> None:
    assert lag_seconds_from_record(4_000, 10_000) == 6.0
    assert lag_seconds_from_record(12_000, 10_000) == 0.0  # stamped ahead of our clock
    assert lag_seconds_from_record(None, 10_000) is None
    assert lag_seconds_from_record(-1, 10_000) is None     # v0 record: no timestamp


INT64 = st.integers(-(2**63), 2**63 - 1)
OFFSET = st.integers(0, 10**12)


@st.composite
def filled(draw: st.DrawFn) -> tuple[LookupTable, list[tuple[int, int]]]:
    """A table fed a walk of points that mostly move forward, sometimes stand still and sometimes
    go back (so every insertion rule is exercised), and those points."""
    t = LookupTable(draw(st.integers(1, 8)))
    steps = draw(st.lists(st.tuples(st.integers(-3, 10**6), st.integers(-3, 10**5)), max_size=30))
    offset, time_ms, points = draw(OFFSET), draw(st.integers(0, 10**7)), []
    for d_offset, d_time in steps:
        offset, time_ms = max(offset + d_offset, 0), time_ms + d_time
        points.append((offset, time_ms))
        t.add(offset, time_ms)
    return t, points


@given(filled())
def test_the_table_stays_increasing_in_time_and_monotone_in_offset(tp: tuple[LookupTable, list]) -> None:
    t, _ = tp
    points = t.points
    assert len(points) <= t.size
    assert all(a[1] < b[1] and a[0] <= b[0] for a, b in zip(points, points[1:], strict=False))
    # Flat runs are collapsed: never three points in a row at one offset.
    assert all(not (a[0] == b[0] == c[0]) for a, b, c in zip(points, points[1:], points[2:], strict=False))


@given(filled(), INT64, INT64)
def test_lookup_never_raises(tp: tuple[LookupTable, list], committed: int, now_ms: int) -> None:
    lag = tp[0].lag_seconds(committed, now_ms)
    assert lag is None or isinstance(lag, float)


@given(filled(), OFFSET, OFFSET, st.integers(0, 10**7))
def test_lag_falls_as_the_commit_advances(tp: tuple[LookupTable, list], a: int, b: int, later: int) -> None:
    t, _ = tp
    points = t.points
    assume(len(points) >= 2 and points[0][0] != points[-1][0])
    newest_offset, newest_time = points[-1]
    now = newest_time + later
    lo, hi = sorted((min(a, newest_offset), min(b, newest_offset)))
    lag_lo, lag_hi = t.lag_seconds(lo, now), t.lag_seconds(hi, now)
    assert lag_lo is not None and lag_hi is not None
    assert lag_lo >= lag_hi - 1e-6
    assert lag_hi >= -1e-6  # behind the newest point, never ahead of now


@given(filled(), st.data())
def test_interpolated_lag_lies_between_its_points(tp: tuple[LookupTable, list], data: st.DataObject) -> None:
    t, _ = tp
    points = t.points
    assume(len(points) >= 2)
    i = data.draw(st.integers(1, len(points) - 1))
    lo_off, hi_off = points[i - 1][0], points[i][0]
    committed = data.draw(st.integers(lo_off, hi_off))
    assume(committed != points[-1][0])  # LagIsZero
    now = points[-1][1] + data.draw(st.integers(0, 10**6))
    lag = t.lag_seconds(committed, now)
    assert lag is not None
    # The estimate lies between the times of the newest pair of points that brackets the offset.
    j = max(k for k in range(1, len(points)) if points[k - 1][0] <= committed <= points[k][0])
    assert j >= i
    assert (now - points[j][1]) / 1000 - 1e-6 <= lag <= (now - points[j - 1][1]) / 1000 + 1e-6
