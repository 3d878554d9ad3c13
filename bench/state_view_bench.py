"""Cost of the operations view (coordinator/ops/state_view.py) and of a lag sample
(coordinator/ops/lag_monitor.py) on a coordinator holding 10,000 classic groups of 10 committed
partitions each (100,000 offsets), loaded the way a partition loads (replayed OffsetCommit
records, then ``on_loaded``, then ``gc.freeze`` as coordinator/gc_policy.py does).

``StateView.groups()`` is what every /metrics scrape and the dashboard's group list read; the
budget is well under 200 ms. The topic's 10 partitions are stand-ins with a growing high
watermark and no records on disk, so the lag monitor interpolates time lag from its lookup
tables and Burrow's windows fill with one commit and one end offset a sample.
Run: ``.venv/bin/python bench/state_view_bench.py``.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coordinator.group.config import GroupConfig  # noqa: E402
from coordinator.group.shard import GroupCoordinatorShard  # noqa: E402
from coordinator.ops.lag_monitor import LagMonitor  # noqa: E402
from coordinator.ops.state_view import StateView  # noqa: E402
from coordinator.runtime.errors import CoordinatorState  # noqa: E402
from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, serialize  # noqa: E402

GROUPS = 10_000
PARTITIONS = 10
REPEATS = 5
T0 = 1_700_000_000_000


class Clock:
    now = T0

    def now_ms(self) -> int:
        return self.now


class NoTimer:
    def schedule(self, *args: Any, **kwargs: Any) -> None:
        pass

    def cancel(self, key: str) -> None:
        pass


class Runtime:
    topic = "__consumer_offsets"
    load_seconds: dict[int, float] = {}

    def __init__(self, shard: GroupCoordinatorShard) -> None:
        self.shard = shard

    def hosted(self) -> list[tuple[int, CoordinatorState, GroupCoordinatorShard]]:
        return [(0, CoordinatorState.ACTIVE, self.shard)]


class Partition:
    """What the view reads of a hosted partition."""

    replication = None

    def __init__(self, partition: int) -> None:
        self.topic, self.partition = "orders", partition
        self.log_start_offset = 0
        self.high_watermark = self.last_stable_offset = 1_000


class Logs:
    def __init__(self) -> None:
        self.hosted = [Partition(p) for p in range(PARTITIONS)]

    def partitions(self) -> list[Partition]:
        return self.hosted

    def get(self, topic: str, partition: int) -> None:
        return None  # no records on disk: time lag comes from the lookup tables


def load(shard: GroupCoordinatorShard, clock: Clock) -> None:
    for g in range(GROUPS):
        for p in range(PARTITIONS):
            shard.replay(*serialize(OffsetCommitKey(f"group-{g}", "orders", p), OffsetCommitValue(
                offset=g % 900, metadata="", commit_timestamp=clock.now, leader_epoch=-1)))
    shard.on_loaded()


def commit_some(shard: GroupCoordinatorShard, clock: Clock, step: int) -> None:
    """A tenth of the groups commit between two samples."""
    for g in range(step % 10, GROUPS, 10):
        for p in range(PARTITIONS):
            shard.replay(*serialize(OffsetCommitKey(f"group-{g}", "orders", p), OffsetCommitValue(
                offset=g % 900 + step, metadata="", commit_timestamp=clock.now, leader_epoch=-1)))


def main() -> None:
    clock = Clock()
    shard = GroupCoordinatorShard(GroupConfig(), clock, NoTimer())  # type: ignore[arg-type]
    load(shard, clock)
    gc.collect()
    gc.freeze()
    logs = Logs()
    view = StateView(runtime=Runtime(shard), logs=logs, node_id=0)  # type: ignore[arg-type]
    first = time.perf_counter()
    groups = view.groups()
    print(f"StateView.groups(), first: {(time.perf_counter() - first) * 1000:.1f} ms "
          f"({len(groups)} groups, {sum(len(g.offsets) for g in groups)} offsets)")
    monitor = LagMonitor(view, clock.now_ms)
    reads: list[float] = []
    samples: list[float] = []
    for step in range(REPEATS):
        clock.now += 10_000
        for part in logs.hosted:
            part.high_watermark = part.last_stable_offset = part.high_watermark + 100
        commit_some(shard, clock, step)
        started = time.perf_counter()
        view.groups()
        reads.append(time.perf_counter() - started)
        started = time.perf_counter()
        monitor.sample(clock.now)
        samples.append(time.perf_counter() - started)
    print(f"StateView.groups(), after a tenth of the groups committed: median {statistics.median(reads) * 1000:.1f} ms")
    print(f"LagMonitor.sample (view read included): median {statistics.median(samples) * 1000:.1f} ms "
          f"({len(monitor.lags())} partitions)")


if __name__ == "__main__":
    main()
