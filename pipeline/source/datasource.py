"""The Spark 4 Python data source ``consumer_offsets``::

    spark.dataSource.register(ConsumerOffsetsDataSource)      # pipeline.session does this
    df = spark.read.format("consumer_offsets").load(data_dir)

One row per record of the ``__consumer_offsets`` segment files (schema: ``schema.RAW_SCHEMA``),
parsed by ``columns.parse_segment`` and handed to Spark as Arrow batches. No server needs to run.

``path`` (the ``load`` argument) is a data directory — every ``__consumer_offsets-<N>``
directory in it is read — or one ``__consumer_offsets-<N>`` directory.

Options (strings, case-insensitive; sizes take a k/m/g suffix):

* ``verifyCrc`` (default ``true``): check every batch's CRC-32C. Cheap (C extension).
* ``maxPartitionBytes`` (default ``64m``): segment files are packed into input partitions of at
  most about this many bytes. Each Spark task costs ~50 ms even with worker reuse, and
  ``__consumer_offsets`` segments are often small, so one task per file would waste it.
* ``minPartitions`` (default twice this machine's cores): but use at least this many partitions,
  so every core has work and a slow one can be balanced, ...
* ``minPartitionBytes`` (default ``4m``): ... unless that would make partitions smaller than
  this: a few MB parse in about the time a task costs to start.
* ``batchRows`` (default 65536): rows per Arrow batch handed to Spark. Measured on 2 cores:
  8192 is ~20% slower, 262144 no faster, and each batch holds that many rows in Python memory.

Theory of operation.
  1. Planning (``partitions()``, once, in a Python process on the driver) lists the ``*.log``
     files and takes each one's size *now*. Cleaner leftovers (``.cleaned``, ``.swap``,
     ``.deleted``) and the index files are not listed.
  2. Each input partition is a picklable list of ``SegmentFile(path, size, base_offset,
     log_partition)``; executors read each file only up to its planned size, so a server still
     appending cannot hand a task a half-written batch, and a job sees one point in time per file.
  3. A file gone by the time it is read (retention deleted it, or the cleaner replaced it after
     planning) is skipped with a warning; a file the cleaner rewrote under the same name is read
     up to the planned size of the old one (it is a complete, compacted copy, so at worst rows
     are missing, never wrong). For an exact point-in-time read of a busy log, hard-link the
     segments into a snapshot directory first and read that.
  4. Executors need the same path (local disk in local mode; a shared volume on a cluster).
  5. Files are memory-mapped. Deleting or renaming a mapped file is harmless (the mapping keeps
     the old inode), which is how retention and the cleaner replace segments; truncating one in
     place while it is read (the server's recovery after a crash, at startup) would fault the
     reading worker. Do not restart a crashed server onto a directory a job is reading.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .schema import RAW_SCHEMA

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "FORMAT",
    "OFFSETS_TOPIC",
    "ConsumerOffsetsDataSource",
    "ConsumerOffsetsReader",
    "SegmentFile",
    "SegmentGroup",
    "list_segments",
    "plan_partitions",
    "read_partition",
]

FORMAT = "consumer_offsets"
OFFSETS_TOPIC = "__consumer_offsets"

#: Defaults of the size options (see the module docstring for why).
MAX_PARTITION_BYTES = 64 << 20
#: Rows per Arrow batch handed to Spark (``columns.BATCH_ROWS``; option ``batchRows``).
BATCH_ROWS = 65_536
MIN_PARTITION_BYTES = 4 << 20

logger = logging.getLogger("groupcoord.pipeline")

_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_PARTITION_DIR = re.compile(r"^" + re.escape(OFFSETS_TOPIC) + r"-(\d+)$")


class SegmentFile(NamedTuple):
    """A segment as planned: read ``path`` up to ``size`` bytes."""

    path: str
    size: int
    base_offset: int
    log_partition: int


class SegmentGroup(InputPartition):
    """One Spark input partition: segment files read one after another by one task."""

    def __init__(self, segments: list[SegmentFile]) -> None:
        super().__init__(None)
        self.segments = segments

    def __repr__(self) -> str:
        return f"SegmentGroup({len(self.segments)} files, {sum(s.size for s in self.segments)} bytes)"


def list_segments(path: str | os.PathLike[str]) -> list[SegmentFile]:
    """The non-empty ``*.log`` segments under a data directory or one ``__consumer_offsets-N``
    directory, in (partition, base offset) order, with their sizes now.

    Raises:
        FileNotFoundError: ``path`` is not a directory.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"consumer_offsets: {root} is not a directory")
    match = _PARTITION_DIR.match(root.name)
    if match:
        dirs = [(int(match.group(1)), root)]
    else:
        dirs = sorted((int(m.group(1)), d) for d in root.iterdir() if (m := _PARTITION_DIR.match(d.name)) and d.is_dir())
    out = []
    for partition, directory in dirs:
        for entry in os.scandir(directory):
            m = _SEGMENT_NAME.match(entry.name)
            if not m:
                continue
            try:
                size = entry.stat().st_size
            except FileNotFoundError:
                continue  # removed while listing
            if size:
                out.append(SegmentFile(entry.path, size, int(m.group(1)), partition))
    out.sort(key=lambda s: (s.log_partition, s.base_offset))
    return out


