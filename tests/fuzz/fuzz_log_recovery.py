"""Log recovery (``storage/recovery.py``, ``storage/segment.py``, ``storage/log.py``) of a partition
directory damaged by fuzzed mutations, opened as the server opens it after a crash.

Edge: the ``.log`` files of a partition after an unclean shutdown (no clean-shutdown marker, no
recovery-point checkpoint: every segment is scanned). The directory holds two segments of real
batches built by the project's own builders (plain, compressed with each codec, idempotent,
transactional with their commit marker, record headers, several leader epochs); the input is a
list of mutations applied to them: truncate, flip a bit, set a byte, append garbage, wrong magic,
CRC mismatch, a batch length overwritten, or a whole segment replaced by fuzzed bytes.

Input: byte 0 = flags (bit 0: write a recovery-point checkpoint, the value byte 1 modulo the
second segment's base, so both segments are still scanned); the mutations follow from byte 2.

Properties asserted:

1. ``Log.open`` never raises (recovery rule 1).
2. Every batch whose bytes precede the first damaged byte of the log (in log order: the first
   segment, then the second) is kept, byte for byte, at its offsets, and ``Log.read`` returns it.
3. What recovery keeps is a log: whole batches with good CRCs, offsets strictly increasing across
   segments, the log end one past the last of them (with a recovery point; without one an empty
   last segment may keep the end at its base), and the leader-epoch cache exactly what the kept
   batches' headers say.
4. Recovery is idempotent: opening the recovered directory again (now with a recovery point and
   index files, as after a restart) gives the same batches.
"""

from __future__ import annotations

import shutil
import struct
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from protocol.compression import Compression
from protocol.records import (
    ControlRecordType,
    batch_crc_ok,
    build_batch,
    control_record,
    encode_batch,
    iter_batch_positions,
    read_batch_header,
)
from storage import Log, LogOptions
from storage.files import (
    LOG_SUFFIX,
    RECOVERY_POINT_FILE,
    segment_path,
    write_checkpoint,
)
from tests.fuzz.harness import Finding, quiet, scratch_dir

NAME = "log_recovery"
INSTRUMENT = ("storage.recovery", "storage.segment", "storage.log", "storage.offset_index", "storage.time_index",
              "storage.leader_epoch", "storage.files")

OPTIONS = LogOptions(index_interval_bytes=128, flush_policy="none")
TRUNCATE, FLIP, SET, APPEND, MAGIC, CRC, LENGTH, REPLACE = range(8)
WITH_RECOVERY_POINT = 1
#: Mutations per input at most: enough to combine damage in both segments.
_MAX_MUTATIONS = 8


@dataclass(frozen=True)
class _Batch:
    segment: int
    position: int
    data: bytes
    base: int
    last: int
    epoch: int


def _batches() -> list[list[bytes]]:
    """Two segments' worth of batches, each kind the log holds, offsets assigned in order."""
    kinds: list[tuple[list[tuple[bytes | None, bytes | None]] | list[tuple[bytes, bytes, list[tuple[str, bytes | None]]]],
                      dict[str, object]]] = []
    kinds.append(([(b"k%d" % i, b"v%d" % i) for i in range(3)], {}))
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        kinds.append(([(b"c%d" % i, b"compressed-%d" % i * 4) for i in range(4)], {"compression": codec}))
    kinds.append(([(b"idem", b"1"), (b"idem", b"2")], {"producer_id": 7, "producer_epoch": 0, "base_sequence": 0}))
    kinds.append(([(b"txn", b"x")], {"producer_id": 9, "producer_epoch": 1, "base_sequence": 0, "transactional": True}))
    kinds.append(([], {"control": True}))  # the transaction's commit marker
    kinds.append(([(b"h", b"with headers", [("trace", b"abc"), ("none", None)])], {}))
    kinds.append(([(None, b"no key"), (b"tomb", None)], {}))
    out: list[list[bytes]] = [[], []]
    offset = 0
    for i, (items, options) in enumerate(kinds * 2):
        epoch = i // 5  # several leader epochs, changing inside each segment
        if options.get("control"):
            data = encode_batch([control_record(ControlRecordType.COMMIT, 3)], base_offset=offset,
                                base_timestamp=1_700_000_000_000 + i, producer_id=9, producer_epoch=1,
                                transactional=True, control=True, partition_leader_epoch=epoch)
        else:
            data = build_batch(items, timestamp_ms=1_700_000_000_000 + i, base_offset=offset,  # type: ignore[arg-type]
                               partition_leader_epoch=epoch, **options)  # type: ignore[arg-type]
        out[0 if i < len(kinds) else 1].append(data)
        offset = read_batch_header(data).last_offset + 1
    return out


