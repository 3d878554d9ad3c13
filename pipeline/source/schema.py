"""The raw table the ``consumer_offsets`` data source produces: one row per record of the
``__consumer_offsets`` segment files, for every record type.

Times stay epoch milliseconds (``LONG``); transforms convert with ``F.timestamp_millis``. That
sidesteps Arrow's ``timestamp[us, tz=UTC]`` exactness rule for Python data sources and keeps the
source's Arrow schema a plain mapping of this one.

This module is the single statement of the schema: the reader builds its Arrow schema from
``RAW_SCHEMA`` and the transforms and their tests name columns through it.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

#: ``record_type`` values.
OFFSET_COMMIT = "offset_commit"
GROUP_METADATA = "group_metadata"
CONTROL = "control"
UNKNOWN = "unknown"
#: A batch that failed validation: one row naming the file and byte position in ``error``; the
#: reader then stops reading that segment (what follows a corrupt batch cannot be trusted).
CORRUPT = "corrupt"

MEMBER_TYPE = StructType([
    StructField("member_id", StringType()),
    StructField("group_instance_id", StringType()),
    StructField("client_id", StringType()),
    StructField("client_host", StringType()),
    StructField("rebalance_timeout_ms", IntegerType()),
    StructField("session_timeout_ms", IntegerType()),
    StructField("subscription", BinaryType()),
    StructField("assignment", BinaryType()),
])

RAW_SCHEMA = StructType([
    # Where the record sits: the __consumer_offsets partition, its segment and its offset.
    StructField("log_partition", IntegerType(), nullable=False),
    StructField("segment_base_offset", LongType(), nullable=False),
    StructField("offset", LongType(), nullable=False),
    # Its batch.
    StructField("batch_timestamp_ms", LongType()),   # the record's timestamp (base + delta)
    StructField("producer_id", LongType()),
    StructField("is_transactional", BooleanType()),
    StructField("is_control", BooleanType()),
    # What kind of record: OFFSET_COMMIT, GROUP_METADATA, CONTROL or UNKNOWN (a key version this
    # codec does not know, e.g. KIP-848 records; kept so nothing is silently dropped).
    StructField("record_type", StringType(), nullable=False),
    StructField("key_version", ShortType()),
    StructField("value_version", ShortType()),
    StructField("is_tombstone", BooleanType()),
    # Offset commits (and the group id of group metadata records).
    StructField("group_id", StringType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("committed_offset", LongType()),
    StructField("leader_epoch", IntegerType()),
    StructField("commit_metadata", StringType()),
    StructField("commit_timestamp_ms", LongType()),
    StructField("expire_timestamp_ms", LongType()),
    # Group metadata.
    StructField("protocol_type", StringType()),
    StructField("generation", IntegerType()),
    StructField("protocol", StringType()),
    StructField("leader", StringType()),
    StructField("state_timestamp_ms", LongType()),
    StructField("members", ArrayType(MEMBER_TYPE)),
    # CORRUPT rows only: "<file>: <reason> at byte <position>".
    StructField("error", StringType()),
])

RAW_COLUMNS = tuple(f.name for f in RAW_SCHEMA.fields)
