"""The reset plan per scenario, clamping and the --topic scope, against Kafka's rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.offset_reset.scenarios import (
    SCENARIOS,
    ResetUsageError,
    clamp,
    lookups_for,
    parse_topic_args,
    plan_reset,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)
EARLIEST = {A0: 10, A1: 0, B0: 5}
LATEST = {A0: 100, A1: 50, B0: 5}
COMMITTED = {A0: 40, A1: 50}


def plan(scenario: str, partitions=(A0, A1, B0), **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("earliest", EARLIEST)
    kw.setdefault("latest", LATEST)
    kw.setdefault("committed", COMMITTED)
    return plan_reset(scenario, list(partitions), **kw)


def test_to_earliest_and_to_latest() -> None:
    assert plan("to-earliest").offsets == {A0: 10, A1: 0, B0: 5}
    assert plan("to-latest").offsets == {A0: 100, A1: 50, B0: 5}


def test_missing_bounds_are_kafkas_usage_errors() -> None:
    with pytest.raises(ResetUsageError, match=r"^Error getting starting offset of topic partition: a-1$"):
        plan("to-earliest", earliest={A0: 1})
    with pytest.raises(ResetUsageError, match=r"^Error getting ending offset of topic partition: b-0$"):
        plan("to-latest", latest={A0: 1, A1: 1, B0: None})


def test_to_current_falls_back_to_latest_without_a_commit() -> None:
    assert plan("to-current").offsets == {A0: 40, A1: 50, B0: 5}


def test_to_offset_is_clamped_with_kafkas_warnings() -> None:
    result = plan("to-offset", value=60)
    assert result.offsets == {A0: 60, A1: 50, B0: 5}
    assert result.warnings == [
        "New offset (60) is higher than latest offset for topic partition a-1. Value will be set to 50",
        "New offset (60) is higher than latest offset for topic partition b-0. Value will be set to 5",
    ]
    low = plan("to-offset", value=3, partitions=[A0])
    assert low.offsets == {A0: 10}
    assert low.warnings == ["New offset (3) is lower than earliest offset for topic partition a-0. Value will be set to 10"]


def test_shift_by_moves_from_the_commit_and_clamps() -> None:
    result = plan("shift-by", value=-35, partitions=[A0, A1])
    assert result.offsets == {A0: 10, A1: 15}
    assert result.warnings == ["New offset (5) is lower than earliest offset for topic partition a-0. Value will be set to 10"]


def test_shift_by_without_a_commit_is_kafkas_illegal_argument() -> None:
    with pytest.raises(ResetUsageError) as caught:
        plan("shift-by", value=1)
    assert str(caught.value) == "Cannot shift offset for partition b-0 since there is no current committed offset"


@pytest.mark.parametrize("scenario", ["to-datetime", "by-duration"])
def test_timestamp_scenarios_fall_back_to_latest_with_kafkas_notice(scenario: str) -> None:
    result = plan(scenario, for_timestamp={A0: 42, A1: -1})
    assert result.offsets == {A0: 42, A1: 50, B0: 5}
    assert result.notices == [
        "\nWarn: Partition 1 from topic a is empty. Falling back to latest known offset.",
        "\nWarn: Partition 0 from topic b is empty. Falling back to latest known offset.",
    ]
    assert result.warnings == []  # not clamped
    with pytest.raises(ResetUsageError, match="^Error getting offset by timestamp of topic partition: a-1$"):
        plan(scenario, for_timestamp={A0: 42}, latest={A0: 1})


def test_from_file_uses_the_files_partitions_clamped() -> None:
    result = plan("from-file", partitions=[], from_file={A0: 1000, B0: 5, ("c", 0): -3})
    assert result.offsets == {A0: 100, B0: 5, ("c", 0): -3}  # an unknown bound is not enforced
    assert len(result.warnings) == 1


def test_every_scenario_has_its_lookups() -> None:
    assert {s for s in SCENARIOS if lookups_for(s)} == set(SCENARIOS)
    with pytest.raises(ValueError):
        lookups_for("to-nowhere")


@pytest.mark.parametrize(
    ("args", "explicit", "whole"),
    [
        (["t"], [], ["t"]),
        (["t:0,2", "u"], [("t", 0), ("t", 2)], ["u"]),
        (["t:0,", "t:+3"], [("t", 0), ("t", 3)], []),
    ],
)
def test_topic_args(args: list[str], explicit: list[tuple[str, int]], whole: list[str]) -> None:
    assert parse_topic_args(args) == (explicit, whole)


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("t:x", "Invalid partition 'x' specified in topic arg 't:x''"),
        ("t:0,,1", "Invalid partition '' specified in topic arg 't:0,,1''"),
        ("t:99999999999", "Invalid partition '99999999999' specified in topic arg 't:99999999999''"),
        ("t:1:2", "Invalid topic arg 't:1:2', expected topic name and partitions"),
        ("t:", "Invalid topic arg 't:', expected topic name and partitions"),
    ],
)
def test_bad_topic_args(arg: str, message: str) -> None:
    with pytest.raises(ResetUsageError) as caught:
        parse_topic_args([arg])
    assert str(caught.value) == message


bounds = st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)).map(sorted)


@given(st.dictionaries(st.tuples(st.sampled_from("abc"), st.integers(0, 5)),
                       st.tuples(st.integers(-(2**63), 2**63 - 1), bounds), max_size=12))
def test_clamping_stays_within_range(cases: dict) -> None:  # type: ignore[type-arg]
    requested = {tp: offset for tp, (offset, _) in cases.items()}
    earliest = {tp: lo for tp, (_, (lo, _hi)) in cases.items()}
    latest = {tp: hi for tp, (_, (_lo, hi)) in cases.items()}
    result, warnings = clamp(requested, earliest, latest)
    assert result.keys() == requested.keys()
    for tp, offset in result.items():
        assert earliest[tp] <= offset <= latest[tp]
        assert (offset == requested[tp]) == (earliest[tp] <= requested[tp] <= latest[tp])
    assert len(warnings) == sum(1 for tp in requested if result[tp] != requested[tp])


@given(st.integers(-(10**9), 10**9), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_shift_by_lands_in_range(shift: int, committed: int, lo: int, width: int) -> None:
    result = plan_reset("shift-by", [A0], value=shift, committed={A0: committed},
                        earliest={A0: lo}, latest={A0: lo + width})
    assert lo <= result.offsets[A0] <= lo + width
