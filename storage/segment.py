"""``LogSegment``: one ``.log`` file of concatenated v2 batches plus its two sparse indexes and its
transaction index (``txn_index.py``).

Kept whole (~500 lines): lookups, appends, recovery and truncation all read and set the same
per-segment state (size, next offset, both indexes, the largest timestamp), and the batch
scanner ``FileScan`` shares the recovery loop's header layout.

A segment with base offset ``B`` holds batches whose offsets are >= ``B`` and below the next
segment's base offset. Its bytes are exactly Kafka's on-disk format, so any Kafka tool (and our
pipeline) can read the file.

Theory of operation: the segment never decides anything about offsets or durability; the ``Log``
plans each group-commit round, writes the bytes at ``size`` (``write_at``, called off the event
loop), and only after the write succeeded calls ``note_appended`` on the loop, which advances
``size``/``next_offset`` and adds index entries. Readers never look beyond ``size``, so they can
never see bytes that are still being written. Lookups go index entry -> forward scan of batch
headers read in chunks.

Rules (recovery and compaction rely on them):
  1. ``size`` is the end of the last complete batch known to be written; bytes past it are
     garbage to be overwritten or truncated.
  2. Within a segment batch offsets strictly increase; for batches at or above the recovery point
     (written by ``append``, never by the cleaner) each batch starts exactly one past the previous
     batch's last offset. (A replicated append may leave a gap, as the leader's log has one; its
     round is fsynced and moves the recovery-point checkpoint past the gap, see group_commit.) ``recover`` enforces both and truncates at the first batch that breaks
     them, or has a bad size, magic or CRC.
  3. Index files are rewritten whole, atomically, when the segment is sealed (rolled), closed or
     rebuilt; indexes of a segment that ``recover`` scanned are rebuilt from the scan.
  4. A file position fits in int32 (the index format), so a segment never grows past 2 GiB.
  5. Index files carry no checksum, so a loaded index is checked where it is used: ``load_state``
     keeps it only if its last entries name real batches and the tail scans as whole batches,
     and ``find`` checks the entry it starts from; a wrong entry there rebuilds the offset index
     from the batches. An index may make a lookup faster, never change its answer. (The time
     index's inner entries are trusted as Kafka trusts them: checking them means a scan.)
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c as _crc32c

from protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    CorruptBatchError,
    read_batch_header,
)

from .files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, pread_exact, segment_path
from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .txn_index import TransactionIndex

__all__ = ["LogSegment", "SegmentRecovery", "scan_file", "FileScan", "MAX_SEGMENT_POSITION"]

logger = logging.getLogger("groupcoord.storage")

#: Rule 4: the index stores positions as int32.
MAX_SEGMENT_POSITION = (1 << 31) - 1
#: Read granularity for scans: 1 MiB amortises the syscall and Python-loop cost per read while
#: keeping memory per scan small.
SCAN_CHUNK_BYTES = 1 << 20
_PREFIX = struct.Struct(">qi")
#: The v2 batch header as flat fields (same layout as ``protocol.records``), for the recovery loop.
_HEADER = struct.Struct(">qiibIhiqqqhii")
#: The CRC covers the batch from its attributes field (byte 21) to the end.
_CRC_START = 21
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD


class FileScan:
    """Walk the complete batches of a file region, reading in big chunks.

    Iterating yields ``(position, header, buffer, buffer_offset)``; when ``with_bytes`` the whole
    batch is in ``buffer`` at ``buffer_offset``, otherwise at least its header. After iteration
    ``end`` is the position after the last batch yielded and ``problem`` says why the walk
    stopped early (``None`` at a clean end of region).
    """

    def __init__(self, fd: int, start: int, end: int, *, with_bytes: bool, chunk: int = SCAN_CHUNK_BYTES) -> None:
        self.fd, self.start, self.limit, self.with_bytes, self.chunk = fd, start, end, with_bytes, chunk
        self.end = start
        self.problem: str | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader, bytes, int]]:
        fd, limit = self.fd, self.limit
        unpack, new_header = _HEADER.unpack_from, tuple.__new__  # hot loop: no keyword constructor
        pos = self.start
        buf = b""
        buf_start = pos
        while pos < limit:
            avail = buf_start + len(buf) - pos
            if avail < BATCH_HEADER_SIZE:
                buf = pread_exact(fd, min(self.chunk, limit - pos), pos)
                buf_start = pos
                avail = len(buf)
                if avail < LOG_OVERHEAD:
                    self.problem = f"{avail} trailing bytes, less than a batch prefix"
                    return
            off = pos - buf_start
            _base, length = _PREFIX.unpack_from(buf, off)
            if length < _MIN_BATCH_LENGTH:
                self.problem = f"batch length {length} too small"
                return
            size = LOG_OVERHEAD + length
            if pos + size > limit:
                self.problem = f"batch of {size} bytes runs past the end of the file"
                return
            if avail < BATCH_HEADER_SIZE or (self.with_bytes and avail < size):
                buf = pread_exact(fd, max(self.chunk, size) if self.with_bytes else self.chunk, pos)
                buf_start, off = pos, 0
                if len(buf) < min(size, BATCH_HEADER_SIZE) or (self.with_bytes and len(buf) < size):
                    self.problem = "short read"
                    return
            fields = unpack(buf, off)
            if fields[3] != MAGIC_V2:
                self.problem = f"unsupported magic {fields[3]}"
                return
            yield pos, new_header(BatchHeader, fields), buf, off
            pos += size
            self.end = pos


def scan_file(fd: int, start: int, end: int, *, with_bytes: bool = False) -> FileScan:
    return FileScan(fd, start, end, with_bytes=with_bytes)


@dataclass(slots=True)
class SegmentRecovery:
    """What ``LogSegment.recover`` found."""

    valid_bytes: int
    truncated_bytes: int
    dropped_batches: int
    reason: str | None
    batches: int


class LogSegment:
    """One segment. Not thread-safe; the owning ``Log`` serialises structural changes."""

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int,
                 suffix: str = LOG_SUFFIX) -> None:
        self.directory = directory
        #: Offset <= every offset in this segment and > every offset of earlier segments.
        self.base_offset = base_offset
        self.path = segment_path(directory, base_offset, suffix)
        self.index = OffsetIndex(segment_path(directory, base_offset, INDEX_SUFFIX), base_offset)
        self.time_index = TimeIndex(segment_path(directory, base_offset, TIME_INDEX_SUFFIX), base_offset)
        #: Aborted transactions whose marker is here; loaded now (the file exists only once one is).
        self.txn_index = TransactionIndex(segment_path(directory, base_offset, TXN_INDEX_SUFFIX))
        self.index_interval_bytes = index_interval_bytes
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        #: Rule 1: end of the last complete, written batch.
        self.size = os.fstat(self.fd).st_size
        #: One past the last offset in the segment (``base_offset`` when empty).
        self.next_offset = base_offset
        #: Largest batch max-timestamp seen, and the last offset of the first batch reaching it.
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        #: Max timestamp of the first batch: the reference for time-based rolling (Kafka does
        #: the same so a segment's age follows record time, not wall-clock time of the broker).
        self.first_batch_timestamp: int | None = None
        self.created_ms = now_ms
        self._bytes_since_index = 0
        self.closed = False

    # -- appending --------------------------------------------------------------------------
    def write_at(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``position`` (runs off the event loop). Does not change ``size``."""
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, position)
            view = view[n:]
            position += n

    def note_appended(self, position: int, headers: list[BatchHeader], bases: list[int] | None = None) -> None:
        """Account for batches now written at ``position`` onward; called in log order.

        ``bases`` are the batches' base offsets when they differ from ``headers`` (offsets were
        assigned after the headers were parsed).
        """
        interval = self.index_interval_bytes
        since = self._bytes_since_index
        max_ts = self.max_timestamp
        if self.first_batch_timestamp is None and headers:
            self.first_batch_timestamp = headers[0].max_timestamp
        last = self.next_offset - 1
        for i, h in enumerate(headers):
            last = (h.base_offset if bases is None else bases[i]) + h.last_offset_delta
            if h.max_timestamp > max_ts:
                max_ts = self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = last
            if since > interval:
                self.index.append(last, position)
                self.time_index.maybe_append(max_ts, self.offset_of_max_timestamp)
                since = 0
            size = LOG_OVERHEAD + h.batch_length
            position += size
            since += size
        self._bytes_since_index = since
        self.next_offset = last + 1
        self.size = position

    def seal(self) -> None:
        """The segment stops being active: record its max timestamp in the time index."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # -- reading ----------------------------------------------------------------------------
    def find(self, offset: int, max_position: int | None = None) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset`` (and starts below ``max_position``).

        The index entry used is checked on the way (rule 5): the scan must start with the batch
        it names. If it does not, the index is rebuilt from the batches and the lookup repeated.
        """
        limit = self.size if max_position is None else min(max_position, self.size)
        indexed, start = self.index.lookup(offset)
        # Position 0 is always a batch boundary, whatever the entry says.
        verified = start == 0
        for pos, header, _b, _off in FileScan(self.fd, start, limit, with_bytes=False, chunk=1 << 16):
            last = header.base_offset + header.last_offset_delta
            if not verified:
                if last != indexed:
                    break
                verified = True
            if last >= offset:
                return pos, header
        if verified or start >= limit:
            return None
        if limit < self.size and self._names_batch(start, indexed):
            return None  # the entry is right: its batch only ends past ``max_position``
        self._index_was_wrong(indexed, start)
        _o, start = self.index.lookup(offset)
        for pos, header, _b, _off in FileScan(self.fd, start, limit, with_bytes=False, chunk=1 << 16):
            if header.base_offset + header.last_offset_delta >= offset:
                return pos, header
        return None

    def _names_batch(self, position: int, last_offset: int) -> bool:
        """Whether a whole batch with last offset ``last_offset`` starts at ``position``."""
        for _pos, h, _b, _off in FileScan(self.fd, position, self.size, with_bytes=False, chunk=1 << 16):
            return h.base_offset + h.last_offset_delta == last_offset
        return False

    def _index_was_wrong(self, indexed: int, position: int) -> None:
        """An index entry named a batch that is not there (the file was damaged after it was
        written, or is not this segment's): rebuild the index from the batches, once, and write
        it back so the next start does not trust the bad file again."""
        logger.warning("%s: index entry (offset %d, byte %d) does not point at that batch; rebuilt the index "
                       "from the log", self.index.path, indexed, position)
        self.index.clear()
        interval, since, end = self.index_interval_bytes, 0, 0
        for pos, h, _b, _off in FileScan(self.fd, 0, self.size, with_bytes=False):
            if since > interval:  # the rule of note_appended and recover
                self.index.append(h.base_offset + h.last_offset_delta, pos)
                since = 0
            end = pos + LOG_OVERHEAD + h.batch_length
            since += LOG_OVERHEAD + h.batch_length
        if end == self.size:
            self._bytes_since_index = since
        try:
            self.index.write(sync=False)
        except OSError as exc:  # the rebuilt index still serves from memory
            logger.warning("%s: could not rewrite the index: %r", self.index.path, exc)

    def slice(self, offset: int, max_bytes: int, max_position: int | None = None) -> tuple[int, int] | None:
        """``(position, length)`` of whole batches from the one holding ``offset``: as many as fit
        in ``max_bytes``, but at least one."""
        limit = self.size if max_position is None else min(max_position, self.size)
        found = self.find(offset, limit)
        if found is None:
            return None
        start, first = found
        end = start + LOG_OVERHEAD + first.batch_length
        budget_end = start + max(max_bytes, 0)
        if end < budget_end and end < limit:
            scan = FileScan(self.fd, end, min(limit, budget_end), with_bytes=False,
                            chunk=min(max(budget_end - end, BATCH_HEADER_SIZE), SCAN_CHUNK_BYTES))
            for pos, h, _b, _off in scan:
                end = pos + LOG_OVERHEAD + h.batch_length
        return start, end - start

    def read_bytes(self, position: int, length: int) -> bytes:
        return pread_exact(self.fd, length, position)

    def batches(self, start: int = 0, end: int | None = None, *, with_bytes: bool = True) -> FileScan:
        return FileScan(self.fd, start, self.size if end is None else end, with_bytes=with_bytes)

    # -- recovery ---------------------------------------------------------------------------
    def recover(self, *, expected_next: int | None, strict_from: int | None) -> SegmentRecovery:
        """Validate every batch, rebuild both indexes, truncate at the first invalid byte.

        ``expected_next`` is the offset the first batch may not go below (the previous segment's
        end); ``strict_from`` is the recovery point: once the expected next offset reaches it,
        batches must be exactly contiguous (rule 2).

        This is the recovery hot loop, so it reads 1 MiB chunks and works on raw ``struct``
        tuples and the C CRC, without building a header object or a generator frame per batch;
        index entries follow the same rule as ``note_appended``.
        """
        self.index.clear()
        self.time_index.clear()
        fd = self.fd
        file_size = os.fstat(fd).st_size
        expected = max(self.base_offset, expected_next if expected_next is not None else self.base_offset)
        strict_at = strict_from if strict_from is not None else 1 << 63
        interval = self.index_interval_bytes
        index_append = self.index.append
        time_append = self.time_index.maybe_append
        unpack = _HEADER.unpack_from
        crc32c = _crc32c
        max_ts, offset_of_max = -1, self.base_offset
        first_ts: int | None = None
        since = 0
        count = 0
        reason: str | None = None
        pos = 0
        buf = b""
        view = memoryview(buf)
        buf_start = 0
        while True:
            off = pos - buf_start
            avail = len(buf) - off
            if avail < BATCH_HEADER_SIZE:
                if pos >= file_size:
                    break
                buf = pread_exact(fd, SCAN_CHUNK_BYTES, pos)
                view = memoryview(buf)
                buf_start, off, avail = pos, 0, len(buf)
                if avail < BATCH_HEADER_SIZE:
                    reason = f"{avail} trailing bytes, less than a batch header"
                    break
            (base, length, _epoch, magic, crc, _attrs, lod, _bts, mts, _pid, _pep, _seq,
             _count) = unpack(buf, off)
            if length < _MIN_BATCH_LENGTH:
                reason = f"batch length {length} too small"
                break
            size = LOG_OVERHEAD + length
            if size > avail:
                if pos + size > file_size:
                    reason = f"batch of {size} bytes runs past the end of the file"
                    break
                buf = pread_exact(fd, max(SCAN_CHUNK_BYTES, size), pos)
                view = memoryview(buf)
                buf_start = pos
                continue
            if magic != MAGIC_V2:
                reason = f"unsupported magic {magic}"
                break
            if base < expected or (expected >= strict_at and base != expected):
                reason = f"batch base offset {base} where {expected} was expected"
                break
            if lod < 0 or base + lod - self.base_offset > MAX_SEGMENT_POSITION:
                reason = f"last offset {base + lod} impossible in a segment based at {self.base_offset}"
                break
            if crc32c(view[off + _CRC_START : off + size]) != crc:
                reason = "CRC mismatch"
                break
            last = base + lod
            if first_ts is None:
                first_ts = mts
            if mts > max_ts:
                max_ts, offset_of_max = mts, last
            if since > interval:
                index_append(last, pos)
                time_append(max_ts, offset_of_max)
                since = 0
            since += size
            pos += size
            count += 1
            expected = last + 1
        self.size = pos
        self.next_offset = expected if count else self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, offset_of_max
        self.first_batch_timestamp = first_ts
        self._bytes_since_index = since
        truncated = file_size - pos
        dropped = 0
        if truncated:
            dropped = _count_plausible_batches(fd, pos, file_size)
            os.ftruncate(fd, pos)
        return SegmentRecovery(pos, truncated, dropped, reason if truncated else None, count)

    def load_state(self, *, indexes_trusted: bool) -> bool:
        """Restore in-memory state of a segment whose data needs no validation.

        Loads the index files (if ``indexes_trusted``) and scans only from the last index entry
        to the end. Returns False if the index files were unusable; the caller then runs
        ``recover``.
        """
        self.size = os.fstat(self.fd).st_size
        if not indexes_trusted or not self.index.load(self.size) or not self.time_index.load():
            return False
        indexed, start = self.index.last_entry()
        last = self.time_index.last_entry()
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        self.next_offset = self.base_offset
        self._bytes_since_index = self.size - start
        first = self.read_first_header()
        if first is not None:
            self.first_batch_timestamp = first.max_timestamp
        scan = FileScan(self.fd, start, self.size, with_bytes=False)
        verified = start == 0
        for _pos, h, _b, _off in scan:
            if not verified:
                if h.base_offset + h.last_offset_delta != indexed:
                    return False  # the last entry names a batch that is not there (rule 5)
                verified = True
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset + h.last_offset_delta
            self.next_offset = h.base_offset + h.last_offset_delta + 1
        if scan.problem is not None or not verified:
            return False  # the index pointed at garbage, or the tail is not whole batches
        if last is not None:
            # The time index's last entry sets the segment's largest timestamp (retention by
            # time reads it): it must name a batch of this segment with that timestamp.
            t, o = last
            found = self.find(o) if o < self.next_offset else None
            if found is None or found[1].base_offset + found[1].last_offset_delta != o or found[1].max_timestamp != t:
                return False
        return True

    def read_first_header(self) -> BatchHeader | None:
        data = self.read_bytes(0, BATCH_HEADER_SIZE)
        try:
            return read_batch_header(data, 0)
        except CorruptBatchError:
            return None

    # -- truncation -------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed.

        Truncation is by whole batches, so ``next_offset`` afterwards is one past the last
        remaining batch, which may be below ``offset``.
        """
        found = self.find(offset)
        if found is None:
            return 0
        pos, _h = found
        removed = self.size - pos
        os.ftruncate(self.fd, pos)
        self.txn_index.truncate_to(offset)
        self.size = pos
        self.index.truncate_to_position(pos)
        self.time_index.truncate_to_offset(offset)
        # Recompute the tail state from the last remaining index entry, checked first (rule 5).
        idx_off, start = self.index.last_entry()
        if start:
            self.find(idx_off)  # rebuilds the index if the entry names no batch
            idx_off, start = self.index.last_entry()
        self.next_offset = self.base_offset
        self._bytes_since_index = self.size - start
        last_t = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = last_t if last_t else (-1, self.base_offset)
        if pos == 0:
            self.first_batch_timestamp = None
        for _p, h, _b, _off in FileScan(self.fd, start, self.size, with_bytes=False):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset + h.last_offset_delta
            self.next_offset = h.base_offset + h.last_offset_delta + 1
        return removed

    # -- durability and lifecycle -----------------------------------------------------------
    def flush(self) -> None:
        os.fsync(self.fd)
        self.txn_index.flush()

    def write_indexes(self, *, sync: bool) -> None:
        self.index.write(sync=sync)
        self.time_index.write(sync=sync)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)

    def delete_files(self) -> None:
        for p in (self.path, self.index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"


def _count_plausible_batches(fd: int, start: int, end: int) -> int:
    """How many batch-shaped records follow a corruption point (for the warning only)."""
    count, pos = 0, start
    while pos + LOG_OVERHEAD <= end and count < 1_000_000:
        prefix = os.pread(fd, LOG_OVERHEAD, pos)
        if len(prefix) < LOG_OVERHEAD:
            break
        _b, length = _PREFIX.unpack(prefix)
        count += 1
        if length < _MIN_BATCH_LENGTH:
            break
        pos += LOG_OVERHEAD + length
    return max(count, 1)