@dataclass(frozen=True)
class _Reference:
    files: tuple[bytes, bytes]
    bases: tuple[int, int]
    batches: tuple[_Batch, ...]


def _reference() -> _Reference:
    segments = _batches()
    batches = []
    for s, parts in enumerate(segments):
        data = b"".join(parts)
        for pos, h in iter_batch_positions(data):
            batches.append(_Batch(s, pos, data[pos : pos + h.size], h.base_offset, h.last_offset,
                                  h.partition_leader_epoch))
    files = (b"".join(segments[0]), b"".join(segments[1]))
    second_base = read_batch_header(files[1]).base_offset
    return _Reference(files, (0, second_base), tuple(batches))


_state: tuple[Path, _Reference] | None = None


def _setup() -> tuple[Path, _Reference]:
    """One directory and reference per process; every input rewrites the files in it."""
    global _state
    if _state is None:
        root = scratch_dir("fuzz-recovery-", memory=True)
        _state = (root, _reference())
    return _state


class _Bytes:
    """The fuzzed input as a stream of mutation parameters; reads past the end give zeros."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk.ljust(n, b"\x00")

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return int.from_bytes(self.take(2), "big")

    def rest(self) -> bytes:
        chunk = self.data[self.pos :]
        self.pos = len(self.data)
        return chunk

    @property
    def left(self) -> bool:
        return self.pos < len(self.data)


def _mutate(ref: _Reference, data: bytes) -> list[bytearray]:
    files = [bytearray(f) for f in ref.files]
    stream = _Bytes(data)
    for _ in range(_MAX_MUTATIONS):
        if not stream.left:
            break
        op = stream.u8()
        f = files[op >> 7]
        segment_batches = [b for b in ref.batches if b.segment == op >> 7]
        kind = op & 7
        if kind == TRUNCATE:
            del f[stream.u16() % (len(f) + 1) :]
        elif kind in (FLIP, SET):
            pos, value = stream.u16(), stream.u8()
            if f:
                if kind == FLIP:
                    f[pos % len(f)] ^= 1 << (value & 7)
                else:
                    f[pos % len(f)] = value
        elif kind == APPEND:
            f += stream.take(stream.u8())
        elif kind in (MAGIC, CRC, LENGTH):
            batch = segment_batches[stream.u8() % len(segment_batches)]
            at = batch.position + {MAGIC: 16, CRC: 17, LENGTH: 8}[kind]
            value = stream.take(1 if kind == MAGIC else 4)
            if kind == CRC:  # a mismatch for sure: flip bits of the stored CRC
                value = bytes(a ^ (b | 1) for a, b in zip(f[at : at + 4], value, strict=False))
            if at + len(value) <= len(f):
                f[at : at + len(value)] = value
        else:  # REPLACE: the rest of the input is the whole segment
            f[:] = stream.rest()
    return files


def _first_damage(original: bytes, mutated: bytes) -> int | None:
    """Byte position of the first difference, None if the file is unchanged."""
    if original == mutated:
        return None
    n = min(len(original), len(mutated))
    for i in range(n):
        if original[i] != mutated[i]:
            return i
    return n


def _expected(ref: _Reference, files: list[bytearray]) -> list[_Batch]:
    """Property 2: the batches before the first damaged byte of the log."""
    kept = []
    for s in (0, 1):
        damage = _first_damage(ref.files[s], bytes(files[s]))
        for b in ref.batches:
            if b.segment == s and (damage is None or b.position + len(b.data) <= damage):
                kept.append(b)
        if damage is not None:
            break
    return kept


def _recovered(log: Log) -> list[tuple[int, int, int, bytes]]:
    """(base, last, epoch, bytes) of every batch the log serves, read through ``Log.read``."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            # Only a trailing gap may read as nothing (empty segments after the data, as after a
            # roll): no segment may hold a batch at or past the offset.
            if any(seg.size and seg.next_offset > offset for seg in log.segments):
                raise Finding(f"read({offset}) returned nothing, yet a segment holds later batches")
            break
        progressed = False
        for pos, h in iter_batch_positions(data):
            if h.last_offset < offset:
                continue
            if not batch_crc_ok(data, pos, h):
                raise Finding(f"recovery kept a batch with a bad CRC at offset {h.base_offset}")
            out.append((h.base_offset, h.last_offset, h.partition_leader_epoch, bytes(data[pos : pos + h.size])))
            offset = h.last_offset + 1
            progressed = True
        if not progressed:
            raise Finding(f"read({offset}) returned no batch at or after it")
    return out


