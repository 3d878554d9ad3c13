"""RecordBatch v2 (magic 2): the unit Kafka stores on disk and sends on the wire.

Kept whole (~680 lines): the encoder, the decoder and the header readers all work from the one
layout below and its byte offsets, and change together when it does; the decode loop inlines its
one- and two-byte varint cases for speed (``protocol/varints.py`` holds the general reader).

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

After the header come ``recordsCount`` records, compressed as one block when bits 0-2 of the
attributes name a codec (``protocol/compression.py``). Each record (Kafka ``DefaultRecord``,
KIP-98) is::

    length          varint   bytes that follow this field
    attributes      int8     unused, written as 0
    timestampDelta  varlong  from the batch's baseTimestamp
    offsetDelta     varint   from the batch's baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value (a tombstone on a compacted topic)
    value           bytes
    headersCount    varint
    headers         headersCount x (keyLength varint, key UTF-8, valueLength varint (-1 = null), value)

Every varint here is the zigzag encoding protobuf uses (sign folded into bit 0, then 7 bits per
byte, least significant group first), so small negative numbers such as -1 take one byte.

This module holds the batch-level view the log engine needs (header, CRC, offset rewrite, walking
a buffer of batches) and the record level: ``decode_records``, ``encode_batch``/``build_batch`` and
the transaction markers of control batches.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from mmap import mmap
from typing import NamedTuple, TypedDict, Unpack, cast

import crc32c as _crc32c

from protocol.compression import Compression, CompressionError, compress, decompress
from protocol.varints import VarintError, encode_uvarint, read_uvarint

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "BatchBuffer",
    "BatchHeader",
    "CorruptBatchError",
    "read_batch_header",
    "batch_crc_ok",
    "compute_crc",
    "set_base_offset",
    "iter_batch_positions",
    "Compression",
    "Record",
    "ControlRecordType",
    "decode_records",
    "encode_batch",
    "build_batch",
    "control_record",
    "decode_control_record",
    "encode_end_txn_marker",
    "read_end_txn_marker",
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


#: What the batch readers read: bytes, a view, or a memory-mapped segment file (the pipeline's
#: readers map whole segments); ``struct.unpack_from``, ``len`` and ``memoryview`` work on each.
BatchBuffer = bytes | bytearray | memoryview | mmap


def read_batch_header(buf: BatchBuffer, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``. Raises CorruptBatchError if it cannot be a v2 batch."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptBatchError("truncated batch header", pos)
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC_V2:
        raise CorruptBatchError(f"unsupported magic {header.magic}", pos)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"batch length {header.batch_length} too small", pos)
    return header


def compute_crc(buf: BatchBuffer, pos: int, size: int) -> int:
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
    buf: BatchBuffer, start: int = 0, end: int | None = None
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


# ---------------------------------------------------------------------------------------------
# Record level


@dataclass(slots=True)
class Record:
    """One record of a batch, with its offset and timestamp relative to the batch header.

    Deltas rather than absolute values because that is what the wire holds: a record can be
    decoded before its batch is assigned offsets, and re-encoded without knowing them.
    """

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    def offset(self, header: BatchHeader) -> int:
        return header.base_offset + self.offset_delta

    def timestamp(self, header: BatchHeader) -> int:
        """The record's timestamp as a consumer sees it.

        With LogAppendTime (attributes bit 3) the broker's append time, stored once as the batch's
        maxTimestamp, stands for every record (KIP-32). Otherwise baseTimestamp + delta; when the
        cleaner set a delete horizon (KIP-534) baseTimestamp holds it and the deltas were rebased
        onto it, so the same sum still gives the producer's timestamp.
        """
        if header.attributes & TIMESTAMP_TYPE_MASK:
            return header.max_timestamp
        return header.base_timestamp + self.timestamp_delta


class ControlRecordType(IntEnum):
    """The ``type`` in a control record's key (Kafka ``ControlRecordType``)."""

    #: Transaction markers (KIP-98): written by the transaction coordinator's WriteTxnMarkers.
    ABORT = 0
    COMMIT = 1
    #: KRaft's own metadata log uses these (KIP-595, KIP-630); listed so they print by name.
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


