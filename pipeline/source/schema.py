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
    ByteType,
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
#: The KIP-848 consumer-group records (key versions 3-8 and 16, ``protocol/consumer_group_records.py``);
#: ``key_version`` tells which.
CONSUMER_GROUP = "consumer_group"
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

#: A ConsumerGroupMemberMetadataValue (key version 5): a member's subscription. ``classic_protocol``:
#: the member joined with the classic protocol (JoinGroup) into a consumer group (KIP-848 migration).
CONSUMER_MEMBER_TYPE = StructType([
    StructField("instance_id", StringType()),
    StructField("rack_id", StringType()),
    StructField("client_id", StringType()),
    StructField("client_host", StringType()),
    StructField("subscribed_topic_names", ArrayType(StringType())),
    StructField("subscribed_topic_regex", StringType()),
    StructField("rebalance_timeout_ms", IntegerType()),
    StructField("server_assignor", StringType()),
    StructField("classic_protocol", BooleanType()),
])

#: Partitions by topic id, as the assignment records hold them. Topic ids are written as Kafka's tools
#: print them (``Uuid.toString()``: URL-safe base64 without padding, as ``groupcoord dump-log`` does).
TOPIC_PARTITIONS_TYPE = ArrayType(StructType([
    StructField("topic_id", StringType()),
    StructField("partitions", ArrayType(IntegerType())),
]))

#: A topic of ConsumerGroupPartitionMetadataValue (key version 4): the subscribed topics as the group saw them.
SUBSCRIBED_TOPIC_TYPE = StructType([
    StructField("topic_id", StringType()),
    StructField("topic_name", StringType()),
    StructField("num_partitions", IntegerType()),
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
    # What kind of record: OFFSET_COMMIT, GROUP_METADATA, CONSUMER_GROUP, CONTROL or UNKNOWN (a key
    # version the codecs do not know, e.g. share-group records; kept so nothing is silently dropped).
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
    # KIP-848 consumer groups (CONSUMER_GROUP rows; the group in group_id). The member of keys 5, 7 and 8.
    StructField("member_id", StringType()),
    StructField("group_epoch", IntegerType()),                      # 3: ConsumerGroupMetadata
    StructField("subscribed_topics", ArrayType(SUBSCRIBED_TOPIC_TYPE)),  # 4: ConsumerGroupPartitionMetadata
    StructField("consumer_member", CONSUMER_MEMBER_TYPE),           # 5: ConsumerGroupMemberMetadata
    StructField("assignment_epoch", IntegerType()),                 # 6: ConsumerGroupTargetAssignmentMetadata
    # 7 (ConsumerGroupTargetAssignmentMember): the member's target; 8: what it owns now.
    StructField("assigned_partitions", TOPIC_PARTITIONS_TYPE),
    # 8: ConsumerGroupCurrentMemberAssignment. member_state is Kafka's MemberState code: 0 STABLE,
    # 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS, 127 UNKNOWN.
    StructField("member_epoch", IntegerType()),
    StructField("previous_member_epoch", IntegerType()),
    StructField("member_state", ByteType()),
    StructField("partitions_pending_revocation", TOPIC_PARTITIONS_TYPE),
    # 16: ConsumerGroupRegularExpression: a subscribed regex, the topics it resolved to, and the
    # metadata version and time (ms) of that resolution.
    StructField("regular_expression", StringType()),
    StructField("resolved_topics", ArrayType(StringType())),
    StructField("regex_metadata_version", LongType()),
    StructField("regex_resolved_ms", LongType()),
    # CONTROL rows: the transaction marker's type, 0 ABORT or 1 COMMIT (KIP-98 ControlRecordType);
    # it ends the transaction of the batch's producer_id in that log partition.
    StructField("control_type", ShortType()),
    # CORRUPT rows only: "<file>: <reason> at byte <position>".
    StructField("error", StringType()),
])

RAW_COLUMNS = tuple(f.name for f in RAW_SCHEMA.fields)
