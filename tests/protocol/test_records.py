"""RecordBatch v2 record level: golden bytes, round trips, kafka-python cross-checks, corruption.

kafka-python's ``DefaultRecordBatchBuilder``/``DefaultRecordBatch`` serve as an independent
implementation of the same layout: we encode and it reads, it encodes and we read, for every codec.
"""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record._crc32c import crc as reference_crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol.compression import Compression, CompressionError, compress, decompress
from protocol.records import (
    BATCH_HEADER_SIZE,
    ControlRecordType,
    CorruptBatchError,
    Record,
    batch_crc_ok,
    build_batch,
    control_record,
    decode_control_record,
    decode_records,
    encode_batch,
    read_batch_header,
)

CODECS = list(Compression)

# ---------------------------------------------------------------------------------------------
# Golden bytes

# Two records at base timestamp 1000 (0x3e8), written out field by field from the layout in
# protocol/records.py. Record 0: key b"k", value b"v", no headers. Record 1: offset delta 1,
# timestamp delta 5, null key, value b"xy", one header ("h", null).
GOLDEN_RECORDS = "".join(
    [
        # record 0: length 8, attrs 0, tsDelta 0, offDelta 0, keyLen 1 "k", valLen 1 "v", 0 headers
        "10" "00" "00" "00" "02" "6b" "02" "76" "00",
        # record 1: length 11, attrs 0, tsDelta 5 (zigzag 0a), offDelta 1 (02), key null (01),
        # valLen 2 (04) "xy", 1 header (02): keyLen 1 (02) "h", value null (01)
        "16" "00" "0a" "02" "01" "04" "7879" "02" "02" "68" "01",
    ]
)
GOLDEN_HEADER_NO_CRC = [
    "0000000000000000",  # baseOffset 0
    "%08x" % (49 + len(GOLDEN_RECORDS) // 2),  # batchLength
    "00000000",  # partitionLeaderEpoch 0 (kafka-python writes 0 here)
    "02",  # magic
    None,  # crc
    "0000",  # attributes
    "00000001",  # lastOffsetDelta
    "00000000000003e8",  # baseTimestamp 1000
    "00000000000003ed",  # maxTimestamp 1005
    "ffffffffffffffff",  # producerId -1
    "ffff",  # producerEpoch -1
    "ffffffff",  # baseSequence -1
    "00000002",  # recordsCount
]
# CRC-32C of attributes..end, computed once with kafka-python's pure-Python CRC (see the test).
GOLDEN_CRC = "90d791c8"


def _golden() -> bytes:
    parts = [GOLDEN_CRC if p is None else p for p in GOLDEN_HEADER_NO_CRC]
    return bytes.fromhex("".join(parts) + GOLDEN_RECORDS)


GOLDEN_RECORD_OBJECTS = [
    Record(0, 0, b"k", b"v"),
    Record(1, 5, None, b"xy", (("h", None),)),
]


def test_golden_crc_matches_an_independent_crc32c() -> None:
    golden = _golden()
    assert f"{reference_crc32c(golden[21:]):08x}" == GOLDEN_CRC
    assert batch_crc_ok(golden)


def test_encode_matches_hand_written_golden_bytes() -> None:
    encoded = encode_batch(GOLDEN_RECORD_OBJECTS, base_timestamp=1000, partition_leader_epoch=0)
    assert encoded.hex() == _golden().hex()


def test_decode_golden_bytes() -> None:
    golden = _golden()
    header = read_batch_header(golden)
    records = decode_records(golden)
    assert records == GOLDEN_RECORD_OBJECTS
    assert [r.offset(header) for r in records] == [0, 1]
    assert [r.timestamp(header) for r in records] == [1000, 1005]


def test_kafka_python_builder_produces_the_golden_bytes() -> None:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, 1000, b"k", b"v", [])
    builder.append(1, 1005, None, b"xy", [("h", None)])
    assert bytes(builder.build()).hex() == _golden().hex()


def test_multi_byte_varints_and_large_fields() -> None:
    big = bytes(range(256)) * 40  # 10240 bytes: a 2-byte length varint
    records = [Record(300, -70000, big, None, (("é" * 70, big[:200]),))]
    data = encode_batch(records, base_offset=1 << 40, base_timestamp=1_700_000_000_000)
    assert decode_records(data) == records
    theirs = list(DefaultRecordBatch(bytearray(data)))
    assert (theirs[0].offset, theirs[0].timestamp) == ((1 << 40) + 300, 1_700_000_000_000 - 70000)
    assert theirs[0].key == big and theirs[0].headers == [("é" * 70, big[:200])]


