"""Group commit: the append queue and writer task of one ``Log``.

Theory of operation: ``Log.append`` validates its input here (``validate_batches``) and hands it
to ``GroupCommitWriter.submit``, which queues it with a future and makes sure a writer task runs.
The writer takes the log's write lock for a *session* and runs *rounds* until the queue is empty:

  1. plan (event loop): take everything queued; assign offsets in queue order by rewriting each
     batch's base offset in place (the CRC does not cover it); roll to a new segment where
     ``segment.bytes``/``segment.ms``/int32 relative offsets say so; collect the bytes per segment;
  2. write (the shared I/O thread, ``io_worker.py``): one ``pwrite`` per segment touched, then — after the writes of
     every other round the thread took at the same time, so one journal commit covers them all — if the flush policy
     says so, one fsync per segment, and a directory fsync if a segment file was created;
  3. commit (event loop, strictly in round order): advance sizes, indexes and the log end offset
     (only now can readers see the data), note new leader epochs in the log's
     ``LeaderEpochCache``, seal rolled segments (fsync them, write their indexes and move the
     recovery-point checkpoint), persist the epoch cache if it changed, resolve the futures.

*Replicated* appends (``Log.append_replicated``, a follower copying its leader's log, KIP-101)
go through the same queue and rounds, flagged: their batches keep their own base offsets, which
may leave gaps (a compacted leader log has them). A round holding a gap is fsynced and moves the
recovery-point checkpoint past it, because recovery requires contiguous offsets above that
checkpoint (segment rule 2) and would otherwise cut the log at the gap.

Up to ``_MAX_ROUNDS_IN_FLIGHT`` rounds are between plan and commit at once, so one round's
fsync overlaps the next round's Python work.

Rules:
  1. Offsets are assigned in queue order and never reused by a later round.
  2. A future resolves only after its round's bytes are written and, under ``fsync``, fsynced;
     readers never see a round before its commit.
  3. A failed write or fsync fails its round and every later round, and the log refuses
     appends from then on (``StorageIOError``): what reached the disk is unknown until recovery.
  4. The writer stops starting rounds while an exclusive operation (roll, flush, truncation,
     retention, close) waits for the lock, so those cannot starve under a stream of appends.
  5. A batch whose ``partition_leader_epoch`` is newer than the log's latest epoch adds the entry
     ``(epoch, base offset)`` to the epoch cache (as a Kafka follower keeps its cache in step
     with the leader's). The cache file is written before the round's futures resolve and
     before the recovery-point checkpoint moves past the batch, so after a crash either the
     file has the epoch or recovery rescans the batch and finds it again.
  6. A replicated append starts at or above the log end (as planned, including queued rounds)
     and its batches' offsets increase; otherwise it fails with ``InvalidBatchError`` and
     nothing of it is written.
  7. The ``.txnindex`` entries an append carries (its ABORT markers, ``txn_index.py``) go to the
     segment the round puts the marker in: written to its file with the round's bytes (and
     fsynced with them), added to the in-memory index when the round commits, so a reader sees
     an entry exactly when it sees the marker.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

from crc32c import crc32c as _crc32c

from protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader

from .errors import InvalidBatchError, LogClosedError, RecordTooLargeError, StorageIOError
from .files import RECOVERY_POINT_FILE, fsync_dir, write_checkpoint
from .io_worker import shared_worker
from .leader_epoch import LeaderEpochCache
from .log_parts import WriterLog
from .segment import MAX_SEGMENT_POSITION, LogSegment
from .txn_index import AbortedTxn

__all__ = ["AppendResult", "BatchesInput", "GroupCommitWriter", "set_fsync_observer", "validate_batches"]

logger = logging.getLogger("groupcoord.storage")

_memoryview = memoryview
#: Called on the I/O thread with the seconds a group-commit round's fsyncs took (one call per
#: fsynced round), or None. The process's metrics set it (``set_fsync_observer``); storage imports
#: nothing above it.
fsync_observer: Callable[[float], None] | None = None


def set_fsync_observer(observer: Callable[[float], None] | None) -> None:
    """Time every fsynced group-commit round with ``observer`` (None: stop timing)."""
    global fsync_observer
    fsync_observer = observer


#: Group-commit rounds allowed in the executor at once. Two is what overlaps one round's fsync
#: with the next round's Python work; more would only queue fsyncs behind each other.
_MAX_ROUNDS_IN_FLIGHT = 2
#: The CRC covers the batch from its attributes field (byte 21) to the end.
_CRC_START = 21
_BASE_OFFSET = struct.Struct(">q")
#: Flat header unpack for the append hot path (same layout as ``protocol.records``); the tuple is
#: turned into a ``BatchHeader`` without the keyword-argument constructor.
_HEADER_UNPACK = struct.Struct(">qiibIhiqqqhii").unpack_from
_new_header = tuple.__new__

BatchesInput = bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview]


class AppendResult(NamedTuple):
    """Offsets assigned to one ``append`` call (inclusive)."""

    base_offset: int
    last_offset: int


class _Pending:
    __slots__ = ("buf", "batches", "future", "base", "last", "replicated", "aborted")

    def __init__(self, buf: bytearray, batches: list[tuple[int, BatchHeader]], future: asyncio.Future[AppendResult],
                 replicated: bool = False, aborted: list[AbortedTxn] | None = None):
        self.buf = buf
        self.batches = batches
        self.future = future
        self.base = -1
        self.last = -1
        #: Keep the batches' base offsets (a follower's copy of its leader's log).
        self.replicated = replicated
        #: ``.txnindex`` entries of ABORT markers among the batches (rule 7); may be filled after
        #: ``submit``, until the round is planned.
        self.aborted = aborted


def _wake(waiter: asyncio.Future[None], _done: asyncio.Future[None]) -> None:
    """Done callback of a round's future: resolve the session's waiter, unless already woken."""
    if not waiter.done():
        waiter.set_result(None)


class _Round:
    """One group commit: the appends it covers and what to write where."""

    __slots__ = ("items", "writes", "sealed", "new_segments", "sync", "end_offset", "future", "epochs", "gap")

    #: The round's write (and fsync) on the I/O worker: set when the round is handed to it, before
    #: the round enters the in-flight queue, so every round ``_session`` or ``_commit`` sees has one.
    future: asyncio.Future[None]

    def __init__(self, items: list[_Pending], writes: list[_Write]) -> None:
        self.items = items
        self.writes = writes
        self.sealed: list[LogSegment] = []
        self.new_segments: list[LogSegment] = []
        self.sync = False
        self.end_offset = 0
        #: ``(epoch, base offset)`` of batches that raise the leader epoch (rule 5), in order.
        self.epochs: list[tuple[int, int]] = []
        #: A replicated batch left an offset gap: checkpoint the recovery point past it.
        self.gap = False


class _Write:
    __slots__ = ("segment", "position", "parts", "headers", "bases", "aborted")

    def __init__(self, segment: LogSegment, position: int) -> None:
        self.segment = segment
        self.position = position
        self.parts: list[memoryview] = []
        #: Headers as the caller sent them, and the base offsets assigned (parallel lists).
        self.headers: list[BatchHeader] = []
        self.bases: list[int] = []
        #: ``.txnindex`` entries whose marker this write holds (rule 7).
        self.aborted: list[AbortedTxn] | None = None


def _route_aborted(writes: list[_Write], aborted: list[AbortedTxn]) -> None:
    """Give each ``.txnindex`` entry to the write (segment) holding its marker."""
    for entry in aborted:
        for w in reversed(writes):
            if w.segment.base_offset <= entry.last_offset:
                if w.aborted is None:
                    w.aborted = []
                w.aborted.append(entry)
                break


def validate_batches(data: BatchesInput, limit: int, *,
                     replicated: bool = False) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """Check every batch (whole, v2, CRC, record count, size limit) before anything is queued.

    With ``replicated`` (batches copied from a leader, offsets kept) the record count may be
    below ``last_offset_delta + 1`` (compaction keeps the delta while removing records), and
    base offsets must be >= 0 and each above the previous batch's last offset (rule 6).

    Hot path: a plain loop over ``struct`` unpacks and the C CRC, no generator per batch.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        buf = bytearray(data)
    else:
        buf = bytearray(b"".join(data))
    total = len(buf)
    if not total:
        raise InvalidBatchError("append of zero bytes")
    batches: list[tuple[int, BatchHeader]] = []
    pos = 0
    while pos < total:
        if total - pos < BATCH_HEADER_SIZE:
            raise InvalidBatchError(f"{total - pos} trailing bytes after the last whole batch at byte {pos}")
        h = _new_header(BatchHeader, _HEADER_UNPACK(buf, pos))
        if h.magic != 2:
            raise InvalidBatchError(f"batch at byte {pos}: unsupported magic {h.magic}")
        if h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatchError(f"batch at byte {pos}: batch length {h.batch_length} too small")
        size = LOG_OVERHEAD + h.batch_length
        if pos + size > total:
            raise InvalidBatchError(f"batch at byte {pos} claims {size} bytes, only {total - pos} given")
        if size > limit:
            raise RecordTooLargeError(f"batch at byte {pos} is {size} bytes, over max_batch_bytes={limit}")
        if replicated:
            _check_replicated(h, pos, batches[-1][1] if batches else None)
        elif h.records_count < 1 or h.last_offset_delta != h.records_count - 1:
            raise InvalidBatchError(
                f"batch at byte {pos}: {h.records_count} records but last offset delta {h.last_offset_delta}")
        if _crc32c(_memoryview(buf)[pos + _CRC_START : pos + size]) != h.crc:
            raise InvalidBatchError(f"batch at byte {pos}: CRC mismatch")
        batches.append((pos, h))
        pos += size
    return buf, batches


