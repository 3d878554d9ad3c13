"""The write path: run an operation, append its records to the open batch, flush the batch to the
log, and answer once the log says it is durable (runtime rules 2 and 7, ``runtime.py``).

Must be used only from the event loop's thread: an operation runs start to finish without
awaiting, so the operations of one partition never interleave.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from protocol.records import build_batch, read_batch_header

from .contract import CoordinatorResult, Record
from .errors import (
    CommitTimedOut,
    CoordinatorState,
    MarkerRefused,
    NotActiveError,
    NotEnoughReplicas,
    ProducerFenced,
    RecordTooLarge,
)
from .partition import Partition, PartitionTable, ShardT
from .snapshot_schedule import SnapshotSchedule

__all__ = ["WritePath", "APPEND_BATCH_MAX_BYTES", "unanswered"]

log = logging.getLogger("groupcoord.runtime")

#: A partition's open batch is flushed before it grows past this (rule 7); Kafka caps it at the
#: partition's ``max.message.bytes`` (1 MiB by default).
APPEND_BATCH_MAX_BYTES = 512 << 10

#: What a RecordBatch v2 adds to the keys and values of its records: the 61-byte batch header,
#: and per record at most 23 bytes (length, attributes, timestamp delta 0, offset delta, key and
#: value lengths, header count). An upper bound, so a write accepted always fits its batch.
BATCH_OVERHEAD = 61
RECORD_OVERHEAD = 23

R = TypeVar("R")


def unanswered(done: asyncio.Future[R]) -> None:
    """A write nobody answers (a timer's, an internal one): its outcome is still read when it
    comes, because an unload (leadership moved while its records waited for the ISR) fails it,
    and asyncio logs an exception never retrieved as an ERROR. The records' fate is the log's."""
    done.add_done_callback(_read_outcome)


def _read_outcome(done: asyncio.Future[R]) -> None:
    if not done.cancelled():
        done.exception()


class _Handle(Generic[ShardT]):
    """A parked response of a partition (``contract.ResponseHandle``): its value is delivered once
    the operation that set it is durable."""

    __slots__ = ("_writes", "_part", "_fut", "done")

    def __init__(self, writes: WritePath[ShardT], part: Partition[ShardT], fut: asyncio.Future[object]) -> None:
        self._writes = writes
        self._part = part
        self._fut = fut
        self.done = False

    def set_result(self, value: object) -> None:
        if self.done:
            return
        self.done = True
        state = self._part.writes
        state.completions.append((self._fut, value))
        if not state.in_op:
            self._writes.release_completions(self._part)


class WritePath(Generic[ShardT]):
    """Writes, reads and parked responses of the partitions of one coordinator topic."""

    def __init__(self, table: PartitionTable[ShardT], snapshots: SnapshotSchedule[ShardT], *,
                 commit_timeout_ms: int) -> None:
        self._table = table
        self._serialize = table.serde.serialize
        self._snapshots = snapshots
        #: ``offsets.commit.timeout.ms``: how long an answer waits for the ISR (cluster mode).
        self.commit_timeout_ms = commit_timeout_ms
        #: Called with each write operation's name and records once they are in the batch (the
        #: ops wing counts commits, expirations, rebalances from them; app.py sets it). None: nothing.
        self.write_observer: Callable[[str, list[Record]], None] | None = None

    def active(self, partition: int) -> Partition[ShardT]:
        part = self._table.by_id.get(partition)
        if part is None or part.state is not CoordinatorState.ACTIVE:
            raise NotActiveError(partition, part.state if part else None)
        if not part.plog.is_leader:
            # Cluster mode: leadership gone or suspended (a stall, cluster/liveness.py) before
            # the resignation reached us: answer nothing from a state that may be stale.
            raise NotActiveError(partition, part.state)
        return part

    def write(self, partition: int, name: str,
              op: Callable[[ShardT], CoordinatorResult[R]]) -> asyncio.Future[R | None]:
        """Run the write operation ``name`` now; the returned future gets its response once
        durable. The name goes with its records to the log lines about their batch."""
        part = self.active(partition)
        if not part.plog.accepts_writes():
            # Cluster mode: not leading, or the ISR is below min.insync.replicas; Kafka refuses
            # the append (NOT_ENOUGH_REPLICAS) and the group answers an error, never NONE.
            if part.plog.is_leader:
                raise NotEnoughReplicas(partition, part.state)
            raise NotActiveError(partition, part.state)
        loop = asyncio.get_running_loop()
        state = part.writes
        state.in_op = True
        parked = len(state.completions)
        try:
            result = op(part.shard)
            if result.records:
                if result.producer_id < 0:
                    self._append(part, name, result.records, result.atomic)
                else:
                    self._append_transactional(part, name, result)
                if self.write_observer is not None:
                    self.write_observer(name, result.records)
        except RecordTooLarge as exc:
            # The responses the operation parked assumed its records: they fail with it.
            refused, state.completions = state.completions[parked:], state.completions[:parked]
            for waiting, _value in refused:
                if not waiting.done():
                    waiting.set_exception(exc)
            log.warning("coordinator write refused: its records exceed max.message.bytes",
                        extra={**part.where, "operation": name, "bytes": exc.size, "limit": exc.limit})
            raise
        finally:
            state.in_op = False
        fut: asyncio.Future[R | None] = loop.create_future()
        self._after_durable(part, state.last_written, fut, result.response, result.on_appended)
        self.release_completions(part)
        return fut

    def read(self, partition: int, name: str, op: Callable[[ShardT], R]) -> asyncio.Future[R]:
        """Run a read now; its answer waits for pending writes to be durable (rule 2)."""
        part = self.active(partition)
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._after_durable(part, part.writes.last_written, fut, op(part.shard), None)
        return fut

    def response_future(self, partition: int) -> tuple[_Handle[ShardT], asyncio.Future[object]]:
        """A parked-response handle for the shard, and the asyncio future the service awaits.

        ``handle.set_result(x)``, called by the shard during some later operation or timer, is
        delivered once that operation's records are durable.
        """
        part = self._table.by_id[partition]
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        return _Handle(self, part, fut), fut

    def _append(self, part: Partition[ShardT], name: str, records: list[Record], atomic: bool) -> None:
        serialize = self._serialize
        items = [serialize(key, value) for key, value in records]
        size = sum(len(k) + (0 if v is None else len(v)) for k, v in items)
        if size + RECORD_OVERHEAD * len(items) + BATCH_OVERHEAD > part.plog.config.max_message_bytes:
            self._oversized(part, name, records, items, size, atomic)
            return
        self._add(part, name, records, items, size)

    def _append_transactional(self, part: Partition[ShardT], name: str, result: CoordinatorResult[R]) -> None:
        """A transactional write (KIP-447's TxnOffsetCommit): the open batch goes first, then the
        records in a batch of their own with the producer's id and epoch, at once (no linger),
        as Kafka's runtime does. Replayed with ``replay_transactional``, each with its offset."""
        serialize = self._serialize
        records = result.records
        items = [serialize(key, value) for key, value in records]
        size = sum(len(k) + (0 if v is None else len(v)) for k, v in items)
        total = size + RECORD_OVERHEAD * len(items) + BATCH_OVERHEAD
        if total > part.plog.config.max_message_bytes:
            raise RecordTooLarge(part.id, part.state, name, total, part.plog.config.max_message_bytes)
        pid, epoch = result.producer_id, result.producer_epoch
        plog = part.plog
        known = plog.producers.producers.get(pid)
        if known is not None and epoch < known.epoch:
            raise ProducerFenced(part.id, part.state)
        state = part.writes
        if state.pending is not None:
            self.flush(part, state.pending)
        if part.state is not CoordinatorState.ACTIVE or not self._table.is_current(part):
            raise NotActiveError(part.id, part.state)  # the flush found the partition gone
        base = plog.next_offset
        batch = bytearray(build_batch(items, timestamp_ms=self._table.clock.now_ms(), producer_id=pid,
                                      producer_epoch=epoch, base_sequence=0, transactional=True))
        replay = part.shard.replay_transactional
        for i, ((key, value), (typed_key, _typed_value)) in enumerate(zip(items, records)):  # noqa: B905
            replay(base + i, pid, epoch, key, value, typed_key)
        state.last_written = base + len(items)
        self._give(part, batch, {name})
        part.snapshots.since_snapshot += len(items)
        self._snapshots.maybe_snapshot(part)

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                             coordinator_epoch: int) -> asyncio.Future[None]:
        """Write a transaction marker (Kafka's ``CoordinatorRuntime.scheduleTransactionCompletion``):
        the open batch is flushed, the control batch appended, the marker replayed into the shard
        (``replay_end_transaction``), and the returned future resolves once the marker is
        durable. Raises NotActiveError (not served here), NotEnoughReplicas, or MarkerRefused
        (the log refused the marker: nothing was written or replayed)."""
        part = self.active(partition)
        plog = part.plog
        if not plog.accepts_writes():
            if plog.is_leader:
                raise NotEnoughReplicas(partition, part.state)
            raise NotActiveError(partition, part.state)
        state = part.writes
        if state.pending is not None:
            self.flush(part, state.pending)
        if part.state is not CoordinatorState.ACTIVE or not self._table.is_current(part):
            raise NotActiveError(partition, part.state)
        # Kafka replays the marker before the append and reverts on a refusal; here the log
        # decides first and nothing runs in between (one event-loop step), which is the same.
        appended = plog.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                      self._table.clock.now_ms())
        if isinstance(appended, int):
            raise MarkerRefused(partition, part.state, appended)
        offset, durable = appended
        durable.add_done_callback(lambda f: self._appended(part, f, {"complete-transaction"}))
        state.in_op = True
        try:
            part.shard.replay_end_transaction(producer_id, producer_epoch, commit)
        finally:
            state.in_op = False
        state.last_written = offset + 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._after_durable(part, state.last_written, fut, None, None)
        self.release_completions(part)
        return fut

    def _oversized(self, part: Partition[ShardT], name: str, records: list[Record],
                   items: list[tuple[bytes, bytes | None]], size: int, atomic: bool) -> None:
        limit = part.plog.config.max_message_bytes
        if atomic:
            # Refused before the replay, as Kafka's runtime does (records first: the shard is
            # unchanged), and before the open batch is touched: the writes already in it go on.
            raise RecordTooLarge(part.id, part.state, name, size + RECORD_OVERHEAD * len(items) + BATCH_OVERHEAD,
                                 limit)
        # Non-atomic (Kafka's cleanups): as many batches as needed, each within the limit but for
        # a record too large alone, which goes alone (Kafka's builder always takes a first record).
        state = part.writes
        start, chunk = 0, 0
        for i in range(len(items) + 1):
            grown = 0
            if i < len(items):
                key, value = items[i]
                grown = len(key) + (0 if value is None else len(value))
                if i == start or BATCH_OVERHEAD + RECORD_OVERHEAD * (i - start + 1) + chunk + grown <= limit:
                    chunk += grown
                    continue
            if state.pending is not None:  # each part in a batch of its own
                self.flush(part, state.pending)
            self._add(part, name, records[start:i], items[start:i], chunk)
            if state.pending is not None:
                self.flush(part, state.pending)
            start, chunk = i, grown

    def _add(self, part: Partition[ShardT], name: str, records: list[Record],
             items: list[tuple[bytes, bytes | None]], size: int) -> None:
        state = part.writes
        if state.pending is not None and state.pending_bytes + size > APPEND_BATCH_MAX_BYTES:
            self.flush(part, state.pending)
        if state.pending is None:
            state.pending = []
            state.pending_base = part.plog.next_offset
            state.pending_bytes = 0
            state.pending_operations = set()
            asyncio.get_running_loop().call_soon(self.flush, part, state.pending)
        state.pending.extend(items)
        state.pending_operations.add(name)
        state.pending_bytes += size
        state.last_written = state.pending_base + len(state.pending)
        replay = part.shard.replay
        # Equal lengths; zip's strict= would cost ~0.1 us per write.
        for (key, value), (typed_key, _typed_value) in zip(items, records):  # noqa: B905
            replay(key, value, typed_key)
        part.snapshots.since_snapshot += len(items)
        self._snapshots.maybe_snapshot(part)

    def flush(self, part: Partition[ShardT], pending: list[tuple[bytes, bytes | None]]) -> None:
        """Give the partition's open batch to its log (rule 7)."""
        state = part.writes
        if state.pending is not pending:
            return  # flushed early, or dropped
        state.pending = None
        if not self._table.is_current(part) or part.state is not CoordinatorState.ACTIVE:
            return  # no longer served here: the answers waiting on these records failed already
        plog = part.plog
        operations = state.pending_operations
        if plog.replication is not None and not plog.replication.is_leader:
            # Leadership went between the operations and the flush (the unload follows): the
            # shard holds records its log will never have, so it must not answer again.
            log.info("coordinator batch not written: the partition changed hands first",
                     extra={**part.where, "operations": sorted(operations)})
            self.fail(part)
            return
        if plog.next_offset != state.pending_base:  # only the runtime writes here: a bug, say so loudly
            log.error("coordinator batch not written: the log moved under it", extra={
                **part.where, "expected_base": state.pending_base, "next_offset": plog.next_offset,
                "operations": sorted(operations)})
            self.fail(part)
            return
        self._give(part, bytearray(build_batch(pending, timestamp_ms=self._table.clock.now_ms())), operations)

    def _give(self, part: Partition[ShardT], batch: bytearray, operations: set[str]) -> None:
        """Append a batch to the partition's log; a failed append fails the partition."""
        _base, durable = part.plog.append_batch(batch, read_batch_header(batch, 0))
        durable.add_done_callback(lambda f: self._appended(part, f, operations))

    def flush_pending(self) -> None:
        """Flush every partition's open batch now (shutdown, before the logs close)."""
        for part in list(self._table.by_id.values()):
            if part.writes.pending is not None:
                self.flush(part, part.writes.pending)

    def _appended(self, part: Partition[ShardT], durable: asyncio.Future[None], operations: set[str]) -> None:
        exc = None if durable.cancelled() else durable.exception()
        if exc is None and not durable.cancelled():
            return
        if not self._table.is_current(part):
            # Unloaded before its batch was written (the replica reassigned away, KIP-455: the
            # log closes right after): its answers already failed with NOT_COORDINATOR, and the
            # state it would have stopped serving is gone. Nothing is lost; not an error.
            log.info("coordinator batch not written: the partition was unloaded first",
                     extra={**part.where, "reason": str(exc or "cancelled"), "operations": sorted(operations)})
            return
        log.error("coordinator append failed; the partition stops serving until a restart reloads it",
                  extra={**part.where, "reason": str(exc or "cancelled"), "operations": sorted(operations)})
        self.fail(part)

    def fail(self, part: Partition[ShardT]) -> None:
        """The partition stops serving: its timers stop and every answer waiting on it fails."""
        if part.state is CoordinatorState.ACTIVE:
            part.state = CoordinatorState.FAILED
            part.snapshots.stop_refresh()
            part.timer.cancel_all()
            waiting, part.writes.waiting = part.writes.waiting, set()
            for fut in waiting:
                if not fut.done():
                    fut.set_exception(NotActiveError(part.id, part.state))

    def _after_durable(self, part: Partition[ShardT], offset: int, fut: asyncio.Future[R], response: R,
                       on_appended: Callable[[], None] | None) -> None:
        state = part.writes
        by_id = self._table.by_id

        def deliver(committed: asyncio.Future[None] | None = None) -> None:
            # The wait's outcome is read first, also when the answer was settled meanwhile
            # (unloaded, timed out): asyncio logs an exception never retrieved as an ERROR.
            lost = committed is not None and (committed.cancelled() or committed.exception() is not None)
            state.waiting.discard(fut)
            if fut.done():
                return
            if lost:
                # Cluster mode: leadership went before the ISR had it. Never NONE from a log this
                # node no longer leads (KAFKA-20634): the client retries at the new coordinator.
                fut.set_exception(NotActiveError(part.id, part.state))
                return
            if part.state is CoordinatorState.FAILED or by_id.get(part.id) is not part:  # unloaded
                fut.set_exception(NotActiveError(part.id, part.state))
                return
            if on_appended is not None:
                state.in_op = True
                try:
                    on_appended()
                finally:
                    state.in_op = False
                self.release_completions(part)
            fut.set_result(response)

        if part.plog.high_watermark >= offset:
            deliver()
        else:
            state.waiting.add(fut)
            part.plog.wait_committed(offset).add_done_callback(deliver)
            if part.plog.replication is not None:
                def timed_out() -> None:
                    state.waiting.discard(fut)
                    if not fut.done():
                        fut.set_exception(CommitTimedOut(part.id, part.state))
                timer = self._table.timers(self.commit_timeout_ms, timed_out)
                fut.add_done_callback(lambda _f: timer.cancel())

    def release_completions(self, part: Partition[ShardT]) -> None:
        state = part.writes
        if not state.completions or part.state is CoordinatorState.LOADING:
            return
        pending, state.completions = state.completions, []
        for fut, value in pending:
            self._after_durable(part, state.last_written, fut, value, None)

    def fail_waiting(self, part: Partition[ShardT]) -> None:
        """Unloaded: the open batch is never written, and every answer waiting on the partition
        (for durability, or parked) fails (NOT_COORDINATOR)."""
        state = part.writes
        state.pending = None  # never written (rule 7): the answers waiting on it fail below
        waiting, state.waiting = state.waiting, set()
        for fut in waiting:
            if not fut.done():
                fut.set_exception(NotActiveError(part.id, None))
        for parked, _value in state.completions:
            if not parked.done():
                parked.set_exception(NotActiveError(part.id, None))
        state.completions = []