def test_build_batch_sequential_records() -> None:
    data = build_batch([(b"a", b"1"), (b"b", None, [("x", b"y")])], timestamp_ms=42, base_offset=10)
    header = read_batch_header(data)
    assert (header.base_offset, header.last_offset, header.records_count) == (10, 11, 2)
    assert decode_records(data) == [Record(0, 0, b"a", b"1"), Record(1, 0, b"b", None, (("x", b"y"),))]


def test_empty_batch_is_legal() -> None:
    # Compaction can leave a batch with no records to keep producer state (KIP-98).
    data = encode_batch([], base_offset=7, base_timestamp=1, last_offset_delta=3, producer_id=9, producer_epoch=0)
    header = read_batch_header(data)
    assert header.size == BATCH_HEADER_SIZE and header.last_offset == 10 and header.max_timestamp == -1
    assert decode_records(data) == []


def test_last_offset_delta_keeps_compaction_gaps() -> None:
    data = encode_batch([Record(2, 0, b"k", b"v")], base_timestamp=0, last_offset_delta=9)
    assert read_batch_header(data).last_offset_delta == 9


def test_log_append_time_uses_max_timestamp() -> None:
    data = encode_batch([Record(0, 3, b"k", b"v")], base_timestamp=100, max_timestamp=999, log_append_time=True)
    header = read_batch_header(data)
    assert header.log_append_time
    assert decode_records(data)[0].timestamp(header) == 999


def test_delete_horizon_rebases_timestamps() -> None:
    records = [Record(0, 0, b"a", None), Record(1, 10, b"b", None)]
    data = encode_batch(records, base_timestamp=5000, delete_horizon=90000)
    header = read_batch_header(data)
    assert header.attributes & 0x40 and header.base_timestamp == 90000 and header.max_timestamp == 5010
    assert [r.timestamp(header) for r in decode_records(data)] == [5000, 5010]
    # kafka-python agrees on the absolute timestamps.
    assert [r.timestamp for r in DefaultRecordBatch(bytearray(data))] == [5000, 5010]


def test_producer_fields_and_flags() -> None:
    data = encode_batch(
        [Record(0, 0, b"k", b"v")],
        base_timestamp=1,
        producer_id=123456789,
        producer_epoch=7,
        base_sequence=42,
        partition_leader_epoch=3,
        transactional=True,
    )
    h = read_batch_header(data)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (123456789, 7, 42, 3)
    assert h.is_transactional and not h.is_control
    theirs = DefaultRecordBatch(bytearray(data))
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence, theirs.is_transactional) == (
        123456789,
        7,
        42,
        True,
    )


# ---------------------------------------------------------------------------------------------
# Control batches


@pytest.mark.parametrize("kind", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_control_batch_is_recognised(kind: ControlRecordType) -> None:
    data = encode_batch(
        [control_record(kind, coordinator_epoch=4)],
        base_offset=50,
        base_timestamp=10,
        producer_id=1000,
        producer_epoch=2,
        transactional=True,
        control=True,
    )
    header = read_batch_header(data)
    assert header.is_control and header.is_transactional
    (record,) = decode_records(data)
    assert decode_control_record(record) == (0, kind)
    assert record.value == struct.pack(">hi", 0, 4)
    # kafka-python parses it as a ControlRecord with the same type.
    (theirs,) = list(DefaultRecordBatch(bytearray(data)))
    assert theirs.type == kind and theirs.version == 0


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00", b"\xff\xff\x00\x01"])
def test_malformed_control_key_is_corrupt(key: bytes | None) -> None:
    with pytest.raises(CorruptBatchError):
        decode_control_record(Record(0, 0, key, None))


def test_control_key_may_grow() -> None:
    assert decode_control_record(Record(0, 0, b"\x00\x01\x00\x01extra", None)) == (1, 1)


# ---------------------------------------------------------------------------------------------
# Compression framings


PAYLOAD = b"".join(b"record-%06d;" % i for i in range(20000))  # ~260 kB: several snappy blocks


@pytest.mark.parametrize("codec", CODECS)
def test_compression_round_trip(codec: Compression) -> None:
    assert decompress(codec, compress(codec, PAYLOAD)) == PAYLOAD
    assert decompress(codec, compress(codec, b"")) == b""


def test_snappy_is_written_xerial_framed() -> None:
    data = compress(Compression.SNAPPY, PAYLOAD)
    assert data[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def test_snappy_reads_raw_and_official_framing() -> None:
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(PAYLOAD))) == PAYLOAD
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress(PAYLOAD))) == PAYLOAD


def test_lz4_blocks_are_independent() -> None:
    flg = compress(Compression.LZ4, PAYLOAD)[4]
    assert flg & 0x20, "Kafka's LZ4 reader needs the block-independence flag"


