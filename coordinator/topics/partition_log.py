"""One hosted partition's log: :class:`PartitionLog` wraps a ``storage.Log`` with what the request
handlers need around it.

That is the topic's settings the produce path applies (:class:`PartitionConfig`), the
idempotent-producer state, the offsets appends will get, waiters for new data (Fetch long polls)
and for durability (duplicate produce retries) and, in cluster mode, the partition's replication
state. ``log_manager.py`` opens, creates and deletes these; this module is one partition.

Rules:

1. Every append to a partition goes through its ``PartitionLog``. Offsets are assigned by the log
   in the order appends are queued (``append_validated`` queues before it returns), so the wrapper
   knows a batch's offset the moment it queues it, and updates producer state then — before the
   next request's sequence check.
2. On a single node the high watermark is the log end offset: the storage engine exposes data to
   readers only once it is written under the flush policy, which is what "committed" means there.
   In cluster mode ``replication`` (``replication.py``) holds the role, leader epoch, ISR and a
   high watermark that the ISR moves; consumers read below it, followers up to the log end.
3. Producer state survives a clean restart as a snapshot taken at the log end on close; it is used
   only if it was taken exactly at the log end found on open (nothing was appended or lost since),
   and deleted once read (``load_producer_state``). Otherwise the state is rebuilt by replaying
   every batch header (and every transaction marker) — or taken from recovery, when it already
   replayed the whole log to rebuild the ``.txnindex`` (an unclean restart with markers in the
   rescanned segments), so the log is read once.
4. Transactions (KIP-98): producer state opens a transaction at a producer's first transactional
   batch and a marker (``append_marker``, or a control batch a coordinator appends) closes it;
   an ABORT that closed one gets a ``.txnindex`` entry in the segment the marker lands in
   (``storage/txn_index.py``), written with the marker. The last stable offset is the first
   offset of the earliest open transaction, or of a completed one whose marker the high
   watermark has not passed, capped by the high watermark (Kafka's ``UnifiedLog``). Followers
   replay the same from replicated batches, so a new leader has the LSO and index right.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.fetch_response import RecordsRef
from protocol.records import (
    CONTROL_MASK,
    BatchHeader,
    CorruptBatchError,
    decode_records,
    encode_end_txn_marker,
    read_batch_header,
    read_end_txn_marker,
)
from protocol.responses import FileRange
from storage.cleaner import CleanResult
from storage.files import atomic_write
from storage.log import AppendResult, FileSlice, Log
from storage.producer_state import CompletedTxn, ProducerInfo, ProducerStateManager, replay_segments
from storage.txn_index import AbortedTxn

from .replication import Replication

__all__ = ["PartitionLog", "PartitionConfig", "load_producer_state", "PRODUCER_SNAPSHOT", "SENDFILE_MIN_BYTES"]

log = logging.getLogger("groupcoord.logs")

#: The producer-state snapshot a clean close leaves in the partition directory (rule 3).
PRODUCER_SNAPSHOT = "producer_state.snapshot"
_LEADER_EPOCH = struct.Struct(">i")
#: Reads smaller than this are copied into the response; larger ones go out with sendfile. Below
#: it the extra task and syscalls of sendfile cost more than copying a few pages.
SENDFILE_MIN_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class PartitionConfig:
    """The topic settings the produce path applies."""

    max_message_bytes: int
    log_append_time: bool
    #: None keeps what the producer sent (``compression.type=producer``).
    compression: int | None
    #: ``min.insync.replicas``: acks=all needs this many in-sync replicas; there is one.
    min_insync_replicas: int = 1
    #: ``message.timestamp.before.max.ms`` / ``after.max.ms`` (KIP-937): how far a CreateTime
    #: record's timestamp may lie in the past / future of the append time.
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 2**63 - 1


class PartitionLog:
    """One hosted partition. Used from the event loop only."""

    def __init__(self, topic: str, partition: int, storage: Log, config: PartitionConfig,
                 producers: ProducerStateManager) -> None:
        self.topic = topic
        self.partition = partition
        self.log = storage
        self.config = config
        self.producers = producers
        self._next_offset = storage.log_end_offset
        self._data_waiters: set[asyncio.Future[None]] = set()
        self._durable_waiters: list[tuple[int, asyncio.Future[None]]] = []
        #: Cluster mode only (rule 2): None on a single node, which leads every partition.
        self.replication: Replication | None = None
        # The two below are the hot standby's bookkeeping: a coordinator standby (the runtime's)
        # replays this log as it grows and remembers how many cuts it has seen.
        #: How many times ``truncate_to`` cut the log's tail (a follower diverged from a new
        #: leader). Only grows; a reader that ran ahead compares it with the count it last saw.
        self.truncations: int = 0
        #: Where each of those cuts was, oldest first (``truncation_offsets[n:]`` are the cuts
        #: since a reader saw ``truncations == n``): a reader that stayed below every new cut
        #: keeps its state, any other starts over.
        self.truncation_offsets: list[int] = []
        #: Replicated appends queued and not yet written (see ``settle_replicated``).
        self._replicating: set[asyncio.Future[AppendResult]] = set()

    def replicate(self, broker_id: int, high_watermark: int | None) -> Replication:
        """Switch this partition to cluster mode (no role yet: the cluster wing assigns it).
        ``high_watermark``: the last checkpointed one; unknown → the log start (nothing is
        readable until the ISR confirms it)."""
        if self.replication is None:
            self.replication = Replication(broker_id, lambda: self.log.log_end_offset,
                                           self.config.min_insync_replicas, on_advance=self._wake)
            start = self.log.log_start_offset if high_watermark is None else high_watermark
            self.replication.high_watermark = max(min(start, self.log.log_end_offset), self.log.log_start_offset)
        return self.replication

    @property
    def leader_epoch(self) -> int:
        # A single node leads every partition from creation on: the epoch stays 0.
        return 0 if self.replication is None else self.replication.leader_epoch

    @property
    def is_leader(self) -> bool:
        """Whether this node serves the partition as its leader now: the role, and in cluster
        mode a lease that a stall longer than the session suspends (cluster/liveness.py)."""
        repl = self.replication
        return repl is None or (repl.is_leader and repl.lease())

    @property
    def next_offset(self) -> int:
        """The offset the next append gets: the log end once everything queued has landed."""
        return self._next_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        if self.replication is not None:
            return self.replication.high_watermark
        return self.log.log_end_offset

    def accepts_writes(self) -> bool:
        """Whether a coordinator may write here now: it leads, with an ISR of at least
        ``min.insync.replicas`` (Kafka's NOT_ENOUGH_REPLICAS otherwise)."""
        repl = self.replication
        return repl is None or (repl.is_leader and repl.lease() and len(repl.isr) >= self.config.min_insync_replicas)

    def wait_committed(self, offset: int) -> asyncio.Future[None]:
        """Resolves once everything below ``offset`` is committed: durable here on a single node;
        in the ISR (the high watermark) in cluster mode, failing with NotLeader if this node
        stops leading first."""
        if self.replication is None:
            return self.wait_durable(offset)
        return self.replication.wait_for(offset)

    def append_batch(self, batch: bytearray, header: BatchHeader) -> tuple[int, asyncio.Future[None]]:
        """Queue one validated batch; returns its base offset and a future for durability.

        A transactional batch opens its producer's transaction here if none is open; a control
        batch (a marker a coordinator built) closes it (rule 4)."""
        if self.replication is not None:
            # KIP-101: every batch carries the leader epoch it was written in (not under the CRC).
            _LEADER_EPOCH.pack_into(batch, 12, self.replication.leader_epoch)
        base = self._next_offset
        if header.attributes & CONTROL_MASK:
            aborted: list[AbortedTxn] = []
            queued = self.log.append_validated(batch, header, aborted)
            self._next_offset = base + header.last_offset_delta + 1
            self._apply_marker(batch, 0, header, base, aborted)
        else:
            queued = self.log.append_validated(batch, header)
            self._next_offset = base + header.last_offset_delta + 1
            self.producers.update(header, base)
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A callback rather than a task: this runs for every coordinator write.
        queued.add_done_callback(lambda f: self._appended(f, base, durable))
        return base, durable

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      timestamp_ms: int) -> tuple[int, asyncio.Future[None]] | int:
        """Write one transaction marker (a control batch, ``protocol.records.encode_end_txn_marker``)
        for ``producer_id``; returns its offset and a future for durability, or the error code
        that refused it: INVALID_PRODUCER_EPOCH (epoch below the stored one) or
        TRANSACTION_COORDINATOR_FENCED (coordinator epoch below the stored one)."""
        error = self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if error != ErrorCode.NONE:
            return error
        batch = encode_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch, timestamp_ms,
                                      partition_leader_epoch=self.leader_epoch)
        return self.append_batch(batch, read_batch_header(batch, 0))

    def _apply_marker(self, data: bytes | bytearray, pos: int, header: BatchHeader, offset: int,
                      aborted: list[AbortedTxn]) -> CompletedTxn | None:
        """Producer state for the control batch at ``pos`` of ``data``, appended at ``offset``; an
        ABORT that closed a transaction adds its ``.txnindex`` entry to ``aborted``."""
        try:
            marker = read_end_txn_marker(data, pos, header)
        except CorruptBatchError as exc:
            log.warning("unreadable control batch", extra={"partition": f"{self.topic}-{self.partition}",
                                                           "offset": offset, "reason": str(exc)})
            return None
        if marker is None:
            return None  # emptied by the cleaner, or not a transaction marker
        commit, coordinator_epoch = marker
        done = self.producers.complete_txn(header.producer_id, header.producer_epoch, coordinator_epoch, commit,
                                           offset, header.max_timestamp)
        if done is not None and done.is_aborted:
            # The LSO when the transaction aborted (Kafka's lastStableOffset(completedTxn)): the
            # first offset of the earliest other open transaction, else just past the marker.
            first = self.producers.first_ongoing_offset()
            aborted.append(AbortedTxn(done.producer_id, done.first_offset, offset,
                                      offset + 1 if first is None else first))
        return done

    @property
    def last_stable_offset(self) -> int:
        """Where ``read_committed`` reads stop (rule 4): never past the high watermark, equal to it
        when no transaction holds it back."""
        hw = self.high_watermark
        first = self.producers.first_unstable_offset(hw)
        if first is None or first >= hw:
            return hw
        # Retention or DeleteRecords may have moved the log start past an open transaction's
        # start: the LSO is never below the log start (Kafka's maybeIncrementFirstUnstableOffset).
        return max(first, self.log.log_start_offset)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of the aborted transactions with a marker at or above
        ``fetch_offset`` and a first offset below ``upper_bound``, by first offset (Kafka's
        ``LocalLog.collectAbortedTransactions``, from the ``.txnindex`` files)."""
        return self.log.collect_aborted_txns(fetch_offset, upper_bound)

    async def clean(self, *, force: bool = False) -> CleanResult | None:
        """One compaction pass (``storage.cleaner``) below the last stable offset, so open
        transactions stay whole, keeping the last batch of every producer with state here, so
        their idempotence and transaction state survive a rebuild from the log (Kafka's
        ``LogCleaner`` rules (1) and (2))."""
        return await self.log.clean(force=force, max_offset=self.last_stable_offset,
                                    last_records=lambda: self.producers.last_records())

    def remove_expired_producers(self, expiration_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` by the log's clock, open transactions
        excepted (``ProducerStateManager.remove_expired``); how many went."""
        return len(self.producers.remove_expired(self.log.clock(), expiration_ms))

    def producer_entries(self) -> list[ProducerInfo]:
        """Every producer with state here (DescribeProducers, KIP-664)."""
        return self.producers.entries()

    def has_open_transaction(self, producer_id: int) -> bool:
        return self.producers.has_open_transaction(producer_id)

    def _appended(self, queued: asyncio.Future[AppendResult], expected_base: int, durable: asyncio.Future[None]) -> None:
        self._wake()
        if self.replication is not None:
            self.replication.maybe_advance()
        if durable.done():
            return  # cancelled by its waiter (a request whose connection went): nobody to tell
        if queued.cancelled():
            durable.cancel()
            return
        exc = queued.exception()
        if exc is not None:
            durable.set_exception(exc)
            return
        result = queued.result()
        if result.base_offset != expected_base:  # rule 1 broken: a bug, say so loudly
            log.error("append landed at an unexpected offset",
                      extra={"partition": f"{self.topic}-{self.partition}", "expected": expected_base,
                             "actual": result.base_offset})
        durable.set_result(None)

    def wait_durable(self, offset: int) -> asyncio.Future[None]:
        """Resolves once everything below ``offset`` is durable in this node's log."""
        fut = asyncio.get_running_loop().create_future()
        if self.log.log_end_offset >= offset:
            fut.set_result(None)
        else:
            self._durable_waiters.append((offset, fut))
        return fut

    def _wake(self) -> None:
        hw = self.log.log_end_offset
        for fut in self._data_waiters:
            if not fut.done():
                fut.set_result(None)
        self._data_waiters.clear()
        if self._durable_waiters:
            still = []
            for offset, fut in self._durable_waiters:
                if hw >= offset:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    still.append((offset, fut))
            self._durable_waiters = still

    def add_data_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.add(fut)

    def remove_data_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.discard(fut)

    def read(self, offset: int, max_bytes: int, *, min_one: bool, max_offset: int | None = None) -> bytes | RecordsRef | None:
        """Whole batches from ``offset`` within ``max_bytes`` (one at least if ``min_one``),
        ending below ``max_offset`` (the high watermark for consumers; None: the log end)."""
        if max_offset is not None and max_offset < self.log.log_end_offset:
            return self._read_below(offset, max_bytes, min_one, max_offset)
        found = self.log.slice(offset, max_bytes)
        if found is None or (not min_one and found.length > max_bytes):
            return None
        if found.length < SENDFILE_MIN_BYTES:
            return found.read()
        return RecordsRef(found.length, _file_range(found))

    def _read_below(self, offset: int, max_bytes: int, min_one: bool, max_offset: int) -> bytes | None:
        # Rare (a leader whose followers lag): copy and cut at the last whole batch below.
        if offset >= max_offset:
            return None
        data = self.log.read(offset, max_bytes)
        end = pos = 0
        while pos + 61 <= len(data):
            header = read_batch_header(data, pos)
            if header.base_offset + header.last_offset_delta >= max_offset:
                break
            pos += header.size
            end = pos
        if end == 0 or (not min_one and end > max_bytes):
            return None
        return bytes(data[:end])

    # --- follower side (cluster mode) -------------------------------------------------------------

    def append_replicated(self, data: bytes) -> asyncio.Future[AppendResult]:
        """Append batches fetched from the leader, offsets and leader epochs kept; producer state
        follows, so a follower that becomes leader keeps the idempotence guarantees."""
        aborted: list[AbortedTxn] = []
        fut = self.log.append_replicated(data, aborted)
        pos = 0
        while pos + 61 <= len(data):
            header = read_batch_header(data, pos)
            if header.attributes & CONTROL_MASK:
                self._apply_marker(data, pos, header, header.base_offset, aborted)
            else:
                self.producers.update(header, header.base_offset)
            # The end of what is queued, not of what is written: a follower that becomes leader
            # with this append in flight must give its first batch the offset after it.
            self._next_offset = max(self._next_offset, header.base_offset + header.last_offset_delta + 1)
            pos += header.size
        self._replicating.add(fut)

        def done(f: asyncio.Future[AppendResult]) -> None:
            self._replicating.discard(f)
            self._next_offset = max(self._next_offset, self.log.log_end_offset)
            self._wake()
        fut.add_done_callback(done)
        return fut

    async def settle_replicated(self) -> None:
        """Wait for replicated appends still in flight (a follower becoming leader: the new epoch
        starts after them, KIP-101)."""
        while self._replicating:
            await asyncio.gather(*list(self._replicating), return_exceptions=True)

    async def truncate_to(self, offset: int) -> None:
        """Drop everything from ``offset`` on (a follower whose log diverged from the leader's)."""
        if offset >= self.log.log_end_offset:
            await self.log.truncate_to(offset)  # no batch goes; a conflicting epoch entry may
            return
        self.truncations += 1
        self.truncation_offsets.append(offset)
        await self.log.truncate_to(offset)
        self._next_offset = self.log.log_end_offset
        if self.replication is not None:
            self.replication.high_watermark = min(self.replication.high_watermark, self.log.log_end_offset)
        self.producers = await asyncio.get_running_loop().run_in_executor(
            None, _rebuild_producer_state, self.log, self.high_watermark)
        self._wake()

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        offset = self.log.offset_for_timestamp(timestamp)
        if offset is None:
            return None
        return offset, self._record_timestamp(offset)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """KIP-734: the first record carrying the largest timestamp in the log."""
        best = None
        for seg in self.log.segments:
            if seg.size and seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        data = self.log.read(max(best.offset_of_max_timestamp, self.log_start_offset), 1)
        header = read_batch_header(data, 0)
        for record in decode_records(data, 0, header, check_crc=False):
            if record.timestamp(header) == best.max_timestamp:
                return header.base_offset + record.offset_delta, best.max_timestamp
        return best.offset_of_max_timestamp, best.max_timestamp

    def _record_timestamp(self, offset: int) -> int:
        data = self.log.read(offset, 1)
        header = read_batch_header(data, 0)
        for record in decode_records(data, 0, header, check_crc=False):
            if header.base_offset + record.offset_delta == offset:
                return record.timestamp(header)
        return -1

    async def close(self) -> None:
        """Close the log cleanly, then snapshot producer state at its final end (rule 3)."""
        await self.log.close()
        snapshot = self.producers.snapshot(self.log.log_end_offset)
        await asyncio.get_running_loop().run_in_executor(
            None, atomic_write, self.log.directory / PRODUCER_SNAPSHOT, snapshot)


