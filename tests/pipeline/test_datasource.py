"""The data source through Spark: registration, planning into packed input partitions, the
Arrow schema, and a corrupt segment reported as a row."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pipeline.source.schema import CORRUPT, RAW_SCHEMA
from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, serialize
from protocol.records import build_batch
from storage.log import Log
from storage.options import offsets_topic_options


def _write(root: Path, partitions: int) -> None:
    async def go() -> None:
        for p in range(partitions):
            log = Log.open(root, "__consumer_offsets", p, offsets_topic_options())
            await log.append(build_batch([serialize(OffsetCommitKey("g", "t", p), OffsetCommitValue(p))],
                                         timestamp_ms=1))
            await log.close()

    asyncio.run(go())


def test_read_through_spark(spark: Any, tmp_path: Path) -> None:
    _write(tmp_path, 6)
    df = spark.read.format("consumer_offsets").option("minPartitions", "3").load(str(tmp_path))
    assert df.schema == RAW_SCHEMA
    assert df.rdd.getNumPartitions() == 3
    assert sorted((r["log_partition"], r["committed_offset"]) for r in df.collect()) == [(p, p) for p in range(6)]
    one = spark.read.format("consumer_offsets").load(str(tmp_path / "__consumer_offsets-2"))
    assert [r["committed_offset"] for r in one.collect()] == [2]
    segment = tmp_path / "__consumer_offsets-4" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-5] ^= 0xFF
    segment.write_bytes(bytes(data))
    rows = spark.read.format("consumer_offsets").load(str(tmp_path)).where(f"record_type = '{CORRUPT}'").collect()
    assert [r["error"] for r in rows] == [f"{segment}: CRC mismatch at byte 0"]
