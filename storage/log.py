"""``Log``: one partition's log: an ordered list of segments, the last one active.

Theory of operation.
  *Appends* are group-committed. ``append`` validates the caller's batches in full (size, magic,
  CRC, record count) and queues them with a future. One writer task per log drains the queue a
  round at a time: it assigns offsets in queue order by rewriting each batch's base offset (the
  CRC does not cover it), rolls to a new segment where ``segment.bytes``/``segment.ms`` say so,
  then writes everything with one ``pwrite`` per segment and, under the ``fsync`` policy, one
  fsync, all in an executor thread so the event loop keeps accepting appends meanwhile. Only then,
  back on the loop, are sizes, indexes and the log end offset advanced and the futures resolved.
  So offsets follow queue order, an append returns only once durable under the policy, and
  readers, who never look past a segment's ``size``, never see unwritten bytes.
  *Reads* are synchronous and lock-free: they run on the loop between rounds and see a
  consistent list of segments. They return whole batches starting with the one holding the
  requested offset (at least one batch even when larger than ``max_bytes``, as in Kafka), as
  bytes (``read``) or as a file range for ``sendfile`` (``slice``).
  *Structural changes* (roll, truncation, retention, compaction swaps, close) take the write
  lock, so they never interleave with a round. Compaction (``storage.cleaner``) does its heavy
  work in a thread on sealed segments and only swaps segment objects on the loop.

Rules / invariants:
  1. Offsets strictly increase across the log; an appended batch starts one past the last
     offset of the log (truncation leaves the end at a batch boundary).
  2. ``log_start_offset <= log_end_offset``; both persist (log-start checkpoint; the end is
     implied by the data).
  3. The recovery point only advances past data that was fsynced; it is checkpointed when a
     segment rolls (the sealed segment and its indexes are fsynced first), on truncation, and
     on close. Recovery rescans only from the segment holding it.
  4. After an I/O error the log refuses appends (``StorageIOError``) until reopened.
  5. Files of removed or replaced segments stay open ``file_delete_delay_ms`` so in-flight
     ``slice`` users can finish.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

from protocol.records import (
    LOG_OVERHEAD,
    BatchHeader,
    CorruptBatchError,
    compute_crc,
    decode_records,
    iter_batch_positions,
    set_base_offset,
)

from .errors import (
    InvalidBatchError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageIOError,
)
from .files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_FILE,
    DELETED_SUFFIX,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    fsync_dir,
    partition_dir,
    read_checkpoint,
    write_checkpoint,
)
from .options import LogOptions
from .recovery import LoadResult, load_segments
from .segment import MAX_SEGMENT_POSITION, LogSegment

__all__ = ["Log", "AppendResult", "FileSlice"]

logger = logging.getLogger("groupcoord.storage")

BatchesInput = bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview]


class AppendResult(NamedTuple):
    """Offsets assigned to one ``append`` call (inclusive)."""

    base_offset: int
    last_offset: int


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
        from .files import pread_exact

        return pread_exact(self.fd, self.length, self.position)


class _Pending:
    __slots__ = ("buf", "batches", "future", "base", "last")

    def __init__(self, buf: bytearray, batches: list[tuple[int, BatchHeader]], future: asyncio.Future[AppendResult]):
        self.buf = buf
        self.batches = batches
        self.future = future
        self.base = -1
        self.last = -1


class _Write:
    __slots__ = ("segment", "position", "parts", "headers")

    def __init__(self, segment: LogSegment, position: int) -> None:
        self.segment = segment
        self.position = position
        self.parts: list[memoryview] = []
        self.headers: list[BatchHeader] = []


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


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
        self._pending: list[_Pending] = []
        self._writer: asyncio.Task[None] | None = None
        #: Held by a write round and by structural changes of the tail (roll, truncation, close).
        self._write_lock = asyncio.Lock()
        #: Held by the cleaner for a whole pass, and by operations that delete or cut sealed
        #: segments (truncation, retention, close) so they never pull a file from under it.
        self._structure_lock = asyncio.Lock()
        self._last_sync_ms = clock()
        self._flush_timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._failed: BaseException | None = None
        #: Retired segments waiting out ``file_delete_delay_ms``: (timer, finisher).
        self._deferred: list[tuple[asyncio.TimerHandle, Callable[[], None]]] = []
        self._write_checkpoint(RECOVERY_POINT_FILE, self._recovery_point)
        self._recovery_point_checkpointed = self._recovery_point

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, root: Path | str, topic: str, partition: int, options: LogOptions | None = None, *,
             clock: Callable[[], int] | None = None) -> Log:
        """Open (creating if needed) and recover ``<root>/<topic>-<partition>``. Blocking."""
        options = options or LogOptions()
        clock = clock or _wall_ms
        directory = partition_dir(Path(root), topic, partition)
        loaded = load_segments(directory, index_interval_bytes=options.index_interval_bytes, now_ms=clock())
        return cls(directory, options, loaded, clock)

    @classmethod
    async def open_async(cls, root: Path | str, topic: str, partition: int, options: LogOptions | None = None, *,
                         clock: Callable[[], int] | None = None) -> Log:
        """``open`` in an executor thread, so recovery does not stall the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: cls.open(root, topic, partition, options, clock=clock))

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

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")
        if self._failed is not None:
            raise StorageIOError(f"log {self.directory} failed earlier: {self._failed}")

    # -- appending --------------------------------------------------------------------------
    def _validate(self, data: BatchesInput) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
        if isinstance(data, (bytes, bytearray, memoryview)):
            buf = bytearray(data)
        else:
            buf = bytearray(b"".join(data))
        if not buf:
            raise InvalidBatchError("append of zero bytes")
        batches: list[tuple[int, BatchHeader]] = []
        end = 0
        limit = self.options.max_batch_bytes
        try:
            for pos, h in iter_batch_positions(buf):
                size = LOG_OVERHEAD + h.batch_length
                if size > limit:
                    raise RecordTooLargeError(f"batch at byte {pos} is {size} bytes, over max_batch_bytes={limit}")
                if h.records_count < 1 or h.last_offset_delta != h.records_count - 1:
                    raise InvalidBatchError(
                        f"batch at byte {pos}: {h.records_count} records but last offset delta {h.last_offset_delta}")
                if compute_crc(buf, pos, size) != h.crc:
                    raise InvalidBatchError(f"batch at byte {pos}: CRC mismatch")
                batches.append((pos, h))
                end = pos + size
        except CorruptBatchError as exc:
            raise InvalidBatchError(str(exc)) from None
        if end != len(buf):
            raise InvalidBatchError(f"{len(buf) - end} trailing bytes after the last whole batch at byte {end}")
        return buf, batches

    async def append(self, batches: BatchesInput) -> AppendResult:
        """Append one or more v2 batches (bytes, or a list of batch bytes) as one unit.

        Offsets are assigned here (the batches' base offsets are ignored). Returns when the
        data is written and, under the ``fsync`` policy, fsynced. Raises ``InvalidBatchError``
        or ``RecordTooLargeError`` with nothing appended.
        """
        self._check_open()
        buf, parsed = self._validate(batches)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[AppendResult] = loop.create_future()
        self._pending.append(_Pending(buf, parsed, fut))
        if self._writer is None:
            self._writer = loop.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self._pending:
                async with self._write_lock:
                    if not self._pending:
                        break
                    items, self._pending = self._pending, []
                    await self._round(items)
        finally:
            self._writer = None

    def _should_roll(self, seg: LogSegment, pos: int, first_ts: int | None, h: BatchHeader, next_off: int) -> bool:
        if pos == 0:
            return False
        o = self.options
        size = LOG_OVERHEAD + h.batch_length
        if pos + size > o.segment_bytes or pos + size > MAX_SEGMENT_POSITION:
            return True
        if next_off + h.last_offset_delta - seg.base_offset > MAX_SEGMENT_POSITION:
            return True  # relative offsets are int32 in the index
        if first_ts is not None and first_ts >= 0:
            return h.max_timestamp - first_ts > o.segment_ms
        return self.clock() - seg.created_ms > o.segment_ms

    async def _round(self, items: list[_Pending]) -> None:
        if self._closed or self._failed is not None:
            err = LogClosedError("log closed") if self._closed else StorageIOError(str(self._failed))
            for it in items:
                if not it.future.done():
                    it.future.set_exception(err)
            return
        seg = self._segments[-1]
        pos = seg.size
        next_off = seg.next_offset
        first_ts = seg.first_batch_timestamp
        write = _Write(seg, pos)
        writes = [write]
        sealed: list[LogSegment] = []
        new_segments: list[LogSegment] = []
        now = self.clock()
        for it in items:
            view = memoryview(it.buf)
            it.base = next_off
            for bpos, h in it.batches:
                if self._should_roll(seg, pos, first_ts, h, next_off):
                    seg.seal()
                    sealed.append(seg)
                    seg = LogSegment(self.directory, next_off, index_interval_bytes=self.options.index_interval_bytes,
                                     now_ms=now)
                    new_segments.append(seg)
                    pos, first_ts = 0, None
                    write = _Write(seg, 0)
                    writes.append(write)
                if first_ts is None:
                    first_ts = h.max_timestamp
                set_base_offset(it.buf, bpos, next_off)
                size = LOG_OVERHEAD + h.batch_length
                write.parts.append(view[bpos : bpos + size])
                write.headers.append(h._replace(base_offset=next_off))
                next_off += h.last_offset_delta + 1
                pos += size
            it.last = next_off - 1
        policy = self.options.flush_policy
        sync = policy == "fsync" or (policy == "interval" and now - self._last_sync_ms >= self.options.flush_interval_ms)
        checkpoint = new_segments[-1].base_offset if new_segments else None
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self._write_round, writes, sealed, sync, checkpoint)
        except BaseException as exc:  # noqa: BLE001 - every appender must learn of it
            self._failed = exc
            logger.error("log %s: write failed, refusing further appends: %r", self.directory, exc)
            err = StorageIOError(f"write to {self.directory} failed: {exc!r}")
            for it in items:
                if not it.future.done():
                    it.future.set_exception(err)
            for s in new_segments:
                s.close()
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for w in writes:
            if w.headers:
                w.segment.note_appended(w.position, w.headers)
        for s in new_segments:
            self._segments.append(s)
            self._bases.append(s.base_offset)
        if checkpoint is not None:
            self._recovery_point = max(self._recovery_point, checkpoint)
            self._recovery_point_checkpointed = max(self._recovery_point_checkpointed, checkpoint)
        if sync:
            self._recovery_point = next_off
            self._last_sync_ms = now
        elif policy == "interval":
            self._arm_flush_timer()
        for it in items:
            if not it.future.done():
                it.future.set_result(AppendResult(it.base, it.last))

    def _write_round(self, writes: list[_Write], sealed: list[LogSegment], sync: bool, checkpoint: int | None) -> None:
        """Executor side of a round: write, seal rolled segments, fsync."""
        for w in writes:
            if w.parts:
                w.segment.write_at(w.position, b"".join(w.parts) if len(w.parts) > 1 else w.parts[0])
        for s in sealed:
            s.flush()
            s.write_indexes(sync=True)
        if sync:
            writes[-1].segment.flush()
            for w in writes[:-1]:
                if w.segment not in sealed:
                    w.segment.flush()
        if checkpoint is not None:
            fsync_dir(self.directory)  # the new segment files' directory entries
            write_checkpoint(self.directory / RECOVERY_POINT_FILE, checkpoint)

    def _arm_flush_timer(self) -> None:
        if self._flush_timer is None and not self._closed:
            loop = asyncio.get_running_loop()

            def fire() -> None:
                self._flush_timer = None
                if not self._closed:
                    loop.create_task(self._timed_flush())

            self._flush_timer = loop.call_later(self.options.flush_interval_ms / 1000, fire)

    async def _timed_flush(self) -> None:
        try:
            await self.flush()
        except Exception as exc:  # noqa: BLE001 - logged; the next append reports the failure
            logger.error("log %s: background flush failed: %r", self.directory, exc)

    async def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point (not checkpointed)."""
        self._check_open()
        async with self._write_lock:
            seg = self._segments[-1]
            end = seg.next_offset
            await asyncio.get_running_loop().run_in_executor(None, seg.flush)
            self._recovery_point = max(self._recovery_point, end)
            self._last_sync_ms = self.clock()

    async def roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the log end (no-op if it is empty)."""
        self._check_open()
        async with self._write_lock:
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

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp`` (Kafka ListOffsets), or
        None if every record is older."""
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")
        for seg in list(self._segments):
            if seg.max_timestamp < timestamp or seg.size == 0:
                continue
            start_offset = max(seg.time_index.lookup_before(timestamp), self._log_start_offset)
            _o, start_pos = seg.index.lookup(start_offset)
            for _pos, h, buf, off in seg.batches(start_pos, with_bytes=True):
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
        async with self._structure_lock, self._write_lock:
            if offset >= self.log_end_offset:
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

            def work() -> None:
                seg.flush()
                write_checkpoint(self.directory / RECOVERY_POINT_FILE, rp)
                if cleaner is not None and cleaner > seg.base_offset:
                    write_checkpoint(self.directory / CLEANER_OFFSET_FILE, seg.base_offset)

            await asyncio.get_running_loop().run_in_executor(None, work)
            return end

    def _retire(self, seg: LogSegment, *, delete: bool) -> None:
        """Take ``seg`` out of service: rename its files ``.deleted`` (if ``delete``) now, close and
        unlink later (rule 5)."""
        if delete:
            for p in (seg.path, seg.index.path, seg.time_index.path):
                try:
                    os.replace(p, p.with_name(p.name + DELETED_SUFFIX))
                except FileNotFoundError:
                    pass

        def finish() -> None:
            seg.close()
            if delete:
                for p in (seg.path, seg.index.path, seg.time_index.path):
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
        await asyncio.get_running_loop().run_in_executor(
            None, write_checkpoint, self.directory / LOG_START_OFFSET_FILE, new_start)
        self._log_start_offset = new_start
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        for seg in doomed:
            self._retire(seg, delete=True)

    async def advance_log_start_offset(self, offset: int) -> None:
        """Raise the log start (Kafka DeleteRecords); whole segments below it are deleted."""
        self._check_open()
        async with self._structure_lock, self._write_lock:
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
        async with self._structure_lock, self._write_lock:
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
    async def clean(self, *, force: bool = False) -> object | None:
        """Run one compaction pass if the dirty ratio calls for it (or ``force``). See ``storage.cleaner``."""
        from .cleaner import clean_log

        self._check_open()
        return await clean_log(self, force=force)

    # -- lifecycle ----------------------------------------------------------------------------
    def _write_checkpoint(self, name: str, value: int) -> None:
        write_checkpoint(self.directory / name, value)

    async def close(self) -> None:
        """Flush everything, write indexes and checkpoints, then the clean-shutdown marker."""
        if self._closed:
            return
        async with self._structure_lock, self._write_lock:
            self._closed = True
            if self._flush_timer is not None:
                self._flush_timer.cancel()
            healthy = self._failed is None

            def work() -> None:
                if healthy:
                    active = self._segments[-1]
                    active.flush()
                    active.seal()
                    for s in self._segments:
                        s.write_indexes(sync=True)
                    write_checkpoint(self.directory / RECOVERY_POINT_FILE, self.log_end_offset)
                    write_checkpoint(self.directory / LOG_START_OFFSET_FILE, self._log_start_offset)
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
        """Drop the log as a crash would: close file descriptors, write nothing (for tests)."""
        self._closed = True
        if self._flush_timer is not None:
            self._flush_timer.cancel()
        for s in self._segments:
            s.close()
        for handle, finish in self._deferred:
            handle.cancel()
        self._deferred = []

    async def delete(self) -> None:
        """Close the log and remove its directory."""
        if not self._closed:
            self.abort()
        await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, self.directory, True)
