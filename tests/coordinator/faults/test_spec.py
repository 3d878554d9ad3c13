"""parse_fault: every fault of the vocabulary, and each bad input refused with a message naming
what was wrong and what is valid."""

from __future__ import annotations

import pytest

from coordinator.faults.spec import (
    FAULT_NAMES,
    CrashRestart,
    Delay,
    DropConnections,
    Fail,
    FaultError,
    KickMember,
    LeaderUnavailable,
    MoveCoordinator,
    PauseHeartbeats,
    Rebalance,
    parse_fault,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

MAX = 300_000


def refused(body: dict[str, object], max_duration_ms: int = MAX) -> FaultError:
    with pytest.raises(FaultError) as info:
        parse_fault(body, max_duration_ms)
    return info.value


def test_every_fault_parses() -> None:
    assert parse_fault({"fault": "rebalance", "group": "g"}, MAX) == Rebalance("g")
    assert parse_fault({"fault": "kick-member", "group": "g"}, MAX) == KickMember("g", None)
    assert parse_fault({"fault": "kick-member", "group": "g", "member": "m"}, MAX) == KickMember("g", "m")
    assert parse_fault({"fault": "move-coordinator", "group": "g", "load_ms": 200}, MAX) == \
        MoveCoordinator("g", 200, 0)
    assert parse_fault({"fault": "fail", "api": "OffsetCommit", "error": "REBALANCE_IN_PROGRESS"}, MAX) == \
        Fail(ApiKey.OFFSET_COMMIT, ErrorCode.REBALANCE_IN_PROGRESS, 1, None, None, 60_000)
    assert parse_fault({"fault": "delay", "api": "JOIN_GROUP", "ms": 50, "group": "g", "duration_ms": 900}, MAX) == \
        Delay(ApiKey.JOIN_GROUP, 50, None, "g", None, 900)
    assert parse_fault({"fault": "drop-connections"}, MAX) == DropConnections(None)
    assert parse_fault({"fault": "pause-heartbeats", "duration_ms": 5000}, MAX) == PauseHeartbeats(5000, None)
    assert parse_fault({"fault": "leader-unavailable", "topic": "t", "partition": 2, "duration_ms": 10}, MAX) == \
        LeaderUnavailable("t", 2, 10)
    assert parse_fault({"fault": "crash-restart"}, MAX) == CrashRestart()


@pytest.mark.parametrize("api", ["OffsetCommit", "offsetcommit", "OFFSET_COMMIT", 8, "8"])
def test_api_forms(api: object) -> None:
    spec = parse_fault({"fault": "fail", "api": api, "error": 27}, MAX)
    assert isinstance(spec, Fail)
    assert (spec.api, spec.error) == (ApiKey.OFFSET_COMMIT, ErrorCode.REBALANCE_IN_PROGRESS)


def test_unknown_fault_lists_the_names() -> None:
    error = refused({"fault": "explode"})
    assert error.status == 400
    assert "unknown fault 'explode'" in error.message
    for name in FAULT_NAMES:
        assert name in error.message
    assert "unknown fault None" in refused({"group": "g"}).message


def test_unknown_param_is_named_with_the_valid_ones() -> None:
    error = refused({"fault": "rebalance", "group": "g", "grup": "x"})
    assert error.status == 400
    assert error.message == "unknown parameter 'grup' for fault 'rebalance': valid parameters are group"
    assert "valid parameters are none" in refused({"fault": "crash-restart", "now": True}).message


def test_bad_api_and_error_names() -> None:
    error = refused({"fault": "fail", "api": "OffsetComit", "error": "REBALANCE_IN_PROGRESS"})
    assert error.status == 400 and "unknown api 'OffsetComit'" in error.message and "OffsetCommit" in error.message
    error = refused({"fault": "fail", "api": 999, "error": "REBALANCE_IN_PROGRESS"})
    assert "unknown api 999" in error.message
    error = refused({"fault": "fail", "api": "OffsetCommit", "error": "REBALANCING"})
    assert error.status == 400 and "unknown error 'REBALANCING'" in error.message
    assert "REBALANCE_IN_PROGRESS" in error.message


def test_missing_and_bad_values() -> None:
    assert refused({"fault": "rebalance"}).message == "fault 'rebalance' needs group"
    assert refused({"fault": "pause-heartbeats"}).message == "fault 'pause-heartbeats' needs duration_ms"
    assert "needs topic, partition, duration_ms" in refused({"fault": "leader-unavailable"}).message
    assert "count must be an integer >= 1" in refused({"fault": "fail", "api": 8, "error": 27, "count": 0}).message
    assert "partition must be an integer" in refused(
        {"fault": "leader-unavailable", "topic": "t", "partition": "one", "duration_ms": 5}).message
    assert "group must be a non-empty string" in refused({"fault": "rebalance", "group": 7}).message
    assert refused({"fault": "rebalance", "group": ""}).message == "group must be a non-empty string, not ''"


def test_durations_above_the_bound_are_refused() -> None:
    error = refused({"fault": "pause-heartbeats", "duration_ms": 5001}, max_duration_ms=5000)
    assert error.status == 400
    assert error.message == "duration_ms 5001 is above test.faults.max.duration.ms (5000)"
    assert "ms 9000 is above" in refused({"fault": "delay", "api": 8, "ms": 9000}, max_duration_ms=5000).message
    # fail/delay without a duration last the default, cut to the bound.
    spec = parse_fault({"fault": "fail", "api": 8, "error": 27}, 5000)
    assert isinstance(spec, Fail) and spec.duration_ms == 5000