def _check_log(log: Log, expected: list[_Batch], with_checkpoint: bool) -> tuple[list[tuple[int, int, int, bytes]], int]:
    got = _recovered(log)
    for i, b in enumerate(expected):
        if i >= len(got) or got[i] != (b.base, b.last, b.epoch, b.data):
            raise Finding(f"recovery lost or changed the intact batch {b.base}..{b.last}: "
                          f"kept {[(g[0], g[1]) for g in got]}")
    for a, b in pairwise(got):
        if b[0] <= a[1]:
            raise Finding(f"recovered offsets do not increase: {a[:2]} then {b[:2]}")
    data_end = got[-1][1] + 1 if got else log.segments[0].base_offset
    # With a recovery point the log ends where the data does (recovery rule 4); without one, an
    # empty last segment past the data may stand (its hole could be compaction's).
    end = data_end if with_checkpoint else max(data_end, log.segments[-1].base_offset)
    if log.log_end_offset != end:
        raise Finding(f"log end {log.log_end_offset}, the recovered batches end at {data_end - 1}")
    epochs: list[tuple[int, int]] = []
    for base, _last, epoch, _data in got:
        if epoch >= 0 and (not epochs or epoch > epochs[-1][0]):
            epochs.append((epoch, base))
    if list(log.leader_epochs.entries) != epochs:
        raise Finding(f"leader epochs {log.leader_epochs.entries}, the kept batches say {epochs}")
    return got, log.log_end_offset


def _check(root: Path, ref: _Reference, data: bytes) -> None:
    directory = root / "t-0"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    with_checkpoint = bool(data[:1]) and data[0] & WITH_RECOVERY_POINT
    files = _mutate(ref, data[2:])
    for s in (0, 1):
        segment_path(directory, ref.bases[s], LOG_SUFFIX).write_bytes(bytes(files[s]))
    if with_checkpoint:
        # Below the second segment's base, so both segments are scanned; from it on, offsets
        # must be contiguous (segment.py rule 2).
        write_checkpoint(directory / RECOVERY_POINT_FILE, data[1] % ref.bases[1] if len(data) > 1 else 0)
    expected = _expected(ref, files)
    log = Log.open(root, "t", 0, OPTIONS)  # property 1: raising here is the finding
    try:
        first = _check_log(log, expected, with_checkpoint)
        # Recovery rule 2: a cut in the first segment leaves nothing of the second.
        cut_first = f"{segment_path(directory, ref.bases[0], LOG_SUFFIX)}: invalid data"
        if any(r.startswith(cut_first) for r in log.load_result.repairs) and len(log.segments) > 1:
            raise Finding(f"the first segment was cut, yet {len(log.segments)} segments remain")
    finally:
        log.abort()
    log = Log.open(root, "t", 0, OPTIONS)  # property 4: a restart after recovery
    try:
        if _check_log(log, expected, with_checkpoint) != first:
            raise Finding("a second open of the recovered directory changed the log")
    finally:
        log.abort()


def seeds() -> list[bytes]:
    """No damage, one of each mutation, and an interrupted roll; some with a recovery point."""
    ref = _setup()[1]
    mid0, mid1 = ref.batches[3].position + 5, ref.batches[len(ref.batches) - 3].position + 5
    ops = [b""]
    # One of each mutation, spread over the two segments (the replay test mutates each seed a
    # thousand ways more, so a few seeds keep it fast).
    ops += [
        bytes([TRUNCATE]) + struct.pack(">H", mid0),
        bytes([0x80 | FLIP]) + struct.pack(">HB", mid1 + 40, 3),
        bytes([SET]) + struct.pack(">HB", mid0, 0xFF),
        bytes([0x80 | APPEND, 20]) + b"\x00" * 8 + b"\x00\x00\x00\x31" + b"garbage!",
        bytes([MAGIC, 2, 1]),
        bytes([0x80 | CRC, 1]) + b"\x00\x00\x00\x01",
        bytes([LENGTH, 4]) + struct.pack(">i", 10**6),
        bytes([0x80 | REPLACE]) + ref.files[1][:mid1],
    ]
    # The first segment cut at a batch boundary, the second emptied: an interrupted roll.
    ops.append(bytes([TRUNCATE]) + struct.pack(">H", ref.batches[5].position) + bytes([0x80 | REPLACE]))
    return [bytes([0, 0]) + o for o in ops] + [bytes([WITH_RECOVERY_POINT, 3]) + o for o in ops[::3]]


def one_input(data: bytes) -> None:
    root, ref = _setup()
    with quiet():  # every repair is logged
        _check(root, ref, data)


if __name__ == "__main__":
    import sys

    from tests.fuzz.run import main

    sys.exit(main([NAME, *sys.argv[1:]]))