def _check_replicated(h: BatchHeader, pos: int, prev: BatchHeader | None) -> None:
    if h.last_offset_delta < 0 or not 0 <= h.records_count <= h.last_offset_delta + 1:
        raise InvalidBatchError(
            f"batch at byte {pos}: {h.records_count} records but last offset delta {h.last_offset_delta}")
    if h.base_offset < 0:
        raise InvalidBatchError(f"batch at byte {pos}: negative base offset {h.base_offset}")
    if prev is not None and h.base_offset <= prev.base_offset + prev.last_offset_delta:
        raise InvalidBatchError(
            f"batch at byte {pos}: base offset {h.base_offset} not above the previous batch's last offset "
            f"{prev.base_offset + prev.last_offset_delta}")


class GroupCommitWriter:
    """The queue and writer task of one log (see the module docstring)."""

    def __init__(self, log: WriterLog) -> None:
        self.log = log
        #: Validated appends waiting for the next round, in arrival order.
        self._pending: list[_Pending] = []
        #: The writer task, while one runs.
        self._writer: asyncio.Task[None] | None = None
        #: Set by ``submit`` to wake a session waiting on an in-flight round.
        self._wakeup: asyncio.Future[None] | None = None
        #: Planning position of the session: (segment, position, next offset, first timestamp).
        self._tail: tuple[LogSegment, int, int, int | None] = (log._segments[-1], 0, 0, None)
        #: Newest leader epoch of the planned rounds (rule 5; the cache's, once they commit).
        self._planned_epoch = -1

    @property
    def busy(self) -> bool:
        return self._writer is not None

    def submit(self, buf: bytearray, batches: list[tuple[int, BatchHeader]], *,
               replicated: bool = False, aborted: list[AbortedTxn] | None = None) -> asyncio.Future[AppendResult]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[AppendResult] = loop.create_future()
        self._pending.append(_Pending(buf, batches, fut, replicated, aborted))
        if self._writer is None:
            self._writer = loop.create_task(self._drain())
        elif self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)
        return fut

    async def _drain(self) -> None:
        try:
            while self._pending:
                async with self.log._write_lock:
                    await self._session()
        finally:
            self._writer = None

    async def _session(self) -> None:
        """Run write rounds, pipelined, until the queue is empty or an exclusive operation waits.

        Up to ``_MAX_ROUNDS_IN_FLIGHT`` rounds are in the executor at once: while one round
        fsyncs, the next is planned and written, so Python work and disk latency overlap instead
        of adding up. Rounds are committed (state advanced, futures resolved) strictly in order.
        """
        loop = asyncio.get_running_loop()
        tail = self.log._segments[-1]
        self._tail = (tail, tail.size, tail.next_offset, tail.first_batch_timestamp)
        self._planned_epoch = self.log._leader_epochs.latest_epoch
        inflight: deque[_Round] = deque()
        while True:
            if self._pending and len(inflight) < _MAX_ROUNDS_IN_FLIGHT and not self.log._exclusive_waiters:
                items, self._pending = self._pending, []
                if self.log._closed or self.log._failed is not None:
                    self._fail(items, LogClosedError("log closed") if self.log._closed else StorageIOError(str(self.log._failed)))
                    continue
                rnd = self._plan(items)
                needs_sync = rnd.sync or bool(rnd.new_segments)
                rnd.future = shared_worker().run(self._write_round, rnd,
                                                 then=partial(self._sync_round, rnd) if needs_sync else None)
                inflight.append(rnd)
                continue
            if not inflight:
                return
            head = inflight[0]
            if not head.future.done():
                # Wake up for the head's completion or, if another round could start, for a new
                # append, whichever comes first. (A bare future and a callback: asyncio.wait
                # costs several times as much, and this runs for every round.)
                waiter = loop.create_future()
                head.future.add_done_callback(partial(_wake, waiter))
                if not (self._pending or self.log._exclusive_waiters):
                    self._wakeup = waiter
                await waiter
                self._wakeup = None
                continue
            inflight.popleft()
            await self._commit(head)

    @staticmethod
    def _fail(items: list[_Pending], err: BaseException) -> None:
        for it in items:
            if not it.future.done():
                it.future.set_exception(err)

    def _should_roll(self, seg: LogSegment, pos: int, first_ts: int | None, h: BatchHeader, next_off: int) -> bool:
        """The rarer roll reasons (size and record time are checked inline by ``_plan``)."""
        if next_off + h.last_offset_delta - seg.base_offset > MAX_SEGMENT_POSITION:
            return True  # relative offsets are int32 in the index
        if first_ts is None or first_ts < 0:
            return self.log.clock() - seg.created_ms > self.log.options.segment_ms  # no record time: wall clock
        return False

    def _plan(self, items: list[_Pending]) -> _Round:
        """Assign offsets (queue order), decide rolls, gather the bytes to write. Loop side, no I/O
        except creating the file of a new segment."""
        seg, pos, next_off, first_ts = self._tail
        write = _Write(seg, pos)
        rnd = _Round(items, [write])
        now = self.log.clock()
        seg_bytes = min(self.log.options.segment_bytes, MAX_SEGMENT_POSITION)
        seg_ms = self.log.options.segment_ms
        pack_base = _BASE_OFFSET.pack_into
        epoch = self._planned_epoch
        for it in items:
            buf = it.buf
            view = memoryview(buf)
            replicated = it.replicated
            if replicated:
                first = it.batches[0][1].base_offset
                if first < next_off:  # rule 6; validation checked the order within the append
                    it.future.set_exception(InvalidBatchError(
                        f"replicated append starting at offset {first} overlaps the log, which ends at {next_off}"))
                    continue
                it.base = first
            else:
                it.base = next_off
            for bpos, h in it.batches:
                size = LOG_OVERHEAD + h.batch_length
                if replicated and h.base_offset != next_off:
                    next_off = h.base_offset  # a gap: the leader's log has one here
                    rnd.gap = True
                if (pos and (pos + size > seg_bytes
                             or (first_ts is not None and first_ts >= 0 and h.max_timestamp - first_ts > seg_ms)
                             or self._should_roll(seg, pos, first_ts, h, next_off))) or (
                        replicated and not pos
                        and next_off + h.last_offset_delta - seg.base_offset > MAX_SEGMENT_POSITION):
                    # (The second case: a gap so wide, into an empty segment, that the int32
                    # relative offsets cannot span it; the empty segment is sealed as it is.)
                    rnd.sealed.append(seg)
                    seg = LogSegment(self.log.directory, next_off, index_interval_bytes=self.log.options.index_interval_bytes,
                                     now_ms=now)
                    rnd.new_segments.append(seg)
                    pos, first_ts = 0, None
                    write = _Write(seg, 0)
                    rnd.writes.append(write)
                if first_ts is None:
                    first_ts = h.max_timestamp
                pack_base(buf, bpos, next_off)
                write.parts.append(view[bpos : bpos + size])
                write.headers.append(h)
                write.bases.append(next_off)
                if h.partition_leader_epoch > epoch:  # rare: one int compare per batch otherwise
                    epoch = h.partition_leader_epoch
                    rnd.epochs.append((epoch, next_off))
                next_off += h.last_offset_delta + 1
                pos += size
            it.last = next_off - 1
            if it.aborted:  # rare: transaction aborts only
                _route_aborted(rnd.writes, it.aborted)
        self._tail = (seg, pos, next_off, first_ts)
        self._planned_epoch = epoch
        rnd.end_offset = next_off
        policy = self.log.options.flush_policy
        rnd.sync = rnd.gap or policy == "fsync" or (
            policy == "interval" and now - self.log._last_sync_ms >= self.log.options.flush_interval_ms)
        if rnd.sync:
            self.log._last_sync_ms = now
        return rnd

    def _write_round(self, rnd: _Round) -> None:
        """I/O-thread side of a round, first step: write each segment's bytes with one pwrite.
        The fsyncs (``_Round.sync_step``) run after the writes of every round taken with it."""
        for w in rnd.writes:
            if w.parts:
                w.segment.write_at(w.position, b"".join(w.parts) if len(w.parts) > 1 else w.parts[0])
            if w.aborted:
                w.segment.txn_index.write(w.aborted)

    def _sync_round(self, rnd: _Round) -> None:
        """Second step: fsync what the round wrote if the flush policy says so, and the
        directory if a segment file was created — both before anything is acknowledged."""
        if rnd.sync:
            observer = fsync_observer
            started = time.perf_counter() if observer is not None else 0.0
            for w in rnd.writes:
                if w.parts:
                    w.segment.flush()  # its .txnindex too
            if observer is not None:
                observer(time.perf_counter() - started)
        if rnd.new_segments:
            fsync_dir(self.log.directory)

    async def _commit(self, rnd: _Round) -> None:
        """Loop side, in round order: make the round visible, seal rolled segments, resolve."""
        exc = rnd.future.exception()
        if exc is not None or self.log._failed is not None:
            if exc is not None and self.log._failed is None:
                self.log._failed = exc
                logger.error("log %s: write failed, refusing further appends: %r", self.log.directory, exc)
            self._fail(rnd.items, StorageIOError(f"write to {self.log.directory} failed: {self.log._failed!r}"))
            for s in rnd.new_segments:
                s.close()
            return
        for w in rnd.writes:
            if w.headers:
                w.segment.note_appended(w.position, w.headers, w.bases)
            if w.aborted:
                w.segment.txn_index.entries.extend(w.aborted)
        for s in rnd.new_segments:
            self.log._segments.append(s)
            self.log._bases.append(s.base_offset)
        epochs_changed = False
        if rnd.epochs:
            cache = self.log._leader_epochs
            for epoch, start in rnd.epochs:
                # Re-checked: a leader may have assigned a newer epoch since this round was planned.
                if epoch > cache.latest_epoch and cache.assign(epoch, start, flush=False):
                    epochs_changed = True
        if rnd.sealed or rnd.gap or epochs_changed:
            for s in rnd.sealed:
                s.seal()
            # The recovery point may pass rolled segments (fsynced now) and a gap (this round
            # was fsynced because of it; every earlier byte of the file is covered by that fsync).
            checkpoint = rnd.end_offset if rnd.gap else rnd.new_segments[-1].base_offset if rnd.sealed else None
            try:
                await asyncio.get_running_loop().run_in_executor(
                    None, self._persist, rnd.sealed, checkpoint, self.log._leader_epochs if epochs_changed else None)
            except OSError as err:
                self.log._failed = err
                self._fail(rnd.items, StorageIOError(f"roll or checkpoint of {self.log.directory} failed: {err!r}"))
                return
            if checkpoint is not None:
                self.log._recovery_point = max(self.log._recovery_point, checkpoint)
                self.log._recovery_point_checkpointed = max(self.log._recovery_point_checkpointed, checkpoint)
        if rnd.sync:
            self.log._recovery_point = max(self.log._recovery_point, rnd.end_offset)
        elif self.log.options.flush_policy == "interval":
            self.log._arm_flush_timer()
        for it in rnd.items:
            if not it.future.done():
                it.future.set_result(AppendResult(it.base, it.last))

    def _persist(self, sealed: list[LogSegment], checkpoint: int | None, epochs: LeaderEpochCache | None) -> None:
        """Executor side of a commit: the epoch cache first (rule 5), then fsync rolled segments
        and their indexes, then move the recovery-point checkpoint."""
        if epochs is not None:
            epochs.flush()
        for s in sealed:
            s.flush()
            s.write_indexes(sync=True)
        if checkpoint is not None:
            write_checkpoint(self.log.directory / RECOVERY_POINT_FILE, checkpoint)
