"""``Log``: one partition's log: an ordered list of segments, the last one active.

Kept whole (~630 lines): what is left here is the segment list, the lock-free reads over it and
the changes to it that share the same two locks (roll, truncation, retention, close); appends
(``group_commit``), compaction (``cleaner``), recovery (``recovery``) and the epoch cache
(``leader_epoch``) already live in their own modules.

Theory of operation.
  *Appends* are group-committed by ``storage.group_commit``: input is validated in full (size,
  magic, CRC, record count), queued, given offsets in queue order, written with one ``pwrite``
  and (under the ``fsync`` policy) one fsync per round in an executor thread, and acknowledged
  only when its round commits, in order. Readers never look past a segment's ``size``, which only
  a commit advances, so they never see bytes that are not yet written (nor, under ``fsync``, not
  yet durable).
  *Reads* are synchronous and lock-free: they run on the loop between rounds and see a
  consistent list of segments. They return whole batches starting with the one holding the
  requested offset (at least one batch even when larger than ``max_bytes``, as in Kafka), as
  bytes (``read``) or as a file range for ``sendfile`` (``slice``).
  *Structural changes* (roll, flush, truncation, retention, close) take the write lock, so they
  never interleave with a round. Compaction (``storage.cleaner``) holds only the structure lock
  (which keeps truncation and retention away from the sealed segments it reads), does its heavy
  work in a thread and swaps segment objects on the loop; appends go on meanwhile.

Rules / invariants:
  1. Offsets strictly increase across the log; an appended batch starts at ``log_end_offset``
     (compaction and truncation may leave a gap below it, never data above it).
  2. ``log_start_offset <= log_end_offset``; both persist (log-start checkpoint; the end is
     implied by the data).
  3. The recovery point only advances past data that was fsynced; it is checkpointed when a
     segment rolls (the sealed segment and its indexes are fsynced first), on truncation, and
     on close. Recovery rescans only from the segment holding it.
  4. After an I/O error the log refuses appends (``StorageIOError``) until reopened.
  5. Files of removed or replaced segments stay open ``file_delete_delay_ms`` so in-flight
     ``slice`` users can finish.
  6. The leader-epoch cache (``leader_epochs``, KIP-101) covers exactly the log: appends add the
     epochs of their batches, truncation cuts it from the end, a moving log start from the
     start. Opening rebuilds it from batch headers when the file is missing or corrupt, and
     re-reads the epochs of every segment recovery rescanned (the file may lag the data there).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.records import BatchHeader, decode_records

from .cleaner import CleanResult, LastRecords, clean_log
from .errors import CorruptCheckpointError, InvalidBatchError, LogClosedError, OffsetOutOfRangeError, StorageIOError
from .files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_FILE,
    DELETED_SUFFIX,
    LEADER_EPOCH_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    fsync_dir,
    partition_dir,
    pread_exact,
    read_checkpoint,
    write_checkpoint,
)
from .group_commit import AppendResult, BatchesInput, GroupCommitWriter, validate_batches
from .leader_epoch import LeaderEpochCache
from .options import LogOptions
from .producer_state import ProducerStateManager
from .recovery import LoadResult, load_segments
from .segment import LogSegment
from .txn_index import AbortedTxn, collect_aborted

__all__ = ["Log", "AppendResult", "FileSlice"]

logger = logging.getLogger("groupcoord.storage")


@dataclass(frozen=True, slots=True)
class FileSlice:
    """Whole batches at ``position``..``position + length`` of an open file, for ``os.sendfile``.

    ``fd`` stays valid at least ``file_delete_delay_ms`` after the segment is removed (rule 5).
    """

    fd: int
    path: Path
    position: int
    length: int
    first_offset: int

    def read(self) -> bytes:
        return pread_exact(self.fd, self.length, self.position)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _open_leader_epochs(directory: Path, loaded: LoadResult) -> LeaderEpochCache:
    """The epoch cache of a freshly loaded log (rule 6). Blocking.

    Batches carry their epoch, so the data is the authority: a missing file (logs written
    before epochs were tracked) or a corrupt one is rebuilt from every batch header; otherwise
    only segments recovery rescanned are read again, since a crash may have come between a
    batch's write and the cache's (the file is written before the recovery point moves past
    the batch, so the rescanned segments are enough).
    """
    path = directory / LEADER_EPOCH_FILE
    try:
        cache = LeaderEpochCache.load(path)
    except CorruptCheckpointError as exc:
        msg = f"{exc}; rebuilt it from the batch headers"
        loaded.repairs.append(msg)
        logger.warning("%s", msg)
        cache = LeaderEpochCache(path)
    if cache.dirty:
        scan = loaded.segments
    elif loaded.rescanned_from is not None:
        scan = [s for s in loaded.segments if s.base_offset >= loaded.rescanned_from]
    else:
        scan = []
    for seg in scan:
        for _pos, h, _buf, _off in seg.batches(with_bytes=False):
            if h.partition_leader_epoch > cache.latest_epoch:  # also skips -1 (no epoch)
                cache.assign(h.partition_leader_epoch, h.base_offset, flush=False)
    cache.truncate_from_end(loaded.segments[-1].next_offset, flush=False)
    cache.truncate_from_start(loaded.log_start_offset, flush=False)
    cache.flush()
    return cache


class Log:
    """One partition log. Create with ``Log.open`` (blocking) or ``await Log.open_async``.

    Methods that change structure are coroutines; reads are plain methods. Not thread-safe:
    use it from one event loop.
    """

    def __init__(self, directory: Path, options: LogOptions, loaded: LoadResult, clock: Callable[[], int]) -> None:
        #: ``<root>/<topic>-<partition>``.
        self.directory = directory
        self.options = options
        #: Milliseconds since the epoch; injectable so tests can move time.
        self.clock = clock
        #: All live segments in offset order; the last is active (appended to).
        self._segments: list[LogSegment] = loaded.segments
        #: Base offsets of ``_segments``, for bisect.
        self._bases: list[int] = [s.base_offset for s in self._segments]
        self._log_start_offset = loaded.log_start_offset
        #: Offset below which everything is fsynced (in memory; rule 3 for the file).
        self._recovery_point = loaded.recovery_point
        #: What the recovery-point file on disk says; the cleaner stays below it.
        self._recovery_point_checkpointed = loaded.recovery_point
        self.load_result = loaded
        #: Exclusive operations waiting for the write lock; the writer yields to them.
        self._exclusive_waiters = 0
        #: The append queue and its writer task (``storage.group_commit``).
        self._writer = GroupCommitWriter(self)
        #: Held by the writer for a session of rounds, and by exclusive operations (roll, flush,
        #: truncation, retention, close) through ``_exclusive``.
        self._write_lock = asyncio.Lock()
        #: Held by the cleaner for a whole pass, and by operations that delete or cut sealed
        #: segments (truncation, retention, close) so they never pull a file from under it.
        self._structure_lock = asyncio.Lock()
        self._last_sync_ms = clock()
        self._flush_timer: asyncio.TimerHandle | None = None
        #: The background flush the timer started (kept so it is not garbage-collected).
        self._flush_task: asyncio.Task[None] | None = None
        self._closed = False
        self._failed: BaseException | None = None
        #: Retired segments waiting out ``file_delete_delay_ms``: (timer, finisher).
        self._deferred: list[tuple[asyncio.TimerHandle, Callable[[], None]]] = []
        #: Leader epoch -> start offset (rule 6); the writer adds to it, persisted off the loop.
        self._leader_epochs = _open_leader_epochs(directory, loaded)
        # Only now, with the epoch file caught up with the rescanned segments, may the
        # recovery point move past them.
        self._write_checkpoint(RECOVERY_POINT_FILE, self._recovery_point)
        self._recovery_point_checkpointed = self._recovery_point

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, root: Path | str, topic: str, partition: int, options: LogOptions | None = None, *,
             clock: Callable[[], int] | None = None, high_watermark: int | None = None) -> Log:
        """Open (creating if needed) and recover ``<root>/<topic>-<partition>``. Blocking.
        ``high_watermark``: for producer state recovery rebuilds (``take_replayed_producers``)."""
        options = options or LogOptions()
        clock = clock or _wall_ms
        directory = partition_dir(Path(root), topic, partition)
        loaded = load_segments(directory, index_interval_bytes=options.index_interval_bytes, now_ms=clock(),
                               high_watermark=high_watermark)
        return cls(directory, options, loaded, clock)

    @classmethod
    async def open_async(cls, root: Path | str, topic: str, partition: int, options: LogOptions | None = None, *,
                         clock: Callable[[], int] | None = None) -> Log:
        """``open`` in an executor thread, so recovery does not stall the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: cls.open(root, topic, partition, options, clock=clock))

    def take_replayed_producers(self, high_watermark: int | None) -> ProducerStateManager | None:
        """The producer state recovery rebuilt while replaying the whole log for the ``.txnindex``
        (an unclean restart with markers in rescanned segments), if it used ``high_watermark``
        and nothing was appended since; None otherwise. Handed over once (then forgotten)."""
        loaded = self.load_result
        state, loaded.producers = loaded.producers, None
        if state is None or loaded.producers_high_watermark != high_watermark:
            return None
        if self.log_end_offset != loaded.recovery_point:  # the log end when loaded
            return None
        return state

    # -- state ------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """One past the last offset readers can see (everything written under the policy)."""
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def leader_epochs(self) -> LeaderEpochCache:
        """Leader epoch -> start offset of this log (KIP-101). Read it freely; change it through
        ``assign_leader_epoch``, which persists off the event loop."""
        return self._leader_epochs

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")
        if self._failed is not None:
            raise StorageIOError(f"log {self.directory} failed earlier: {self._failed}")

    # -- appending --------------------------------------------------------------------------
    async def append(self, batches: BatchesInput) -> AppendResult:
        """Append one or more v2 batches (bytes, or a list of batch bytes) as one unit.

        Offsets are assigned here (the batches' base offsets are ignored). Returns when the
        data is written and, under the ``fsync`` policy, fsynced. Raises ``InvalidBatchError``
        or ``RecordTooLargeError`` with nothing appended.
        """
        if self._closed or self._failed is not None:
            self._check_open()
        buf, batches_ = validate_batches(batches, self.options.max_batch_bytes)
        return await self._writer.submit(buf, batches_)

    def append_validated(self, buf: bytearray, header: BatchHeader,
                         aborted: list[AbortedTxn] | None = None) -> asyncio.Future[AppendResult]:
        """Queue one batch its caller has already checked in full (one whole v2 batch, CRC, size
        limit, record count), skipping the second pass and copy ``append`` would make.

        The batch is queued before this returns, so offsets follow call order; the future
        resolves as ``append`` would return. ``buf`` is owned by the log from here on.

        ``aborted``: the ``.txnindex`` entries of the ABORT markers among the batches
        (``txn_index.py`` rule 1), written with them and visible when they are. The caller may
        fill the list after this returns, until it next yields to the loop: the round that
        writes the batch is planned later, by the writer task.
        """
        if self._closed or self._failed is not None:
            self._check_open()
        return self._writer.submit(buf, [(0, header)], aborted=aborted)

    def append_replicated(self, buf: BatchesInput,
                          aborted: list[AbortedTxn] | None = None) -> asyncio.Future[AppendResult]:
        """Append whole v2 batches copied from the leader, keeping their base offsets and leader
        epochs (a follower's log is a byte-for-byte copy of its leader's; KIP-101).

        Checked like ``append`` (whole batches, magic 2, CRC, size) except that compacted batches
        (fewer records than their offset span) are accepted; in addition the first base offset
        must be >= the log end offset and every batch must start above the previous one's last
        offset. Gaps are kept: a compacted leader log has them. Violations raise
        ``InvalidBatchError`` (the start offset is re-checked when the append's round is
        planned, so a conflict with appends still queued fails the future) and nothing is
        appended. Queued before this returns, like ``append_validated``; the log end after it
        is the last batch's last offset + 1. Batches with a newer leader epoch add it to
        ``leader_epochs``. ``aborted`` as for ``append_validated``.
        """
        if self._closed or self._failed is not None:
            self._check_open()
        data, batches = validate_batches(buf, self.options.max_batch_bytes, replicated=True)
        first = batches[0][1].base_offset
        if first < self.log_end_offset:
            raise InvalidBatchError(
                f"replicated append starting at offset {first} overlaps the log, which ends at {self.log_end_offset}")
        return self._writer.submit(data, batches, replicated=True, aborted=aborted)

    async def assign_leader_epoch(self, epoch: int, start_offset: int | None = None) -> bool:
        """Record that leader epoch ``epoch`` starts at ``start_offset`` (default: the log end,
        what a newly elected leader records). Returns whether the cache changed; persisted
        before returning, off the event loop. Taken between write rounds, so no queued batch
        lands between the log end read here and the entry."""
        self._check_open()
        async with self._exclusive():
            start = self.log_end_offset if start_offset is None else start_offset
            changed = self._leader_epochs.assign(epoch, start, flush=False)
            if changed:
                await asyncio.get_running_loop().run_in_executor(None, self._leader_epochs.flush)
            return changed

    @contextlib.asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        """The write lock, for an operation that must not interleave with write rounds; the
        writer stops starting rounds while anyone waits here, so this cannot starve."""
        self._exclusive_waiters += 1
        waiting = True
        try:
            async with self._write_lock:
                self._exclusive_waiters -= 1
                waiting = False
                yield
        finally:
            if waiting:
                self._exclusive_waiters -= 1

    def _arm_flush_timer(self) -> None:
        if self._flush_timer is None and not self._closed:
            loop = asyncio.get_running_loop()

            def fire() -> None:
                self._flush_timer = None
                if not self._closed:
                    self._flush_task = loop.create_task(self._timed_flush())

            self._flush_timer = loop.call_later(self.options.flush_interval_ms / 1000, fire)

    async def _timed_flush(self) -> None:
        try:
            await self.flush()
        except LogClosedError:
            pass
        except Exception as exc:  # noqa: BLE001 - logged; the next append reports the failure
            logger.error("log %s: background flush failed: %r", self.directory, exc)

    async def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point (not checkpointed)."""
        self._check_open()
        async with self._exclusive():
            seg = self._segments[-1]
            end = seg.next_offset
            await asyncio.get_running_loop().run_in_executor(None, seg.flush)
            self._recovery_point = max(self._recovery_point, end)
            self._last_sync_ms = self.clock()

    async def roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the log end (no-op if it is empty)."""
        self._check_open()
        async with self._exclusive():
            return await self._roll_locked()

    async def _roll_locked(self) -> LogSegment:
        seg = self._segments[-1]
        if seg.size == 0:
            return seg
        seg.seal()
        new = LogSegment(self.directory, seg.next_offset, index_interval_bytes=self.options.index_interval_bytes,
                         now_ms=self.clock())

        def work() -> None:
            seg.flush()
            seg.write_indexes(sync=True)
            fsync_dir(self.directory)
            write_checkpoint(self.directory / RECOVERY_POINT_FILE, new.base_offset)

        try:
            await asyncio.get_running_loop().run_in_executor(None, work)
        except OSError as exc:
            new.close()
            self._failed = exc
            raise StorageIOError(f"roll of {self.directory} failed: {exc!r}") from exc
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self._recovery_point = max(self._recovery_point, new.base_offset)
        self._recovery_point_checkpointed = max(self._recovery_point_checkpointed, new.base_offset)
        return new

    # -- reading ----------------------------------------------------------------------------
    def _check_read_offset(self, offset: int) -> bool:
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")
        if offset < self._log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self._log_start_offset}, {self.log_end_offset}] of {self.directory}")
        return offset < self.log_end_offset

    def slice(self, offset: int, max_bytes: int) -> FileSlice | None:
        """File range of whole batches from the one holding ``offset`` (see ``read``)."""
        if not self._check_read_offset(offset):
            return None
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        for seg in self._segments[i:]:
            found = seg.slice(offset, max_bytes)
            if found is not None:
                position, length = found
                first = seg.find(offset, position + 1)
                first_offset = first[1].base_offset if first else offset
                return FileSlice(seg.fd, seg.path, position, length, first_offset)
        return None

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches starting with the one that holds ``offset``.

        As many as fit in ``max_bytes``, but always at least one (so a consumer can make
        progress past a batch bigger than its fetch size, as in Kafka). Only batches from one
        segment are returned; the caller asks again from the next offset. The first batch may
        start below ``offset`` (batches are not split). Reading at the log end returns ``b""``.
        """
        s = self.slice(offset, max_bytes)
        return b"" if s is None else s.read()

    async def read_async(self, offset: int, max_bytes: int) -> bytes:
        """``read`` with the file read in an executor (for cold data)."""
        s = self.slice(offset, max_bytes)
        if s is None:
            return b""
        return await asyncio.get_running_loop().run_in_executor(None, s.read)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of the aborted transactions overlapping
        ``[fetch_offset, upper_bound)``, ordered by first offset, from the ``.txnindex`` files
        (``txn_index.collect_aborted``)."""
        return collect_aborted(self._segments, fetch_offset, upper_bound)

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp`` (Kafka ListOffsets), or
        None if every record is older."""
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")
        for seg in list(self._segments):
            if seg.max_timestamp < timestamp or seg.size == 0:
                continue
            start_offset = max(seg.time_index.lookup_before(timestamp), self._log_start_offset)
            found = seg.find(start_offset)  # not index.lookup: find checks the entry (segment rule 5)
            if found is None:
                continue
            for _pos, h, buf, off in seg.batches(found[0], with_bytes=True):
                if h.base_offset + h.last_offset_delta < self._log_start_offset or h.max_timestamp < timestamp:
                    continue
                for r in decode_records(buf, off, h, check_crc=False):
                    o = h.base_offset + r.offset_delta
                    if o >= self._log_start_offset and r.timestamp(h) >= timestamp:
                        return o
        return None

    # -- truncation and retention -------------------------------------------------------------
    async def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns the new log end.

        By whole batches, so the new end may be below ``offset``. Segments starting at or
        above the cut are deleted; the recovery point is lowered and checkpointed.
        """
        self._check_open()
        if offset < self._log_start_offset:
            raise OffsetOutOfRangeError(f"cannot truncate to {offset}, below log start {self._log_start_offset}")
        async with self._structure_lock, self._exclusive():
            if offset >= self.log_end_offset:
                # No batch to remove, but an epoch entry at the log end may still conflict with
                # the new leader's log: a replica elected leader records its epoch at its log
                # end, and if it appended nothing before the next election, the batches it then
                # copies from the new leader start at that offset with an older epoch. Kafka
                # drops such entries here too (UnifiedLog.truncateTo).
                epochs = self._leader_epochs
                if epochs.truncate_from_end(self.log_end_offset, flush=False):
                    await asyncio.get_running_loop().run_in_executor(None, epochs.flush)
                return self.log_end_offset
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                seg = self._segments.pop()
                self._bases.pop()
                self._retire(seg, delete=True)
            seg = self._segments[-1]
            seg.truncate_to(offset)
            end = self.log_end_offset
            self._recovery_point = min(self._recovery_point, end)
            self._recovery_point_checkpointed = min(self._recovery_point_checkpointed, end)
            cleaner = read_checkpoint(self.directory / CLEANER_OFFSET_FILE)
            rp = self._recovery_point_checkpointed
            epochs = self._leader_epochs
            epochs.truncate_from_end(end, flush=False)

            def work() -> None:
                seg.flush()
                epochs.flush()
                write_checkpoint(self.directory / RECOVERY_POINT_FILE, rp)
                if cleaner is not None and cleaner > seg.base_offset:
                    write_checkpoint(self.directory / CLEANER_OFFSET_FILE, seg.base_offset)

            await asyncio.get_running_loop().run_in_executor(None, work)
            return end

    def _retire(self, seg: LogSegment, *, delete: bool) -> None:
        """Take ``seg`` out of service: rename its files ``.deleted`` (if ``delete``) now, close and
        unlink later (rule 5)."""
        if delete:
            for p in (seg.path, seg.index.path, seg.time_index.path, seg.txn_index.path):
                try:
                    os.replace(p, p.with_name(p.name + DELETED_SUFFIX))
                except FileNotFoundError:
                    pass

        def finish() -> None:
            seg.close()
            if delete:
                for p in (seg.path, seg.index.path, seg.time_index.path, seg.txn_index.path):
                    try:
                        os.unlink(p.with_name(p.name + DELETED_SUFFIX))
                    except FileNotFoundError:
                        pass

        delay = self.options.file_delete_delay_ms / 1000
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            finish()
            return
        if delay <= 0 or self._closed:
            finish()
        else:
            handle = loop.call_later(delay, finish)
            self._deferred.append((handle, finish))

    async def _delete_prefix(self, count: int, new_start: int) -> None:
        """Drop the first ``count`` (sealed) segments and raise the log start to ``new_start``."""
        new_start = max(new_start, self._log_start_offset)
        epochs = self._leader_epochs
        epochs.truncate_from_start(new_start, flush=False)

        def work() -> None:
            # Log start first: if the cache write is lost, opening re-derives it from the start.
            write_checkpoint(self.directory / LOG_START_OFFSET_FILE, new_start)
            epochs.flush()

        await asyncio.get_running_loop().run_in_executor(None, work)
        self._log_start_offset = new_start
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        for seg in doomed:
            self._retire(seg, delete=True)

    async def advance_log_start_offset(self, offset: int) -> None:
        """Raise the log start (Kafka DeleteRecords); whole segments below it are deleted."""
        self._check_open()
        async with self._structure_lock, self._exclusive():
            offset = min(offset, self.log_end_offset)
            if offset <= self._log_start_offset:
                return
            i = bisect.bisect_right(self._bases, offset) - 1
            await self._delete_prefix(max(i, 0), offset)

    async def apply_retention(self) -> int:
        """``cleanup.policy=delete``: drop whole sealed segments past ``retention.ms`` (by their
        largest timestamp) or beyond ``retention.bytes``. Returns how many were deleted."""
        self._check_open()
        o = self.options
        if o.cleanup_policy != "delete":
            return 0
        async with self._structure_lock, self._exclusive():
            sealed = self._segments[:-1]
            now = self.clock()
            count = 0
            if o.retention_ms >= 0:
                for seg in sealed:
                    ts = seg.max_timestamp if seg.max_timestamp >= 0 else seg.created_ms
                    if now - ts > o.retention_ms:
                        count += 1
                    else:
                        break
            if o.retention_bytes >= 0:
                excess = self.size_bytes - o.retention_bytes
                by_size = 0
                for seg in sealed:
                    if excess - seg.size < 0:
                        break
                    excess -= seg.size
                    by_size += 1
                count = max(count, by_size)
            if count:
                await self._delete_prefix(count, self._segments[count].base_offset)
            return count

    # -- compaction ---------------------------------------------------------------------------
    async def clean(self, *, force: bool = False, max_offset: int | None = None,
                    last_records: Callable[[], LastRecords] | None = None) -> CleanResult | None:
        """Run one compaction pass if the dirty ratio calls for it (or ``force``), below
        ``max_offset`` (the last stable offset) if given, keeping the last batch of the active
        producers ``last_records`` returns. See ``storage.cleaner``."""
        self._check_open()
        return await clean_log(self, force=force, max_offset=max_offset, last_records=last_records)

    # -- lifecycle ----------------------------------------------------------------------------
    def _write_checkpoint(self, name: str, value: int) -> None:
        write_checkpoint(self.directory / name, value)

    async def close(self) -> None:
        """Flush everything, write indexes and checkpoints, then the clean-shutdown marker."""
        if self._closed:
            return
        async with self._structure_lock, self._exclusive():
            self._closed = True
            if self._flush_timer is not None:
                self._flush_timer.cancel()
            healthy = self._failed is None

            def work() -> None:
                if healthy:
                    # Sealed segments had their indexes written when they rolled, were rebuilt
                    # or were swapped in by the cleaner; only the active one is behind.
                    active = self._segments[-1]
                    active.flush()
                    active.seal()
                    active.write_indexes(sync=True)
                    write_checkpoint(self.directory / RECOVERY_POINT_FILE, self.log_end_offset)
                    write_checkpoint(self.directory / LOG_START_OFFSET_FILE, self._log_start_offset)
                    self._leader_epochs.flush()  # a no-op unless a write of it failed earlier
                    (self.directory / CLEAN_SHUTDOWN_FILE).write_bytes(b"")
                    fsync_dir(self.directory)
                for s in self._segments:
                    s.close()

            await asyncio.get_running_loop().run_in_executor(None, work)
            self._finish_deferred()

    def _finish_deferred(self) -> None:
        for handle, finish in self._deferred:
            handle.cancel()
            finish()
        self._deferred = []

    def abort(self) -> None:
        """Drop the log as a crash would: close file descriptors, write nothing (for tests and
        for giving up on a failed log). Call it with no append in flight: a write already in
        the executor could otherwise land on a reused descriptor number."""
        self._closed = True
        if self._flush_timer is not None:
            self._flush_timer.cancel()
        for s in self._segments:
            s.close()
        self._finish_deferred()  # retired segments: close their descriptors too

    async def delete(self) -> None:
        """Close the log and remove its directory."""
        if not self._closed:
            self.abort()
        await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, self.directory, True)