def plan_partitions(segments: list[SegmentFile], *, max_bytes: int = MAX_PARTITION_BYTES,
                    min_partitions: int | None = None,
                    min_bytes: int = MIN_PARTITION_BYTES) -> list[list[SegmentFile]]:
    """Pack segments into input partitions.

    The number of partitions is the larger of ``ceil(total / max_bytes)`` and ``min_partitions``
    (at most one per file, and no more than ``total / min_bytes``). Files are dealt largest
    first to the least loaded partition (LPT), which keeps partitions within one file of each
    other; within a partition they stay in log order. A file is never split.
    """
    if not segments:
        return []
    if min_partitions is None:
        min_partitions = 2 * (os.cpu_count() or 1)
    total = sum(s.size for s in segments)
    wanted = max(math.ceil(total / max(max_bytes, 1)),
                 min(min_partitions, len(segments), total // max(min_bytes, 1)), 1)
    count = min(wanted, len(segments))
    heap = [(0, i) for i in range(count)]
    bins: list[list[SegmentFile]] = [[] for _ in range(count)]
    for seg in sorted(segments, key=lambda s: (-s.size, s.log_partition, s.base_offset)):
        load, i = heapq.heappop(heap)
        bins[i].append(seg)
        heapq.heappush(heap, (load + seg.size, i))
    for b in bins:
        b.sort(key=lambda s: (s.log_partition, s.base_offset))
    bins.sort(key=lambda b: (b[0].log_partition, b[0].base_offset))
    return bins


def read_partition(segments: list[SegmentFile], *, verify_crc: bool = True, schema: pa.Schema | None = None,
                   batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of a list of planned segments (what one task does); Spark-free."""
    from .columns import parse_segment

    for seg in segments:
        try:
            yield from parse_segment(seg.path, seg.log_partition, seg.base_offset, seg.size,
                                     verify_crc=verify_crc, schema=schema, batch_rows=batch_rows)
        except FileNotFoundError:
            # Rule 3: retention or the cleaner removed it after planning.
            logger.warning("consumer_offsets: segment %s disappeared after planning; skipped", seg.path)


def _size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kmg]?)b?\s*", text.lower())
    if not m:
        raise ValueError(f"consumer_offsets: not a size: {text!r}")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2)]


def _flag(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"consumer_offsets: expected true or false, got {text!r}")
    return value == "true"


class ConsumerOffsetsReader(DataSourceReader):
    """Picklable: holds only the path, the schema and option values (files are opened in
    ``read``, on the executor)."""

    def __init__(self, path: str, schema: StructType, options: dict[str, str]) -> None:
        self.path = path
        self.schema = schema
        self.verify_crc = _flag(options.get("verifycrc", "true"))
        self.max_bytes = _size(options.get("maxpartitionbytes", str(MAX_PARTITION_BYTES)))
        self.min_bytes = _size(options.get("minpartitionbytes", str(MIN_PARTITION_BYTES)))
        self.min_partitions = int(options["minpartitions"]) if "minpartitions" in options else None
        self.batch_rows = int(options.get("batchrows", BATCH_ROWS))

    def partitions(self) -> list[InputPartition]:
        bins = plan_partitions(list_segments(self.path), max_bytes=self.max_bytes,
                               min_partitions=self.min_partitions, min_bytes=self.min_bytes)
        return [SegmentGroup(b) for b in bins] or [SegmentGroup([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        assert isinstance(partition, SegmentGroup)
        schema = to_arrow_schema(self.schema, timezone="UTC")
        yield from read_partition(partition.segments, verify_crc=self.verify_crc, schema=schema,
                                  batch_rows=self.batch_rows)


class ConsumerOffsetsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return RAW_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        if schema != RAW_SCHEMA:
            # Python data sources have no column pruning: the parser always produces every
            # column, and Spark rejects batches that do not match the schema exactly.
            raise ValueError("consumer_offsets has a fixed schema (pipeline.source.schema.RAW_SCHEMA); "
                             "select columns after load() instead of passing .schema()")
        path = self.options.get("path")
        if not path:
            raise ValueError("consumer_offsets: load(path) needs a data directory or a __consumer_offsets-N directory")
        return ConsumerOffsetsReader(path, schema, {k.lower(): v for k, v in self.options.items()})
