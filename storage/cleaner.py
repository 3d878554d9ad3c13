"""Log compaction (``cleanup.policy=compact``): keep the last record of every key.

Theory of operation (after Kafka's ``LogCleaner``):
  * The *cleanable* part of a log is the prefix of sealed segments that lie wholly below the
    checkpointed recovery point (so they are fsynced and never rescanned by recovery, whose
    strict offset checks would otherwise trip over compaction gaps). The cleaner checkpoint
    (``cleaner-offset-checkpoint``) splits it into a *clean* head, already compacted, and a
    *dirty* tail. A pass runs when ``dirty / cleanable >= min.cleanable.dirty.ratio``.
  * A pass reads the dirty segments once to build ``key -> last offset`` (key bytes exactly),
    stopping early once the map holds ``cleaner_max_keys`` keys (then only the segments up to
    there count as cleaned this pass), then rewrites every cleanable segment up to that point: a record survives unless a later record has the same
    key; a record without a key always survives; a tombstone (null value) survives until the
    delete horizon of its batch has passed. The first pass that keeps a tombstone stamps its
    batch with ``now + delete.retention.ms`` (the batch delete-horizon attribute, KIP-534), so
    consumers that read the log within that window still see the delete.
  * Batches keep their base offset, last offset delta, producer id/epoch/sequence, leader epoch,
    compression and flags; untouched batches are copied byte for byte; batches left empty are
    dropped. Offsets of retained records never change, so the log gains gaps and nothing else.
  * Except the last batch of each active producer (the caller passes them, from the partition's
    producer state): it stays even when all its records go, as an empty batch with the same
    offsets, producer id, epoch and sequences (Kafka's ``RETAIN_EMPTY``, rule (1) of the
    ``LogCleaner`` class comment), so producer state rebuilt from the log after a restart still
    knows the producer's last sequence and recognises a retried batch as a duplicate. For a
    producer whose last entry is a marker (its epoch bumped, no data since), that marker's batch
    is the one kept.
  * Transactions (KIP-98; Kafka's ``CleanedTransactionMetadata``): nothing at or above the last
    stable offset is cleanable (the caller passes it as ``max_offset``), so no open transaction
    is ever cleaned. The batches of aborted transactions (the ``.txnindex`` entries say which)
    are dropped whatever their keys, and never enter the key map. An ABORT marker is kept, with
    its ``.txnindex`` entry, in the pass that still found data of its transaction; a COMMIT
    marker while a batch of its transaction remains. A marker past that point is removable like
    a tombstone: stamped with a delete horizon ``now + delete.retention.ms``, dropped by the first
    pass after it.
  * Heavy work (decoding, encoding, writing, fsync) runs in an executor thread on sealed,
    immutable segments; appends to the active segment continue meanwhile. The log's structure
    lock keeps truncation and retention from removing a segment under the cleaner.

Crash safety of the swap (each segment is replaced one-to-one, same base offset):
  1. Write ``X.log.cleaned`` and fsync it. A crash now leaves a ``.cleaned`` file, deleted on open.
  2. Rename it to ``X.log.swap`` and fsync the directory: the commit point.
  3. Unlink ``X.index``/``X.timeindex``; write the cleaned ``X.txnindex`` (fsynced); rename
     ``X.log.swap`` over ``X.log``. A crash between 2 and here is finished by recovery (``.swap``
     replaces ``.log``, indexes, the ``.txnindex`` too, rebuilt).
  4. Write the new indexes atomically. A crash before that leaves no index: rebuilt on open.
  5. After all segments of the pass: write the cleaner checkpoint. A crash before it only means
     the next pass redoes some work.
  So at every instant the directory holds, for each base offset, either the old or the new
  segment, both complete, and no acknowledged record whose key was not superseded is lost.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from protocol.records import (
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptBatchError,
    decode_records,
    encode_batch,
    read_batch_header,
    read_end_txn_marker,
)

from .errors import LogClosedError
from .files import (
    CLEANED_SUFFIX,
    CLEANER_OFFSET_FILE,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    fsync_dir,
    read_checkpoint,
    segment_path,
    write_checkpoint,
)
from .log_parts import CleanerLog
from .segment import LogSegment
from .txn_index import AbortedTxn

__all__ = ["CleanResult", "LastRecords", "clean_log", "dirty_ratio", "run_cleaner"]

logger = logging.getLogger("groupcoord.storage")

#: Directories already warned about a cleaner checkpoint past their log end (``_plan`` runs
#: every cleaner interval until a pass rewrites the checkpoint: one line, not one per interval).
_warned_past_end: set[Path] = set()
#: Buffer this much cleaned output before each write: big writes, bounded memory.
_WRITE_CHUNK = 1 << 20

#: producer id -> (last offset of its last data batch, -1 if it has none since its epoch began;
#: its epoch): the active producers whose last batch a pass keeps (Kafka's
#: ``lastRecordsOfActiveProducers``; ``ProducerStateManager.last_records``).
LastRecords = Mapping[int, tuple[int, int]]
_NO_RECORD = (-2, -2)


def _keeps_last(h: BatchHeader, last_records: LastRecords) -> bool:
    """Whether ``h`` is the last batch of an active producer (module docstring)."""
    if h.producer_id < 0 or not last_records:
        return False
    last_offset, epoch = last_records.get(h.producer_id, _NO_RECORD)
    if last_offset >= 0:
        return h.base_offset + h.last_offset_delta == last_offset
    return last_offset == -1 and h.attributes & CONTROL_MASK != 0 and h.producer_epoch == epoch


def _empty_batch(h: BatchHeader) -> bytes:
    """``h``'s batch without records: same offsets, producer id, epoch, sequence and flags
    (Kafka's ``DefaultRecordBatch.writeEmptyHeader``: uncompressed, no delete horizon, base and
    max timestamp both the batch's max timestamp)."""
    return encode_batch(
        [],
        base_offset=h.base_offset,
        base_timestamp=h.max_timestamp,
        max_timestamp=h.max_timestamp,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        transactional=h.is_transactional,
        control=h.is_control,
        log_append_time=h.log_append_time,
        last_offset_delta=h.last_offset_delta,
    )


@dataclass(slots=True)
class CleanResult:
    segments: int
    dirty_bytes: int
    bytes_read: int
    bytes_written: int
    records_removed: int
    tombstones_removed: int
    batches_removed: int
    cleaned_up_to: int
    seconds: float


@dataclass(slots=True)
class _Plan:
    cleanable: list[LogSegment]
    dirty: list[LogSegment]
    end_offset: int
    dirty_bytes: int
    total_bytes: int

    @property
    def ratio(self) -> float:
        return self.dirty_bytes / self.total_bytes if self.total_bytes else 0.0


def _plan(log: CleanerLog, max_offset: int | None = None) -> _Plan:
    segs = log._segments
    limit = log._recovery_point_checkpointed
    if max_offset is not None:  # the last stable offset: never clean an open transaction
        limit = min(limit, max_offset)
    cleanable: list[LogSegment] = []
    for i in range(len(segs) - 1):
        if segs[i + 1].base_offset <= limit:
            cleanable.append(segs[i])
        else:
            break
    end = segs[len(cleanable)].base_offset if cleanable else segs[0].base_offset
    checkpoint = read_checkpoint(log.directory / CLEANER_OFFSET_FILE)
    if checkpoint is not None and checkpoint > segs[-1].next_offset:
        # Past the log end: the tail it counted as clean is gone (recovery cut it) or the file is
        # not this log's. Trusting it would leave every record appended below it uncleaned for
        # good; Kafka resets the first dirty offset to the log start, and so do we.
        if log.directory not in _warned_past_end:
            _warned_past_end.add(log.directory)
            logger.warning("%s: cleaner checkpoint %d is past the log end %d; cleaning from the log start",
                           log.directory, checkpoint, segs[-1].next_offset)
        checkpoint = None
    first_dirty = max(checkpoint or 0, log.log_start_offset)
    dirty = [s for i, s in enumerate(cleanable) if segs[i + 1].base_offset > first_dirty]
    return _Plan(cleanable, dirty, end, sum(s.size for s in dirty), sum(s.size for s in cleanable))


def dirty_ratio(log: CleanerLog) -> float:
    """Share of the cleanable log not yet cleaned (what ``min.cleanable.dirty.ratio`` compares)."""
    return _plan(log).ratio


@dataclass(slots=True)
class _OffsetMap:
    """What the dirty section says: the last offset of every key, plus what lets the rewrite skip
    decoding most dirty batches."""

    last: dict[bytes, int]
    #: Sorted ``last`` values: a dirty batch holding none of them is wholly superseded, one
    #: holding ``records_count`` of them is wholly retained, and neither needs decoding.
    survivors: list[int]
    #: Base offsets of dirty batches with a keyless record or a tombstone: always decoded.
    special: set[int]
    bytes_read: int
    #: How many of the dirty segments the map covers (fewer than all when it filled up).
    segments: int


class _Transactions:
    """Which batches of a walk in offset order belong to aborted transactions, and which markers
    are still needed (Kafka's ``CleanedTransactionMetadata``).

    ``aborted``: the ``.txnindex`` entries whose marker is at or above the walk's start."""

    __slots__ = ("_pending", "_aborted", "_seen", "_committed")

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda e: e.first_offset, reverse=True)
        #: producer id -> its aborted transaction under way in the walk
        self._aborted: dict[int, AbortedTxn] = {}
        #: Producers in ``_aborted`` whose data the walk found.
        self._seen: set[int] = set()
        #: Producers with data of a transaction under way that is not aborted.
        self._committed: set[int] = set()

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[-1].first_offset <= offset:
            e = pending.pop()
            self._aborted[e.producer_id] = e
            self._seen.discard(e.producer_id)

    def on_data(self, h: BatchHeader) -> bool:
        """Whether the data batch belongs to an aborted transaction (then it is dropped)."""
        if not self._pending and not self._aborted and not h.attributes & TRANSACTIONAL_MASK:
            return False
        self._reach(h.base_offset + h.last_offset_delta)
        if not h.attributes & TRANSACTIONAL_MASK:
            return False
        if h.producer_id in self._aborted:
            self._seen.add(h.producer_id)
            return True
        self._committed.add(h.producer_id)
        return False

    def on_control(self, h: BatchHeader, buf: bytes | memoryview, off: int) -> tuple[bool, AbortedTxn | None]:
        """``(removable, .txnindex entry to keep)`` for a control batch: a marker stays while data
        of its transaction was seen; an empty control batch is removable."""
        self._reach(h.base_offset + h.last_offset_delta)
        if h.records_count == 0:
            return True, None
        try:
            marker = read_end_txn_marker(buf, off, h)
        except CorruptBatchError:
            return False, None
        if marker is None:
            return False, None  # another control type: kept, as Kafka does
        if marker[0]:
            if h.producer_id in self._committed:
                self._committed.discard(h.producer_id)
                return False, None
            return True, None
        entry = self._aborted.pop(h.producer_id, None)
        if entry is not None and h.producer_id in self._seen:
            self._seen.discard(h.producer_id)
            return False, entry
        return True, None


