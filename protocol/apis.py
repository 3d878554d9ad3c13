"""API keys, the table of what groupcoord speaks, and the message classes for each API.

``SUPPORTED_VERSIONS`` is the one table of supported APIs and version ranges: the server answers
ApiVersions from it and rejects requests outside it. An API goes in only when a handler for it
exists (a node refuses to start when an advertised API has no handler: ``App._build_handlers``).

The message classes come from kafka-python 3.x (``kafka.protocol``), generated from Kafka's JSON
message schemas: every field of every version, flexible versions and tagged fields included. The
KIP-848 APIs it lacks are built the same way from our own definitions (protocol/consumer_group_messages.py).
"""

from __future__ import annotations

from enum import IntEnum

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from .consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from .kafka_types import KafkaMessageClass

__all__ = ["ApiKey", "SUPPORTED_VERSIONS", "ZOOKEEPER_MODE_VERSIONS", "request_class", "response_class", "is_flexible"]


class ApiKey(IntEnum):
    """Kafka's api keys (``org.apache.kafka.common.protocol.ApiKeys``), for the APIs we know."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


# Request and response classes per api key. Knowing a codec is not the same as serving the API:
# only SUPPORTED_VERSIONS says what we serve.
_MESSAGES: dict[ApiKey, tuple[KafkaMessageClass, KafkaMessageClass]] = {
    ApiKey.PRODUCE: (ProduceRequest, ProduceResponse),
    ApiKey.FETCH: (FetchRequest, FetchResponse),
    ApiKey.LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    ApiKey.METADATA: (MetadataRequest, MetadataResponse),
    ApiKey.OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    ApiKey.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    ApiKey.JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    ApiKey.HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    ApiKey.LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    ApiKey.SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    ApiKey.DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    ApiKey.LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    ApiKey.API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (CreateTopicsRequest, CreateTopicsResponse),
    ApiKey.DELETE_TOPICS: (DeleteTopicsRequest, DeleteTopicsResponse),
    ApiKey.DELETE_RECORDS: (DeleteRecordsRequest, DeleteRecordsResponse),
    ApiKey.INIT_PRODUCER_ID: (InitProducerIdRequest, InitProducerIdResponse),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    ApiKey.ADD_PARTITIONS_TO_TXN: (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    ApiKey.ADD_OFFSETS_TO_TXN: (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    ApiKey.END_TXN: (EndTxnRequest, EndTxnResponse),
    ApiKey.DESCRIBE_TRANSACTIONS: (DescribeTransactionsRequest, DescribeTransactionsResponse),
    ApiKey.LIST_TRANSACTIONS: (ListTransactionsRequest, ListTransactionsResponse),
    ApiKey.WRITE_TXN_MARKERS: (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    ApiKey.DESCRIBE_ACLS: (DescribeAclsRequest, DescribeAclsResponse),
    ApiKey.CREATE_ACLS: (CreateAclsRequest, CreateAclsResponse),
    ApiKey.DELETE_ACLS: (DeleteAclsRequest, DeleteAclsResponse),
    ApiKey.DESCRIBE_CONFIGS: (DescribeConfigsRequest, DescribeConfigsResponse),
    ApiKey.ALTER_CONFIGS: (AlterConfigsRequest, AlterConfigsResponse),
    ApiKey.CREATE_PARTITIONS: (CreatePartitionsRequest, CreatePartitionsResponse),
    ApiKey.DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
    ApiKey.TXN_OFFSET_COMMIT: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    ApiKey.OFFSET_DELETE: (OffsetDeleteRequest, OffsetDeleteResponse),
    ApiKey.DESCRIBE_CLUSTER: (DescribeClusterRequest, DescribeClusterResponse),
    ApiKey.DESCRIBE_PRODUCERS: (DescribeProducersRequest, DescribeProducersResponse),
    ApiKey.DESCRIBE_LOG_DIRS: (DescribeLogDirsRequest, DescribeLogDirsResponse),
    ApiKey.ELECT_LEADERS: (ElectLeadersRequest, ElectLeadersResponse),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
    # The KIP-848 consumer group protocol (protocol/consumer_group_messages.py).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
    # SASL (coordinator/security/sasl/gate.py answers these, not a handler) and SCRAM users (KIP-554).
    ApiKey.SASL_HANDSHAKE: (SaslHandshakeRequest, SaslHandshakeResponse),
    ApiKey.SASL_AUTHENTICATE: (SaslAuthenticateRequest, SaslAuthenticateResponse),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (DescribeUserScramCredentialsRequest,
                                             DescribeUserScramCredentialsResponse),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
}

# What we serve. Minimums follow Kafka 4.x, which removed the oldest versions (KIP-896); the
# schemas we decode with are Kafka 4.x's, so versions older than these have no schema here.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    # SASL (reference/security.md §10): exactly 0-1 and 0-2; librdkafka needs v0 in range, Java up
    # to 2.4 breaks on a SaslHandshake max above 1, kafkajs falls back to raw tokens without 36.
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    # SCRAM users (KIP-554) and ACLs (KIP-140; v1 prefixed patterns, v2 flexible, v3 USER resource).
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    # v3+ adds ClientSoftwareName/Version; v4 is what the Java client and kafka-python send.
    ApiKey.API_VERSIONS: (0, 4),
    # v0-v12: v10 topic ids, v11 drops cluster authorized operations, v12 nullable topic name.
    ApiKey.METADATA: (0, 12),
    # v4+ batched coordinator keys (KIP-699); v6 adds share coordinators (KIP-932).
    ApiKey.FIND_COORDINATOR: (0, 6),
    # Kafka 4.x schemas: CreateTopics v2-v7, DeleteTopics v1-v6, CreatePartitions v0-v3.
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    # v1 adds EndpointType, v2 IncludeFencedBrokers.
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    # Kafka 4.x schema: v1-v4 (v1 config sources and synonyms, v3 types and documentation).
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    # Hosted topics. Produce v3+ carries only magic-2 batches; v13 would name topics by id.
    ApiKey.PRODUCE: (3, 12),
    # Fetch v13+ names topics by id; v17 is the newest our zero-copy encoder writes.
    ApiKey.FETCH: (4, 17),
    # v4 current leader epoch, v7 max timestamp (KIP-734), v8 earliest local, v9 latest tiered.
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    # Idempotent and transactional producers; v6 adds two-phase-commit transactions (KIP-939).
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    # The transaction coordinator (KIP-98), the classic flow: transaction.version is not
    # advertised, so clients stay on AddPartitionsToTxn and EndTxn <= v4 (EndTxn v5 is KIP-890
    # part 2). AddPartitionsToTxn v4-5 are the brokers' batched and VerifyOnly calls (KIP-890 part 1).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    # kafka-transactions.sh describe / list (KIP-664); ListTransactions v1 adds DurationFilter
    # (KIP-994), v2 a transactional id pattern (not served).
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    # The classic group protocol; versions from Kafka's request schemas, e.g.
    # https://github.com/apache/kafka/blob/trunk/clients/src/main/resources/common/message/JoinGroupRequest.json
    # v4 JoinGroup brings MEMBER_ID_REQUIRED (KIP-394), v5 static membership (KIP-345),
    # v9 SkipAssignment (KIP-814).
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    # Kafka 4.x schemas start OffsetCommit at v2; v10 names topics by id only.
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    # KIP-447; v5 needs transaction.version 2 (KIP-890 part 2), which is not advertised.
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    # The KIP-848 consumer group protocol (group.protocol=consumer): v1 lets members choose their
    # member id (KIP-1082) and subscribe by regex; describe v1 adds MemberType (KIP-1099).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # kafka-log-dirs: v1-v4 (v4 adds total/usable bytes, KIP-827); v5 IsCordoned is KRaft-only.
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    # Preferred and unclean leader election (KIP-183, KIP-460).
    ApiKey.ELECT_LEADERS: (0, 2),
    # Topic overrides and dynamic broker configs (KIP-339); v1 is flexible.
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    # The same, non-incremental (the given set replaces the resource's); v2 is flexible.
    ApiKey.ALTER_CONFIGS: (0, 2),
    # Partition reassignment (KIP-455); Alter v1 adds AllowReplicationFactorChange (KIP-860).
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # Transaction markers from a transaction coordinator (or kafka-transactions.sh abort); v1 is
    # flexible. Kafka 4.0 drops v0, v2 adds TransactionVersion (KIP-1228, TV2: not served).
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    # A partition leader's producer state (KIP-664).
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    # Raising a partition's log start (KIP-107); v2 is flexible.
    ApiKey.DELETE_RECORDS: (0, 2),
}

#: What a node with ``zookeeper.connect`` serves: the table above plus OffsetCommit v0-1 and OffsetFetch v0, which
#: Kafka brokers in ZooKeeper mode served until Kafka 4.0 removed them (KIP-896); v0 keeps its offsets in ZooKeeper
#: (coordinator/cluster/zk_offset_apis.py). A node without ZooKeeper answers as Kafka 4 does.
ZOOKEEPER_MODE_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    **SUPPORTED_VERSIONS,
    ApiKey.OFFSET_COMMIT: (0, SUPPORTED_VERSIONS[ApiKey.OFFSET_COMMIT][1]),
    ApiKey.OFFSET_FETCH: (0, SUPPORTED_VERSIONS[ApiKey.OFFSET_FETCH][1]),
}


def request_class(api_key: int) -> KafkaMessageClass:
    return _MESSAGES[ApiKey(api_key)][0]


def response_class(api_key: int) -> KafkaMessageClass:
    return _MESSAGES[ApiKey(api_key)][1]


def is_flexible(api_key: int, api_version: int) -> bool:
    """True when this api version uses compact encodings and tagged fields (header v2 / v1)."""
    return bool(request_class(api_key).flexible_version_q(api_version))
