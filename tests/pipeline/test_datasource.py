"""The ``consumer_offsets`` data source: planning (listing, bin-packing; no Spark) and reading
through Spark (registration, rows, input partitions, Arrow schema, a corrupt segment)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from pipeline.source.datasource import SegmentFile, list_segments, plan_partitions, read_partition
from pipeline.source.schema import CORRUPT, OFFSET_COMMIT, RAW_SCHEMA
from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, encode_value, serialize
from protocol.records import build_batch
from storage.log import Log
from storage.options import offsets_topic_options


def _write(root: Path, partition: int, batches: int, per_batch: int = 2, **options: Any) -> None:
    async def go() -> None:
        log = Log.open(root, "__consumer_offsets", partition, offsets_topic_options().with_(flush_policy="none", **options))
        for i in range(batches):
            await log.append(build_batch([serialize(OffsetCommitKey(f"g{partition}", "t", p),
                                                    OffsetCommitValue(i * per_batch + p, "", 1000 + i))
                                          for p in range(per_batch)], timestamp_ms=1000 + i))
        await log.close()

    asyncio.run(go())


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Six partitions, 10 records each; partition 5's log rolled into several segments."""
    for p in range(5):
        _write(tmp_path, p, 5)
    _write(tmp_path, 5, 5, segment_bytes=300)
    (tmp_path / "orders-0").mkdir()  # a hosted topic: not read
    (tmp_path / "topics.json").write_text('{"version": 1, "topics": []}')
    return tmp_path


# Planning, no Spark ---------------------------------------------------------------------------

def test_list_segments_takes_only_log_files(data_dir: Path) -> None:
    p1 = data_dir / "__consumer_offsets-1"
    for leftover in ("00000000000000000004.log.cleaned", "00000000000000000004.log.swap",
                     "00000000000000000002.log.deleted", "notes.log"):
        (p1 / leftover).write_bytes(b"x" * 100)
    (p1 / "00000000000000000099.log").write_bytes(b"")  # an empty active segment
    listed = list_segments(data_dir)
    assert [(s.log_partition, s.base_offset) for s in listed][:6] == [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]
    assert len([s for s in listed if s.log_partition == 5]) > 2
    assert all(s.size == Path(s.path).stat().st_size and s.path.endswith(".log") for s in listed)
    assert list_segments(p1) == [s for s in listed if s.log_partition == 1]
    with pytest.raises(FileNotFoundError):
        list_segments(data_dir / "missing")


def _files(sizes: list[int]) -> list[SegmentFile]:
    return [SegmentFile(f"/d/{i:020d}.log", size, i, i % 3) for i, size in enumerate(sizes)]


def test_bin_packing() -> None:
    mb = 1 << 20
    # Small files, little data: one partition (a task costs more than it saves).
    assert len(plan_partitions(_files([100] * 40), min_partitions=4)) == 1
    # Enough data: at least min_partitions, balanced within one file.
    bins = plan_partitions(_files([mb] * 40), min_partitions=4)
    assert [sum(s.size for s in b) for b in bins] == [10 * mb] * 4
    # Much data: partitions of at most ~max_bytes.
    bins = plan_partitions(_files([10 * mb] * 40), max_bytes=64 * mb, min_partitions=2)
    assert len(bins) == 7 and max(sum(s.size for s in b) for b in bins) <= 64 * mb
    # Never more partitions than files; a big file is not split.
    assert [len(b) for b in plan_partitions(_files([300 * mb, mb]), min_partitions=8)] == [1, 1]
    # Every file exactly once, in log order within a partition.
    bins = plan_partitions(_files([mb * (i % 7 + 1) for i in range(50)]), min_partitions=5, min_bytes=1)
    assert sorted(s for b in bins for s in b) == sorted(_files([mb * (i % 7 + 1) for i in range(50)]))
    assert all(b == sorted(b, key=lambda s: (s.log_partition, s.base_offset)) for b in bins)
    assert plan_partitions([]) == []


def test_segment_gone_after_planning_is_skipped_with_a_warning(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    planned = list_segments(data_dir)
    Path(planned[2].path).unlink()  # e.g. retention, or the cleaner replaced it
    with caplog.at_level(logging.WARNING, logger="groupcoord.pipeline"):
        rows = sum(b.num_rows for b in read_partition(planned[:4]))
    assert rows == 30
    assert [r.getMessage() for r in caplog.records] == [
        f"consumer_offsets: segment {planned[2].path} disappeared after planning; skipped"]


# Through Spark --------------------------------------------------------------------------------

def test_read_through_spark(spark: Any, data_dir: Path) -> None:
    reader = spark.read.format("consumer_offsets").option("minPartitionBytes", "1")
    df = reader.option("minPartitions", "3").load(str(data_dir))
    assert df.schema == RAW_SCHEMA
    assert df.rdd.getNumPartitions() == 3
    got = sorted((r["log_partition"], r["offset"], r["group_id"], r["partition"], r["committed_offset"])
                 for r in df.where(f"record_type = '{OFFSET_COMMIT}'").collect())
    assert got == [(lp, o, f"g{lp}", o % 2, o) for lp in range(6) for o in range(10)]
    assert reader.option("maxPartitionBytes", "1").load(str(data_dir)).rdd.getNumPartitions() == len(list_segments(data_dir))
    one = spark.read.format("consumer_offsets").load(str(data_dir / "__consumer_offsets-2"))
    assert one.rdd.getNumPartitions() == 1
    assert sorted(r["committed_offset"] for r in one.collect()) == list(range(10))


def test_corrupt_segment_gives_a_corrupt_row_through_spark(spark: Any, data_dir: Path) -> None:
    segment = data_dir / "__consumer_offsets-4" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    batch = len(data) // 5
    value = data.index(encode_value(OffsetCommitValue(6, "", 1003)), 3 * batch)  # batch 3's first record
    data[value + 9] ^= 0xFF  # the low byte of its committed offset: 6 -> 249
    segment.write_bytes(bytes(data))
    df = spark.read.format("consumer_offsets").load(str(data_dir))
    counts = {r["record_type"]: r["count"] for r in df.groupBy("record_type").count().collect()}
    assert counts == {OFFSET_COMMIT: 50 + 6, CORRUPT: 1}
    (corrupt,) = df.where(f"record_type = '{CORRUPT}'").collect()
    assert (corrupt["log_partition"], corrupt["error"]) == (4, f"{segment}: CRC mismatch at byte {3 * batch}")
    # verifyCrc=false: the flipped byte is read as data.
    unchecked = spark.read.format("consumer_offsets").option("verifyCrc", "false").load(str(data_dir))
    assert sorted(r["committed_offset"] for r in unchecked.where("log_partition = 4").collect()) == [
        0, 1, 2, 3, 4, 5, 7, 8, 9, 249]
    assert unchecked.where(f"record_type = '{CORRUPT}'").count() == 0
