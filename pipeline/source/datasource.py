"""The Spark 4 Python data source ``consumer_offsets``: ``spark.read.format("consumer_offsets")
.load(data_dir)`` gives one row per record of the ``__consumer_offsets`` segments (schema in
``schema.py``), yielded as Arrow batches by ``reader.py``.

Planning lists the segments and their sizes once, on the driver; each input partition is a
picklable list of (path, size, ...) so executors read exactly what was planned. Options (strings,
case-insensitive): ``verifyCrc`` (default true), ``maxPartitionBytes`` (default 64 MiB),
``minPartitions`` (default 4: about twice the cores of a small machine).
"""

from __future__ import annotations

from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .reader import Segment, list_segments, plan_partitions, read_segment
from .schema import RAW_SCHEMA

__all__ = ["ConsumerOffsetsDataSource", "FORMAT"]

FORMAT = "consumer_offsets"


class SegmentGroup(InputPartition):
    def __init__(self, segments: list[Segment]) -> None:
        self.segments = segments


class ConsumerOffsetsReader(DataSourceReader):
    def __init__(self, path: str, schema: StructType, options: dict[str, str]) -> None:
        self.path = path
        self.schema = schema
        self.verify_crc = options.get("verifycrc", "true").lower() != "false"
        self.max_bytes = int(options.get("maxpartitionbytes", 64 << 20))
        self.min_partitions = int(options.get("minpartitions", 4))

    def partitions(self) -> list[InputPartition]:
        bins = plan_partitions(list_segments(self.path), self.max_bytes, self.min_partitions)
        return [SegmentGroup(b) for b in bins] or [SegmentGroup([])]

    def read(self, partition: Any) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(self.schema, timezone="UTC")
        for segment in partition.segments:
            yield from read_segment(segment, schema, verify_crc=self.verify_crc)


class ConsumerOffsetsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return RAW_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        path = self.options.get("path")
        if not path:
            raise ValueError("consumer_offsets: load(path) needs a data directory or a __consumer_offsets-N directory")
        return ConsumerOffsetsReader(path, schema, dict(self.options))
