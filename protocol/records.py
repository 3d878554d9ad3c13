"""RecordBatch v2 (magic 2): the unit Kafka stores on disk and sends on the wire.

Layout (Kafka ``DefaultRecordBatch``), all big-endian::

    offset  size  field
         0     8  baseOffset
         8     4  batchLength            bytes that follow this field
        12     4  partitionLeaderEpoch
        16     1  magic                  2
        17     4  crc                    CRC-32C of bytes 21..end (attributes onwards)
        21     2  attributes             bits 0-2 compression, 3 timestamp type (1 = LogAppendTime),
                                          4 transactional, 5 control, 6 delete horizon set
        23     4  lastOffsetDelta
        27     8  baseTimestamp          (the delete horizon when bit 6 is set)
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61        records...

The CRC starts at the attributes, so the broker can rewrite baseOffset, and the leader epoch,
without recomputing it. That is how offsets are assigned to a batch a producer sent compressed.

This module holds the batch-level view (header, CRC, offset rewrite, walking a buffer of batches)
that the log engine needs; record-level encoding and compression live beside it.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

import crc32c as _crc32c

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "BatchHeader",
    "CorruptBatchError",
    "read_batch_header",
    "batch_crc_ok",
    "compute_crc",
    "set_base_offset",
    "iter_batch_positions",
]

MAGIC_V2 = 2
#: baseOffset + batchLength: the part of a batch not counted by batchLength.
LOG_OVERHEAD = 12
BATCH_HEADER_SIZE = 61
#: The smallest legal batchLength (a header with no records).
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAGIC_OFFSET = 16
_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_INT64 = struct.Struct(">q")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40


class CorruptBatchError(ValueError):
    """A batch failed validation; ``position`` is its byte offset in the buffer or file."""

    def __init__(self, reason: str, position: int = 0) -> None:
        super().__init__(f"{reason} at byte {position}")
        self.reason = reason
        self.position = position


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``. Raises CorruptBatchError if it cannot be a v2 batch."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptBatchError("truncated batch header", pos)
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC_V2:
        raise CorruptBatchError(f"unsupported magic {header.magic}", pos)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"batch length {header.batch_length} too small", pos)
    return header


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of the batch at ``pos`` of ``size`` bytes, over attributes..end."""
    return _crc32c.crc32c(memoryview(buf)[pos + _ATTRIBUTES_OFFSET : pos + size])


def batch_crc_ok(buf: bytes | bytearray | memoryview, pos: int = 0, header: BatchHeader | None = None) -> bool:
    if header is None:
        header = read_batch_header(buf, pos)
    if len(buf) - pos < header.size:
        return False
    return compute_crc(buf, pos, header.size) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite a batch's base offset in place; the CRC does not cover it."""
    _INT64.pack_into(buf, pos, base_offset)


def iter_batch_positions(
    buf: bytes | bytearray | memoryview, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch from ``start``.

    Stops silently at a trailing partial batch (the caller decides whether that is a torn write or
    just the end of a read); raises CorruptBatchError on a header that cannot be valid. CRCs are
    not checked here.
    """
    if end is None:
        end = len(buf)
    pos = start
    while end - pos >= LOG_OVERHEAD:
        _base, length = _PREFIX.unpack_from(buf, pos)
        if length < MIN_BATCH_LENGTH:
            raise CorruptBatchError(f"batch length {length} too small", pos)
        if pos + LOG_OVERHEAD + length > end:
            return
        header = read_batch_header(buf, pos)
        yield pos, header
        pos += header.size
