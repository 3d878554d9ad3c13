"""Opening a partition directory: classify files, finish or roll back interrupted work, and
validate whatever might not have reached the disk intact.

Theory of operation: a ``Log`` is only ever changed by appending to its last segment, truncating
its tail, deleting whole segments (retention) and replacing a sealed segment by a cleaned copy
(compaction). Each of these leaves a recognisable trace if interrupted, so loading is a fixed
sequence of passes (after Kafka's ``LogLoader``):

  Pass 1. Delete leftovers that are incomplete by definition: ``*.cleaned`` (a cleaner output
          not yet fsynced and renamed), ``*.deleted`` (segments already unlinked from the log),
          ``*.tmp`` (a checkpoint or index being replaced).
  Pass 2. Finish interrupted swaps: ``X.log.swap`` was fsynced before it got that name, so it
          replaces ``X.log``; X's index files are dropped and rebuilt (they may describe the old
          file).
  Pass 3. Drop index files with no ``.log`` beside them.
  Pass 4. Load segments in offset order. After a clean shutdown (marker present) trust the index
          files. Otherwise segments wholly below the recovery point load their indexes (they were
          fsynced when the segment rolled) and every other segment is scanned batch by batch
          (size, magic, CRC, offsets) and cut at the first invalid byte; segments after a cut
          one are deleted, since the log must stay a prefix.
  Pass 5. Derive the log start offset, fsync what was recovered and move the recovery point to
          the log end. Rebuild the ``.txnindex`` of every scanned segment and of any whose file
          is damaged (``txn_index.rebuild``): an entry may have been lost with the data's tail,
          or written for a marker the cut removed. When that replays the whole log, the producer
          state it built is kept for the partition, which would otherwise replay it again.

Rules:
  1. Opening never raises because of file contents; every byte dropped is reported in a warning
     that names the file, the byte offset, the byte count and the (estimated) batch count.
  2. The result is always a prefix of what was written: nothing after a cut survives.
  3. A missing or unreadable checkpoint only makes loading slower (full rescan, offset checks
     relaxed to "increasing"), never less safe.
  4. The log end is where the data ends, not where an interrupted roll left a file. A roll
     creates the new segment's file, fsyncs the old segment, and only then moves the recovery
     point checkpoint to the new base; nothing is appended to the new segment before that. So a
     segment based past the recovery point that holds no valid batch, after a previous segment
     that ends below its base, is the trace of a roll cut short after the old segment lost its
     unflushed tail: it is deleted (with any later one), and the log ends where the data does,
     instead of past a hole of offsets no batch holds. Without a recovery point the hole may be
     compaction's (a cleaned segment's tail batches removed), so the segment is kept.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from .files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_START_OFFSET_FILE,
    LOG_SUFFIX,
    RECOVERY_POINT_FILE,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    fsync_dir,
    parse_base_offset,
    read_checkpoint,
    segment_path,
)
from .producer_state import ProducerStateManager
from .segment import LogSegment
from .txn_index import rebuild as rebuild_txn_indexes

__all__ = ["LoadResult", "load_segments"]

logger = logging.getLogger("groupcoord.storage")

#: Above every offset: "no segment was scanned".
_NO_OFFSET = 2**63


@dataclass(slots=True)
class LoadResult:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    clean_shutdown: bool
    #: Human-readable notes of everything repaired (also logged as warnings).
    repairs: list[str] = field(default_factory=list)
    truncated_bytes: int = 0
    scanned_bytes: int = 0
    #: Base offset of the first segment scanned batch by batch (not trusted), None if none was:
    #: files that may lag the data (the leader-epoch cache) are refreshed from there on.
    rescanned_from: int | None = None
    #: The producer state the ``.txnindex`` rebuild replayed the whole log for (None: it did not),
    #: with completed transactions below ``producers_high_watermark`` dropped (None: the log
    #: end). The partition takes it (``Log.take_replayed_producers``) rather than replay again.
    producers: ProducerStateManager | None = None
    producers_high_watermark: int | None = None


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def load_segments(directory: Path, *, index_interval_bytes: int, now_ms: int,
                  high_watermark: int | None = None) -> LoadResult:
    """Passes 1-5 of the module docstring. ``high_watermark``: for the producer state a
    ``.txnindex`` rebuild yields (``LoadResult.producers``)."""
    directory.mkdir(parents=True, exist_ok=True)
    repairs: list[str] = []

    def warn(msg: str) -> None:
        repairs.append(msg)
        logger.warning("%s", msg)

    # Pass 1: incomplete leftovers.
    swaps: list[int] = []
    changed = False
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp")):
            _unlink(Path(entry.path))
            changed = True
        elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            base = parse_base_offset(name)
            if base is not None:
                swaps.append(base)
    # Pass 2: finish interrupted swaps.
    for base in sorted(swaps):
        _unlink(segment_path(directory, base, INDEX_SUFFIX))
        _unlink(segment_path(directory, base, TIME_INDEX_SUFFIX))
        _unlink(segment_path(directory, base, TXN_INDEX_SUFFIX))
        os.replace(segment_path(directory, base, LOG_SUFFIX + SWAP_SUFFIX), segment_path(directory, base, LOG_SUFFIX))
        warn(f"{segment_path(directory, base, LOG_SUFFIX)}: completed an interrupted compaction swap")
        changed = True
    # Pass 3: orphan indexes; collect segments.
    bases: list[int] = []
    names = set(os.listdir(directory))
    for name in names:
        base = parse_base_offset(name)
        if base is None:
            continue
        if name.endswith(LOG_SUFFIX) and name.count(".") == 1:
            bases.append(base)
        elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)) and f"{base:020d}{LOG_SUFFIX}" not in names:
            _unlink(directory / name)
            changed = True
    bases.sort()

    clean_marker = directory / CLEAN_SHUTDOWN_FILE
    clean = clean_marker.exists()
    if clean:
        os.unlink(clean_marker)
        changed = True
    if changed:
        fsync_dir(directory)
    recovery_point = read_checkpoint(directory / RECOVERY_POINT_FILE)
    start_checkpoint = read_checkpoint(directory / LOG_START_OFFSET_FILE)

    # Pass 4: load segments.
    segments: list[LogSegment] = []
    truncated_total = 0
    scanned = 0
    recovered: list[LogSegment] = []
    for i, base in enumerate(bases):
        seg = LogSegment(directory, base, index_interval_bytes=index_interval_bytes, now_ms=now_ms)
        prev_end = segments[-1].next_offset if segments else None
        if prev_end is not None and base < prev_end:
            warn(f"{seg.path}: base offset {base} overlaps the previous segment (ends at {prev_end}); "
                 f"deleted it and {len(bases) - i - 1} later segment(s), {seg.size} bytes")
            seg.close()
            for later in bases[i:]:
                for suffix in SEGMENT_SUFFIXES:
                    _unlink(segment_path(directory, later, suffix))
            break
        below_rp = recovery_point is not None and i + 1 < len(bases) and bases[i + 1] <= recovery_point
        if (clean or below_rp) and seg.load_state(indexes_trusted=True):
            segments.append(seg)
            continue
        if clean or below_rp:
            warn(f"{seg.index.path}: index missing or invalid; rebuilt from the log")
        strict_from = None if clean else recovery_point
        result = seg.recover(expected_next=prev_end, strict_from=strict_from)
        scanned += result.valid_bytes + result.truncated_bytes
        if (seg.next_offset == base and prev_end is not None and base > prev_end
                and recovery_point is not None and base > recovery_point):
            # Rule 4: an interrupted roll left this (now) empty segment behind a hole.
            warn(f"{seg.path}: empty segment at {base}, past the previous segment's end {prev_end} and the "
                 f"recovery point {recovery_point}: a roll that did not complete; deleted it and "
                 f"{len(bases) - i - 1} later segment(s), {result.truncated_bytes} bytes")
            truncated_total += result.truncated_bytes
            seg.close()
            for later in bases[i:]:
                for suffix in SEGMENT_SUFFIXES:
                    _unlink(segment_path(directory, later, suffix))
            break
        recovered.append(seg)
        segments.append(seg)
        if result.truncated_bytes:
            truncated_total += result.truncated_bytes
            warn(f"{seg.path}: invalid data at byte {result.valid_bytes} ({result.reason}); truncated "
                 f"{result.truncated_bytes} bytes (about {result.dropped_batches} batch(es)) after "
                 f"{result.batches} valid batch(es)")
            after_cut = bases[i + 1 :]
            if after_cut:
                dropped = 0
                for lb in after_cut:
                    p = segment_path(directory, lb, LOG_SUFFIX)
                    try:
                        dropped += p.stat().st_size
                    except OSError:
                        pass
                    for suffix in SEGMENT_SUFFIXES:
                        _unlink(segment_path(directory, lb, suffix))
                truncated_total += dropped
                warn(f"{directory}: deleted {len(after_cut)} segment(s) after the cut in {seg.path.name} "
                     f"({dropped} bytes), so the log stays a prefix")
            break

    # Pass 5: start offset, durability of what was recovered.
    if not segments:
        start = max(start_checkpoint or 0, 0)
        seg = LogSegment(directory, start, index_interval_bytes=index_interval_bytes, now_ms=now_ms)
        seg.flush()
        fsync_dir(directory)
        segments.append(seg)
    log_end = segments[-1].next_offset
    log_start = max(start_checkpoint or 0, segments[0].base_offset)
    log_start = min(log_start, log_end)
    for seg in recovered:
        seg.flush()
        seg.write_indexes(sync=True)
    rescanned_from = min((s.base_offset for s in recovered), default=None)
    for seg in segments:
        if seg.txn_index.corrupt is not None:
            warn(f"{seg.txn_index.path}: {seg.txn_index.corrupt}; rebuilt it from the log")
    _written, producers = rebuild_txn_indexes(segments, _NO_OFFSET if rescanned_from is None else rescanned_from,
                                              high_watermark)
    return LoadResult(segments, log_start, log_end, clean, repairs, truncated_total, scanned, rescanned_from,
                      producers, high_watermark)
