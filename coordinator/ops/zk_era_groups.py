"""ZooKeeper-era consumer groups for /metrics and the dashboard: the groups of Kafka's old high-level consumer,
whose members, owners and offsets live under ``/consumers`` in ZooKeeper (Kafka's "ZooKeeper Directories",
https://kafka.apache.org/0100/documentation.html#impl_zookeeper), not in this node's offsets topic.

Every ``lag.sample.interval.ms`` the whole of ``/consumers`` is read through
:class:`coordinator.cluster.zk_consumers.ZkConsumers` on a worker thread (kazoo's calls block; the event loop
only swaps the finished read in), and the last read is kept: ``groups`` for the exposition, ``errors`` the
malformed znodes found (each naming its path; a bad znode never stops the read of the others). A read that
fails as a whole (ZooKeeper unreachable) keeps the previous one and is logged once per failure streak.

``lag_rows`` turns the last read into rows the lag exposition (``metrics_lag.py``) writes in
kafka-lag-exporter's families like any other group's: on a cluster node, only the partitions this node
leads, with their high watermark as log end (every node reads the same ``/consumers``; each partition's series
then comes from one node, as ``StateView.led_partition_offsets`` does for ``kafka_partition_latest_offset``).
The consumer is the owner znode's thread id without its ``-<thread>`` (Kafka's ``ConsumerThreadId``); host,
client id and lag in seconds are unknown for these groups (NaN / ``unknown``, as kafka-lag-exporter writes them).

A group id names one group whichever storage holds its offsets: a group under ``/consumers`` named like a group
of this node's coordinator is a group in the middle of a migration (dual commit). ``merge_rows`` gives /metrics
one series per partition for it, as Kafka 1.1's ``kafka-consumer-groups`` and ConsumerOffsetChecker showed a
mixed group: Kafka's offset where Kafka has one, ZooKeeper's for the partitions it has not
(https://github.com/apache/kafka/blob/1.1/core/src/main/scala/kafka/admin/ConsumerGroupCommand.scala,
``ZkConsumerGroupService``: OffsetFetch first, the znode on NoOffset). The dashboard lists the two apart, the
ZooKeeper one marked "ZooKeeper-era" (dashboard/rows.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cluster.zk_consumers import ZkConsumers, ZkGroup

__all__ = ["ZkEraGroups", "ZkPartitionLag", "lag_rows", "merge_rows"]

log = logging.getLogger("groupcoord.ops")

_THREAD_SUFFIX = re.compile(r"-\d+$")


@dataclass(frozen=True, slots=True)
class ZkPartitionLag:
    """The fields of a ``lag_monitor.PartitionLag`` the lag exposition reads, for a ZooKeeper-era partition."""

    group: str
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    member_id: str | None
    host: str | None = None
    client_id: str | None = None
    lag_seconds: float | None = None
    status: Any = None
    expiring_within_day: bool = False
    expires_at_ms: int | None = None


def lag_rows(groups: Sequence[ZkGroup], led: Mapping[tuple[str, int], tuple[int, int]] | None,
             latest: Callable[[str, int], int | None] | None) -> list[ZkPartitionLag]:
    """Rows per group (groups sorted, partitions sorted): with ``led`` (cluster mode) only the partitions in it,
    log end its high watermark; without (one node) every partition, log end from ``latest``."""
    rows: list[ZkPartitionLag] = []
    for g in groups:
        for tp in sorted(set(g.offsets) | set(g.owners)):
            if led is None:
                log_end = None if latest is None else latest(*tp)
            elif tp in led:
                log_end = led[tp][0]
            else:
                continue
            owner = g.owners.get(tp)
            rows.append(ZkPartitionLag(g.group, tp[0], tp[1], g.offsets.get(tp), log_end,
                                       None if owner is None else _THREAD_SUFFIX.sub("", owner)))
    return rows


def merge_rows(kafka_rows: Sequence[Any], zk_rows: Sequence[ZkPartitionLag]) -> list[Any]:
    """``kafka_rows`` (the lag monitor's, each group's rows together), each group's ZooKeeper-era rows of the
    same name for the partitions Kafka has no row of right after its rows, then the ZooKeeper-era groups of
    names Kafka has not (module docstring). Pure: runs in a thread."""
    by_group: dict[str, list[ZkPartitionLag]] = {}
    for row in zk_rows:
        by_group.setdefault(row.group, []).append(row)
    covered: dict[str, set[tuple[str, int]]] = {}
    for row in kafka_rows:
        if row.group in by_group:
            covered.setdefault(row.group, set()).add((row.topic, row.partition))
    if not covered:
        return [*kafka_rows, *zk_rows]
    out: list[Any] = []
    count = len(kafka_rows)
    for i, row in enumerate(kafka_rows):
        out.append(row)
        group = row.group
        if group in covered and (i + 1 == count or kafka_rows[i + 1].group != group):
            seen = covered[group]
            out.extend(r for r in by_group.pop(group, ()) if (r.topic, r.partition) not in seen)
    for rows in by_group.values():
        out.extend(rows)
    return out


class ZkEraGroups:
    """The last read of ``/consumers`` through ``client`` (a started kazoo client), refreshed every
    ``interval_ms`` once :meth:`start` ran."""

    def __init__(self, client: Any, interval_ms: int = 10_000) -> None:
        self.consumers = ZkConsumers(client)
        self.interval_ms = interval_ms
        self.groups: list[ZkGroup] = []
        #: How many reads completed (tests and the dashboard's "as of" wait on it).
        self.reads = 0
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    @property
    def errors(self) -> list[str]:
        return [error for group in self.groups for error in group.errors]

    def read(self) -> list[ZkGroup]:
        """One blocking pass over every group (call it off the event loop)."""
        return [self.consumers.read_group(group) for group in sorted(self.consumers.groups())]

    async def sample(self) -> None:
        try:
            groups = await asyncio.to_thread(self.read)
        except Exception as exc:  # ZooKeeper away: keep the last read, say so once
            if not self._failing:
                log.warning("ZooKeeper-era groups: reading /consumers failed (%s); showing the last read", exc)
            self._failing = True
            return
        self._failing = False
        self.groups = groups
        self.reads += 1

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="zk-era-groups")

    async def _run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(self.interval_ms / 1000)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
