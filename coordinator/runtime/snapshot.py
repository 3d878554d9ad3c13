"""Snapshots of a coordinator partition's materialised state, so that loading follows the live
state instead of the length of the log (issue #6).

A snapshot is the shard's hard state *as records* — the GroupMetadata and OffsetCommit records a
fully compacted log would keep — taken when the partition's log had been written up to offset
``O``. Loading replays the snapshot's records, then the log from ``O``, through the one
``replay()``: a snapshot is a shortcut over a prefix of the log, not a second format of the state.

File ``coordinator.snapshot`` in the partition's log directory::

    magic "GCSNAP01" | int64 offset O | int64 captured_ms | int64 record count | uint32 CRC-32C of
    the 28 bytes before it | RecordBatch v2 batches (each with its own CRC) holding the records

Trust rule. A snapshot at ``O`` captured at wall time ``T`` is used only if all of these hold,
otherwise it is deleted and the whole log is replayed:

1. the file is whole: magic, header CRC, every batch CRC and the record count check out, and
   every record replays (``loader.py`` drops a snapshot whose record raises, and replays the log
   into a new shard: a writer's bug must not fail a partition whose log is sound);
2. ``log_start_offset <= O <= log_end_offset`` after the log's crash recovery. A snapshot is
   written to disk only once the log is durable up to ``O`` and recovery only cuts bytes that
   were never fsynced, so ``O`` past the end means the disk lost acknowledged data or the
   directory was swapped: the snapshot could then hold state the log does not, and is dropped;
3. ``now < T + delete.retention.ms`` of the offsets topic. Replaying a compacted tail onto the
   snapshot gives the state of replaying the whole log only while every tombstone written after
   ``T`` is still in the log; the cleaner removes a tombstone no earlier than
   ``delete.retention.ms`` after it first cleans it (KIP-534), which is after ``T``.

The runtime renews a partition's snapshot when half of ``delete.retention.ms`` has passed, even
if nothing changed, so rule 3 does not push an idle coordinator into a full replay.

A snapshot that fails a rule is deleted, so that appends after a full replay cannot later make a
stale snapshot look valid (rule 2 would pass again once the log grows past ``O``).

Open transactions (KIP-447). Pending transactional offsets are state the log implies: a
TxnOffsetCommit's records whose COMMIT or ABORT marker is not yet written. A compacted log keeps
them in their transactional batches, and so does a snapshot: after the plain records come the
shard's ``snapshot_transactional_records``, one batch each, carrying the producer id and epoch
and the record's original offset as its base offset. Replaying the snapshot then gives the
shard the same pending records, from the same producers, at the same offsets, which is what
its later markers need ("the last log position wins" compares offsets), and a marker in the log
after ``O`` completes them as it would have without the snapshot. Snapshots are therefore taken
whether or not transactions are open (under exactly-once load one almost always is).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import crc32c

from protocol.records import CorruptBatchError, batch_crc_ok, build_batch, iter_batch_positions
from storage.files import atomic_write

__all__ = ["SNAPSHOT_FILE", "Snapshot", "SnapshotEncoder", "SnapshotError", "encode_snapshot", "read_snapshot",
           "remove_snapshot", "write_snapshot"]

SNAPSHOT_FILE = "coordinator.snapshot"
_MAGIC = b"GCSNAP01"
_HEAD = struct.Struct(">8sqqq")
_CRC = struct.Struct(">I")
_HEADER_SIZE = _HEAD.size + _CRC.size
#: Records per batch: big batches keep the per-batch cost out of loading.
_BATCH_RECORDS = 4096


class SnapshotError(ValueError):
    """A snapshot file that is not whole; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Snapshot:
    offset: int
    captured_ms: int
    records: int
    #: The record batches, to be walked with the log's batch reader.
    batches: bytes


class SnapshotEncoder:
    """Builds a snapshot batch by batch, so a caller on the event loop can pause in between."""

    BATCH_RECORDS = _BATCH_RECORDS

    def __init__(self, offset: int, captured_ms: int) -> None:
        self.offset = offset
        self.captured_ms = captured_ms
        self._body = bytearray()
        self._count = 0

    def add(self, records: list[tuple[bytes, bytes]]) -> None:
        if records:
            self._body += build_batch(records, timestamp_ms=self.captured_ms)
            self._count += len(records)

    def add_transactional(self, records: Iterable[tuple[int, int, int, bytes, bytes | None]]) -> None:
        """Records of open transactions, ``(offset, producer_id, producer_epoch, key, value)``:
        each in a batch at its original offset, transactional with its producer (-1: plain)."""
        for offset, producer_id, producer_epoch, key, value in records:
            if producer_id < 0:
                self._body += build_batch([(key, value)], timestamp_ms=self.captured_ms, base_offset=offset)
            else:
                self._body += build_batch([(key, value)], timestamp_ms=self.captured_ms, base_offset=offset,
                                          producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                                          transactional=True)
            self._count += 1

    def finish(self) -> bytes:
        head = _HEAD.pack(_MAGIC, self.offset, self.captured_ms, self._count)
        return b"".join((head, _CRC.pack(crc32c.crc32c(head)), self._body))


def encode_snapshot(offset: int, captured_ms: int, records: Iterable[tuple[bytes, bytes]]) -> bytes:
    encoder = SnapshotEncoder(offset, captured_ms)
    chunk: list[tuple[bytes, bytes]] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == _BATCH_RECORDS:
            encoder.add(chunk)
            chunk = []
    encoder.add(chunk)
    return encoder.finish()


def write_snapshot(directory: Path, data: bytes) -> None:
    """Atomically replace the directory's snapshot (blocking: run it off the event loop)."""
    atomic_write(directory / SNAPSHOT_FILE, data)


def read_snapshot(directory: Path) -> Snapshot | None:
    """The directory's snapshot, None if there is none; SnapshotError if it is not whole."""
    path = directory / SNAPSHOT_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) < _HEADER_SIZE:
        raise SnapshotError(f"{path}: {len(data)} bytes, shorter than the header")
    magic, offset, captured_ms, count = _HEAD.unpack_from(data)
    if magic != _MAGIC:
        raise SnapshotError(f"{path}: not a snapshot (magic {magic!r})")
    if _CRC.unpack_from(data, _HEAD.size)[0] != crc32c.crc32c(data[:_HEAD.size]):
        raise SnapshotError(f"{path}: header CRC mismatch")
    body = data[_HEADER_SIZE:]
    seen = 0
    end = 0
    try:
        for pos, header in iter_batch_positions(body):
            if not batch_crc_ok(body, pos, header):
                raise SnapshotError(f"{path}: CRC mismatch in the batch at byte {_HEADER_SIZE + pos}")
            seen += header.records_count
            end = pos + header.size
    except CorruptBatchError as exc:
        raise SnapshotError(f"{path}: {exc}") from None
    if end != len(body) or seen != count:
        raise SnapshotError(f"{path}: truncated ({seen} of {count} records, {len(body) - end} stray bytes)")
    return Snapshot(offset, captured_ms, count, body)


def remove_snapshot(directory: Path) -> None:
    try:
        os.unlink(directory / SNAPSHOT_FILE)
    except FileNotFoundError:
        pass
