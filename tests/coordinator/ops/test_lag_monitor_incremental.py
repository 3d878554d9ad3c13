"""The lag monitor keeps last sample's results for what did not change, and the exposition keeps
the lines it rendered for them (coordinator/ops/lag_monitor.py, metrics_lag.py). Nothing kept may
go stale: what moves with time alone (lag in seconds, Burrow's STOP, the expiry flag) and every
change of a commit, a high watermark or an owner must show. Checked against the same monitor
evaluating every partition afresh, over a stand-in view stepped at random, and on the cases one by
one; and the coordinator metrics' group counts (StateView.group_counts) against view.groups() on a
live node."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import astuple, dataclass, field

import pytest

from coordinator.app import App
from coordinator.lag.burrow import GroupStatus, Status
from coordinator.ops.lag_monitor import EXPIRING_WITHIN_MS, LagMonitor, PartitionLag
from coordinator.ops.metrics_lag import LagRenderer, render_lag
from coordinator.ops.state_view import CommittedView, GroupView, MemberView, PartitionView
from tests.coordinator.ops.test_state_view import (
    consumer_group_member,
    join_and_commit,
    node,  # noqa: F401  (the fixture)
    produce,
    view_of,
    wait_for,
)

T0 = 1_700_000_000_000
HOUR = 3_600_000


@dataclass
class View:
    """What the lag monitor reads of StateView: groups, partitions, record timestamps."""

    ends: dict[tuple[str, int], int] = field(default_factory=dict)
    #: group -> (topic, partition) -> committed view; group -> member (id, assignment).
    offsets: dict[str, dict[tuple[str, int], CommittedView]] = field(default_factory=dict)
    members: dict[str, list[tuple[str, list[tuple[str, int]]]]] = field(default_factory=dict)

    def groups(self) -> list[GroupView]:
        return [GroupView(g, "classic", "consumer", "Stable" if self.members.get(g) else "Empty", "range", 1, 0,
                          [MemberView(m, None, f"client-{m}", "/10.0.0.1", list(tps))
                           for m, tps in self.members.get(g, [])],
                          dict(offsets))
                for g, offsets in self.offsets.items()]

    def partitions(self) -> dict[tuple[str, int], PartitionView]:
        return {tp: PartitionView(0, end, end, 0, (0,), (0,), True) for tp, end in self.ends.items()}

    def first_unconsumed_timestamp(self, topic: str, partition: int, offset: int) -> int | None:
        # Topic "stamped" has record timestamps on disk (one a second); "plain" has none, so the
        # lookup tables interpolate.
        if topic != "stamped" or offset >= self.ends.get((topic, partition), 0):
            return None
        return T0 + offset * 1000

    def commit(self, group: str, tp: tuple[str, int], offset: int, now: int, expires: int | None = None) -> None:
        self.offsets.setdefault(group, {})[tp] = CommittedView(offset, -1, "", now, expires)


def monitor_of(view: View, clock: Callable[[], int], **settings: int) -> LagMonitor:
    # The stand-in has what the monitor reads of a StateView.
    return LagMonitor(view, clock, **settings)  # type: ignore[arg-type]


def rows(monitor: LagMonitor) -> list[tuple[object, ...]]:
    return [astuple(row) for row in monitor.lags()]


def by_tp(monitor: LagMonitor, group: str) -> dict[tuple[str, int], PartitionLag]:
    return {(r.topic, r.partition): r for r in monitor.lags() if r.group == group}


def test_kept_results_equal_fresh_evaluation_over_random_steps() -> None:
    rng = random.Random(34)
    view = View()
    tps = [(topic, p) for topic in ("stamped", "plain") for p in range(3)]
    for tp in tps:
        view.ends[tp] = 100
    now = T0
    kept = monitor_of(view, lambda: now, intervals=3, allowed_lag=0)
    fresh = monitor_of(view, lambda: now, intervals=3, allowed_lag=0)
    fresh.reuse_results = False
    renderer = LagRenderer()
    reused_rows = rerendered_less = 0
    for step in range(300):
        now += rng.choice((1_000, 10_000, 10_000, 60_000, HOUR, 20 * HOUR))
        for tp in tps:
            if rng.random() < 0.2:
                view.ends[tp] += rng.randrange(1, 50)
        for g in (f"g{i}" for i in range(6)):
            if rng.random() < 0.05:
                view.offsets.pop(g, None)
                view.members.pop(g, None)
                continue
            for tp in tps[: 2 + int(g[1:]) % 4]:
                r = rng.random()
                end = view.ends[tp]
                old = view.offsets.get(g, {}).get(tp)
                if r < 0.15:
                    view.commit(g, tp, end, now)  # caught up
                elif r < 0.25:
                    view.commit(g, tp, max(end - rng.randrange(1, 30), 0), now)
                elif r < 0.28 and old is not None:
                    view.commit(g, tp, max(old.offset - 5, 0), now)  # a rewind
                elif r < 0.33 and old is not None:
                    # The same offset, a new deadline: near (within a day later) or far.
                    view.commit(g, tp, old.offset, old.commit_timestamp_ms,
                                now + rng.choice((2 * HOUR, 30 * HOUR, 50 * HOUR)))
                elif r < 0.35 and old is not None:
                    del view.offsets[g][tp]
            if rng.random() < 0.1:
                view.members[g] = [(f"m{step}", [tp for tp in tps if rng.random() < 0.5])]
            elif rng.random() < 0.05:
                view.members.pop(g, None)
        previous = {id(r) for r in kept.lags()}
        kept.sample(now)
        fresh.sample(now)
        assert rows(kept) == rows(fresh), step
        assert kept.group_statuses() == fresh.group_statuses(), step
        assert {g: kept.history(g) for g in view.offsets} == {g: fresh.history(g) for g in view.offsets}
        reused_rows += sum(id(r) in previous for r in kept.lags())
        text = renderer.render("c", kept.lags(), kept.group_statuses(), 1.5, {tp: 0 for tp in tps})
        assert text == render_lag("c", fresh.lags(), fresh.group_statuses(), 1.5, {tp: 0 for tp in tps}), step
        rerendered_less += renderer.rendered_groups < len(kept.group_statuses())
    # The comparison is not vacuous: results and lines were kept along the way.
    assert reused_rows > 100 and rerendered_less > 10


def test_a_kept_caught_up_partition_shows_a_new_high_watermark_and_its_expiry_coming() -> None:
    view = View(ends={("plain", 0): 50})
    now = T0
    view.commit("g", ("plain", 0), 50, now, expires=now + 2 * 24 * HOUR)
    monitor = monitor_of(view, lambda: now)
    monitor.sample(now)
    first = by_tp(monitor, "g")[("plain", 0)]
    assert (first.lag, first.lag_seconds, first.status, first.expiring_within_day) == (0, 0.0, Status.OK, False)
    now += 10_000
    monitor.sample(now)
    assert by_tp(monitor, "g")[("plain", 0)] is first  # kept: nothing changed
    # Nothing changes but the time: a day and a bit later the offset expires within a day.
    now = T0 + 2 * 24 * HOUR - EXPIRING_WITHIN_MS + 1
    monitor.sample(now)
    assert by_tp(monitor, "g")[("plain", 0)].expiring_within_day is True
    # The high watermark moves past the commit: lag, and no longer the kept row.
    view.ends[("plain", 0)] = 80
    monitor.sample(now + 10_000)
    moved = by_tp(monitor, "g")[("plain", 0)]
    assert (moved.log_end, moved.lag) == (80, 30)
    assert monitor.group_statuses()["g"].totallag == 30


def test_a_lagging_partition_without_changes_stops_and_its_time_lag_grows() -> None:
    view = View(ends={("stamped", 0): 100})
    now = T0 + 200_000
    view.commit("g", ("stamped", 0), 40, now)
    monitor = monitor_of(view, lambda: now)
    renderer = LagRenderer()
    monitor.sample(now)
    row = by_tp(monitor, "g")[("stamped", 0)]
    # One commit with lag, no time since it: not stopped yet, but stalled (every commit in the
    # window the same offset); 160 s behind the record at offset 40.
    assert (row.status, row.lag_seconds) == (Status.STALL, 160.0)
    before = renderer.render("c", monitor.lags(), monitor.group_statuses(), None, {})
    assert 'consumer_group="g",topic="stamped",partition="0"} 5\n' in before
    now += 10_000
    monitor.sample(now)
    row = by_tp(monitor, "g")[("stamped", 0)]
    # Burrow's STOP: the newest commit is older than the window spans and the consumer was
    # never caught up; nothing but the time changed.
    assert (row.status, row.lag_seconds) == (Status.STOP, 170.0)
    assert monitor.group_statuses()["g"].status is Status.ERR
    after = renderer.render("c", monitor.lags(), monitor.group_statuses(), None, {})
    assert 'consumer_group="g",topic="stamped",partition="0"} 4\n' in after
    assert 'burrow_kafka_consumer_status{cluster="c",consumer_group="g"} 3\n' in after
    assert after == render_lag("c", monitor.lags(), monitor.group_statuses(), None, {})


def test_an_owner_change_on_a_kept_partition_shows() -> None:
    view = View(ends={("plain", 0): 10, ("plain", 1): 10})
    now = T0
    view.commit("g", ("plain", 0), 10, now)
    view.members["g"] = [("m1", [("plain", 0), ("plain", 1)])]
    monitor = monitor_of(view, lambda: now)
    monitor.sample(now)
    assert {tp: r.member_id for tp, r in by_tp(monitor, "g").items()} == {("plain", 0): "m1", ("plain", 1): "m1"}
    view.members["g"] = [("m2", [("plain", 0), ("plain", 1)])]
    monitor.sample(now + 10_000)
    assert {tp: r.member_id for tp, r in by_tp(monitor, "g").items()} == {("plain", 0): "m2", ("plain", 1): "m2"}
    del view.members["g"]
    monitor.sample(now + 20_000)
    assert {tp: r.member_id for tp, r in by_tp(monitor, "g").items()} == {("plain", 0): None}


def test_the_renderer_follows_a_new_status_over_the_same_rows() -> None:
    row = PartitionLag("g", "plain", 0, 5, 10, 5, 1.0, Status.WARN, None, None, None, None, False)
    renderer = LagRenderer()
    ok = GroupStatus(Status.OK, 1.0, ("plain", 0), 5)
    err = GroupStatus(Status.ERR, 1.0, ("plain", 0), 7)
    renderer.render("c", [row], {"g": ok}, None, {})
    text = renderer.render("c", [row], {"g": err}, None, {})
    assert text == render_lag("c", [row], {"g": err}, None, {})
    assert 'burrow_kafka_consumer_status{cluster="c",consumer_group="g"} 3\n' in text
    # A new cluster name: every line again.
    assert renderer.render("d", [row], {"g": err}, None, {}) == render_lag("d", [row], {"g": err}, None, {})


def test_in_a_cluster_the_latest_offsets_are_those_of_the_partitions_led_here() -> None:
    # The group consumes plain/0 (led elsewhere: its log end came from the leader); this node leads
    # plain/1 and other/0, which no group of its consumes: it serves those two, and not plain/0.
    row = PartitionLag("g", "plain", 0, 5, 10, 5, 1.0, Status.WARN, None, None, None, None, False)
    led = {("plain", 1): (40, 3), ("other", 0): (7, 0)}
    status = {"g": GroupStatus(Status.WARN, 1.0, ("plain", 0), 5)}
    text = LagRenderer().render("c", [row], status, None, {("plain", 0): 2}, led)
    assert text == render_lag("c", [row], status, None, {("plain", 0): 2}, led)
    latest = [line for line in text.splitlines() if line.startswith("kafka_partition_latest_offset{")]
    assert latest == ['kafka_partition_latest_offset{cluster_name="c",topic="other",partition="0"} 7',
                      'kafka_partition_latest_offset{cluster_name="c",topic="plain",partition="1"} 40']
    assert 'kafka_partition_earliest_offset{cluster_name="c",topic="plain",partition="1"} 3' in text
    assert 'kafka_consumergroup_group_lag{cluster_name="c",group="g",topic="plain",partition="0"' in text
    # One node (None): the consumed partitions', from the lag rows.
    one = LagRenderer().render("c", [row], status, None, {("plain", 0): 2}, None)
    assert 'kafka_partition_latest_offset{cluster_name="c",topic="plain",partition="0"} 10' in one


@pytest.mark.asyncio
async def test_group_counts_count_what_groups_lists(node: tuple[App, int]) -> None:  # noqa: F811
    app, port = node
    view = view_of(app)
    await asyncio.to_thread(produce, port)
    consumer = await asyncio.to_thread(join_and_commit, port)
    try:
        await asyncio.to_thread(consumer_group_member, port)
        await wait_for(lambda: (g := view.group("classic-g")) is not None and g.state == "Stable")
        counts, offsets = view.group_counts()
        expected: dict[tuple[str, str], int] = {}
        for g in view.groups():
            expected[(g.type, g.state)] = expected.get((g.type, g.state), 0) + 1
        assert counts == expected and ("classic", "Stable") in counts and any(k[0] == "consumer" for k in counts)
        assert offsets == sum(len(g.offsets) for g in view.groups()) == 2
    finally:
        await asyncio.to_thread(consumer.close)
