"""``pipeline.source.columns``: segment files -> Arrow rows, against segments written by the
server's own log writer (``storage.log.Log`` + ``protocol.records`` + ``protocol.consumer_offsets``).

Every record type and version the server reads, tombstones, control batches, a compressed batch,
unknown versions, a cut-off tail, a flipped byte, a log growing after planning; and the fast path
checked against the codec (reference) path on the same bytes, damaged bytes included. No Spark:
these tests start no JVM.
"""

from __future__ import annotations

import asyncio
import random
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline.source import fast_path
from pipeline.source.columns import arrow_schema, parse_segment
from pipeline.source.schema import CONTROL, CORRUPT, GROUP_METADATA, OFFSET_COMMIT, RAW_COLUMNS, RAW_SCHEMA, UNKNOWN
from protocol.compression import Compression
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
    serialize,
)
from protocol.records import ControlRecordType, Record, build_batch, control_record, encode_batch
from storage.log import Log
from storage.options import offsets_topic_options

TS = 1_763_800_000_000
MEMBER_V0 = MemberMetadata("m-1", "client-1", "/10.0.0.1", 30000, 10000, b"sub", b"assign")
MEMBER = MemberMetadata("m-2", "client-2", "/10.0.0.2", 45000, 20000, b"\x00\x01", b"", "instance-2")


def write_log(root: Path, partition: int, batches: list[bytes], **options: Any) -> Path:
    """Append ``batches`` with the server's log writer; returns the partition directory."""

    async def go() -> None:
        log = Log.open(root, "__consumer_offsets", partition, offsets_topic_options().with_(**options))
        for b in batches:
            await log.append(b)
        await log.close()

    asyncio.run(go())
    return root / f"__consumer_offsets-{partition}"


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def key_v0(key: OffsetCommitKey) -> bytes:
    """An OffsetCommitKey at version 0 (same layout as 1; the server writes 1)."""
    return struct.pack(">h", 0) + encode_key(key)[2:]


def rows(path: Path | bytes, log_partition: int = 0, base: int = 0, limit: int | None = None, **kw: Any) -> list[dict[str, Any]]:
    batches = list(parse_segment(path, log_partition, base, limit, **kw))
    for b in batches:
        assert b.schema.equals(arrow_schema())
    return pa.Table.from_batches(batches, schema=arrow_schema()).to_pylist()


def pick(row: dict[str, Any], *names: str) -> tuple[Any, ...]:
    return tuple(row[n] for n in names)