def test_zstd_frame_without_content_size() -> None:
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert decompress(Compression.ZSTD, frame) == PAYLOAD
    streamer = zstandard.ZstdCompressor().compressobj()
    assert decompress(Compression.ZSTD, streamer.compress(PAYLOAD) + streamer.flush()) == PAYLOAD


def test_gzip_accepts_several_members() -> None:
    assert decompress(Compression.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


@pytest.mark.parametrize("codec", [c for c in CODECS if c != Compression.NONE])
@pytest.mark.parametrize("garbage", [b"", b"\x00", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x7f", b"nonsense" * 9])
def test_malformed_compressed_data_raises_compression_error(codec: Compression, garbage: bytes) -> None:
    if codec == Compression.SNAPPY and garbage == b"\x00":
        # Not garbage for snappy: a raw block whose uncompressed length (varint 0) is zero.
        assert decompress(codec, garbage) == b""
        return
    with pytest.raises(CompressionError):
        decompress(codec, garbage)


def test_unknown_codec() -> None:
    with pytest.raises(CompressionError):
        decompress(5, b"x")
    with pytest.raises(CompressionError):
        compress(7, b"x")


# ---------------------------------------------------------------------------------------------
# Hypothesis: round trips and cross-checks

header_keys = st.text(max_size=12)
maybe_bytes = st.none() | st.binary(max_size=80)
records_st = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1),  # offset delta
        st.integers(-(2**40), 2**40),  # timestamp delta
        maybe_bytes,
        maybe_bytes,
        st.lists(st.tuples(header_keys, maybe_bytes), max_size=3),
    ),
    max_size=12,
).map(lambda rows: [Record(o, t, k, v, tuple(h)) for o, t, k, v, h in rows])


@settings(max_examples=150, deadline=None)
@given(
    records=records_st,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.integers(-(2**41), 2**41),
    producer=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)),
    flags=st.tuples(st.booleans(), st.booleans()),
)
def test_round_trip(
    records: list[Record],
    codec: Compression,
    base_offset: int,
    base_timestamp: int,
    producer: tuple[int, int, int],
    flags: tuple[bool, bool],
) -> None:
    data = encode_batch(
        records,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        compression=codec,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        transactional=flags[0],
        log_append_time=flags[1],
    )
    header = read_batch_header(data)
    assert header.size == len(data) and batch_crc_ok(data)
    assert header.compression == codec and header.records_count == len(records)
    assert decode_records(data) == records
    # Inside a bigger buffer, from a bytearray and a memoryview too.
    padded = b"\x00" * 13 + data + b"\xff" * 5
    assert decode_records(padded, 13) == records
    assert decode_records(memoryview(bytearray(padded)), 13) == records


@settings(max_examples=100, deadline=None)
@given(records=records_st.filter(bool), codec=st.sampled_from(CODECS), base_timestamp=st.integers(0, 2**41))
def test_kafka_python_reads_our_batches(records: list[Record], codec: Compression, base_timestamp: int) -> None:
    data = encode_batch(records, base_offset=100, base_timestamp=base_timestamp, compression=codec)
    theirs = DefaultRecordBatch(bytearray(data))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs]
    want = [(100 + r.offset_delta, base_timestamp + r.timestamp_delta, r.key, r.value, list(r.headers)) for r in records]
    assert got == want


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 10**6), maybe_bytes, maybe_bytes, st.lists(st.tuples(header_keys, maybe_bytes), max_size=3)),
        min_size=1,
        max_size=12,
    ),
    codec=st.sampled_from(CODECS),
    base_timestamp=st.integers(0, 2**41),
)
def test_we_read_kafka_python_batches(
    rows: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: Compression,
    base_timestamp: int,
) -> None:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 24)
    for i, (ts, key, value, headers) in enumerate(rows):
        # Make values compressible so kafka-python keeps the codec instead of falling back.
        builder.append(i, base_timestamp + ts, key, value * 4 if value else value, headers)
    data = bytes(builder.build())
    header = read_batch_header(data)
    records = decode_records(data)
    first = base_timestamp + rows[0][0]
    assert [(r.offset(header), r.timestamp(header), r.key, r.value, list(r.headers)) for r in records] == [
        (i, base_timestamp + ts, key, value * 4 if value else value, headers)
        for i, (ts, key, value, headers) in enumerate(rows)
    ]
    assert header.base_timestamp == first


# ---------------------------------------------------------------------------------------------
# Corruption: only CorruptBatchError may come out


def _sample_batch(codec: Compression) -> bytes:
    records = [Record(i, i * 3, b"key-%d" % i, b"value" * i, (("h", b"v"),) if i % 2 else ()) for i in range(6)]
    return encode_batch(records, base_offset=10, base_timestamp=1000, compression=codec)


