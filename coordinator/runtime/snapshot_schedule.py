"""When a partition writes its snapshot (runtime rules 4 and 5; the file format and the trust rule
are ``snapshot.py``'s).

* Amortized: a new snapshot once the records appended (or replayed, for a standby) since the last
  one outnumber both ``snapshot_min_records`` and the records of the last snapshot, so the log
  tail replayed at load stays no longer than the state itself.
* Renewed: a snapshot is trusted for ``delete.retention.ms`` after it was taken, so a serving
  partition takes a fresh one when half of that has passed, changed or not.
* At shutdown, every partition that changed (``snapshot_all``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Generic

from .errors import CoordinatorState
from .partition import Partition, PartitionTable, ShardT
from .snapshot import SnapshotEncoder, write_snapshot

__all__ = ["SnapshotSchedule", "SNAPSHOT_RETRY_MS"]

log = logging.getLogger("groupcoord.runtime")

#: After a failed snapshot, the earliest retry of a renewal that is already due (rule 5).
SNAPSHOT_RETRY_MS = 60_000


class SnapshotSchedule(Generic[ShardT]):
    """Takes the snapshots of the partitions of one coordinator topic."""

    def __init__(self, table: PartitionTable[ShardT], *, snapshot_min_records: int) -> None:
        self._table = table
        self.snapshot_min_records = snapshot_min_records

    def maybe_snapshot(self, part: Partition[ShardT]) -> None:
        # A standby snapshots too (issue 14): a follower restarted, or taking over after a
        # restart, replays from its own recent snapshot rather than from the log start.
        snaps = part.snapshots
        if snaps.snapshotting is None and part.state in (CoordinatorState.ACTIVE, CoordinatorState.STANDBY) \
                and snaps.since_snapshot >= max(self.snapshot_min_records, snaps.snapshot_records):
            snaps.snapshotting = asyncio.ensure_future(self._snapshot(part))

    async def _snapshot(self, part: Partition[ShardT]) -> None:
        """Write the partition's state as of now (offset ``last_written``; a standby's: what it
        replayed, all committed) once it is durable."""
        snaps = part.snapshots
        retry = 0
        state = part.state
        try:
            offset = part.standby.replayed_to if state is CoordinatorState.STANDBY else part.writes.last_written
            encoder = SnapshotEncoder(offset, self._table.clock.now_ms())
            # A copy of the records, taken in one step so it is the state at ``offset``; the
            # encoding after it pauses between batches so serving goes on.
            records = list(part.shard.snapshot_records())
            transactional = list(part.shard.snapshot_transactional_records())
            snaps.since_snapshot = 0
            snaps.snapshot_records = len(records) + len(transactional)
            step = SnapshotEncoder.BATCH_RECORDS
            for i in range(0, len(records), step):
                encoder.add(records[i:i + step])
                await asyncio.sleep(0)
            encoder.add_transactional(transactional)
            data = encoder.finish()
            del records
            if state is CoordinatorState.ACTIVE:
                await part.plog.wait_committed(offset)  # never claim what the log (the ISR) does not hold yet
            if part.state is not state or not self._table.is_current(part):
                return
            await asyncio.get_running_loop().run_in_executor(None, write_snapshot, part.plog.log.directory, data)
            snaps.snapshot_ms = encoder.captured_ms
            log.debug("snapshot written", extra={**part.where, "offset": offset, "records": snaps.snapshot_records})
        except Exception as exc:
            log.warning("snapshot failed; loading will replay more of the log",
                        extra={**part.where, "reason": str(exc)})
            retry = SNAPSHOT_RETRY_MS
        finally:
            snaps.snapshotting = None
            self.schedule_refresh(part, retry)

    def schedule_refresh(self, part: Partition[ShardT], min_delay_ms: int = 0) -> None:
        """Rule 5: renew the snapshot on disk when half its trusted life has passed (after a
        failed attempt, not sooner than ``min_delay_ms``: a broken disk is not hammered)."""
        snaps = part.snapshots
        snaps.stop_refresh()
        if snaps.snapshot_ms is None or part.state is not CoordinatorState.ACTIVE or not self._table.is_current(part):
            return
        due_ms = snaps.snapshot_ms + part.plog.log.options.delete_retention_ms // 2
        delay_ms = max(due_ms - self._table.clock.now_ms(), min_delay_ms)
        snaps.refresh = self._table.timers(delay_ms, lambda: self._refresh(part))

    def _refresh(self, part: Partition[ShardT]) -> None:
        snaps = part.snapshots
        snaps.refresh = None
        if part.state is CoordinatorState.ACTIVE and snaps.snapshotting is None and self._table.is_current(part):
            log.info("renewing the snapshot before delete.retention.ms passes", extra=part.where)
            snaps.snapshotting = asyncio.ensure_future(self._snapshot(part))

    async def snapshot_all(self) -> None:
        """Snapshot every serving partition that changed since its last snapshot, and every hot
        standby that replayed at least ``snapshot_min_records`` since its own (shutdown).

        A standby's snapshots are amortized (the next one after as many records as the last
        held), so a standby of a large partition may hold half its state beyond its last
        snapshot; after a controlled shutdown every partition here is a standby, and without
        this the restart would replay that half from the log (issue 14: the restarted node is
        slow to rejoin, and to follow, the ISRs it is in). A standby still rebuilding (the
        partition this node led until the handover) is left as it is: its state is partial."""
        for part in list(self._table.by_id.values()):
            snaps = part.snapshots
            if snaps.snapshotting is not None:
                continue
            if (part.state is CoordinatorState.ACTIVE and snaps.since_snapshot > 0) or (
                    part.state is CoordinatorState.STANDBY and not part.standby.rebuilding
                    and snaps.since_snapshot >= self.snapshot_min_records):
                snaps.snapshotting = asyncio.ensure_future(self._snapshot(part))
        pending = [part.snapshots.snapshotting for part in self._table.by_id.values()
                   if part.snapshots.snapshotting is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
