"""Record batches: headers, records, varints, headers of records, control records, codecs.

Edge: every RecordBatch that enters from a Produce request, a replica fetch or a segment file
(``protocol/records.py``), and the four codecs behind it (``protocol/compression.py``). Only
magic 2 is ours to read: a v0/v1 message set (magic 0 or 1) must be refused as corrupt, never
misread, so the seeds carry a few to keep that path exercised.

Input: byte 0 picks a mode, the rest is the buffer.

0. *Log scan*, as recovery and ``dump-log`` walk a buffer: ``iter_batch_positions``, then for each
   batch the CRC check and ``decode_records`` without the CRC (so mutations reach the records),
   and ``decode_control_record`` on control batches.
1. *Produce*, as the Produce handler validates one batch: the harness first makes the batch's
   length and CRC agree with the bytes (else nearly every mutation dies at the CRC), then
   ``read_batch_header`` and ``decode_records`` with the CRC checked.
2. *Codec*: byte 1 picks a codec id (0-7: the four codecs, none, and unknown ids), the rest is
   handed to ``decompress`` directly, with a 1 MiB output cap.

Properties: only ``CorruptBatchError`` and ``CompressionError`` escape; a decoded record's
offset delta fits an int32 and its timestamp delta an int64, as Kafka's ``DefaultRecord`` holds
them; and decoded records re-encode (``encode_batch``) to a batch that decodes to the same records.
"""

from __future__ import annotations

import struct

from protocol.compression import Compression, CompressionError, compress, decompress
from protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    LOG_OVERHEAD,
    ControlRecordType,
    CorruptBatchError,
    Record,
    batch_crc_ok,
    build_batch,
    compute_crc,
    control_record,
    decode_control_record,
    decode_records,
    encode_batch,
    iter_batch_positions,
    read_batch_header,
)
from tests.fuzz.harness import Finding, expect

NAME = "records"
INSTRUMENT = ("protocol.records", "protocol.compression")

OURS = (CorruptBatchError, CompressionError)
SCAN, PRODUCE, CODEC = range(3)
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_CODEC_CAP = 1 << 20


def _legacy_message(magic: int, offset: int, key: bytes | None, value: bytes) -> bytes:
    """A v0/v1 message set entry (offset, size, crc, magic, attributes, [timestamp], key, value):
    built here only so the seeds show the decoder one; we never write them."""
    body = bytes([magic, 0]) + (struct.pack(">q", 1_700_000_000_000) if magic == 1 else b"")
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", 0) + body  # CRC-32 not computed: refused before it is read
    return struct.pack(">qi", offset, len(message)) + message


def _batches() -> list[bytes]:
    ts = 1_700_000_000_000
    items = [(b"k1", b"v1"), (None, b"tombstone-less value"), (b"k3", None)]
    with_headers = [(b"k", b"v", [("h1", b"x"), ("trace-id", None), ("été", b"\xff\x00")]), (b"k2", b"v2", [])]
    out = [build_batch(items, timestamp_ms=ts), build_batch([], timestamp_ms=ts)]
    for codec in Compression:
        out.append(build_batch(with_headers, timestamp_ms=ts, base_offset=100, compression=codec,
                               producer_id=7, producer_epoch=0, base_sequence=0))
        out.append(build_batch([(b"k%d" % i, b"value-%d" % i * 20) for i in range(20)], timestamp_ms=ts,
                               compression=codec))
    out.append(encode_batch([control_record(ControlRecordType.COMMIT, 5)], base_offset=9, base_timestamp=ts,
                            producer_id=7, producer_epoch=1, transactional=True, control=True))
    out.append(encode_batch([control_record(ControlRecordType.ABORT, 0)], base_timestamp=ts,
                            transactional=True, control=True, compression=Compression.GZIP))
    out.append(encode_batch([Record(0, -5, b"k", b"v"), Record(3, 2**40, None, None)], base_timestamp=ts,
                            delete_horizon=ts + 86_400_000, log_append_time=True, last_offset_delta=7))
    return out


def seeds() -> list[bytes]:
    batches = _batches()
    legacy = [_legacy_message(0, 0, b"k", b"v0 value"), _legacy_message(1, 1, None, b"v1 value")]
    out = [bytes([SCAN]) + b for b in batches + legacy]
    out.append(bytes([SCAN]) + b"".join(batches))
    out += [bytes([PRODUCE]) + b for b in batches + legacy]
    payload = b"".join(b for b in batches[:2])
    out += [bytes([CODEC, codec]) + compress(codec, payload) for codec in Compression]
    return out


def _check_records(header: object, records: list[Record]) -> None:
    """Decoded values are in their Kafka types' ranges and survive a re-encode."""
    for r in records:
        if not _INT32[0] <= r.offset_delta <= _INT32[1] or not _INT64[0] <= r.timestamp_delta <= _INT64[1]:
            raise Finding(f"record deltas out of range: offset {r.offset_delta}, timestamp {r.timestamp_delta}")
    again = encode_batch(records, base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp,  # type: ignore[attr-defined]
                         last_offset_delta=header.last_offset_delta)  # type: ignore[attr-defined]
    if decode_records(again) != records:
        raise Finding("decoded records do not survive a re-encode")


def _scan(buf: bytes) -> None:
    with expect(*OURS):
        for pos, header in iter_batch_positions(buf):
            batch_crc_ok(buf, pos, header)
            records = decode_records(buf, pos, header, check_crc=False)
            _check_records(header, records)
            if header.attributes & CONTROL_MASK:
                for record in records:
                    decode_control_record(record)


def _produce(buf: bytes) -> None:
    batch = bytearray(buf)
    if len(batch) >= BATCH_HEADER_SIZE:
        struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
        struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
    with expect(*OURS):
        header = read_batch_header(batch, 0)
        records = decode_records(batch, 0, header)
        _check_records(header, records)
        if header.is_control:
            for record in records:
                decode_control_record(record)


def _codec(buf: bytes) -> None:
    if not buf:
        return
    with expect(*OURS):
        out = decompress(buf[0] % 8, buf[1:], max_size=_CODEC_CAP)
        if len(out) > _CODEC_CAP:
            raise Finding(f"decompress returned {len(out)} bytes, over its cap of {_CODEC_CAP}")


def one_input(data: bytes) -> None:
    if not data:
        return
    mode = data[0] % 3
    if mode == SCAN:
        _scan(data[1:])
    elif mode == PRODUCE:
        _produce(data[1:])
    else:
        _codec(data[1:])
