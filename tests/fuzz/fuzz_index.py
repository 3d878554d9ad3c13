"""Offset and time index files (``storage/offset_index.py``, ``storage/time_index.py``) of a
segment the log trusts, then every lookup that goes through them.

Edge: after a clean shutdown (or below the recovery point) ``Log.open`` loads a segment's
``.index`` and ``.timeindex`` instead of scanning its batches (``LogSegment.load_state``). The
index files carry no checksum, so their bytes are the input: the segment's ``.log`` holds real
batches built by the project's own batch builder and stays intact.

Properties asserted on any index bytes:

1. ``Log.open`` never raises (recovery rule 1).
2. The opened log is the log on disk: same end offset and largest timestamp as a full scan gives.
3. Every offset reads back the batch that holds it (``Log.read``): an offset index may speed a
   lookup up, never change its answer. ``offset_for_timestamp`` gives the first offset with a
   timestamp at or after the one asked, for every timestamp in the segment and around it, when
   the time index is the true one; with a fuzzed one it never raises and never answers an offset
   without that timestamp or earlier than the true answer (its inner entries are trusted as
   Kafka trusts them, so a wrong one may make the answer late: ``storage/segment.py`` rule 5).

Input: byte 0 = flags (bit 0: no ``.index`` file, bit 1: no ``.timeindex`` file); bytes 1-2 =
length of the offset index bytes, which follow; the rest is the time index.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from protocol.records import (
    build_batch,
    decode_records,
    iter_batch_positions,
    read_batch_header,
)
from storage import Log, LogOptions
from storage.files import (
    CLEAN_SHUTDOWN_FILE,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    segment_path,
)
from storage.segment import LogSegment
from tests.fuzz.harness import Finding, quiet, scratch_dir

NAME = "index"
INSTRUMENT = ("storage.offset_index", "storage.time_index", "storage.segment", "storage.recovery",
              "storage.log")

NO_INDEX, NO_TIME_INDEX = 1, 2
BASE = 100
#: Small, so the segment has an index entry every batch or two.
OPTIONS = LogOptions(index_interval_bytes=90, flush_policy="none")
#: Batch timestamps: not monotonic, so the time index has entries to skip and lookups to get wrong.
_TIMESTAMPS = (1000, 1500, 1200, 2000, 1800, 1800, 2500, 900, 3000, 2999, 3100, 3050, 4000, 3500, 5000)


@dataclass(frozen=True)
class _Reference:
    log_bytes: bytes
    #: (position, base offset, last offset) of every batch.
    batches: tuple[tuple[int, int, int], ...]
    #: (offset, timestamp) of every record.
    records: tuple[tuple[int, int], ...]
    end: int
    max_timestamp: int
    index: bytes
    time_index: bytes


def _build(directory: Path) -> _Reference:
    """The segment and its true indexes, made by the storage code itself from real batches."""
    parts = []
    offset = BASE
    for i, ts in enumerate(_TIMESTAMPS):
        items = [(b"key-%d-%d" % (i, j), b"value-%d" % (i * j)) for j in range(1 + i % 3)]
        parts.append(build_batch(items, timestamp_ms=ts, base_offset=offset))
        offset += len(items)
    data = b"".join(parts)
    batches, records = [], []
    for pos, h in iter_batch_positions(data):
        batches.append((pos, h.base_offset, h.last_offset))
        records += [(h.base_offset + r.offset_delta, r.timestamp(h)) for r in decode_records(data, pos, h)]
    directory.mkdir(parents=True, exist_ok=True)
    segment_path(directory, BASE, LOG_SUFFIX).write_bytes(data)
    seg = LogSegment(directory, BASE, index_interval_bytes=OPTIONS.index_interval_bytes, now_ms=0)
    try:
        seg.recover(expected_next=None, strict_from=None)
        seg.seal()
        index, time_index = seg.index.to_bytes(), seg.time_index.to_bytes()
    finally:
        seg.close()
    if len(index) < 16 or len(time_index) < 24:
        raise RuntimeError("the reference segment should have several index entries")
    return _Reference(data, tuple(batches), tuple(records), offset, max(_TIMESTAMPS), index, time_index)


_state: tuple[Path, _Reference] | None = None


def _setup() -> tuple[Path, _Reference]:
    """One directory and reference per process; every input rewrites the files in it."""
    global _state
    if _state is None:
        root = scratch_dir("fuzz-index-", memory=True)
        _state = (root, _build(root / "t-0"))
    return _state


def _input(flags: int, index: bytes, time_index: bytes) -> bytes:
    return bytes([flags]) + struct.pack(">H", len(index)) + index + time_index


def seeds() -> list[bytes]:
    """The true index files, each alone, both missing, and shapes a torn or stale file has: an
    entry cut short, the index of a longer segment, entries of another segment."""
    _root, ref = _setup()
    out = [_input(0, ref.index, ref.time_index), _input(NO_INDEX, b"", ref.time_index),
           _input(NO_TIME_INDEX, ref.index, b""), _input(NO_INDEX | NO_TIME_INDEX, b"", b""),
           _input(0, ref.index[:-3], ref.time_index), _input(0, ref.index, ref.time_index[:-12]),
           _input(0, ref.index[8:], ref.time_index[12:])]
    return out


def _expected_for_timestamp(ref: _Reference, timestamp: int) -> int | None:
    return next((o for o, t in ref.records if t >= timestamp), None)


def _check(root: Path, ref: _Reference, flags: int, index: bytes, time_index: bytes) -> None:
    directory = root / "t-0"
    for name in os.listdir(directory):
        os.unlink(directory / name)
    segment_path(directory, BASE, LOG_SUFFIX).write_bytes(ref.log_bytes)
    if not flags & NO_INDEX:
        segment_path(directory, BASE, INDEX_SUFFIX).write_bytes(index)
    if not flags & NO_TIME_INDEX:
        segment_path(directory, BASE, TIME_INDEX_SUFFIX).write_bytes(time_index)
    (directory / CLEAN_SHUTDOWN_FILE).write_bytes(b"")
    log = Log.open(root, "t", 0, OPTIONS)  # property 1: raising here is the finding
    try:
        seg = log.segments[0]
        if log.load_result.rescanned_from is not None:
            # The index files were refused and rebuilt from a scan of the batches: that path is
            # the log recovery harness's; here only trusted indexes need the lookups checked.
            if log.log_end_offset != ref.end:
                raise Finding(f"rebuilt from the batches, the log ends at {log.log_end_offset}, not {ref.end}")
            return
        if (log.log_end_offset, seg.max_timestamp) != (ref.end, ref.max_timestamp):
            raise Finding(f"opened with end {log.log_end_offset}, max timestamp {seg.max_timestamp}; "
                          f"the segment holds {ref.end}, {ref.max_timestamp}")
        for pos, base, last in ref.batches:
            for offset in {base, last}:
                data = log.read(offset, 1)
                header = read_batch_header(data) if len(data) >= 61 else None
                if header is None or (header.base_offset, header.last_offset) != (base, last):
                    raise Finding(f"read({offset}) gave {header}, the batch at byte {pos} holds {base}..{last}")
        exact = time_index == ref.time_index and not flags & NO_TIME_INDEX
        timestamps = dict(ref.records)
        for timestamp in sorted({t + d for _o, t in ref.records for d in (-1, 0, 1)}):
            got = log.offset_for_timestamp(timestamp)
            expected = _expected_for_timestamp(ref, timestamp)
            if got == expected:
                continue
            # The time index's inner entries are trusted, as Kafka trusts them (segment rule 5):
            # a wrong one may make the answer late, never one without the timestamp, never early.
            if exact or (got is not None and (timestamps.get(got, -1) < timestamp
                                              or (expected is not None and got < expected))):
                raise Finding(f"offset_for_timestamp({timestamp}) = {got}, the records say {expected}")
    finally:
        log.abort()


def one_input(data: bytes) -> None:
    if len(data) < 3:
        return
    root, ref = _setup()
    (n,) = struct.unpack_from(">H", data, 1)
    with quiet():  # a rebuilt index is reported
        _check(root, ref, data[0], data[3 : 3 + n], data[3 + n :])


if __name__ == "__main__":
    import sys

    from tests.fuzz.run import main

    sys.exit(main([NAME, *sys.argv[1:]]))