def by_offset(table_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted by offset (CORRUPT rows, offset -1, last): the fast path puts rows that went
    through the codec after the others within a chunk."""
    return sorted(table_rows, key=lambda r: (r["offset"] < 0, r["offset"], repr(r)))


# A segment with every record type and version the server reads -----------------------------

def _every_version_batches() -> list[bytes]:
    ock = OffsetCommitKey("group-a", "topic-a", 3)
    out = []
    for v in range(5):  # OffsetCommitValue v0..v4 under key v1
        value = OffsetCommitValue(100 + v, f"md{v}", TS + v, leader_epoch=7, expire_timestamp=TS + 1000 if v == 1 else None)
        out.append(build_batch([(encode_key(ock), encode_value(value, v))], timestamp_ms=TS))
    out.append(build_batch([(key_v0(ock), encode_value(OffsetCommitValue(200, "", TS, 9)))], timestamp_ms=TS))  # key v0
    out.append(build_batch([(encode_key(ock), None)], timestamp_ms=TS + 1))  # offset commit tombstone
    gmk = GroupMetadataKey("group-a")
    for v in range(5):  # GroupMetadataValue v0..v4
        members = (MEMBER_V0,) if v < 3 else (MEMBER_V0, MEMBER)
        value = GroupMetadataValue("consumer", 10 + v, "range", "m-1", TS + 50, members)
        out.append(build_batch([(encode_key(gmk), encode_value(value, v))], timestamp_ms=TS + 2))
    out.append(build_batch([(encode_key(gmk), None)], timestamp_ms=TS + 3))  # group tombstone
    # A transactional commit and its marker, then an aborted one.
    txn = dict(producer_id=42, producer_epoch=1, transactional=True)
    out.append(encode_batch([Record(0, 0, *serialize(OffsetCommitKey("group-t", "topic-t", 0), OffsetCommitValue(5, "", TS)))],
                            base_timestamp=TS, **txn))
    out.append(encode_batch([control_record(ControlRecordType.COMMIT, 3)], base_timestamp=TS + 4, control=True, **txn))
    out.append(encode_batch([control_record(ControlRecordType.ABORT, 3)], base_timestamp=TS + 5, control=True, **txn))
    # A gzip batch of three commits.
    out.append(build_batch([serialize(OffsetCommitKey("group-z", "topic-z", p), OffsetCommitValue(p, "", TS)) for p in range(3)],
                           timestamp_ms=TS + 6, compression=Compression.GZIP))
    # Unknown versions: a share-group key (version 10, KIP-932) and an OffsetCommitValue version 9.
    # (KIP-848 records, key versions 3-8 and 16, are decoded: tests/pipeline/test_consumer_group_history.py.)
    out.append(build_batch([(struct.pack(">h", 10) + b"\x00\x01g", b"\x00\x00whatever")], timestamp_ms=TS + 7))
    out.append(build_batch([(encode_key(ock), struct.pack(">h", 9) + b"\x00" * 20)], timestamp_ms=TS + 8))
    # A plain batch of two commits, LogAppendTime, and a batch with a record header.
    out.append(encode_batch([Record(i, i, *serialize(OffsetCommitKey("group-b", "topic-b", i), OffsetCommitValue(i, "x", TS)))
                             for i in range(2)], base_timestamp=TS, max_timestamp=TS + 99, log_append_time=True))
    out.append(build_batch([(*serialize(OffsetCommitKey("group-h", "topic-h", 0), OffsetCommitValue(1, "", TS)), [("h", b"v")])],
                           timestamp_ms=TS + 9))
    # A plain commit last, so that a fast-path row follows the rows that went through the codec.
    out.append(build_batch([serialize(OffsetCommitKey("group-a", "topic-a", 4), OffsetCommitValue(1, "", TS))], timestamp_ms=TS))
    return out


@pytest.fixture(scope="module")
def every_version(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("every")
    (segment,) = segments(write_log(root, 7, _every_version_batches()))
    return segment


def test_arrow_schema_is_raw_schema() -> None:
    schema = arrow_schema()
    assert schema.names == list(RAW_COLUMNS)
    assert [f.nullable for f in schema] == [f.nullable for f in RAW_SCHEMA.fields]
    assert schema.field("offset").type == pa.int64() and schema.field("key_version").type == pa.int16()


def test_every_record_type_and_version(every_version: Path) -> None:
    got = by_offset(rows(every_version, 7, 0))
    assert [r["offset"] for r in got] == list(range(25))
    assert {(r["log_partition"], r["segment_base_offset"]) for r in got} == {(7, 0)}
    commits = ("record_type", "key_version", "value_version", "is_tombstone", "group_id", "topic", "partition",
               "committed_offset", "leader_epoch", "commit_metadata", "commit_timestamp_ms", "expire_timestamp_ms")
    oc = (OFFSET_COMMIT,)
    assert [pick(r, *commits) for r in got[:7]] == [
        oc + (1, 0, False, "group-a", "topic-a", 3, 100, -1, "md0", TS, None),
        oc + (1, 1, False, "group-a", "topic-a", 3, 101, -1, "md1", TS + 1, TS + 1000),
        oc + (1, 2, False, "group-a", "topic-a", 3, 102, -1, "md2", TS + 2, None),
        oc + (1, 3, False, "group-a", "topic-a", 3, 103, 7, "md3", TS + 3, None),
        oc + (1, 4, False, "group-a", "topic-a", 3, 104, 7, "md4", TS + 4, None),
        oc + (0, 3, False, "group-a", "topic-a", 3, 200, 9, "", TS, None),
        oc + (1, None, True, "group-a", "topic-a", 3, None, None, None, None, None),
    ]
    assert got[6]["batch_timestamp_ms"] == TS + 1
    groups = ("record_type", "key_version", "value_version", "is_tombstone", "group_id", "protocol_type", "generation",
              "protocol", "leader", "state_timestamp_ms")
    gm = (GROUP_METADATA, 2)
    assert [pick(r, *groups) for r in got[7:13]] == [
        gm + (0, False, "group-a", "consumer", 10, "range", "m-1", -1),  # no state timestamp before v2
        gm + (1, False, "group-a", "consumer", 11, "range", "m-1", -1),
        gm + (2, False, "group-a", "consumer", 12, "range", "m-1", TS + 50),
        gm + (3, False, "group-a", "consumer", 13, "range", "m-1", TS + 50),
        gm + (4, False, "group-a", "consumer", 14, "range", "m-1", TS + 50),
        gm + (None, True, "group-a", None, None, None, None, None),
    ]
    m1 = {"member_id": "m-1", "group_instance_id": None, "client_id": "client-1", "client_host": "/10.0.0.1",
          "rebalance_timeout_ms": 30000, "session_timeout_ms": 10000, "subscription": b"sub", "assignment": b"assign"}
    m2 = {"member_id": "m-2", "group_instance_id": "instance-2", "client_id": "client-2", "client_host": "/10.0.0.2",
          "rebalance_timeout_ms": 45000, "session_timeout_ms": 20000, "subscription": b"\x00\x01", "assignment": b""}
    # v0 has no rebalance timeout (the session timeout stands in); v3+ carry group_instance_id.
    assert got[7]["members"] == [{**m1, "rebalance_timeout_ms": 10000}]
    assert got[9]["members"] == [m1]
    assert got[10]["members"] == [m1, m2] and got[11]["members"] == [m1, m2]
    assert got[12]["members"] is None and got[0]["members"] is None
    # Transactions: the commit, its COMMIT marker, an ABORT marker.
    txn = ("record_type", "is_transactional", "is_control", "producer_id", "key_version", "value_version", "group_id",
           "control_type")
    assert [pick(r, *txn) for r in got[13:16]] == [
        (OFFSET_COMMIT, True, False, 42, 1, 3, "group-t", None),
        (CONTROL, True, True, 42, 0, 0, None, ControlRecordType.COMMIT),
        (CONTROL, True, True, 42, 0, 0, None, ControlRecordType.ABORT),
    ]
    assert [pick(r, "group_id", "partition", "committed_offset", "batch_timestamp_ms") for r in got[16:19]] == [
        ("group-z", p, p, TS + 6) for p in range(3)]  # gzip
    assert pick(got[19], "record_type", "key_version", "value_version", "is_tombstone", "group_id") == (UNKNOWN, 10, 0, False, None)
    assert pick(got[20], "record_type", "key_version", "value_version", "group_id", "topic", "partition", "committed_offset") == (
        UNKNOWN, 1, 9, "group-a", "topic-a", 3, None)
    # LogAppendTime: every record carries the batch's max timestamp.
    assert [pick(r, "offset", "partition", "batch_timestamp_ms") for r in got[21:23]] == [(21, 0, TS + 99), (22, 1, TS + 99)]
    assert pick(got[23], "group_id", "committed_offset") == ("group-h", 1)  # a record with a header
    assert pick(got[24], "record_type", "group_id", "partition") == (OFFSET_COMMIT, "group-a", 4)
    assert all(r["producer_id"] == -1 for r in got if not r["is_transactional"])
    assert not [r for r in got if r["record_type"] == CORRUPT or r["error"] is not None]


def test_fast_path_and_codec_path_agree_on_every_version(every_version: Path) -> None:
    fast = rows(every_version, 7, 0)
    reference = rows(every_version, 7, 0, fast=False)
    assert by_offset(fast) == reference  # the reference path is in log order


def _random_log(rnd: random.Random, batches: int) -> list[bytes]:
    """Mostly what the coordinator writes (1-10 v3 commits a batch), with every other kind mixed in."""
    out = []
    for i in range(batches):
        group = f"group-{rnd.randrange(50)}" + "é" * rnd.randrange(2) + "x" * rnd.choice((0, 0, 40, 200))
        kind = rnd.random()
        if kind < 0.75:
            items = [serialize(OffsetCommitKey(group, f"t{rnd.randrange(5)}", p),
                               None if rnd.random() < 0.1 else
                               OffsetCommitValue(rnd.randrange(10**12), "m" * rnd.choice((0, 0, 5, 70)), TS + i,
                                                 rnd.randrange(-1, 5),
                                                 TS + 10**6 if rnd.random() < 0.2 else None))
                     for p in range(rnd.randint(1, 10))]
            if rnd.random() < 0.1:
                items[0] = (key_v0(OffsetCommitKey(group, "t", 0)), items[0][1])
            if rnd.random() < 0.05:
                items.append((encode_key(GroupMetadataKey(group)),
                              encode_value(GroupMetadataValue("consumer", i, "range", "m-2", TS, (MEMBER,)))))
            out.append(build_batch(items, timestamp_ms=TS + i))
        elif kind < 0.85:
            v = rnd.randrange(5)
            out.append(build_batch([(encode_key(OffsetCommitKey(group, "t", 1)),
                                     encode_value(OffsetCommitValue(i, "", TS, 1, TS if v == 1 else None), v))],
                                   timestamp_ms=TS + i))
        elif kind < 0.9:
            out.append(build_batch([serialize(GroupMetadataKey(group), None if rnd.random() < 0.3 else
                                              GroupMetadataValue("consumer", i, "range", "m-2", TS, (MEMBER,) * rnd.randrange(3)))],
                                   timestamp_ms=TS + i))
        elif kind < 0.92:
            out.append(build_batch([serialize(OffsetCommitKey(group, "t", p), OffsetCommitValue(p)) for p in range(4)],
                                   timestamp_ms=TS + i, compression=rnd.choice(list(Compression)[1:])))
        elif kind < 0.95:
            # Long batches (2-byte offset deltas), spread timestamps (1-3 byte deltas) and now and
            # then a record over 8 KiB (a 3-byte length): the varint widths the fast path does and
            # does not take.
            count, delta = rnd.choice((3, 100, 300)), rnd.choice((0, 70, 10**6))
            out.append(encode_batch([Record(p, delta,
                                            *serialize(OffsetCommitKey(group, "t", p),
                                                       OffsetCommitValue(p, "m" * (9000 if count == 3 and p == 1 else 0), TS)))
                                     for p in range(count)], base_timestamp=TS + i))
        else:
            out.append(encode_batch([control_record(ControlRecordType.COMMIT, 1)], base_timestamp=TS + i, control=True,
                                    producer_id=9, producer_epoch=0, transactional=True))
    return out


@pytest.fixture(scope="module")
def random_segment(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    root = tmp_path_factory.mktemp("random")
    (segment,) = segments(write_log(root, 0, _random_log(random.Random(11), 600)))
    return segment.read_bytes()


def test_fast_path_and_codec_path_agree_on_a_mixed_log(random_segment: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = rows(random_segment, fast=False)
    assert len(reference) == 5159 and {r["record_type"] for r in reference} == {OFFSET_COMMIT, GROUP_METADATA, CONTROL}
    plain_rows: list[int] = []
    arrow = fast_path.FastParser._arrow
    monkeypatch.setattr(fast_path.FastParser, "_arrow", lambda self, *a: plain_rows.append(a[-1]) or arrow(self, *a))
    for batch_rows in (65_536, 1000, 7):
        assert by_offset(rows(random_segment, batch_rows=batch_rows)) == reference
    # The fast path did the bulk of it (the rest: compressed, control, group metadata, long
    # varints, value versions 0/2/4).
    assert sum(plain_rows) == 3 * 4582


def test_fast_path_and_codec_path_agree_on_damaged_bytes(tmp_path: Path) -> None:
    """Flipped bytes anywhere, without the CRC to catch them, and cut-offs anywhere: the fast path
    must accept exactly what the codec accepts and report the same corruption."""
    (segment,) = segments(write_log(tmp_path, 0, _random_log(random.Random(12), 80)))
    whole = segment.read_bytes()
    rnd = random.Random(5)
    corrupt = 0
    for trial in range(80):
        data = bytearray(whole[: rnd.randrange(len(whole) // 4, len(whole))])
        for _ in range(rnd.randint(1, 3)):
            data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        data = bytes(data)
        for verify_crc in (False, True):
            reference = rows(data, fast=False, verify_crc=verify_crc)
            # (by_offset on both sides: a flipped bit in a base offset, which no CRC covers, puts
            # offsets out of order.)
            fast = rows(data, verify_crc=verify_crc, batch_rows=rnd.choice((65_536, 100)))
            assert by_offset(fast) == by_offset(reference), trial
            corrupt += reference[-1]["record_type"] == CORRUPT if reference else 0
    assert corrupt > 80  # the damage was mostly seen (not always: a flipped offset or value is valid)


# A damaged or growing log ---------------------------------------------------------------------

def _commit_batches(n: int, per_batch: int = 3) -> list[bytes]:
    return [build_batch([serialize(OffsetCommitKey("g", "t", p), OffsetCommitValue(i * per_batch + p, "", TS + i))
                         for p in range(per_batch)], timestamp_ms=TS + i) for i in range(n)]


def test_cut_off_final_batch_ends_the_segment_quietly(tmp_path: Path) -> None:
    (segment,) = segments(write_log(tmp_path, 0, _commit_batches(4)))
    whole = segment.read_bytes()
    batch_size = len(whole) // 4
    for cut in (len(whole) - 1, len(whole) - batch_size + 12, len(whole) - batch_size + 5):
        segment.write_bytes(whole[:cut])
        for fast in (True, False):
            assert [r["offset"] for r in rows(segment, fast=fast)] == list(range(9)), (cut, fast)


def test_flipped_byte_gives_a_corrupt_row_naming_file_and_position(tmp_path: Path) -> None:
    (segment,) = segments(write_log(tmp_path, 3, _commit_batches(4)))
    data = bytearray(segment.read_bytes())
    batch_size = len(data) // 4
    data[2 * batch_size + 70] ^= 0x01  # inside the third batch's records
    segment.write_bytes(bytes(data))
    got = rows(segment, 3, 0)
    assert [r["offset"] for r in got] == [0, 1, 2, 3, 4, 5, -1]  # the batch after it is not read either
    corrupt = got[-1]
    assert pick(corrupt, "record_type", "log_partition", "segment_base_offset", "group_id") == (CORRUPT, 3, 0, None)
    assert corrupt["error"] == f"{segment}: CRC mismatch at byte {2 * batch_size}"
    assert all(r["error"] is None for r in got[:-1])
    # Without the CRC the flipped bit is just a different (valid-looking) value.
    assert len(rows(segment, 3, 0, verify_crc=False)) == 12


def test_impossible_batch_length_gives_a_corrupt_row(tmp_path: Path) -> None:
    (segment,) = segments(write_log(tmp_path, 0, _commit_batches(2)))
    data = bytearray(segment.read_bytes())
    batch_size = len(data) // 2
    data[batch_size + 8: batch_size + 12] = struct.pack(">i", 3)
    got = rows(bytes(data), name="seg.log")
    assert [r["offset"] for r in got] == [0, 1, 2, -1]
    assert got[-1]["error"] == f"seg.log: batch length 3 too small at byte {batch_size}"


def test_malformed_record_gives_a_corrupt_row(tmp_path: Path) -> None:
    bad_key = build_batch([(b"\x00\x01\x00\x05gr", b"\x00\x03")], timestamp_ms=TS)  # key claims 5 bytes, has 2
    (segment,) = segments(write_log(tmp_path, 0, _commit_batches(1) + [bad_key] + _commit_batches(1)))
    batch_size = len(_commit_batches(1)[0])
    for fast in (True, False):
        got = rows(segment, fast=fast)
        assert [r["offset"] for r in got] == [0, 1, 2, -1]
        assert got[-1]["error"].startswith(f"{segment}: record at offset 3: ")
        assert got[-1]["error"].endswith(f" at byte {batch_size}")


def test_log_growing_after_planning_is_read_to_the_planned_size(tmp_path: Path) -> None:
    directory = write_log(tmp_path, 0, _commit_batches(2))
    (segment,) = segments(directory)
    planned = segment.stat().st_size
    write_log(tmp_path, 0, _commit_batches(3))  # the server appends three more batches
    assert segment.stat().st_size > planned
    assert [r["offset"] for r in rows(segment, limit=planned)] == list(range(6))
    assert [r["offset"] for r in rows(segment, limit=planned + 30)] == list(range(6))  # mid-batch: quiet
    assert [r["offset"] for r in rows(segment)] == list(range(15))


def test_offsets_and_positions_across_rolled_segments(tmp_path: Path) -> None:
    directory = write_log(tmp_path, 12, _commit_batches(10), segment_bytes=400)
    files = segments(directory)
    assert len(files) > 2
    got = []
    for f in files:
        part = rows(f, 12, int(f.stem))
        assert {r["segment_base_offset"] for r in part} == {int(f.stem)}
        assert part[0]["offset"] == int(f.stem)
        got += part
    assert [r["offset"] for r in got] == list(range(30))
    assert [r["committed_offset"] for r in got] == list(range(30))
    assert {r["log_partition"] for r in got} == {12}


def test_file_ending_in_a_tombstone() -> None:
    """Fields a tombstone lacks are not read past the end of the file."""
    key = encode_key(OffsetCommitKey("g", "t", 0))
    data = build_batch([(key, encode_value(OffsetCommitValue(1, "", TS))), (key, None)], timestamp_ms=TS)
    for fast in (True, False):
        got = rows(data, fast=fast)
        assert [pick(r, "offset", "is_tombstone", "committed_offset", "commit_timestamp_ms") for r in got] == [
            (0, False, 1, TS), (1, True, None, None)]


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "00000000000000000000.log"
    empty.write_bytes(b"")
    assert rows(empty) == []
    assert rows(b"\x00" * 11) == []  # less than a batch prefix: a write in progress
    with pytest.raises(FileNotFoundError):
        list(parse_segment(tmp_path / "gone.log", 0, 0))


def test_the_file_is_unmapped_after_reading_or_closing(tmp_path: Path) -> None:
    """Python workers are reused across tasks: a mapping left behind per segment would pile up."""
    (segment,) = segments(write_log(tmp_path, 0, _commit_batches(3)))

    def mapped() -> bool:
        return str(segment) in Path("/proc/self/maps").read_text()

    assert len(rows(segment)) == 9 and not mapped()
    reading = parse_segment(segment, 0, 0, batch_rows=3)
    next(reading)
    assert mapped()
    reading.close()
    assert not mapped()
