"""Idempotent-producer state of one partition: which batches each producer id last wrote.

An idempotent producer (KIP-98) stamps each batch with its producer id, epoch and the sequence
number of its first record. The partition remembers, per producer, the last few batches it
appended, so that:

* a retried batch that was already appended is recognised and not written twice (Kafka answers
  it with success and the offsets of the original, and so do we);
* a gap in sequence numbers is refused with OUT_OF_ORDER_SEQUENCE_NUMBER;
* a batch from an older epoch is refused with INVALID_PRODUCER_EPOCH (the producer was fenced).

Rules:

1. ``check`` is pure: it decides, ``update`` records an appended batch. The caller checks, appends,
   then updates, under the partition's append order.
2. Only the last ``BATCHES_PER_PRODUCER`` (5) batches per producer are kept: a producer has at
   most five requests in flight per partition (``max.in.flight.requests.per.connection`` ≤ 5 is a
   precondition of idempotence), so a retry is always among them.
3. The state is derived from the log: every field comes from batch headers. It survives restarts
   as a snapshot taken at a log offset plus a replay of the batch headers after that offset, and a
   snapshot past the log end (data lost in a crash) is discarded, never trusted.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import crc32c as _crc32c

from protocol.errors import ErrorCode
from protocol.records import BatchHeader

from .errors import CorruptSnapshotError

__all__ = ["ProducerStateManager", "BatchMetadata", "ProducerEntry", "Duplicate", "BATCHES_PER_PRODUCER"]

BATCHES_PER_PRODUCER = 5
NO_PRODUCER_ID = -1
INT32_MAX = 2**31 - 1

_SNAPSHOT_MAGIC = b"GCPS"
_SNAPSHOT_HEAD = struct.Struct(">4shqI")  # magic, version, log offset, entry count
_ENTRY = struct.Struct(">qhB")  # producer id, epoch, batch count
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, max timestamp
_CRC = struct.Struct(">I")


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_PER_PRODUCER))

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The batch was appended before: answer with the original's offsets, append nothing."""

    first_offset: int
    last_offset: int
    max_timestamp: int


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    # Sequence numbers wrap from Integer.MAX_VALUE to 0.
    return next_seq == last_seq + 1 or (last_seq == INT32_MAX and next_seq == 0)


def _last_seq(header: BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % (INT32_MAX + 1)


class ProducerStateManager:
    """Per-partition producer state. Not thread-safe: used under the partition's append order."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> int | Duplicate:
        """``ErrorCode.NONE``, an error code to refuse the batch with, or a :class:`Duplicate`."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID or header.is_control:
            return ErrorCode.NONE
        entry = self.producers.get(pid)
        if entry is None:
            # An unknown producer (new, or its state expired): accept any sequence, as Kafka does.
            return ErrorCode.NONE
        if header.producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if header.producer_epoch > entry.epoch:
            # A bumped epoch restarts the sequence at 0.
            return ErrorCode.NONE if header.base_sequence == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        last = _last_seq(header)
        for batch in entry.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == last:
                return Duplicate(batch.first_offset, batch.last_offset, batch.max_timestamp)
        if entry.last_seq is not None and not _in_sequence(entry.last_seq, header.base_sequence):
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        return ErrorCode.NONE

    def update(self, header: BatchHeader, base_offset: int) -> None:
        """Record a batch appended at ``base_offset`` (its header's own base offset is ignored)."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID or header.is_control:
            return
        entry = self.producers.get(pid)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = ProducerEntry(pid, header.producer_epoch)
            self.producers[pid] = entry
        entry.batches.append(BatchMetadata(header.base_sequence, _last_seq(header), base_offset,
                                           base_offset + header.last_offset_delta, header.max_timestamp))

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Rebuild from batch headers read from the log (their base offsets are the real ones)."""
        for header in headers:
            self.update(header, header.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or above ``offset`` (the log was truncated there)."""
        for pid in list(self.producers):
            entry = self.producers[pid]
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self.producers[pid]
            else:
                entry.batches = deque(kept, maxlen=BATCHES_PER_PRODUCER)

    # --- snapshots ------------------------------------------------------------------------------

    def snapshot(self, log_offset: int) -> bytes:
        """The state as of ``log_offset`` (the log end when taken), with a CRC over it."""
        parts = [_SNAPSHOT_HEAD.pack(_SNAPSHOT_MAGIC, 1, log_offset, len(self.producers))]
        for entry in self.producers.values():
            parts.append(_ENTRY.pack(entry.producer_id, entry.epoch, len(entry.batches)))
            for b in entry.batches:
                parts.append(_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.max_timestamp))
        body = b"".join(parts)
        return body + _CRC.pack(_crc32c.crc32c(body))

    @classmethod
    def from_snapshot(cls, data: bytes) -> tuple[ProducerStateManager, int]:
        """Parse a snapshot; returns the state and the log offset it was taken at.

        Raises ``CorruptSnapshotError`` (a ValueError) when the bytes are not a whole, intact
        snapshot.
        """
        if len(data) < _SNAPSHOT_HEAD.size + _CRC.size:
            raise CorruptSnapshotError("snapshot truncated")
        body, (crc,) = data[:-_CRC.size], _CRC.unpack(data[-_CRC.size:])
        if _crc32c.crc32c(body) != crc:
            raise CorruptSnapshotError("snapshot CRC mismatch")
        magic, version, log_offset, count = _SNAPSHOT_HEAD.unpack_from(body, 0)
        if magic != _SNAPSHOT_MAGIC or version != 1:
            raise CorruptSnapshotError(f"not a producer state snapshot (magic {magic!r}, version {version})")
        state = cls()
        pos = _SNAPSHOT_HEAD.size
        try:
            for _ in range(count):
                pid, epoch, n = _ENTRY.unpack_from(body, pos)
                pos += _ENTRY.size
                entry = ProducerEntry(pid, epoch)
                for _ in range(n):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                state.producers[pid] = entry
        except struct.error:
            raise CorruptSnapshotError("snapshot truncated") from None
        if pos != len(body):
            raise CorruptSnapshotError("snapshot has trailing bytes")
        return state, log_offset
