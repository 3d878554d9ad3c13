"""The one-owner-at-a-time check of group_consumer_scenarios.py on made-up member lines: it must
pass a clean handover and a re-delivery of what was not committed before a revocation, and catch
a partition read by two members at once, a skipped offset, a record of a partition the member did
not own, and a member starting anywhere but at the committed offset."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.clients.group_consumer_scenarios import missing_records, ownership_violations
from tests.clients.group_scenario import Member


def member(name: str, *lines: str) -> Member:
    return Member(name, "java", SimpleNamespace(lines=list(lines)), Path("/nonexistent"))  # type: ignore[arg-type]


def reads(p: int, lo: int, hi: int) -> list[str]:
    return [f"R {p} {o}" for o in range(lo, hi)]


def test_a_handover_after_a_commit_passes() -> None:
    a = member("a", "A 0,1", *reads(0, 0, 5), "C 0 5", "REV 0", "A 1", *reads(1, 0, 3), "C 1 3")
    b = member("b", "A 0", *reads(0, 5, 10), "C 0 10")
    assert ownership_violations([a, b], {}) == []


def test_a_redelivery_of_what_was_not_committed_before_a_revocation_passes() -> None:
    a = member("a", "A 0", *reads(0, 0, 10), "C 0 6", "REV 0")
    b = member("b", "A 0", *reads(0, 6, 12), "C 0 12")
    assert ownership_violations([a, b], {}) == []


def test_two_members_reading_a_partition_at_once_are_caught() -> None:
    a = member("a", "A 0", *reads(0, 0, 10), "C 0 10")
    b = member("b", "A 0", *reads(0, 0, 4), "C 0 4")
    bad = ownership_violations([a, b], {})
    assert len(bad) == 1 and "partition 0" in bad[0], bad


def test_a_second_owner_that_skips_ahead_is_caught() -> None:
    a = member("a", "A 0", *reads(0, 0, 5), "C 0 5", "REV 0")
    b = member("b", "A 0", *reads(0, 7, 9))
    assert ownership_violations([a, b], {}) != []


def test_a_skipped_offset_an_unowned_record_and_a_wrong_start_are_caught() -> None:
    assert ownership_violations([member("a", "A 0", "R 0 0", "R 0 2")], {}) != []
    assert ownership_violations([member("a", "A 0", "R 0 0", "REV 0", "R 0 1")], {}) != []
    assert ownership_violations([member("a", "A 0", *reads(0, 0, 3))], {0: 2}) != []
    assert ownership_violations([member("a", "A 0", *reads(0, 2, 3))], {0: 2}) == []


def test_missing_records_names_what_nobody_read() -> None:
    a = member("a", "A 0", *reads(0, 0, 3), *reads(0, 4, 5))
    assert (0, 3) in missing_records([a], {}, 5)