def _file_range(found: FileSlice) -> FileRange:
    # closefd=False: the segment owns the descriptor and keeps it open long enough after a
    # deletion (file.delete.delay.ms) for a send in flight to finish.
    file = os.fdopen(found.fd, "rb", closefd=False, buffering=0)
    return FileRange(file, found.position, found.length, release=file.close)



def load_producer_state(storage: Log, high_watermark: int | None = None) -> ProducerStateManager:
    """The producer state of a log just opened: its snapshot if taken at this log end, else the
    state recovery rebuilt with the ``.txnindex`` (one pass over the log), else rebuilt from the
    batch headers (rule 3). ``high_watermark``: cluster mode's checkpointed one (None: the log
    end, a single node's), below which completed transactions are stable; pass the same to
    ``Log.open``."""
    replayed = storage.take_replayed_producers(high_watermark)
    path = storage.directory / PRODUCER_SNAPSHOT
    if path.exists():
        try:
            state, at = ProducerStateManager.from_snapshot(path.read_bytes())
        except ValueError as exc:
            log.warning("ignoring producer state snapshot", extra={"file": str(path), "reason": str(exc)})
            state, at = None, -1
        path.unlink()
        if state is not None and at == storage.log_end_offset:
            return state
    if replayed is not None:
        return replayed
    return _rebuild_producer_state(storage, high_watermark)


def _rebuild_producer_state(storage: Log, high_watermark: int | None = None) -> ProducerStateManager:
    """Replay every batch header, and every transaction marker, of ``storage``
    (``storage.producer_state.replay_segments``)."""
    return replay_segments(storage.segments, storage.log_end_offset if high_watermark is None else high_watermark)