def _aborted_from(segments: list[LogSegment], start: int) -> list[AbortedTxn]:
    """Every ``.txnindex`` entry whose marker is at or above ``start`` (loop side: in memory)."""
    return [e for s in segments for e in s.txn_index.entries if e.last_offset >= start]


def _build_offset_map(dirty: list[LogSegment], max_keys: int | None = None,
                      aborted: list[AbortedTxn] | None = None) -> _OffsetMap:
    """Scan dirty segments in order; stop after the segment that brings the map to ``max_keys``
    (at least one segment is always covered), as Kafka stops when its dedupe buffer is full.
    Batches of aborted transactions (``aborted``: the entries from the first dirty offset on)
    never enter the map."""
    last: dict[bytes, int] = {}
    special: set[int] = set()
    read = 0
    covered = 0
    txns = _Transactions(aborted or [])
    for seg in dirty:
        if max_keys is not None and covered and len(last) >= max_keys:
            break
        covered += 1
        for _pos, h, buf, off in seg.batches(with_bytes=True):
            read += LOG_OVERHEAD + h.batch_length
            if h.attributes & CONTROL_MASK:
                txns.on_control(h, buf, off)
                continue
            if txns.on_data(h):
                continue
            base = h.base_offset
            for r in decode_records(buf, off, h, check_crc=False):
                if r.key is None or r.value is None:
                    special.add(base)
                if r.key is not None:
                    last[r.key] = base + r.offset_delta
    return _OffsetMap(last, sorted(last.values()), special, read, covered)


