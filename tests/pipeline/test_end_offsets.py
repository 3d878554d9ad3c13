"""``pipeline.source.end_offsets``: hosted topics' end offsets from a data directory written by the
server's own registry and log writer, and from JSON/CSV files. No Spark."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow as pa
import pytest

from coordinator.topics.registry import TopicRegistry
from pipeline.source.end_offsets import (
    ARROW_SCHEMA,
    PartitionEnd,
    end_offset_history,
    end_offsets_from_data_dir,
    end_offsets_from_file,
    load_log_offsets,
    read_log_offsets,
    to_table,
)
from protocol.records import build_batch
from storage.log import Log
from storage.options import LogOptions


def _append(root: Path, topic: str, partition: int, counts: list[int], **options: object) -> None:
    async def go() -> None:
        log = Log.open(root, topic, partition, LogOptions(flush_policy="none").with_(**options))
        for i, n in enumerate(counts):
            await log.append(build_batch([(b"k", b"v%d" % j) for j in range(n)], timestamp_ms=1000 + i))
        await log.close()

    asyncio.run(go())


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    registry = TopicRegistry(tmp_path)
    registry.create("orders", 3)
    registry.create("payments", 1)
    registry.create("__consumer_offsets", 2)
    _append(tmp_path, "orders", 0, [3, 2])            # ends at 5
    _append(tmp_path, "orders", 1, [1] * 12, segment_bytes=200)  # rolled: several segments
    # orders-2 never written: no directory
    _append(tmp_path, "payments", 0, [4])
    _append(tmp_path, "__consumer_offsets", 0, [7])   # not a hosted topic
    return tmp_path


def test_end_offsets_from_the_topics_logs(data_dir: Path) -> None:
    assert len(list((data_dir / "orders-1").glob("*.log"))) > 2
    assert read_log_offsets(data_dir) == [
        PartitionEnd("orders", 0, 5, 0),
        PartitionEnd("orders", 1, 12, 0),
        PartitionEnd("orders", 2, 0, None),
        PartitionEnd("payments", 0, 4, 0),
    ]
    assert end_offsets_from_data_dir(data_dir) == [("orders", 0, 5), ("orders", 1, 12), ("orders", 2, 0), ("payments", 0, 4)]


def test_log_start_follows_retention_and_a_torn_tail_is_ignored(data_dir: Path) -> None:
    segments = sorted((data_dir / "orders-1").glob("*.log"))
    first_kept = int(segments[1].stem)
    segments[0].unlink()  # retention removed the oldest segment
    last = sorted((data_dir / "payments-0").glob("*.log"))[-1]
    with open(last, "ab") as f:
        f.write(build_batch([(b"k", b"v")], timestamp_ms=5)[:30])  # a write in progress
    got = {(r.topic, r.partition): r for r in read_log_offsets(data_dir)}
    assert got["orders", 1] == PartitionEnd("orders", 1, 12, first_kept)
    assert got["payments", 0] == PartitionEnd("payments", 0, 4, 0)


def test_end_offset_history_per_batch(data_dir: Path) -> None:
    history = end_offset_history(data_dir)
    assert [h for h in history if h[0] == "orders" and h[1] == 0] == [("orders", 0, 3, 1000), ("orders", 0, 5, 1001)]
    assert [h[2] for h in history if h[:2] == ("orders", 1)] == list(range(1, 13))
    assert not [h for h in history if h[0] == "__consumer_offsets"]


def test_end_offsets_from_json_and_csv(tmp_path: Path) -> None:
    js = tmp_path / "ends.json"
    js.write_text('[{"topic": "orders", "partition": 0, "log_end_offset": 42, "log_start_offset": 7},'
                  ' {"topic": "orders", "partition": 1, "log_end_offset": 9}]')
    csv_file = tmp_path / "ends.csv"
    csv_file.write_text("topic,partition,log_end_offset\norders,0,42\norders,1,9\n")
    assert load_log_offsets(js) == [PartitionEnd("orders", 0, 42, 7), PartitionEnd("orders", 1, 9, None)]
    assert load_log_offsets(csv_file) == [PartitionEnd("orders", 0, 42, None), PartitionEnd("orders", 1, 9, None)]
    assert end_offsets_from_file(csv_file) == [("orders", 0, 42), ("orders", 1, 9)]
    bad = tmp_path / "bad.csv"
    bad.write_text("topic,partition,log_end_offset\norders,zero,42\n")
    with pytest.raises(ValueError, match="entry 1"):
        load_log_offsets(bad)


def test_as_an_arrow_table(data_dir: Path) -> None:
    table = to_table(read_log_offsets(data_dir))
    assert table.schema.equals(ARROW_SCHEMA)
    assert table.column("log_end_offset").to_pylist() == [5, 12, 0, 4]
    assert table.column("log_start_offset").to_pylist() == [0, 0, None, 0]
    assert to_table([]).num_rows == 0 and isinstance(to_table([]), pa.Table)
