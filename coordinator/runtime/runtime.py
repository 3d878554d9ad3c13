"""The coordinator runtime: one state machine ("shard") per partition of a coordinator topic.

Generic: it knows records, logs, timers and durability, not groups. What it runs is a coordinator
type (``coordinator_types.py``): a topic, a shard builder and a record serde; the shard is a
``contract.CoordinatorShard`` (``replay(key, value)`` of the log's bytes, value None a tombstone,
and ``on_loaded()``), and its operations are plain functions of the shard returning a
``contract.CoordinatorResult`` (records, response, an optional ``on_appended`` callback). Each
write names its operation (Kafka's runtime does: "commit-offset", "classic-group-sync", ...), for the log
lines now and for metrics later.

The modules, one concern each: ``writes.py`` (the open batch, the flush, answers once durable),
``loader.py`` (snapshot then log, one step function), ``standby.py`` (rule 6),
``snapshot_schedule.py`` (rules 4 and 5; the file is ``snapshot.py``), ``timers.py`` (the clock
and the injected timer factory), ``partition.py`` (a partition's state, one object per concern);
this module ties them together and owns the lifecycle (load, standby, unload).

Theory of operation. asyncio runs one callback at a time, so an operation that runs start to
finish without awaiting is already serial: operations on one partition never interleave. Each
write operation:

1. runs ``op(shard)``, which validates and returns (records, response) without touching the
   records' state;
2. adds the records to the partition's open batch and replays them into the shard with the same
   ``replay`` that loading uses; the batch goes to the log at the end of the event loop's current
   round (rule 7), which assigns offsets in queue order, so the runtime knows them at once;
3. answers only once the log says the batch is durable — and so does every answer of that
   partition produced after it, reads included: nothing a client sees can be lost by a crash.

Replaying at queue time, before durability, lets the next operation see the effects of the
previous one without waiting an fsync, so commits to one partition share fsyncs (group commit).
If an append fails, the log refuses further appends (an I/O error leaves its tail unknown); the
partition is marked failed and every answer still waiting on it fails, so the service answers
NOT_COORDINATOR and clients go elsewhere or retry. A restart reloads the partition from what the
log holds — state that was replayed but never became durable is never seen by anyone.

Rules:

1. Only ``replay`` changes record state, and it takes records as the log holds them (key and
   value bytes): loading a partition is replaying its log, then ``on_loaded()``. There is no
   second code path. A snapshot (``snapshot.py``) stands for a prefix of the log: it is the
   shard's state written out as records, replayed the same way, and then the log after it.
2. A response, a parked response completed by a later operation or timer, and an operation's
   ``on_appended`` all wait for the partition's durable offset to pass everything written up to
   the end of the operation that produced them.
3. While a partition loads, its operations are refused (the service answers
   COORDINATOR_LOAD_IN_PROGRESS); loading yields to the event loop after each read of
   ``LOAD_READ_BYTES`` so partitions already loaded keep being served.
4. A partition writes a new snapshot once the records appended since the last one outnumber
   both ``snapshot_min_records`` and the records of its last snapshot (the live state), so the
   log tail replayed at load stays no longer than the state itself, and the cost of snapshots
   per appended record stays constant. Shutdown snapshots every partition that changed.
5. A snapshot is trusted for ``delete.retention.ms`` after it was taken (``snapshot.py``, rule
   3), so a partition that has one takes a fresh one when half of that has passed, changed or
   not: a coordinator idle for a day would otherwise replay its whole log at the next load.
6. Hot standby (cluster mode, beyond Kafka, which loads the whole partition on election): a
   follower of a partition keeps a shard that replays the log as replication appends to it —
   the same ``replay``, no timers, no answers. Becoming the leader replays only what it had not
   yet and serves. If the follower's log is truncated (a new leader's log diverged), the standby
   state is thrown away and rebuilt from the log, so it never holds a record the log lost.
   A standby is *warming* from its start until it has first replayed up to the high watermark;
   ``standby_listeners`` hear when that starts and ends, so the cluster can prefer a warm
   replica when it elects a leader (a cold one would answer COORDINATOR_LOAD_IN_PROGRESS for the
   seconds a million offsets take to replay).
7. Batching (Kafka's ``group.coordinator.append.linger.ms=-1``, "adaptive", PR #20780): the
   records of every write a partition runs in one round of the event loop go to its log as one
   batch, flushed by a callback queued behind that round's work — no timer, so a lone commit
   waits no longer than before, and commits arriving together (many connections, one ``select``)
   share one batch: one header, one CRC, one append, one follower append and one standby batch
   instead of one each. A batch is flushed early once it reaches ``APPEND_BATCH_MAX_BYTES``; an
   operation's records are never split across batches. Records of a partition that stopped
   being served before its batch was flushed are never written: their answers failed already.
8. Transactions (KIP-447): a write whose result carries a producer id goes in a batch of its own
   (the open batch is flushed first) with that producer's id and epoch and the transactional
   attribute, replayed with ``replay_transactional``; ``complete_transaction`` appends the
   producer's COMMIT or ABORT control batch and replays it with ``replay_end_transaction``. The
   loader and the standby replay both from the batch headers, and a snapshot keeps the records
   of open transactions in batches carrying their producer (``snapshot.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Generic

from protocol.errors import ErrorCode

from ..topics.log_manager import LogManager, PartitionLog
from .contract import Clock, CoordinatorResult, Record, ResponseHandle, non_atomic
from .coordinator_types import CoordinatorType
from .errors import (
    CommitTimedOut,
    CoordinatorState,
    MarkerRefused,
    NotActiveError,
    NotEnoughReplicas,
    RecordReplayError,
)
from .loader import Loader
from .partition import Partition, PartitionTable, ShardT
from .snapshot_schedule import SnapshotSchedule
from .standby import HotStandby
from .timers import CoordinatorTimer, SystemClock, TimerFactory, asyncio_timers, sleep_ms
from .writes import WritePath, unanswered

__all__ = ["CoordinatorRuntime", "CoordinatorState", "NotActiveError", "NotEnoughReplicas", "CommitTimedOut",
           "MarkerRefused", "unanswered"]

log = logging.getLogger("groupcoord.runtime")

#: How often a load waiting for a standby still rebuilding looks again.
_REBUILD_POLL_MS = 10


class CoordinatorRuntime(Generic[ShardT]):
    """Runs the shards of one coordinator type over the partitions of its topic."""

    def __init__(self, logs: LogManager, coordinator: CoordinatorType[ShardT], *, clock: Clock | None = None,
                 timers: TimerFactory = asyncio_timers, snapshot_min_records: int = 20_000,
                 commit_timeout_ms: int = 5000) -> None:
        self.logs = logs
        self.topic = coordinator.topic
        self.coordinator = coordinator
        self.clock = clock or SystemClock()
        self._table: PartitionTable[ShardT] = PartitionTable(coordinator.topic, coordinator.serde, self.clock,
                                                             timers)
        self._partitions = self._table.by_id
        self._loader = Loader(self._table, self._renew_shard)
        self._snapshots = SnapshotSchedule(self._table, snapshot_min_records=snapshot_min_records)
        self._writes = WritePath(self._table, self._snapshots, commit_timeout_ms=commit_timeout_ms)
        self.write = self._writes.write
        self.read = self._writes.read
        #: ``complete_transaction(partition, producer_id, producer_epoch, commit, coordinator_epoch)``
        #: writes a COMMIT or ABORT marker and replays it (``writes.py``); resolves once durable.
        self.complete_transaction = self._writes.complete_transaction
        self._standby = HotStandby(self._table, self._loader, self._snapshots, self._renew_shard)
        #: Partitions promised to ``load`` but not started yet: they answer as loading, as Kafka
        #: does for partitions queued behind others in its loader.
        self._queued: set[int] = set()
        self.load_seconds: dict[int, float] = {}
        #: Told ``(partition, warming)`` when a standby starts warming and when it stops (caught
        #: up, taken over, or gone) — rule 6. Cluster mode publishes it for the controller.
        self.standby_listeners = self._standby.listeners

    @property
    def snapshot_min_records(self) -> int:
        return self._snapshots.snapshot_min_records

    # --- state --------------------------------------------------------------------------------

    def state(self, partition: int) -> CoordinatorState | None:
        part = self._partitions.get(partition)
        if part is None:
            return CoordinatorState.LOADING if partition in self._queued else None
        return part.state

    def serving_error(self, partition: int) -> int:
        """The error a request for ``partition`` gets before it reaches the shard: NONE while it
        serves, COORDINATOR_LOAD_IN_PROGRESS while it loads, NOT_COORDINATOR otherwise (every
        coordinator type answers the same, as Kafka's runtime does)."""
        state = self.state(partition)
        if state is CoordinatorState.ACTIVE:
            return ErrorCode.NONE
        if state is CoordinatorState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def queue_loading(self, partitions: Iterable[int]) -> None:
        """Partitions ``load`` will be called for: until then they count as loading."""
        self._queued.update(partitions)

    def shard(self, partition: int) -> ShardT:
        return self._writes.active(partition).shard

    def active_partitions(self) -> list[int]:
        return [p for p, part in self._partitions.items() if part.state is CoordinatorState.ACTIVE]

    def hosted(self) -> list[tuple[int, CoordinatorState, ShardT | None]]:
        """Every partition held or promised here, with its state and, once ACTIVE, its shard (None
        otherwise: a loading or standby shard is half-built). Read-only, for the operations view
        (``coordinator/ops/state_view.py``); callers must not change what they get."""
        out: list[tuple[int, CoordinatorState, ShardT | None]] = [
            (p, part.state, part.shard if part.state is CoordinatorState.ACTIVE else None)
            for p, part in self._partitions.items()]
        out += [(p, CoordinatorState.LOADING, None) for p in self._queued if p not in self._partitions]
        return out

    def standby_lag(self) -> dict[int, int]:
        """Cluster mode: records each hot standby here has still to replay (up to the high
        watermark: it replays committed records only, ``standby.py``). Read-only, for the metrics."""
        out: dict[int, int] = {}
        for p, part in self._partitions.items():
            if part.state is CoordinatorState.STANDBY:
                plog = part.plog
                out[p] = max(0, min(plog.high_watermark, plog.log_end_offset) - part.standby.replayed_to)
        return out

    # --- operations (writes.py) ---------------------------------------------------------------

    # ``write(partition, name, op)`` runs the write operation ``name`` (Kafka's operation names:
    # "commit-offset", "classic-group-join", ...) now; the returned future gets its response once
    # durable. ``read(partition, name, op)`` runs a read now; its answer waits for pending writes
    # to be durable (rule 2). Both are the write path's own methods, bound in ``__init__``: they
    # run for every commit and heartbeat, and a forwarding call here would cost each one.

    def response_future(self, partition: int) -> tuple[ResponseHandle, asyncio.Future[object]]:
        """A parked-response handle for the shard, and the asyncio future the service awaits.

        ``handle.set_result(x)``, called by the shard during some later operation or timer, is
        delivered once that operation's records are durable.
        """
        return self._writes.response_future(partition)

    def set_write_observer(self, observer: Callable[[str, list[Record]], None] | None) -> None:
        """Tell ``observer`` the name and records of every write operation from now on (the
        ops wing's counters of commits, expirations, rebalances; docs/metrics.md)."""
        self._writes.write_observer = observer

    def flush_pending(self) -> None:
        """Flush every partition's open batch now (shutdown, before the logs close)."""
        self._writes.flush_pending()

    async def snapshot_all(self) -> None:
        """Snapshot what changed since the last snapshots (shutdown; ``snapshot_schedule.py``)."""
        await self._snapshots.snapshot_all()

    async def sleep_ms(self, delay_ms: float) -> None:
        """Wait ``delay_ms`` on the runtime's timers (a stepping clock in tests drives it too)."""
        await sleep_ms(self._table.timers, delay_ms)

    # --- lifecycle ----------------------------------------------------------------------------

    def _new_partition(self, partition: int, plog: PartitionLog) -> Partition[ShardT]:
        timer = self._timer(partition)
        shard = self.coordinator.build_shard(partition, timer, self.clock)
        return Partition(partition, self.topic, plog, shard, timer)

    def _timer(self, partition: int) -> CoordinatorTimer:
        def run(name: str, operation: Callable[[], CoordinatorResult[None]]) -> None:
            # A timer answers nobody, and refusing its records for their size would leave what it
            # expires in place for good: its records may span batches. (Kafka marks only its
            # cleanups non-atomic, cleanupGroupMetadata, and logs a refused timer write.)
            unanswered(self._writes.write(partition, name, lambda _shard: non_atomic(operation())))
        return CoordinatorTimer(f"{self.topic}-{partition}", self._table.timers, run)

    def _renew_shard(self, part: Partition[ShardT]) -> None:
        part.timer = self._timer(part.id)
        part.shard = self.coordinator.build_shard(part.id, part.timer, self.clock)

    async def load(self, partition: int) -> None:
        """Become the coordinator of ``partition``: replay its log into a fresh shard (or take
        over its hot standby, replaying only the tail)."""
        self._queued.discard(partition)
        plog = self.logs.get(self.topic, partition)
        if plog is None:
            raise KeyError(f"{self.topic}-{partition} is not hosted here")
        old = self._partitions.get(partition)
        started = time.monotonic()
        if old is not None and old.state is CoordinatorState.STANDBY and old.plog is plog and old.standby.rebuilding:
            # A standby still rebuilding (a node restarted a moment ago) is nearer the end than a
            # fresh load would be: let it finish (answers meanwhile: COORDINATOR_LOAD_IN_PROGRESS).
            while (old.standby.rebuilding and self._table.is_current(old)
                   and old.state is CoordinatorState.STANDBY):
                await sleep_ms(self._table.timers, _REBUILD_POLL_MS)
            old = self._partitions.get(partition)
        start: int | None
        if old is not None and old.plog is plog and self._standby.can_take_over(old):
            # Rule 6: take over the standby state; only the tail is left to replay.
            part = old
            self._standby.stop(part)  # leading now: no longer a candidate to be ranked
            part.state = CoordinatorState.LOADING
            start = part.standby.replayed_to
        else:
            if old is not None:
                self._halt(old)
            part = self._new_partition(partition, plog)
            self._partitions[partition] = part
            start = None
        try:
            if start is None:
                start = await self._loader.replay_snapshot(part)
                if start is None:
                    start = plog.log_start_offset
                else:
                    await asyncio.sleep(0)
            part.snapshots.since_snapshot += await self._loader.replay_log(part, start)
            part.writes.in_op = True
            try:
                part.shard.on_loaded()
            finally:
                part.writes.in_op = False
        except Exception as exc:
            where = part.where
            if isinstance(exc, RecordReplayError):  # say which record, and in which file
                where = {**where, "offset": exc.offset, "file": exc.source}
            log.exception("loading failed", extra=where)
            part.state = CoordinatorState.FAILED
            return
        if not self._table.is_current(part):
            part.timer.cancel_all()
            return  # unloaded while loading (cluster mode: leadership moved on)
        part.writes.last_written = plog.log_end_offset
        part.state = CoordinatorState.ACTIVE
        self.load_seconds[partition] = time.monotonic() - started
        log.info("coordinator partition loaded", extra={
            **part.where, "seconds": round(self.load_seconds[partition], 4),
            "from_offset": start, "log_end": part.writes.last_written, "from_standby": part is old})
        self._writes.release_completions(part)
        self._snapshots.maybe_snapshot(part)
        self._snapshots.schedule_refresh(part)

    def standby(self, partition: int) -> None:
        """Follow ``partition``'s log into a standby shard (cluster mode: this node is a follower;
        rule 6, ``standby.py``)."""
        plog = self.logs.get(self.topic, partition)
        if plog is None:
            return
        old = self._partitions.get(partition)
        if old is not None:
            if old.state is CoordinatorState.STANDBY and old.plog is plog:
                return
            self.unload(partition)
        part = self._new_partition(partition, plog)
        self._partitions[partition] = part
        self._standby.start(part)

    def _halt(self, part: Partition[ShardT]) -> None:
        """Stop what runs on its own for a partition: the standby's replay, the snapshot
        renewal, the shard's timers."""
        self._standby.stop(part)
        part.snapshots.stop_refresh()
        part.timer.cancel_all()

    def _answer_parked(self, part: Partition[ShardT]) -> bool:
        """An active shard with an ``on_unloaded`` answers what it holds parked, inside an
        operation (its answers are set like any operation's); whether it was called."""
        unloaded = getattr(part.shard, "on_unloaded", None)
        if part.state is not CoordinatorState.ACTIVE or unloaded is None:
            return False
        part.writes.in_op = True
        try:
            unloaded()
        finally:
            part.writes.in_op = False
        return True

    def unload(self, partition: int) -> None:
        """Stop coordinating ``partition`` (cluster mode: another node leads it now). Timers stop,
        parked answers and answers waiting for the ISR fail (NOT_COORDINATOR), the state goes."""
        self._queued.discard(partition)
        part = self._partitions.pop(partition, None)
        if part is None:
            return
        self._halt(part)
        # What the shard holds parked (a JoinGroup waiting for its rebalance) is answered too, as
        # Kafka's onResignation completes them: the answers it sets are not released but failed
        # below with the rest (NOT_COORDINATOR), as nothing of this partition may be answered
        # from here any more.
        self._answer_parked(part)
        part.state = CoordinatorState.FAILED if part.state is CoordinatorState.FAILED else CoordinatorState.LOADING
        self._writes.fail_waiting(part)

    def unload_all(self) -> None:
        """Stop coordinating every partition: timers stop, and shards with an ``on_unloaded``
        answer what they hold parked (delivered once durable, like any answer)."""
        for part in list(self._partitions.values()):
            self._halt(part)
            if self._answer_parked(part):
                self._writes.release_completions(part)
            if part.writes.pending is not None:
                self._writes.flush(part, part.writes.pending)  # what on_unloaded wrote goes to the log before it closes
            part.state = CoordinatorState.FAILED if part.state is CoordinatorState.FAILED else CoordinatorState.LOADING
        self._partitions.clear()
        self._queued.clear()