class _Counts:
    __slots__ = ("records", "tombstones", "batches", "written")

    def __init__(self) -> None:
        self.records = self.tombstones = self.batches = self.written = 0


def _clean_segment(old: LogSegment, omap: _OffsetMap, now: int, delete_retention_ms: int,
                   counts: _Counts, *, dirty: bool = False, txns: _Transactions | None = None,
                   last_records: LastRecords | None = None) -> tuple[LogSegment, list[AbortedTxn]]:
    """The cleaned copy of ``old`` and its ``.txnindex`` entries (written by ``_swap``).
    ``txns``: the pass's walk over aborted transactions, shared by its segments in order;
    ``last_records``: the active producers, whose last batch stays (module docstring)."""
    txns = txns or _Transactions([])
    last_records = last_records or {}
    entries: list[AbortedTxn] = []
    new = LogSegment(old.directory, old.base_offset, index_interval_bytes=old.index_interval_bytes,
                     now_ms=old.created_ms, suffix=LOG_SUFFIX + CLEANED_SUFFIX)
    os.ftruncate(new.fd, 0)
    new.size = 0
    parts: list[bytes | memoryview] = []
    headers: list[BatchHeader] = []
    buffered = 0

    def flush_parts() -> None:
        nonlocal parts, headers, buffered
        if parts:
            pos = new.size
            new.write_at(pos, b"".join(parts))
            new.note_appended(pos, headers)
            parts, headers, buffered = [], [], 0

    def keep_empty(h: BatchHeader, buf: bytes | memoryview, off: int) -> None:
        nonlocal buffered
        if h.records_count == 0 and not h.attributes & DELETE_HORIZON_MASK:  # emptied before: as it is
            parts.append(memoryview(buf)[off : off + LOG_OVERHEAD + h.batch_length])
            headers.append(h)
            buffered += LOG_OVERHEAD + h.batch_length
            return
        data = _empty_batch(h)
        parts.append(data)
        headers.append(read_batch_header(data, 0))
        buffered += len(data)

    offset_map = omap.last
    survivors = omap.survivors
    special = omap.special
    for _pos, h, buf, off in old.batches(with_bytes=True):
        size = LOG_OVERHEAD + h.batch_length
        if h.attributes & CONTROL_MASK:
            removable, entry = txns.on_control(h, buf, off)
            if entry is not None:
                entries.append(entry)
            if removable:
                horizon = h.base_timestamp if h.attributes & DELETE_HORIZON_MASK else None
                if horizon is not None and now >= horizon:
                    if not _keeps_last(h, last_records):
                        counts.batches += 1
                    elif h.records_count:
                        counts.records += h.records_count
                        keep_empty(h, buf, off)
                    else:
                        parts.append(memoryview(buf)[off : off + size])
                        headers.append(h)
                        buffered += size
                    continue
                if horizon is None:
                    # Removable from now on, like a tombstone: first stamp the delete horizon.
                    data = encode_batch(
                        decode_records(buf, off, h, check_crc=False),
                        base_offset=h.base_offset,
                        base_timestamp=h.base_timestamp,
                        max_timestamp=h.max_timestamp if h.log_append_time else None,
                        producer_id=h.producer_id,
                        producer_epoch=h.producer_epoch,
                        base_sequence=h.base_sequence,
                        partition_leader_epoch=h.partition_leader_epoch,
                        transactional=h.is_transactional,
                        control=True,
                        log_append_time=h.log_append_time,
                        last_offset_delta=h.last_offset_delta,
                        delete_horizon=now + delete_retention_ms,
                    )
                    parts.append(data)
                    headers.append(read_batch_header(data, 0))
                    buffered += len(data)
                    continue
            parts.append(memoryview(buf)[off : off + size])
            headers.append(h)
            buffered += size
            continue
        if txns.on_data(h):  # aborted transactional data: dropped whatever its keys
            counts.records += h.records_count
            if _keeps_last(h, last_records):
                keep_empty(h, buf, off)
                continue
            counts.batches += 1
            continue
        if dirty and h.base_offset not in special:
            # Fast path: every record has a key and a value, so survivors are exactly the
            # batch's offsets that are some key's last offset.
            base = h.base_offset
            n = bisect.bisect_right(survivors, base + h.last_offset_delta) - bisect.bisect_left(survivors, base)
            if n == 0:
                counts.records += h.records_count
                if _keeps_last(h, last_records):
                    keep_empty(h, buf, off)
                    continue
                counts.batches += 1
                continue
            if n == h.records_count:
                parts.append(memoryview(buf)[off : off + size])
                headers.append(h)
                buffered += size
                if buffered >= _WRITE_CHUNK:
                    flush_parts()
                continue
        records = decode_records(buf, off, h, check_crc=False)
        horizon = h.base_timestamp if h.attributes & DELETE_HORIZON_MASK else None
        keep = []
        changed = False
        tombstone = False
        base = h.base_offset
        for r in records:
            o = base + r.offset_delta
            if r.key is not None and offset_map.get(r.key, o) > o:
                changed = True
                counts.records += 1
                continue
            if r.value is None:
                if horizon is not None and now >= horizon:
                    changed = True
                    counts.records += 1
                    counts.tombstones += 1
                    continue
                tombstone = True
            keep.append(r)
        if not keep:
            if _keeps_last(h, last_records):
                keep_empty(h, buf, off)
                continue
            counts.batches += 1
            continue
        if changed or (tombstone and horizon is None):
            new_horizon = horizon if horizon is not None else (now + delete_retention_ms if tombstone else None)
            data = encode_batch(
                keep,
                base_offset=h.base_offset,
                base_timestamp=h.base_timestamp,
                max_timestamp=h.max_timestamp if h.log_append_time else None,
                compression=h.compression,
                producer_id=h.producer_id,
                producer_epoch=h.producer_epoch,
                base_sequence=h.base_sequence,
                partition_leader_epoch=h.partition_leader_epoch,
                transactional=h.is_transactional,
                log_append_time=h.log_append_time,
                last_offset_delta=h.last_offset_delta,
                delete_horizon=new_horizon,
            )
            parts.append(data)
            headers.append(read_batch_header(data, 0))
            buffered += len(data)
            if buffered >= _WRITE_CHUNK:
                flush_parts()
            continue
        parts.append(memoryview(buf)[off : off + size])
        headers.append(h)
        buffered += size
        if buffered >= _WRITE_CHUNK:
            flush_parts()
    flush_parts()
    new.seal()
    new.flush()
    counts.written += new.size
    return new, entries