class _Malformed(Exception):
    """Raised inside the record decoder; ``decode_records`` adds the batch position."""


_MIN_RECORD_BODY = 6  # attributes + one byte each for the five varints
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")


#: Bits a varint (5 bytes) or varlong (10 bytes) keeps: those of an int32 / int64, as in Java.
_WIDTH_MASK = {5: (1 << 32) - 1, 10: (1 << 64) - 1}


def _read_varint_slow(data: bytes, p: int, max_bytes: int) -> tuple[int, int]:
    """Zigzag varint of more than one byte at ``p``; returns ``(value, next position)``.

    ``max_bytes`` is 5 for a varint (int32) and 10 for a varlong (int64): protocol/varints.py's
    reader refuses longer encodings, as Kafka's ``ByteUtils`` does. The last byte may still carry
    bits beyond the type's width (5 x 7 = 35 > 32): Java's shifts drop them, and so do we
    (``_WIDTH_MASK``), else an offset delta beyond int32 or a timestamp delta beyond int64 would
    come out of here (found by tests/fuzz/fuzz_records.py).
    """
    try:
        z, p = read_uvarint(data, p, max_bytes)
    except VarintError as exc:
        raise _Malformed(str(exc)) from None
    z &= _WIDTH_MASK[max_bytes]
    return (z >> 1) ^ -(z & 1), p


