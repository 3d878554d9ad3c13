"""Burrow's window and rules: each rule has a case whose status would differ without it."""

from __future__ import annotations

import pytest

from coordinator.lag.burrow import (
    GroupStatus,
    OffsetEntry,
    PartitionStatus,
    PartitionWindow,
    Status,
    evaluate_partition,
    group_status,
    partition_status,
)


def w(*entries: tuple[int, int, int]) -> list[OffsetEntry]:
    """(timestamp_ms, offset, lag) per commit, oldest first."""
    return [OffsetEntry(offset, ts, ts, lag) for ts, offset, lag in entries]


def status(entries: list[OffsetEntry], current_lag: int, now_ms: int, broker_offsets: tuple[int, ...] = (),
           allowed_lag: int = 0, intervals: int = 10) -> str:
    return evaluate_partition(entries, broker_offsets, current_lag, now_ms, allowed_lag, intervals).name


def test_status_numbers_and_names_are_burrows() -> None:
    assert [(s.name, int(s)) for s in Status] == [
        ("NOTFOUND", 0), ("OK", 1), ("WARN", 2), ("ERR", 3), ("STOP", 4), ("STALL", 5), ("REWIND", 6)]


def test_no_current_lag_is_ok_whatever_the_window() -> None:
    stopped = w((0, 10, 5), (10, 20, 6))
    assert status(stopped, 6, 100) == "STOP"
    assert status(stopped, 0, 100) == "OK"
    assert status(stopped, 6, 100, allowed_lag=6) == "OK"
    assert status(stopped, 7, 100, allowed_lag=6) == "STOP"


def test_stop_when_silent_for_longer_than_the_window_spans() -> None:
    window = w((0, 10, 5), (10, 20, 6))
    assert status(window, 6, 20) == "WARN"   # 10 ms silent, the window spans 10: not yet
    assert status(window, 6, 21) == "STOP"


def test_stop_is_checked_before_a_caught_up_window_and_before_rewind() -> None:
    # Old rule sets (Burrow < 1.2) answered OK here: the lag was 0 at the first commit.
    assert status(w((0, 10, 0), (10, 20, 5)), 5, 100) == "STOP"
    assert status(w((0, 20, 5), (10, 10, 9)), 9, 100) == "STOP"


def test_stop_is_held_back_while_a_broker_offset_shows_a_recent_catch_up() -> None:
    window = w((0, 10, 5), (10, 20, 6))
    assert status(window, 6, 100, (20, 26)) == "WARN"   # the end offset was at 20 in the ring
    assert status(window, 6, 100, (21, 26)) == "STOP"   # never at or below the last commit


def test_a_single_commit_stops_as_soon_as_time_passes() -> None:
    one = w((1_000, 10, 5))
    assert status(one, 5, 1_000) == "STALL"  # no time passed: the one offset never moved
    assert status(one, 5, 1_001) == "STOP"
    assert status(one, 5, 1_001, (10,)) == "STALL"
    assert status(one, 0, 1_001) == "OK"


def test_rewind_unless_it_recovers() -> None:
    assert status(w((0, 20, 5), (10, 10, 15)), 15, 15) == "REWIND"
    # Back to 20 afterwards: forgiven, and the lag fell at the end: OK.
    assert status(w((0, 20, 5), (10, 10, 15), (20, 20, 3)), 3, 25) == "OK"
    # Only the first rewind counts, and it did not recover: the later ones do not matter.
    assert status(w((0, 20, 5), (10, 10, 15), (20, 15, 3), (30, 12, 4)), 4, 35) == "REWIND"


def test_rewind_is_checked_before_a_caught_up_window() -> None:
    assert status(w((0, 20, 0), (10, 10, 10)), 10, 15) == "REWIND"


def test_a_window_that_caught_up_is_ok() -> None:
    assert status(w((0, 10, 0), (10, 20, 5)), 5, 15) == "OK"
    assert status(w((0, 10, 3), (10, 20, 5)), 5, 15) == "WARN"
    assert status(w((0, 10, 3), (10, 20, 5)), 5, 15, allowed_lag=3) == "OK"


def test_stall_when_the_offset_never_moves() -> None:
    assert status(w((0, 10, 5), (10, 10, 8)), 8, 15) == "STALL"
    assert status(w((0, 10, 5), (10, 11, 8)), 8, 15) == "WARN"


def test_warn_when_the_lag_never_falls() -> None:
    assert status(w((0, 10, 5), (10, 20, 5), (20, 30, 7)), 7, 25) == "WARN"
    assert status(w((0, 10, 5), (10, 20, 3), (20, 30, 4)), 4, 25) == "OK"


def test_an_incomplete_window_below_the_minimum_is_ok_unevaluated() -> None:
    window = w((0, 10, 5), (10, 20, 6), (20, 30, 7))
    got = partition_status(window, (), 7, 1_000, intervals=10, minimum_complete=0.5)
    assert got == PartitionStatus(Status.OK, 7, 0.3, window[0], window[-1])
    assert partition_status(window, (), 7, 1_000, intervals=10, minimum_complete=0.3).status is Status.STOP
    full = partition_status(window, (), 7, 1_000, intervals=3, minimum_complete=1.0)
    assert (full.status, full.complete) == (Status.STOP, 1.0)
    assert partition_status([], (), 7, 1_000) == PartitionStatus(Status.OK, 7, 0.0, None, None)


