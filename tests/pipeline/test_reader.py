"""The parsing core against segments written by the server's own log writer: every record type
and version the server reads, tombstones, control batches, compression, a cut-off tail, a
corrupt batch and a log that grows after planning. No Spark, no JVM."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pipeline.source.reader import Segment, arrow_schema, list_segments, plan_partitions, read_segment
from pipeline.source.schema import CONTROL, CORRUPT, GROUP_METADATA, OFFSET_COMMIT, RAW_COLUMNS, UNKNOWN
from protocol.compression import Compression
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from protocol.records import ControlRecordType, build_batch, control_record, encode_batch
from storage.log import Log
from storage.options import offsets_topic_options

SCHEMA = arrow_schema()
MEMBER = MemberMetadata("m-1", "client", "/10.0.0.1", 30000, 10000, b"sub", b"assign", "instance-1")


def _write(root: Path, partition: int, batches: list[bytes]) -> Path:
    async def go() -> None:
        log = Log.open(root, "__consumer_offsets", partition, offsets_topic_options())
        for b in batches:
            await log.append(b)
        await log.close()

    asyncio.run(go())
    return root / f"__consumer_offsets-{partition}"


def _rows(segment: Segment, **kw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for batch in read_segment(segment, SCHEMA, **kw):
        assert batch.schema.equals(SCHEMA)
        out.extend(batch.to_pylist())
    return out


def _commit(group: str, partition: int, offset: int, version: int | None = None, key_version: int = 1) -> tuple:
    key = encode_key(OffsetCommitKey(group, "orders", partition))
    if key_version == 0:
        key = b"\x00\x00" + key[2:]
    expire = 99_000 if version == 1 else None
    value = encode_value(OffsetCommitValue(offset, "meta", 5_000, 7 if (version or 3) >= 3 else -1, expire), version)
    return key, value


def test_every_record_type_and_version_becomes_a_row(tmp_path: Path) -> None:
    batches = [build_batch([_commit("g", 0, 10 + v, version=v, key_version=v % 2)], timestamp_ms=1_000 + v)
               for v in range(5)]
    for v in range(5):
        gm = GroupMetadataValue("consumer", 3 + v, "range", "m-1", 4_000 if v >= 2 else -1, (MEMBER,))
        batches.append(build_batch([(encode_key(GroupMetadataKey("g")), encode_value(gm, v))], timestamp_ms=2_000))
    batches.append(build_batch([(encode_key(OffsetCommitKey("g", "orders", 0)), None)], timestamp_ms=3_000))
    batches.append(build_batch([(encode_key(GroupMetadataKey("g")), None)], timestamp_ms=3_001))
    batches.append(build_batch([(b"\x00\x03\x00\x01x", b"\x00\x00")], timestamp_ms=3_002))  # a KIP-848 key
    batches.append(encode_batch([control_record(ControlRecordType.COMMIT, 0)], base_timestamp=3_003,
                                producer_id=9, producer_epoch=0, transactional=True, control=True))
    batches.append(build_batch([_commit("h", p, 100 + p) for p in range(3)], timestamp_ms=4_000,
                               compression=Compression.ZSTD))
    directory = _write(tmp_path, 7, batches)
    [segment] = list_segments(tmp_path)
    assert segment.log_partition == 7 and segment.path.startswith(str(directory))
    rows = _rows(segment)
    assert [r["offset"] for r in rows] == list(range(len(rows)))
    assert all(set(r) == set(RAW_COLUMNS) and r["log_partition"] == 7 and r["segment_base_offset"] == 0
               for r in rows)
    commits = [r for r in rows[:5]]
    assert [(r["record_type"], r["key_version"], r["value_version"], r["committed_offset"]) for r in commits] == [
        (OFFSET_COMMIT, v % 2, v, 10 + v) for v in range(5)]
    assert commits[1]["expire_timestamp_ms"] == 99_000 and commits[3]["expire_timestamp_ms"] is None
    assert commits[3]["leader_epoch"] == 7 and commits[0]["leader_epoch"] == -1
    assert commits[3]["commit_metadata"] == "meta" and commits[3]["commit_timestamp_ms"] == 5_000
    groups = rows[5:10]
    assert [(r["record_type"], r["value_version"], r["generation"]) for r in groups] == [
        (GROUP_METADATA, v, 3 + v) for v in range(5)]
    assert groups[3]["members"][0]["group_instance_id"] == "instance-1"
    assert groups[0]["members"][0]["group_instance_id"] is None  # v0 has none
    assert groups[0]["members"][0]["rebalance_timeout_ms"] == 10000  # v0: the session timeout stands in
    assert groups[3]["members"][0]["assignment"] == b"assign" and groups[3]["leader"] == "m-1"
    tomb_commit, tomb_group, unknown, control = rows[10:14]
    assert (tomb_commit["record_type"], tomb_commit["is_tombstone"], tomb_commit["committed_offset"]) == (
        OFFSET_COMMIT, True, None)
    assert (tomb_group["record_type"], tomb_group["is_tombstone"], tomb_group["group_id"]) == (GROUP_METADATA, True, "g")
    assert (unknown["record_type"], unknown["key_version"]) == (UNKNOWN, 3)
    assert (control["record_type"], control["is_control"], control["producer_id"]) == (CONTROL, True, 9)
    assert [(r["group_id"], r["partition"], r["committed_offset"]) for r in rows[14:]] == [
        ("h", p, 100 + p) for p in range(3)]


def _three_commit_batches(tmp_path: Path) -> Segment:
    _write(tmp_path, 0, [build_batch([_commit("g", p, p)], timestamp_ms=1) for p in range(3)])
    [segment] = list_segments(tmp_path)
    return segment


def test_a_cut_off_tail_is_a_write_in_progress_not_an_error(tmp_path: Path) -> None:
    segment = _three_commit_batches(tmp_path)
    path = Path(segment.path)
    path.write_bytes(path.read_bytes()[:-7])
    rows = _rows(Segment(segment.path, path.stat().st_size, 0, 0))
    assert [r["committed_offset"] for r in rows] == [0, 1]


def test_only_the_planned_size_is_read(tmp_path: Path) -> None:
    segment = _three_commit_batches(tmp_path)
    planned = Segment(segment.path, segment.size * 2 // 3, 0, 0)  # inside the third batch
    with open(segment.path, "ab") as f:  # and the server keeps appending
        f.write(build_batch([_commit("g", 9, 9)], timestamp_ms=1, base_offset=3))
    assert [r["committed_offset"] for r in _rows(planned)] == [0, 1]


def test_a_corrupt_batch_is_reported_with_file_and_position(tmp_path: Path) -> None:
    segment = _three_commit_batches(tmp_path)
    path = Path(segment.path)
    data = bytearray(path.read_bytes())
    second = len(data) // 3
    data[second + 70] ^= 0xFF  # inside the second batch's records: the CRC no longer matches
    path.write_bytes(bytes(data))
    rows = _rows(segment)
    assert [r["record_type"] for r in rows] == [OFFSET_COMMIT, CORRUPT]
    assert rows[1]["error"] == f"{segment.path}: CRC mismatch at byte {second}"
    assert [r["record_type"] for r in _rows(segment, verify_crc=False)][:1] == [OFFSET_COMMIT]


def test_a_segment_removed_after_planning_is_skipped(tmp_path: Path) -> None:
    segment = _three_commit_batches(tmp_path)
    Path(segment.path).unlink()
    assert _rows(segment) == []


def test_cleaner_leftovers_are_not_segments_and_small_files_are_packed(tmp_path: Path) -> None:
    for p in range(6):
        _write(tmp_path, p, [build_batch([_commit("g", 0, p)], timestamp_ms=1)])
    (tmp_path / "__consumer_offsets-0" / "00000000000000000000.log.cleaned").write_bytes(b"x")
    (tmp_path / "orders-0").mkdir()
    segments = list_segments(tmp_path)
    assert sorted(s.log_partition for s in segments) == list(range(6))
    bins = plan_partitions(segments, 64 << 20, 3)
    assert len(bins) == 3 and sorted(s.log_partition for b in bins for s in b) == list(range(6))
    assert len(plan_partitions(segments, 64 << 20, 1)) == 1
    assert plan_partitions([], 1, 1) == []
    with pytest.raises(IndexError):
        list_segments(tmp_path / "__consumer_offsets-0")[1]