def _read_headers(
    data: bytes, p: int, end: int, count: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    """``count`` headers from ``p``, none of them past ``end`` (the record's end)."""
    headers = []
    for _ in range(count):
        b = data[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            n, p = _read_varint_slow(data, p, 5)
        if n < 0:
            raise _Malformed("null or negative header key length")
        q = p + n
        if q > end:
            raise _Malformed("header key overruns its record")
        # Java decodes header keys with new String(bytes, UTF_8), which replaces malformed input
        # instead of failing; doing the same keeps us able to read whatever a Java consumer can.
        hkey = data[p:q].decode("utf-8", "replace")
        p = q
        b = data[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            n, p = _read_varint_slow(data, p, 5)
        if n < 0:
            if n != -1:
                raise _Malformed(f"header value length {n}")
            hvalue = None
        else:
            q = p + n
            if q > end:
                raise _Malformed("header value overruns its record")
            hvalue = data[p:q]
            p = q
        headers.append((hkey, hvalue))
    return tuple(headers), p


def _decode_body(data: bytes, p: int, end: int, count: int) -> list[Record]:
    """Decode ``count`` records from ``data[p:end]``; every record must end where it says.

    This is the hot loop of recovery scans and of the pipeline, hence the inlined fast paths for
    one- and two-byte varints: lengths and deltas below 64 (and -1 for null) take one byte, below
    8192 two, and a Python call per varint would cost more than everything else here.
    """
    records: list[Record] = []
    append = records.append
    new_record = Record
    for _ in range(count):
        b = data[p]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            b = (b & 0x7F) | (data[p + 1] << 7)
            length = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            length, p = _read_varint_slow(data, p, 5)
        rec_end = p + length
        if length < _MIN_RECORD_BODY or rec_end > end:
            raise _Malformed(f"record length {length} is impossible here")
        p += 1  # record attributes: reserved since KIP-98, nothing to read
        b = data[p]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            b = (b & 0x7F) | (data[p + 1] << 7)
            ts_delta = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            ts_delta, p = _read_varint_slow(data, p, 10)
        b = data[p]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            b = (b & 0x7F) | (data[p + 1] << 7)
            off_delta = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            off_delta, p = _read_varint_slow(data, p, 5)
        b = data[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            b = (b & 0x7F) | (data[p + 1] << 7)
            n = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            n, p = _read_varint_slow(data, p, 5)
        if n < 0:
            if n != -1:
                raise _Malformed(f"key length {n}")
            key = None
        else:
            q = p + n
            if q > rec_end:
                raise _Malformed("key overruns its record")
            key = data[p:q]
            p = q
        b = data[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            b = (b & 0x7F) | (data[p + 1] << 7)
            n = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            n, p = _read_varint_slow(data, p, 5)
        if n < 0:
            if n != -1:
                raise _Malformed(f"value length {n}")
            value = None
        else:
            q = p + n
            if q > rec_end:
                raise _Malformed("value overruns its record")
            value = data[p:q]
            p = q
        b = data[p]
        if b == 0:
            headers: tuple[tuple[str, bytes | None], ...] = ()
            p += 1
        else:
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                n, p = _read_varint_slow(data, p, 5)
            if n < 0 or n > rec_end - p:
                raise _Malformed(f"header count {n}")
            headers, p = _read_headers(data, p, rec_end, n)
        if p != rec_end:
            raise _Malformed(f"record declared {length} bytes but its fields take {length + p - rec_end}")
        append(new_record(off_delta, ts_delta, key, value, headers))
    if p != end:
        # Kafka: "Incorrect declared batch size, records still remaining".
        raise _Malformed(f"{end - p} bytes left after the declared {count} records")
    return records


def decode_records(
    buf: BatchBuffer,
    pos: int = 0,
    header: BatchHeader | None = None,
    *,
    check_crc: bool = True,
) -> list[Record]:
    """Decode the records of the batch at ``pos``, decompressing them if needed.

    Args:
        buf: bytes holding the batch (and possibly others around it).
        pos: where the batch starts.
        header: the batch's header if the caller already parsed it.
        check_crc: verify the CRC first. Callers that just validated the batch (a recovery scan)
            can skip the second pass over the bytes.

    Raises:
        CorruptBatchError: for anything malformed, a bad CRC included, with the batch's ``pos``.
        No other exception escapes for bad input.
    """
    if header is None:
        header = read_batch_header(buf, pos)
    size = header.size
    if len(buf) - pos < size:
        raise CorruptBatchError("truncated batch", pos)
    if check_crc and compute_crc(buf, pos, size) != header.crc:
        raise CorruptBatchError("CRC mismatch", pos)
    count = header.records_count
    if count < 0:
        raise CorruptBatchError(f"negative record count {count}", pos)
    codec = header.attributes & COMPRESSION_MASK
    start = pos + BATCH_HEADER_SIZE
    end = pos + size
    if codec == Compression.NONE:
        if type(buf) is bytes:
            data, p = buf, start
        else:
            data, p, end = bytes(memoryview(buf)[start:end]), 0, end - start
    else:
        if codec > Compression.ZSTD:
            raise CorruptBatchError(f"unknown compression codec {codec}", pos)
        try:
            data = decompress(codec, memoryview(buf)[start:end])
        except CompressionError as exc:
            raise CorruptBatchError(str(exc), pos) from exc
        p, end = 0, len(data)
    # Each record takes at least 7 bytes; refuse absurd counts before looping over them.
    if count * (_MIN_RECORD_BODY + 1) > end - p:
        raise CorruptBatchError(f"record count {count} cannot fit in {end - p} bytes", pos)
    try:
        return _decode_body(data, p, end, count)
    except _Malformed as exc:
        raise CorruptBatchError(str(exc), pos) from None
    except IndexError:
        raise CorruptBatchError("record runs past the end of the batch", pos) from None


# A byte string per small zigzag value: most lengths and deltas are below 64.
_SMALL_VARINTS = [bytes([z]) for z in range(0x80)]


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)  # zigzag: a record's fields are signed varints
    if z < 0x80:
        return _SMALL_VARINTS[z]
    return encode_uvarint(z)


def _encode_record(record: Record, ts_delta: int, out: bytearray) -> None:
    body = bytearray(b"\x00")  # attributes
    body += _varint(ts_delta)
    body += _varint(record.offset_delta)
    key = record.key
    if key is None:
        body += b"\x01"  # zigzag(-1)
    else:
        body += _varint(len(key))
        body += key
    value = record.value
    if value is None:
        body += b"\x01"
    else:
        body += _varint(len(value))
        body += value
    body += _varint(len(record.headers))
    for hkey, hvalue in record.headers:
        raw = hkey.encode("utf-8")
        body += _varint(len(raw))
        body += raw
        if hvalue is None:
            body += b"\x01"
        else:
            body += _varint(len(hvalue))
            body += hvalue
    out += _varint(len(body))
    out += body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int,
    max_timestamp: int | None = None,
    compression: int = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
    last_offset_delta: int | None = None,
    delete_horizon: int | None = None,
) -> bytes:
    """Build one RecordBatch v2 from records whose deltas are relative to ``base_timestamp``.

    ``last_offset_delta`` defaults to the largest record offset delta; compaction keeps it when it
    removes the last records, so it may be larger. ``max_timestamp`` defaults to the latest
    record timestamp (-1 for an empty batch, Kafka's NO_TIMESTAMP). With ``delete_horizon`` the
    batch's baseTimestamp field carries the horizon instead (KIP-534) and the record deltas are
    rebased onto it, so absolute timestamps are unchanged.
    """
    attributes = compression & COMPRESSION_MASK
    if compression != attributes:
        raise ValueError(f"unknown compression codec {compression}")
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    stored_base = base_timestamp
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_MASK
        stored_base = delete_horizon
    shift = base_timestamp - stored_base
    body = bytearray()
    for record in records:
        _encode_record(record, record.timestamp_delta + shift, body)
    if records:
        if last_offset_delta is None:
            last_offset_delta = max(r.offset_delta for r in records)
        if max_timestamp is None:
            max_timestamp = base_timestamp + max(r.timestamp_delta for r in records)
    else:
        if last_offset_delta is None:
            last_offset_delta = 0
        if max_timestamp is None:
            max_timestamp = -1
    payload = compress(compression, body) if compression != Compression.NONE else bytes(body)
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC_V2,
        0,  # CRC, filled in below once the bytes it covers exist
        attributes,
        last_offset_delta,
        stored_base,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out += payload
    struct.pack_into(">I", out, _CRC_OFFSET, _crc32c.crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


class BatchOptions(TypedDict, total=False):
    """The keyword arguments of ``encode_batch`` that ``build_batch`` passes on."""

    max_timestamp: int | None
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    transactional: bool
    control: bool
    log_append_time: bool
    last_offset_delta: int | None
    delete_horizon: int | None


def build_batch(
    items: Iterable[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
    *,
    timestamp_ms: int,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    **options: Unpack[BatchOptions],
) -> bytes:
    """A batch of sequential records ``(key, value)`` or ``(key, value, headers)``, one timestamp.

    The usual shape of a coordinator write; ``options`` go to ``encode_batch`` (producer_id, ...).
    """
    items = list(items)
    if compression == Compression.NONE and not options and all(len(item) == 2 for item in items):
        # Every item is a pair (checked just above), which mypy cannot see through ``all``.
        return _plain_batch(cast("list[tuple[bytes | None, bytes | None]]", items), timestamp_ms, base_offset)
    records = []
    for i, item in enumerate(items):
        headers = tuple(item[2]) if len(item) == 3 else ()
        records.append(Record(i, 0, item[0], item[1], headers))
    return encode_batch(
        records, base_offset=base_offset, base_timestamp=timestamp_ms, compression=compression, **options
    )


def _plain_batch(items: list[tuple[bytes | None, bytes | None]], timestamp_ms: int, base_offset: int) -> bytes:
    """``build_batch`` for the coordinator's writes: keyed records, no headers, no compression.

    The same bytes ``encode_batch`` writes (a test compares them), without a ``Record`` per item:
    every OffsetCommit pays for this once per partition it commits.
    """
    varint = _varint
    parts: list[bytes] = []
    for i, (key, value) in enumerate(items):
        # attributes 0, timestamp delta 0, offset delta i, key, value, no headers
        body = b"".join((b"\x00\x00", varint(i),
                         b"\x01" if key is None else varint(len(key)), key or b"",
                         b"\x01" if value is None else varint(len(value)), value or b"", b"\x00"))
        parts.append(varint(len(body)))
        parts.append(body)
    payload = b"".join(parts)
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(out, 0, base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, MAGIC_V2, 0, 0,
                      max(len(items) - 1, 0), timestamp_ms, timestamp_ms if items else -1, -1, -1, -1, len(items))
    out += payload
    struct.pack_into(">I", out, _CRC_OFFSET, _crc32c.crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def control_record(kind: ControlRecordType, coordinator_epoch: int, *, offset_delta: int = 0) -> Record:
    """A transaction marker as the broker writes it (KIP-98 ``EndTransactionMarker``).

    Key: int16 version 0 + int16 type. Value: int16 version 0 + int32 coordinator epoch.
    """
    return Record(
        offset_delta, 0, _CONTROL_KEY.pack(0, int(kind)), _END_TXN_MARKER.pack(0, coordinator_epoch)
    )


def decode_control_record(record: Record) -> tuple[int, int]:
    """``(version, type)`` from a control record's key; compare ``type`` with ControlRecordType.

    Only the first four bytes are read: Kafka allows later key versions to append fields.
    Raises CorruptBatchError if the key is missing, too short, or has a negative version.
    """
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptBatchError("control record key is missing or shorter than 4 bytes")
    version, kind = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptBatchError(f"control record key version {version}")
    return version, kind


def encode_end_txn_marker(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytearray:
    """The control batch a transaction marker is written as (Kafka's
    ``MemoryRecords.writeEndTransactionalMarker``): magic 2, uncompressed, CreateTime, the
    producer's id and epoch, base sequence -1, transactional and control attributes, one record
    whose key is ``EndTransactionMarker``'s (version 0, ABORT=0 / COMMIT=1) and whose value is
    version 0 plus the coordinator epoch. A bytearray: the log takes ownership of the buffer."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return bytearray(encode_batch(
        [control_record(kind, coordinator_epoch)],
        base_offset=base_offset,
        base_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        partition_leader_epoch=partition_leader_epoch,
        transactional=True,
        control=True,
    ))


def read_end_txn_marker(buf: BatchBuffer, pos: int = 0, header: BatchHeader | None = None) -> tuple[bool, int] | None:
    """``(commit, coordinator_epoch)`` of the transaction marker in the control batch at ``pos``,
    or None when the batch holds none: it is empty (the cleaner removed its record, KIP-98) or
    its record is another control type (KRaft's, which a data partition never carries).

    Readers accept later key and value versions, which may only append fields (Kafka's
    ``EndTransactionMarker.deserializeValue``). Raises CorruptBatchError for a malformed batch.
    """
    if header is None:
        header = read_batch_header(buf, pos)
    if not header.attributes & CONTROL_MASK:
        raise CorruptBatchError("not a control batch", pos)
    records = decode_records(buf, pos, header, check_crc=False)
    if not records:
        return None
    _version, kind = decode_control_record(records[0])
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    value = records[0].value
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise CorruptBatchError("transaction marker value is missing or shorter than 6 bytes", pos)
    value_version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if value_version < 0:
        raise CorruptBatchError(f"transaction marker value version {value_version}", pos)
    return kind == ControlRecordType.COMMIT, coordinator_epoch