def test_only_the_last_intervals_commits_count() -> None:
    window = w((0, 10, 0), (10, 20, 5), (20, 30, 6))
    assert status(window, 6, 25, intervals=3) == "OK"
    assert status(window, 6, 25, intervals=2) == "WARN"


class TestPartitionWindow:
    def test_commits_without_a_broker_offset_are_dropped(self) -> None:
        window = PartitionWindow()
        assert window.add_commit(10, 1_000, 1_001) is False
        assert window.entries == ()
        assert window.add_commit(10, 1_000, 1_001, broker_offset=25) is True
        assert window.entries == (OffsetEntry(10, 1_000, 1_001, 15),)
        assert window.broker_offsets == ()  # the commit's broker offset is not a sample
        assert window.current_lag == 0

    def test_lag_against_the_newest_broker_offset_floored_at_zero(self) -> None:
        window = PartitionWindow()
        window.add_broker_offset(20)
        window.add_broker_offset(30)
        window.add_commit(25, 1_000, 1_000)
        window.add_commit(35, 2_000, 2_000)  # ahead of the sampled end: lag 0, not -5
        assert [e.lag for e in window.entries] == [5, 0]
        assert window.current_lag == 0
        window.add_broker_offset(50)
        assert window.current_lag == 15

    def test_rings_hold_intervals_entries(self) -> None:
        window = PartitionWindow(intervals=3)
        for i in range(5):
            window.add_broker_offset(100 + i)
            window.add_commit(i, i * 1_000, i * 1_000)
        assert [e.offset for e in window.entries] == [2, 3, 4]
        assert window.broker_offsets == (102, 103, 104)
        with pytest.raises(ValueError):
            PartitionWindow(intervals=0)

    def test_a_frequent_commit_replaces_the_newest_keeping_its_timestamp(self) -> None:
        window = PartitionWindow(min_distance_ms=1_000)
        window.add_broker_offset(100)
        window.add_commit(10, 0, 0)
        window.add_commit(20, 600, 600)     # 600 ms after: replaces, stamped 0
        window.add_commit(30, 1_200, 1_200)  # 1_200 ms after the kept 0: a new entry
        assert window.entries == (OffsetEntry(20, 0, 600, 80), OffsetEntry(30, 1_200, 1_200, 70))
        # Had the replacement taken the newer timestamp (600), the commit at 1_200 would have
        # merged too, and a group committing every 600 ms would never fill its window.

    def test_with_no_min_distance_only_a_commit_stamped_earlier_replaces(self) -> None:
        window = PartitionWindow()
        window.add_broker_offset(100)
        window.add_commit(10, 1_000, 1_000)
        window.add_commit(20, 1_000, 1_001)  # same timestamp: 0 < 0 is false, appended
        window.add_commit(30, 900, 1_002)    # earlier timestamp: replaces the newest
        assert window.entries == (OffsetEntry(10, 1_000, 1_000, 90), OffsetEntry(30, 1_000, 1_002, 70))

    def test_evaluate_uses_the_rings(self) -> None:
        window = PartitionWindow(intervals=2)
        window.add_broker_offset(20)
        window.add_commit(10, 0, 0)
        window.add_broker_offset(30)
        window.add_commit(20, 10, 10)
        # Silent for long, but the ring still holds the end offset 20, where the last commit is.
        assert window.evaluate(100) == PartitionStatus(Status.WARN, 10, 1.0, *window.entries)
        window.add_broker_offset(30)  # the ring now holds 30, 30: the catch-up slid out
        assert window.evaluate(100) == PartitionStatus(Status.STOP, 10, 1.0, *window.entries)
        assert window.evaluate(100, allowed_lag=10).status is Status.OK
        assert PartitionWindow(intervals=4).evaluate(100) == PartitionStatus(Status.OK, 0, 0.0, None, None)
        window.add_broker_offset(20)  # the end offset went back to the last commit
        assert window.evaluate(100).status is Status.OK  # current lag 0


def part(status: Status, lag: int, complete: float = 1.0) -> PartitionStatus:
    return PartitionStatus(status, lag, complete, None, None)


def test_group_status_is_the_worst_partition_with_stop_stall_rewind_as_err() -> None:
    assert group_status({("t", 0): part(Status.OK, 1), ("t", 1): part(Status.WARN, 3)}) == GroupStatus(
        Status.WARN, 1.0, ("t", 1), 4)
    for bad in (Status.STOP, Status.STALL, Status.REWIND):
        got = group_status({("t", 0): part(Status.WARN, 9), ("t", 1): part(bad, 2, 0.5), ("u", 0): part(Status.OK, 0)})
        assert got == GroupStatus(Status.ERR, 2 / 3, ("t", 0), 11)


def test_group_maxlag_is_the_first_partition_with_the_highest_lag() -> None:
    parts = {("t", 0): part(Status.OK, 0), ("t", 1): part(Status.OK, 5), ("t", 2): part(Status.OK, 5)}
    assert group_status(parts).maxlag == ("t", 1)
    assert group_status({("t", 0): part(Status.OK, 0)}).maxlag == ("t", 0)
    assert group_status({}) == GroupStatus(Status.OK, 0.0, None, 0)
