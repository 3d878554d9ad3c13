"""The ``__consumer_offsets`` source of the pipeline: segment files to Arrow rows (``columns``,
Spark-free), the Spark data source ``consumer_offsets`` over them (``datasource``), the raw
schema (``schema``) and the hosted topics' end offsets for lag (``end_offsets``)."""

from __future__ import annotations

from .columns import arrow_schema, parse_segment
from .datasource import FORMAT, ConsumerOffsetsDataSource, list_segments, plan_partitions, read_partition
from .end_offsets import PartitionEnd, load_log_offsets, read_log_offsets
from .schema import CONSUMER_GROUP, CONTROL, CORRUPT, GROUP_METADATA, OFFSET_COMMIT, RAW_SCHEMA, UNKNOWN

__all__ = [
    "FORMAT",
    "ConsumerOffsetsDataSource",
    "parse_segment",
    "arrow_schema",
    "list_segments",
    "plan_partitions",
    "read_partition",
    "PartitionEnd",
    "read_log_offsets",
    "load_log_offsets",
    "RAW_SCHEMA",
    "OFFSET_COMMIT",
    "GROUP_METADATA",
    "CONSUMER_GROUP",
    "CONTROL",
    "UNKNOWN",
    "CORRUPT",
]
