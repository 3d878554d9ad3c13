"""The hot standby (runtime rule 6; cluster mode, beyond Kafka, which loads the whole partition on
election): a follower of a partition keeps a shard that replays the log as replication appends to
it — the same ``replay``, no timers, no answers — so that becoming the leader replays only the tail.

* Committed records only (below the high watermark): a standby never holds state a truncation
  could take back, and may snapshot what it holds at any time.
* A truncation below what was replayed (a new leader's log diverged) throws the state away and
  rebuilds it from the snapshot and the log.
* *Warming*: from its start until it first replayed up to the high watermark; the listeners hear
  when that starts and ends, so the cluster can prefer a warm replica when it elects a leader (a
  cold one would answer COORDINATOR_LOAD_IN_PROGRESS for the seconds a million offsets take).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import Generic

from storage.errors import LogClosedError

from .errors import CoordinatorState
from .loader import LOAD_READ_BYTES, Loader
from .partition import Partition, PartitionTable, ShardT
from .snapshot_schedule import SnapshotSchedule
from .timers import sleep_ms, wake

__all__ = ["HotStandby"]

log = logging.getLogger("groupcoord.runtime")

#: How long a standby with nothing to read waits before it reads again (the log said it grew, but
#: the read found nothing yet), and the longest it waits for the log to grow before it looks again.
_EMPTY_READ_PAUSE_MS = 50
_DATA_WAIT_MS = 1000


class HotStandby(Generic[ShardT]):
    """Follows the logs of the partitions this node is a follower of."""

    def __init__(self, table: PartitionTable[ShardT], loader: Loader[ShardT], snapshots: SnapshotSchedule[ShardT],
                 renew: Callable[[Partition[ShardT]], None]) -> None:
        self._table = table
        self._loader = loader
        self._snapshots = snapshots
        #: Gives a partition a fresh shard and timers.
        self._renew = renew
        #: Told ``(partition, warming)`` when a standby starts warming and when it stops (caught
        #: up, taken over, or gone). Cluster mode publishes it for the controller.
        self.listeners: list[Callable[[int, bool], None]] = []

    def start(self, part: Partition[ShardT]) -> None:
        part.state = CoordinatorState.STANDBY
        self.set_warming(part, True)
        part.standby.follow = asyncio.ensure_future(self._follow_log(part))

    def can_take_over(self, part: Partition[ShardT]) -> bool:
        return (part.state is CoordinatorState.STANDBY and not part.standby.rebuilding
                and part.standby.truncations == part.plog.truncations)

    def stop(self, part: Partition[ShardT]) -> None:
        """Stop following (taken over, unloaded, or the node is stopping)."""
        self.set_warming(part, False)
        if part.standby.follow is not None:
            part.standby.follow.cancel()
            part.standby.follow = None

    def set_warming(self, part: Partition[ShardT], warming: bool) -> None:
        if part.standby.warming == warming:
            return
        part.standby.warming = warming
        for listener in list(self.listeners):
            try:
                listener(part.id, warming)
            except Exception:
                log.exception("standby listener failed", extra=part.where)

    async def _fresh_standby(self, part: Partition[ShardT]) -> None:
        standby = part.standby
        part.timer.cancel_all()
        standby.rebuilding = True
        self._renew(part)
        standby.truncations = part.plog.truncations
        start = await self._loader.replay_snapshot(part, off_loop=True)
        standby.replayed_to = part.plog.log_start_offset if start is None else start
        part.snapshots.since_snapshot = 0
        standby.rebuilding = False

    def _following(self, part: Partition[ShardT]) -> bool:
        return self._table.is_current(part) and part.state is CoordinatorState.STANDBY

    async def _follow_log(self, part: Partition[ShardT]) -> None:
        plog = part.plog
        standby = part.standby
        loop = asyncio.get_running_loop()
        try:
            await self._fresh_standby(part)
            while self._following(part):
                truncations = plog.truncations
                if standby.truncations != truncations:
                    # Only a cut below what was replayed invalidates the state (an unclean
                    # election: the standby replays committed records only).
                    cuts = plog.truncation_offsets[standby.truncations:]
                    if not cuts or min(cuts) < standby.replayed_to:
                        log.info("standby state rebuilt after the log was truncated", extra=part.where)
                        await self._fresh_standby(part)
                        continue
                    standby.truncations = truncations
                # Committed records only (below the high watermark).
                end = min(plog.high_watermark, plog.log_end_offset)
                if standby.replayed_to >= end:
                    self.set_warming(part, False)
                if standby.replayed_to < end:
                    data = plog.log.read(standby.replayed_to, LOAD_READ_BYTES)
                    if not data:
                        await sleep_ms(self._table.timers, _EMPTY_READ_PAUSE_MS)
                        continue
                    done = 0

                    def progress(count: int, last: int) -> None:
                        # Kept current between slices: a takeover cancels this task at a yield
                        # and replays from ``replayed_to`` (records below it are skipped).
                        nonlocal done
                        standby.replayed_to = max(last + 1, standby.replayed_to)
                        part.snapshots.since_snapshot += count - done
                        done = count

                    await self._loader.replay_batches(part, data, standby.replayed_to, end,
                                                      sliced=True, progress=progress)
                    self._snapshots.maybe_snapshot(part)
                    continue
                grew: asyncio.Future[None] = loop.create_future()
                plog.add_data_waiter(grew)
                timeout = self._table.timers(_DATA_WAIT_MS, partial(wake, grew))
                try:
                    await grew
                finally:
                    timeout.cancel()
                    plog.remove_data_waiter(grew)
        except asyncio.CancelledError:
            raise
        except LogClosedError:
            # The replica is going away (reassigned off this node, or the node is stopping) and
            # its unload has not reached us yet: nothing is wrong, and nothing is left to follow.
            log.info("standby stopped: its log was closed", extra=part.where)
            self._drop(part)
        except Exception:
            log.exception("standby replay failed; taking over will load the partition from its log",
                          extra=part.where)
            self._drop(part)

    def _drop(self, part: Partition[ShardT]) -> None:
        if self._following(part):
            del self._table.by_id[part.id]
            self.set_warming(part, False)
