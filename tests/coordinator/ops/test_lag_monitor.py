"""The lag monitor against an in-process node with a kafka-python member committing, its clock
stepped by the test: lag in offsets and in time (the first unconsumed record's timestamp on
disk), Burrow's status as the member stops and catches up, the expiry warning, the group's lag
history; the lookup table's interpolation when no record timestamp is at hand; the background
task."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from coordinator.app import App
from coordinator.lag.burrow import Status
from coordinator.ops.lag_monitor import LagMonitor, PartitionLag
from coordinator.ops.state_view import CommittedView, GroupView, MemberView, PartitionView
from tests.coordinator.ops.test_state_view import (
    RETENTION_MS,
    T0,
    join_and_commit,
    node,  # noqa: F401  (the fixture)
    produce,
    view_of,
    wait_for,
)

HOUR = 3600_000


def by_partition(monitor: LagMonitor, group: str) -> dict[tuple[str, int], PartitionLag]:
    return {(lag.topic, lag.partition): lag for lag in monitor.lags() if lag.group == group}


@pytest.mark.asyncio
async def test_lag_in_offsets_and_time_and_burrows_status(node: tuple[App, int]) -> None:  # noqa: F811
    app, port = node
    view = view_of(app)
    await asyncio.to_thread(produce, port)
    consumer = await asyncio.to_thread(join_and_commit, port)
    now = [int(time.time() * 1000)]
    monitor = LagMonitor(view, lambda: now[0], intervals=3)
    try:
        await wait_for(lambda: (g := view.group("classic-g")) is not None and g.state == "Stable")
        first = now[0]
        monitor.sample(first)
        lags = by_partition(monitor, "classic-g")
        p0, p1 = lags[("orders", 0)], lags[("orders", 1)]
        assert (p0.committed, p0.log_end, p0.lag) == (4, 10, 6)
        # The record at offset 4 was stamped T0 + 4 s: that is how far behind the group is.
        assert p0.lag_seconds == pytest.approx((first - (T0 + 4000)) / 1000)
        assert (p0.client_id, p0.host, p0.expires_at_ms, p0.expiring_within_day) == (
            "view-client", "/127.0.0.1", None, False)
        assert p0.member_id == view.group("classic-g").members[0].member_id  # type: ignore[union-attr]
        # Assigned, never committed: no lag to tell, Burrow has nothing on it.
        assert (p1.committed, p1.log_end, p1.lag, p1.status, p1.client_id) == (None, 4, None, Status.NOTFOUND,
                                                                                "view-client")
        # An hour without a commit, still behind: Burrow's STOP, reported for the group as ERR.
        now[0] = first + HOUR
        monitor.sample(now[0])
        assert by_partition(monitor, "classic-g")[("orders", 0)].status is Status.STOP
        status = monitor.group_statuses()["classic-g"]
        assert (status.status, status.maxlag, status.totallag) == (Status.ERR, ("orders", 0), 6)

        def catch_up() -> None:
            consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(10, "", -1)})

        await asyncio.to_thread(catch_up)
        now[0] = first + HOUR + 10_000
        monitor.sample(now[0])
        p0 = by_partition(monitor, "classic-g")[("orders", 0)]
        assert (p0.committed, p0.lag, p0.lag_seconds, p0.status) == (10, 0, 0.0, Status.OK)
        assert monitor.group_statuses()["classic-g"].status is Status.OK
        assert monitor.history("classic-g") == [(first, 6), (first + HOUR, 6), (first + HOUR + 10_000, 0)]
    finally:
        await asyncio.to_thread(consumer.close)
    await wait_for(lambda: (g := view.group("classic-g")) is not None and g.state == "Empty")
    became_empty = app.runtime.shard(view.group("classic-g").coordinator_partition) \
        .group_manager.groups["classic-g"].state_timestamp_ms  # type: ignore[union-attr]
    expires = became_empty + RETENTION_MS
    monitor.sample(expires - 25 * HOUR)
    p0 = by_partition(monitor, "classic-g")[("orders", 0)]
    assert (p0.expires_at_ms, p0.expiring_within_day, p0.member_id) == (expires, False, None)
    monitor.sample(expires - HOUR)
    assert by_partition(monitor, "classic-g")[("orders", 0)].expiring_within_day


class StubView:
    """A view whose partition is hosted here but has no record timestamp at hand (the record
    gone with retention): the monitor falls back on its lookup table."""

    def __init__(self) -> None:
        self.log_end = 100
        self.offsets = {("t", 0): CommittedView(100, -1, "", 0, None)}

    def partitions(self) -> dict[tuple[str, int], PartitionView]:
        return {("t", 0): PartitionView(0, self.log_end, self.log_end, 1, (1,), (1,), True)}

    def groups(self) -> list[GroupView]:
        return [GroupView("g", "classic", "consumer", "Empty", "", 1, 0, [MemberView("m", None, "c", "/h", [])],
                          dict(self.offsets))]

    def first_unconsumed_timestamp(self, topic: str, partition: int, offset: int) -> Any:
        return None


def test_time_lag_is_interpolated_from_the_log_end_samples_without_a_record_timestamp() -> None:
    view = StubView()
    monitor = LagMonitor(view, lambda: 0)  # type: ignore[arg-type]
    monitor.sample(1_000_000)  # the log end was 100 then
    view.log_end = 200
    monitor.sample(1_010_000)
    [lag] = monitor.lags()
    # Committed 100: the log end was there 20 s before this sample (kafka-lag-exporter's method).
    assert (lag.lag, lag.lag_seconds) == (100, pytest.approx(10.0))
    view.log_end = 300
    monitor.sample(1_030_000)
    assert monitor.lags()[0].lag_seconds == pytest.approx(30.0)
    assert monitor.history("g") == [(1_000_000, 0), (1_010_000, 100), (1_030_000, 200)]


@pytest.mark.asyncio
async def test_the_task_samples_on_its_interval_until_stopped(tmp_path: Path) -> None:
    view = StubView()
    clock = [5_000]
    monitor = LagMonitor(view, lambda: clock[0], interval_ms=20)  # type: ignore[arg-type]
    monitor.start()
    try:
        await wait_for(lambda: monitor.sampled_at_ms == 5_000)
        clock[0] = 6_000
        await wait_for(lambda: monitor.sampled_at_ms == 6_000)
    finally:
        await monitor.stop()
    clock[0] = 7_000
    await asyncio.sleep(0.1)
    assert monitor.sampled_at_ms == 6_000