def _swap(old: LogSegment, new: LogSegment, entries: list[AbortedTxn]) -> None:
    """Steps 2-4 of the module docstring."""
    directory = old.directory
    base = old.base_offset
    swap_path = segment_path(directory, base, LOG_SUFFIX + SWAP_SUFFIX)
    os.replace(new.path, swap_path)
    fsync_dir(directory)
    new.index.delete_file()
    new.time_index.delete_file()
    if entries != new.txn_index.entries:
        # Same path as the old segment's: rewritten here, after the commit point.
        new.txn_index.replace(entries)
        new.txn_index.flush()
        fsync_dir(directory)
    log_path = segment_path(directory, base, LOG_SUFFIX)
    os.replace(swap_path, log_path)
    new.path = log_path
    new.write_indexes(sync=True)


async def clean_log(log: CleanerLog, *, force: bool = False, max_offset: int | None = None,
                    last_records: Callable[[], LastRecords] | None = None) -> CleanResult | None:
    """One compaction pass over ``log``; None if the policy or the dirty ratio says not now.
    ``max_offset``: the partition's last stable offset; nothing at or above it is cleaned.
    ``last_records``: the active producers (read once, when a pass runs), whose last batch stays."""
    if log.options.cleanup_policy != "compact":
        return None
    loop = asyncio.get_running_loop()
    async with log._structure_lock:
        plan = _plan(log, max_offset)
        if not plan.cleanable or (not force and (not plan.dirty or plan.ratio < log.options.min_cleanable_dirty_ratio)):
            return None
        now = log.clock()
        started = time.perf_counter()
        active = last_records() if last_records is not None else {}
        counts = _Counts()
        dirty_aborted = _aborted_from(log._segments, plan.dirty[0].base_offset) if plan.dirty else []
        omap = await loop.run_in_executor(None, _build_offset_map, plan.dirty, log.options.cleaner_max_keys,
                                          dirty_aborted)
        read = omap.bytes_read
        cleanable, end_offset = plan.cleanable, plan.end_offset
        if omap.segments < len(plan.dirty):  # the map filled up: clean up to its last segment only
            last_covered = plan.dirty[omap.segments - 1]
            cleanable = cleanable[: cleanable.index(last_covered) + 1]
            end_offset = log._segments[log._segments.index(last_covered) + 1].base_offset
        dirty = set(map(id, plan.dirty[: omap.segments]))
        replaced = 0
        txns = _Transactions(_aborted_from(log._segments, cleanable[0].base_offset))
        for old in cleanable:
            new, entries = await loop.run_in_executor(
                None, functools.partial(_clean_segment, old, omap, now, log.options.delete_retention_ms, counts,
                                        dirty=id(old) in dirty, txns=txns, last_records=active))
            read += old.size
            if old not in log._segments or log.closed:
                new.close()
                os.unlink(new.path)
                continue
            await loop.run_in_executor(None, _swap, old, new, entries)
            if old in log._segments:  # replace in place; appends only ever touch the tail
                i = log._segments.index(old)
                log._segments[i] = new
                log._retire(old, delete=False)
                replaced += 1
        await loop.run_in_executor(None, write_checkpoint, log.directory / CLEANER_OFFSET_FILE, end_offset)
        result = CleanResult(replaced, plan.dirty_bytes, read, counts.written, counts.records, counts.tombstones,
                             counts.batches, end_offset, time.perf_counter() - started)
        logger.info("cleaned %s: %s", log.directory, result)
        return result


async def run_cleaner(log: CleanerLog, interval_s: float = 15.0) -> None:
    """Background loop: try a pass every ``interval_s`` (Kafka's cleaner backs off 15 s when idle)
    until the log closes. Errors are logged, never raised, so a bad segment cannot kill it."""
    while not log.closed:
        try:
            await log.clean()
        except asyncio.CancelledError:
            raise
        except LogClosedError:
            return
        except Exception:  # noqa: BLE001
            logger.exception("compaction of %s failed", log.directory)
        await asyncio.sleep(interval_s)