def _refresh_crc(data: bytearray) -> None:
    struct.pack_into(">I", data, 17, reference_crc32c(bytes(data[21:])))


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(CODECS), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4))
def test_bit_flips_fail_crc_or_raise_corrupt(codec: Compression, flips: list[tuple[int, int]]) -> None:
    original = _sample_batch(codec)
    data = bytearray(original)
    for where, xor in flips:
        data[where % len(data)] ^= xor
    changed = {i for i in range(len(data)) if data[i] != original[i]}
    # Only baseOffset (bytes 0-7) and partitionLeaderEpoch (12-15) lie outside what the batch checks
    # (its length, magic and CRC, which covers byte 21 on): a flip anywhere else must be refused.
    if changed <= set(range(0, 8)) | set(range(12, 16)):
        assert len(decode_records(bytes(data))) == 6
    else:
        with pytest.raises(CorruptBatchError):
            decode_records(bytes(data))


@settings(max_examples=400, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    flips=st.lists(st.tuples(st.integers(BATCH_HEADER_SIZE, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_body_garbage_with_a_valid_crc_raises_only_corrupt(codec: Compression, flips: list[tuple[int, int]]) -> None:
    # The CRC is recomputed after the damage, so the record parser itself must reject it.
    data = bytearray(_sample_batch(codec))
    for where, xor in flips:
        pos = BATCH_HEADER_SIZE + where % (len(data) - BATCH_HEADER_SIZE)
        data[pos] ^= xor
    _refresh_crc(data)
    try:
        records = decode_records(bytes(data))
    except CorruptBatchError:
        return
    assert all(isinstance(r, Record) for r in records)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=200), count=st.integers(-5, 40), codec=st.sampled_from(CODECS))
def test_random_bodies_raise_only_corrupt(body: bytes, count: int, codec: Compression) -> None:
    data = bytearray(encode_batch([], base_timestamp=0, compression=Compression.NONE))
    data += body
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, codec)
    struct.pack_into(">i", data, 57, count)
    _refresh_crc(data)
    try:
        decode_records(bytes(data))
    except CorruptBatchError:
        pass


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(CODECS), cut=st.integers(0, 10**6))
def test_truncation_raises_corrupt(codec: Compression, cut: int) -> None:
    data = _sample_batch(codec)
    with pytest.raises(CorruptBatchError):
        decode_records(data[: cut % len(data)])


def test_crc_mismatch_is_reported_with_position() -> None:
    data = bytearray(b"\x00" * 5 + _sample_batch(Compression.NONE))
    data[-1] ^= 1
    with pytest.raises(CorruptBatchError) as info:
        decode_records(bytes(data), 5)
    assert info.value.position == 5 and "CRC" in info.value.reason
    # Skipping the CRC check still parses the (flipped) value.
    assert len(decode_records(bytes(data), 5, check_crc=False)) == 6


def test_overlong_varint_is_corrupt() -> None:
    data = bytearray(encode_batch([Record(0, 0, b"k", b"v")], base_timestamp=0))
    # Replace the record's timestamp delta (1 byte) by 11 continuation bytes: longer than a varlong.
    body = bytes(data[BATCH_HEADER_SIZE:])
    bad = body[:2] + b"\x80" * 11 + b"\x00" + body[3:]
    data = data[:BATCH_HEADER_SIZE] + bytes([(len(bad) - 1) << 1]) + bad[1:]
    struct.pack_into(">i", data, 8, len(data) - 12)
    _refresh_crc(data)
    with pytest.raises(CorruptBatchError, match="varint"):
        decode_records(bytes(data))


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_decompression_bombs_are_refused_without_expanding_them(codec: int) -> None:
    import resource

    from protocol.compression import CompressionError, compress, decompress

    bomb = compress(codec, bytes(64 << 20))  # 64 MiB of zeros, a few KB compressed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CompressionError, match="decompresses to"):
        decompress(codec, bomb, max_size=1 << 20)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 32 << 10  # far less than the 64 MiB the bomb holds
    assert decompress(codec, compress(codec, b"x" * 1000), max_size=1 << 20) == b"x" * 1000
    assert decompress(codec, bomb) == bytes(64 << 20)  # under the default cap it is fine


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.tuples(st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=9000)), max_size=80),
       timestamp=st.integers(0, 2**42), base=st.integers(0, 2**40))
def test_build_batch_fast_path_writes_what_encode_batch_writes(items: list, timestamp: int, base: int) -> None:
    fast = build_batch(items, timestamp_ms=timestamp, base_offset=base)
    general = encode_batch([Record(i, 0, k, v, ()) for i, (k, v) in enumerate(items)],
                           base_offset=base, base_timestamp=timestamp)
    assert fast == general
