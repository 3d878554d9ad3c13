"""The per-API ACL table on the wire, API by API, as Kafka's AuthorizerIntegrationTest does it
(``requestKeysToAcls`` and its error maps,
https://github.com/apache/kafka/blob/3.8/core/src/test/scala/integration/kafka/api/AuthorizerIntegrationTest.scala):
one node with a SASL_PLAINTEXT listener and the ACL authorizer; ``alice`` sends each advertised API
with no ACLs and gets Kafka's authorization error in Kafka's place, then is granted exactly the
ACLs Kafka requires (added and removed between cases by the super user ``admin`` with CreateAcls /
DeleteAcls) and gets some other answer. The table is docs/security.md's per-API section and
https://kafka.apache.org/documentation/#operations_resources_and_protocols.

The handler-level tests (test_api_authz_{groups,topics,transactions}.py) show what a denied request
leaves unchanged; this matrix shows every advertised key is covered, through the real server.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    DescribeUserScramCredentialsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListPartitionReassignmentsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from coordinator.security.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from protocol.errors import ErrorCode as E
from protocol.records import build_batch
from tests.conftest import REPO, free_port
from tests.wire_client import WireClient

O, R = AclOperation, ResourceType
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret";')
#: The authorization errors: after the grants none of them may remain.
AUTHZ = {E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED,
         E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
#: Stands for "left out of the answer" in APIs that filter rather than refuse (ListGroups,
#: ListTransactions, Metadata's all-topics form).
HIDDEN = -1000
#: KIP-430's "not asked / not allowed" authorized-operations value (Integer.MIN_VALUE), which
#: kafka-python's bitfield decodes as None (other values as the set of bits).
OMITTED = None
#: Keys Kafka answers without any check (KafkaApis: ApiVersions; the SASL exchange, which comes
#: before a principal exists; DescribeCluster, whose cluster operations alone need DESCRIBE CLUSTER,
#: test_describe_cluster_operations_need_describe_cluster).
NOT_CHECKED = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.DESCRIBE_CLUSTER}

pytestmark = pytest.mark.timeout(60)

TOPIC, GROUP, TXN = "t", "g", "tx"
Grant = tuple[ResourceType, str, AclOperation]
#: Ids of topics the fixture made, for the by-id forms.
TOPIC_IDS: dict[str, Any] = {}


class Node:
    """``groupcoord serve`` with one SASL_PLAINTEXT listener (PLAIN users admin and alice), plus ``settings``
    (``key=value``; test_api_authz_zk_v0.py adds ZooKeeper)."""

    def __init__(self, root: Path, *settings: str) -> None:
        self.port = free_port()
        self.log = root / "server.log"
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(root / "data"),
                "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{self.port}",
                "--set", "sasl.enabled.mechanisms=PLAIN", "--set", f"sasl.jaas.config={JAAS}",
                "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                "--set", "super.users=User:admin", "--set", "offsets.topic.num.partitions=1",
                "--set", "offsets.topic.replication.factor=1", "--set", "group.initial.rebalance.delay.ms=0",
                "--set", "connection.failed.authentication.delay.ms=0"]
        for setting in settings:
            args += ["--set", setting]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.05)
        self.admin = self.login("admin", "admin-secret")
        self.alice = self.login("alice", "alice-secret")

    def login(self, user: str, password: str) -> WireClient:
        client = WireClient("127.0.0.1", self.port)
        assert client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        token = b"\0" + user.encode() + b"\0" + password.encode()
        assert client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token)).error_code == 0
        return client

    def grant(self, *grants: Grant, host: str = "*", permission: AclPermissionType = AclPermissionType.ALLOW,
              pattern: PatternType = PatternType.LITERAL, principal: str = "User:alice") -> None:
        creations = [CreateAclsRequest.AclCreation(
            resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
            principal=principal, host=host, operation=op, permission_type=permission)
            for rtype, name, op in grants]
        got = self.admin.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=creations))
        assert [r.error_code for r in got.results] == [0] * len(grants), got

    def revoke_all(self, principal: str = "User:alice") -> None:
        got = self.admin.request(ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=R.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
            principal_filter=principal, host_filter=None, operation=O.ANY, permission_type=AclPermissionType.ANY)]))
        assert got.filter_results[0].error_code == 0, got

    def close(self) -> None:
        self.admin.close()
        self.alice.close()
        self.proc.terminate()
        self.proc.wait(20)


# --- what the super user sets up: a topic with a record, a group with an offset, a transactional id.

def _create_topic(c: WireClient, name: str) -> None:
    CT = CreateTopicsRequest.CreatableTopic
    got = c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(timeout_ms=5000, topics=[CT(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
    assert got.topics[0].error_code == 0, got


def _produce(topic: str = TOPIC, transactional_id: str | None = None) -> Any:
    P = ProduceRequest.TopicProduceData
    options: dict[str, Any] = {}
    if transactional_id is not None:
        options = {"producer_id": 999, "producer_epoch": 0, "base_sequence": 0, "transactional": True}
    return ProduceRequest(transactional_id=transactional_id, acks=1, timeout_ms=5000, topic_data=[
        P(name=topic, partition_data=[P.PartitionProduceData(
            index=0, records=build_batch([(None, b"v")], timestamp_ms=1000, **options))])])


def _commit(group: str = GROUP) -> Any:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                               topics=[T(name=TOPIC, partitions=[T.OffsetCommitRequestPartition(
                                   partition_index=0, committed_offset=0, committed_leader_epoch=-1,
                                   committed_metadata="")])])


def _consumer_heartbeat() -> Any:
    return ConsumerGroupHeartbeatRequest(
        group_id="cg", member_id="", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=10000,
        subscribed_topic_names=[TOPIC], server_assignor=None, topic_partitions=[])


def _find_coordinator(c: WireClient, key_type: int, key: str) -> int:
    got = c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]))
    return int(got.coordinators[0].error_code)


def _until(attempt: Callable[[], int]) -> None:
    deadline = time.monotonic() + 15
    while (code := attempt()) in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS):
        assert time.monotonic() < deadline, code
        time.sleep(0.05)
    assert code == 0, code


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    node = Node(tmp_path_factory.mktemp("authz-matrix"))
    try:
        admin = node.admin
        for name in (TOPIC, "doomed", "doomed-by-id", "kept-by-id"):
            _create_topic(admin, name)
        assert admin.request(ApiKey.PRODUCE, 9, _produce()).responses[0].partition_responses[0].error_code == 0
        # The coordinators' topics are made on the first FindCoordinator (as in Kafka), then load.
        for key_type, key in ((0, GROUP), (1, TXN)):
            _until(partial(_find_coordinator, admin, key_type, key))
        _until(lambda: admin.request(ApiKey.OFFSET_COMMIT, 8, _commit()).topics[0].partitions[0].error_code)
        _until(lambda: admin.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            transactional_id=TXN, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)).error_code)
        # A consumer group (KIP-848) subscribed to TOPIC; its member outlives the module (45 s session).
        _until(lambda: admin.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, _consumer_heartbeat()).error_code)
        got = admin.request(ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            topic_id=None, name=name) for name in (TOPIC, "doomed-by-id", "kept-by-id")],
            allow_auto_topic_creation=False))
        TOPIC_IDS.update((t.name, t.topic_id) for t in got.topics)
        yield node
    finally:
        node.close()


# --- the table: per API, the request, where Kafka puts the codes, and the grants in Kafka's order.

def _per_partition(topics: str = "topics", partitions: str = "partitions", code: str = "error_code"
                   ) -> Callable[[Any], list[int]]:
    return lambda r: [getattr(p, code) for t in getattr(r, topics) for p in getattr(t, partitions)]


def _top(r: Any) -> list[int]:
    return [r.error_code]


def _each(items: str, code: str = "error_code") -> Callable[[Any], list[int]]:
    return lambda r: [getattr(i, code) for i in getattr(r, items)]


@dataclass
class Case:
    """One row. Each stage adds its grants to the earlier stages' and sends the request again;
    ``codes`` picks the codes at Kafka's place in the answer, and all of them must be the stage's
    code (``HIDDEN``: left out of a listing). The last stage expects ``None``: no authorization
    error and nothing hidden. ``after`` restores what an allowed request changed."""

    api: ApiKey
    version: int
    request: Callable[[], Any]
    codes: Callable[[Any], list[int]]
    stages: list[tuple[list[Grant], int | None]]
    name: str = ""
    after: Callable[[Node], None] = field(default=lambda node: None)

    @property
    def id(self) -> str:
        return f"{self.api.name}{'-' + self.name if self.name else ''}"


def _simple(api: ApiKey, version: int, request: Callable[[], Any], codes: Callable[[Any], list[int]], denied: int,
            *grants: Grant, name: str = "") -> Case:
    return Case(api, version, request, codes, [([], denied), (list(grants), None)], name)


def _listed(attr: str, key: str, wanted: str) -> Callable[[Any], list[int]]:
    return lambda r: [] if wanted in [getattr(i, key) for i in getattr(r, attr)] else [HIDDEN]


_CLUSTER = R.CLUSTER, CLUSTER_NAME
F = FetchRequest.FetchTopic
L = ListOffsetsRequest.ListOffsetsTopic
OE = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
OFT = OffsetFetchRequest.OffsetFetchRequestTopic
ODT = OffsetDeleteRequest.OffsetDeleteRequestTopic
TOC = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
WM = WriteTxnMarkersRequest.WritableTxnMarker
DRT = DeleteRecordsRequest.DeleteRecordsTopic
IAC = IncrementalAlterConfigsRequest.AlterConfigsResource


def _alter_configs(rtype: int, name: str, key: str, value: str) -> Any:
    C = AlterConfigsRequest.AlterConfigsResource
    return AlterConfigsRequest(validate_only=True, resources=[C(resource_type=rtype, resource_name=name, configs=[
        C.AlterableConfig(name=key, value=value)])])


def _fetch(topic: str) -> Any:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                        session_epoch=-1, topics=[F(topic=topic, partitions=[F.FetchPartition(
                            partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                            partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")


#: Topic-level APIs by a topic name: (version, request for a name, codes, the operation needed).
#: Each is also sent for a topic that does not exist: authorization comes before existence, so a
#: denied name is answered 29, never "unknown" (docs/security.md; KafkaApis ``filterByAuthorized``).
_BY_TOPIC: dict[ApiKey, tuple[int, Callable[[str], Any], Callable[[Any], list[int]], AclOperation]] = {
    ApiKey.FETCH: (12, _fetch, _per_partition("responses"), O.READ),
    ApiKey.LIST_OFFSETS: (7, lambda topic: ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[L(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]),
        _per_partition(), O.DESCRIBE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (4, lambda topic: OffsetForLeaderEpochRequest(replica_id=-1, topics=[OE(
        topic=topic, partitions=[OE.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])]),
        _per_partition(), O.DESCRIBE),
    ApiKey.METADATA: (12, lambda topic: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        topic_id=None, name=topic)], allow_auto_topic_creation=False), _each("topics"), O.DESCRIBE),
    ApiKey.DELETE_RECORDS: (2, lambda topic: DeleteRecordsRequest(timeout_ms=5000, topics=[DRT(
        name=topic, partitions=[DRT.DeleteRecordsPartition(partition_index=0, offset=0)])]), _per_partition(), O.DELETE),
    ApiKey.DELETE_TOPICS: (6, lambda topic: DeleteTopicsRequest(timeout_ms=5000, topics=[
        DeleteTopicsRequest.DeleteTopicState(name=topic, topic_id=None)]), _each("responses"), O.DELETE),
    ApiKey.CREATE_PARTITIONS: (3, lambda topic: CreatePartitionsRequest(timeout_ms=5000, validate_only=True, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=2, assignments=None)]), _each("results"),
        O.ALTER),
    ApiKey.DESCRIBE_CONFIGS: (4, lambda topic: DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None)]),
        _each("results"), O.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CONFIGS: (2, lambda topic: AlterConfigsRequest(validate_only=True, resources=[
        AlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name=topic, configs=[
            AlterConfigsRequest.AlterConfigsResource.AlterableConfig(name="retention.ms", value="1000")])]),
        _each("responses"), O.ALTER_CONFIGS),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (1, lambda topic: IncrementalAlterConfigsRequest(validate_only=True, resources=[
        IAC(resource_type=2, resource_name=topic, configs=[IAC.AlterableConfig(
            name="retention.ms", config_operation=0, value="1000")])]), _each("responses"), O.ALTER_CONFIGS),
    ApiKey.DESCRIBE_PRODUCERS: (0, lambda topic: DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]), _per_partition(), O.READ),
}
CASES: list[Case] = [
    # Each topic-level API on a topic that exists (DeleteTopics: one it may delete) and on one
    # that does not.
    *[_simple(api, version, partial(build, topic), codes, E.TOPIC_AUTHORIZATION_FAILED, (R.TOPIC, topic, op),
              name=label)
      for api, (version, build, codes, op) in _BY_TOPIC.items()
      for topic, label in ((("doomed" if api == ApiKey.DELETE_TOPICS else TOPIC), ""), ("missing", "missing-topic"))],
    _simple(ApiKey.PRODUCE, 9, _produce, _per_partition("responses", "partition_responses"),
            E.TOPIC_AUTHORIZATION_FAILED, (R.TOPIC, TOPIC, O.WRITE)),
    _simple(ApiKey.METADATA, 12, lambda: MetadataRequest(topics=None, allow_auto_topic_creation=False),
            _listed("topics", "name", TOPIC), HIDDEN, (R.TOPIC, TOPIC, O.DESCRIBE), name="all-topics"),
    Case(ApiKey.OFFSET_COMMIT, 8, _commit, _per_partition(),
         [([], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, GROUP, O.READ)], E.TOPIC_AUTHORIZATION_FAILED),
          ([(R.TOPIC, TOPIC, O.READ)], None)]),
    Case(ApiKey.OFFSET_FETCH, 7, lambda: OffsetFetchRequest(
        group_id=GROUP, topics=[OFT(name=TOPIC, partition_indexes=[0])], require_stable=False),
        lambda r: [r.error_code] if r.error_code else _per_partition()(r),
        [([], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, GROUP, O.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
         ([(R.TOPIC, TOPIC, O.DESCRIBE)], None)]),
    _simple(ApiKey.FIND_COORDINATOR, 4, lambda: FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]),
            _each("coordinators"), E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.DESCRIBE)),
    _simple(ApiKey.FIND_COORDINATOR, 4, lambda: FindCoordinatorRequest(key_type=1, coordinator_keys=[TXN]),
            _each("coordinators"), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, (R.TRANSACTIONAL_ID, TXN, O.DESCRIBE),
            name="transaction"),
    _simple(ApiKey.FIND_COORDINATOR, 3, lambda: FindCoordinatorRequest(key=GROUP, key_type=0), _top,
            E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.DESCRIBE), name="v3"),
    _simple(ApiKey.JOIN_GROUP, 5, lambda: JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="", group_instance_id=None,
        protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]),
        _top, E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.READ)),
    _simple(ApiKey.SYNC_GROUP, 3, lambda: SyncGroupRequest(
        group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None, assignments=[]),
        _top, E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.READ)),
    _simple(ApiKey.HEARTBEAT, 3, lambda: HeartbeatRequest(
        group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None),
        _top, E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.READ)),
    _simple(ApiKey.LEAVE_GROUP, 3, lambda: LeaveGroupRequest(group_id=GROUP, members=[
        LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None)]),
        _top, E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.READ)),
    _simple(ApiKey.DESCRIBE_GROUPS, 5, lambda: DescribeGroupsRequest(groups=[GROUP], include_authorized_operations=True),
            _each("groups"), E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.DESCRIBE)),
    _simple(ApiKey.LIST_GROUPS, 4, lambda: ListGroupsRequest(states_filter=[]), _listed("groups", "group_id", GROUP),
            HIDDEN, (R.GROUP, GROUP, O.DESCRIBE)),
    _simple(ApiKey.LIST_GROUPS, 4, lambda: ListGroupsRequest(states_filter=[]), _listed("groups", "group_id", GROUP),
            HIDDEN, (*_CLUSTER, O.DESCRIBE), name="cluster"),
    _simple(ApiKey.CREATE_TOPICS, 7, lambda: CreateTopicsRequest(timeout_ms=5000, validate_only=True, topics=[
        CreateTopicsRequest.CreatableTopic(name="fresh", num_partitions=1, replication_factor=1, assignments=[],
                                           configs=[])]),
        _each("topics"), E.TOPIC_AUTHORIZATION_FAILED, (R.TOPIC, "fresh", O.CREATE)),
    _simple(ApiKey.CREATE_TOPICS, 7, lambda: CreateTopicsRequest(timeout_ms=5000, validate_only=True, topics=[
        CreateTopicsRequest.CreatableTopic(name="fresh", num_partitions=1, replication_factor=1, assignments=[],
                                           configs=[])]),
        _each("topics"), E.TOPIC_AUTHORIZATION_FAILED, (*_CLUSTER, O.CREATE), name="cluster"),
    _simple(ApiKey.INIT_PRODUCER_ID, 4, lambda: InitProducerIdRequest(
        transactional_id=TXN, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1),
        _top, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, (R.TRANSACTIONAL_ID, TXN, O.WRITE)),
    _simple(ApiKey.INIT_PRODUCER_ID, 4, lambda: InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1),
        _top, E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.IDEMPOTENT_WRITE), name="idempotent"),
    _simple(ApiKey.INIT_PRODUCER_ID, 4, lambda: InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1),
        _top, E.CLUSTER_AUTHORIZATION_FAILED, (R.TOPIC, TOPIC, O.WRITE), name="idempotent-topic-write"),
    Case(ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda: AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TXN, v3_and_below_producer_id=999, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]),
        _per_partition("results_by_topic_v3_and_below", "results_by_partition", "partition_error_code"),
        [([], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
         ([(R.TRANSACTIONAL_ID, TXN, O.WRITE)], E.TOPIC_AUTHORIZATION_FAILED), ([(R.TOPIC, TOPIC, O.WRITE)], None)]),
    Case(ApiKey.ADD_OFFSETS_TO_TXN, 3, lambda: AddOffsetsToTxnRequest(
        transactional_id=TXN, producer_id=999, producer_epoch=0, group_id=GROUP), _top,
        [([], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
         ([(R.TRANSACTIONAL_ID, TXN, O.WRITE)], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, GROUP, O.READ)], None)]),
    _simple(ApiKey.END_TXN, 3, lambda: EndTxnRequest(
        transactional_id=TXN, producer_id=999, producer_epoch=0, committed=False),
        _top, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, (R.TRANSACTIONAL_ID, TXN, O.WRITE)),
    _simple(ApiKey.WRITE_TXN_MARKERS, 1, lambda: WriteTxnMarkersRequest(markers=[WM(
        producer_id=999, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[WM.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])])]),
        lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions],
        E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.CLUSTER_ACTION)),
    Case(ApiKey.TXN_OFFSET_COMMIT, 3, lambda: TxnOffsetCommitRequest(
        transactional_id=TXN, group_id=GROUP, producer_id=999, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None, topics=[TOC(name=TOPIC, partitions=[TOC.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])]),
        _per_partition(),
        [([], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
         ([(R.TRANSACTIONAL_ID, TXN, O.WRITE)], E.GROUP_AUTHORIZATION_FAILED),
         ([(R.GROUP, GROUP, O.READ)], E.TOPIC_AUTHORIZATION_FAILED), ([(R.TOPIC, TOPIC, O.READ)], None)]),
    _simple(ApiKey.DESCRIBE_ACLS, 3, lambda: DescribeAclsRequest(
        resource_type_filter=R.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
        principal_filter=None, host_filter=None, operation=O.ANY, permission_type=AclPermissionType.ANY),
        _top, E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.DESCRIBE)),
    _simple(ApiKey.CREATE_ACLS, 3, lambda: CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=R.TOPIC, resource_name="x", resource_pattern_type=PatternType.LITERAL, principal="User:bob",
        host="*", operation=O.READ, permission_type=AclPermissionType.ALLOW)]),
        _each("results"), E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.ALTER)),
    _simple(ApiKey.DELETE_ACLS, 3, lambda: DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=R.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
        principal_filter="User:bob", host_filter=None, operation=O.ANY, permission_type=AclPermissionType.ANY)]),
        _each("filter_results"), E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.ALTER)),
    _simple(ApiKey.DESCRIBE_CONFIGS, 4, lambda: DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None)]),
        _each("results"), E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.DESCRIBE_CONFIGS), name="broker"),
    _simple(ApiKey.DESCRIBE_CONFIGS, 4, lambda: DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=32, resource_name=GROUP, configuration_keys=None)]),
        _each("results"), E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.DESCRIBE_CONFIGS), name="group"),
    _simple(ApiKey.DESCRIBE_LOG_DIRS, 4, lambda: DescribeLogDirsRequest(topics=None), _top,
            E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.DESCRIBE)),
    _simple(ApiKey.DELETE_GROUPS, 2, lambda: DeleteGroupsRequest(groups_names=["nobody"]), _each("results"),
            E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, "nobody", O.DELETE)),
    _simple(ApiKey.ELECT_LEADERS, 2, lambda: ElectLeadersRequest(election_type=0, topic_partitions=None,
                                                                 timeout_ms=5000),
            _top, E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.ALTER)),
    _simple(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, lambda: AlterPartitionReassignmentsRequest(
        timeout_ms=5000, topics=[]), _top, E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.ALTER)),
    _simple(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, lambda: ListPartitionReassignmentsRequest(
        timeout_ms=5000, topics=None), _top, E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.DESCRIBE)),
    Case(ApiKey.OFFSET_DELETE, 0, lambda: OffsetDeleteRequest(group_id=GROUP, topics=[ODT(
        name=TOPIC, partitions=[ODT.OffsetDeleteRequestPartition(partition_index=0)])]),
        lambda r: [r.error_code] if r.error_code else _per_partition()(r),
        [([], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, GROUP, O.DELETE)], E.TOPIC_AUTHORIZATION_FAILED),
         ([(R.TOPIC, TOPIC, O.READ)], None)],
        # The grants let the offset go: put it back for the cases after.
        after=lambda node: node.admin.request(ApiKey.OFFSET_COMMIT, 8, _commit())),
    _simple(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, lambda: DescribeUserScramCredentialsRequest(users=None), _top,
            E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.DESCRIBE)),
    _simple(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, lambda: AlterUserScramCredentialsRequest(deletions=[
        AlterUserScramCredentialsRequest.ScramCredentialDeletion(name="bob", mechanism=1)], upsertions=[]),
        _each("results"), E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.ALTER)),
    _simple(ApiKey.DESCRIBE_TRANSACTIONS, 0, lambda: DescribeTransactionsRequest(transactional_ids=[TXN]),
            _each("transaction_states"), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, (R.TRANSACTIONAL_ID, TXN, O.DESCRIBE)),
    _simple(ApiKey.LIST_TRANSACTIONS, 1, lambda: ListTransactionsRequest(state_filters=[], producer_id_filters=[]),
            lambda r: [c for c in [r.error_code] if c] + _listed("transaction_states", "transactional_id", TXN)(r),
            HIDDEN, (R.TRANSACTIONAL_ID, TXN, O.DESCRIBE)),
    Case(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, _consumer_heartbeat, _top,
        [([], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, "cg", O.READ)], E.TOPIC_AUTHORIZATION_FAILED),
         ([(R.TOPIC, TOPIC, O.DESCRIBE)], None)]),
    # Authorization comes before existence: a denied missing topic says 29, not that it is missing.
    _simple(ApiKey.PRODUCE, 9, lambda: _produce("missing"), _per_partition("responses", "partition_responses"),
            E.TOPIC_AUTHORIZATION_FAILED, (R.TOPIC, "missing", O.WRITE), name="missing-topic"),
    # A transactional batch needs WRITE on the transactional id too, answered for the whole request.
    Case(ApiKey.PRODUCE, 9, lambda: _produce(transactional_id=TXN), _per_partition("responses", "partition_responses"),
         [([(R.TOPIC, TOPIC, O.WRITE)], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
          ([(R.TRANSACTIONAL_ID, TXN, O.WRITE)], None)], name="transactional"),
    # A follower's fetch (replica id set) needs CLUSTER_ACTION on the cluster instead of READ.
    _simple(ApiKey.FETCH, 12, lambda: FetchRequest(
        replica_id=7, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[F(topic=TOPIC, partitions=[F.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id=""), _per_partition("responses"),
        E.TOPIC_AUTHORIZATION_FAILED, (*_CLUSTER, O.CLUSTER_ACTION), name="follower"),
    # Auto-creation by Metadata: DESCRIBE shows the name, creating it needs CREATE as well.
    Case(ApiKey.METADATA, 12, lambda: MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name="auto")], allow_auto_topic_creation=True),
        lambda r: [t.error_code for t in r.topics if t.error_code != E.LEADER_NOT_AVAILABLE],
        [([], E.TOPIC_AUTHORIZATION_FAILED), ([(R.TOPIC, "auto", O.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
         ([(R.TOPIC, "auto", O.CREATE)], None)], name="auto-create"),
    Case(ApiKey.METADATA, 12, lambda: MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name="auto2")], allow_auto_topic_creation=True),
        lambda r: [t.error_code for t in r.topics if t.error_code != E.LEADER_NOT_AVAILABLE],
        [([], E.TOPIC_AUTHORIZATION_FAILED), ([(R.TOPIC, "auto2", O.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
         ([(*_CLUSTER, O.CREATE)], None)], name="auto-create-cluster"),
    # v1 has no group-level error: a denied group is answered on every partition.
    Case(ApiKey.OFFSET_FETCH, 1, lambda: OffsetFetchRequest(
        group_id=GROUP, topics=[OFT(name=TOPIC, partition_indexes=[0])]), _per_partition(),
        [([], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, GROUP, O.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
         ([(R.TOPIC, TOPIC, O.DESCRIBE)], None)], name="v1"),
    # The all-topics form drops the topics the principal may not describe.
    Case(ApiKey.OFFSET_FETCH, 7, lambda: OffsetFetchRequest(group_id=GROUP, topics=None, require_stable=False),
         lambda r: [r.error_code] if r.error_code else _listed("topics", "name", TOPIC)(r),
         [([], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, GROUP, O.DESCRIBE)], HIDDEN),
          ([(R.TOPIC, TOPIC, O.DESCRIBE)], None)], name="all-topics"),
    # v8+: groups in a list, each answered on its own.
    _simple(ApiKey.OFFSET_FETCH, 8, lambda: OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=GROUP, topics=None)], require_stable=False), _each("groups"),
        E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.DESCRIBE), name="v8"),
    _simple(ApiKey.FIND_COORDINATOR, 3, lambda: FindCoordinatorRequest(key=TXN, key_type=1), _top,
            E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, (R.TRANSACTIONAL_ID, TXN, O.DESCRIBE), name="v3-transaction"),
    # Creation's returned configs need DESCRIBE_CONFIGS on the topic, else TopicConfigErrorCode 29.
    Case(ApiKey.CREATE_TOPICS, 7, lambda: CreateTopicsRequest(timeout_ms=5000, validate_only=True, topics=[
        CreateTopicsRequest.CreatableTopic(name="fresh", num_partitions=1, replication_factor=1, assignments=[],
                                           configs=[])]),
        _each("topics", "topic_config_error_code"),
        [([(R.TOPIC, "fresh", O.CREATE)], E.TOPIC_AUTHORIZATION_FAILED),
         ([(R.TOPIC, "fresh", O.DESCRIBE_CONFIGS)], None)], name="configs"),
    # Not served here (INVALID_REQUEST when allowed), but authorized first as Kafka does.
    _simple(ApiKey.DESCRIBE_CONFIGS, 4, lambda: DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=8, resource_name="1", configuration_keys=None)]),
        _each("results"), E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.DESCRIBE_CONFIGS), name="broker-logger"),
    *[_simple(ApiKey.ALTER_CONFIGS, 2, partial(_alter_configs, rtype, name, key, value), _each("responses"), denied,
              (grant_type, grant_name, O.ALTER_CONFIGS), name=label)
      for label, rtype, name, key, value, denied, grant_type, grant_name in (
          ("broker", 4, "", "log.cleaner.threads", "1", E.CLUSTER_AUTHORIZATION_FAILED, R.CLUSTER, CLUSTER_NAME),
          ("group", 32, GROUP, "consumer.session.timeout.ms", "45000", E.GROUP_AUTHORIZATION_FAILED, R.GROUP, GROUP))],
    # Not served here (INVALID_REQUEST when allowed), but authorized first as Kafka does.
    _simple(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, lambda: IncrementalAlterConfigsRequest(validate_only=True, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=8, resource_name="1", configs=[
            IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
                name="kafka", config_operation=0, value="INFO")])]),
        _each("responses"), E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.ALTER_CONFIGS), name="broker-logger"),
    _simple(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, lambda: IncrementalAlterConfigsRequest(validate_only=True, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=4, resource_name="", configs=[
            IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
                name="log.cleaner.threads", config_operation=0, value="1")])]),
        _each("responses"), E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.ALTER_CONFIGS), name="broker"),
    _simple(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, lambda: IncrementalAlterConfigsRequest(validate_only=True, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=32, resource_name=GROUP, configs=[
            IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
                name="consumer.session.timeout.ms", config_operation=0, value="45000")])]),
        _each("responses"), E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.ALTER_CONFIGS), name="group"),
    # By id: DELETE (which implies the DESCRIBE needed to name it).
    _simple(ApiKey.DELETE_TOPICS, 6, lambda: DeleteTopicsRequest(timeout_ms=5000, topics=[
        DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=TOPIC_IDS["doomed-by-id"])]),
        _each("responses"), E.TOPIC_AUTHORIZATION_FAILED, (R.TOPIC, "doomed-by-id", O.DELETE), name="by-id"),
    # v4+: the brokers' batched form (KIP-890), for brokers only: CLUSTER_ACTION, top level.
    _simple(ApiKey.ADD_PARTITIONS_TO_TXN, 4, lambda: AddPartitionsToTxnRequest(transactions=[
        AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=TXN, producer_id=999, producer_epoch=0, verify_only=True,
            topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])])]),
        _top, E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.CLUSTER_ACTION), name="brokers"),
    # A denied election or reassignment names the error at the top and on every partition.
    _simple(ApiKey.ELECT_LEADERS, 2, lambda: ElectLeadersRequest(election_type=0, timeout_ms=5000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[0])]),
        lambda r: [r.error_code] + [p.error_code for t in r.replica_election_results for p in t.partition_result],
        E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.ALTER), name="partitions"),
    _simple(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, lambda: AlterPartitionReassignmentsRequest(
        timeout_ms=5000, topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name=TOPIC, partitions=[
            AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                partition_index=0, replicas=None)])]),
        lambda r: [r.error_code] + _per_partition("responses")(r),
        E.CLUSTER_AUTHORIZATION_FAILED, (*_CLUSTER, O.ALTER), name="partitions"),
    # Before v3 there is no error field: a denied caller sees no log dirs.
    _simple(ApiKey.DESCRIBE_LOG_DIRS, 2, lambda: DescribeLogDirsRequest(topics=None),
            lambda r: [] if r.results else [HIDDEN], HIDDEN, (*_CLUSTER, O.DESCRIBE), name="v2"),

    _simple(ApiKey.DESCRIBE_TRANSACTIONS, 0, lambda: DescribeTransactionsRequest(transactional_ids=["missing"]),
            _each("transaction_states"), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            (R.TRANSACTIONAL_ID, "missing", O.DESCRIBE), name="missing"),
    _simple(ApiKey.DESCRIBE_GROUPS, 5, lambda: DescribeGroupsRequest(groups=["missing"]), _each("groups"),
            E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, "missing", O.DESCRIBE), name="missing"),
    _simple(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, lambda: ConsumerGroupDescribeRequest(
        group_ids=[GROUP], include_authorized_operations=True), _each("groups"),
        E.GROUP_AUTHORIZATION_FAILED, (R.GROUP, GROUP, O.DESCRIBE)),
    # The consumer group the fixture made, subscribed to TOPIC: from Kafka 4.0 its
    # description needs DESCRIBE on its topics too (KAFKA-18813).
    Case(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, lambda: ConsumerGroupDescribeRequest(
        group_ids=["cg"], include_authorized_operations=False), _each("groups"),
        [([], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, "cg", O.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
         ([(R.TOPIC, TOPIC, O.DESCRIBE)], None)], name="subscribed"),
]


def test_every_advertised_key_has_a_row() -> None:
    checked = {case.api for case in CASES}
    assert not checked & NOT_CHECKED
    assert checked | NOT_CHECKED == set(SUPPORTED_VERSIONS)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_alice_needs_exactly_kafkas_acls(node: Node, case: Case) -> None:
    granted: list[Grant] = []
    try:
        for grants, expected in case.stages:
            if grants:
                node.grant(*grants)
                granted += grants
            answer = node.alice.request(case.api, case.version, case.request())
            codes = case.codes(answer)
            if expected is None:
                assert not set(codes) & (AUTHZ | {HIDDEN}), (granted, answer)
            else:
                assert codes and set(codes) == {expected}, (granted, answer)
    finally:
        node.revoke_all()
        case.after(node)


@pytest.mark.parametrize("api", sorted(NOT_CHECKED), ids=lambda api: api.name)
def test_unchecked_apis_answer_alice_without_acls(node: Node, api: ApiKey) -> None:
    if api in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
        # Before any principal exists: alice's own login, on a fresh connection, is the case.
        node.login("alice", "alice-secret").close()
        return
    version, request = {
        ApiKey.API_VERSIONS: (3, ApiVersionsRequest(client_software_name="t", client_software_version="1")),
        ApiKey.DESCRIBE_CLUSTER: (1, DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                            endpoint_type=1)),
    }[api]
    got = node.alice.request(api, version, request)
    assert got.error_code == 0, got


# --- filtering and KIP-430 authorized operations.

def _operations(value: set[int] | int | None) -> set[int] | None:
    """An authorized-operations field as the set of its operations (None: omitted)."""
    if value is None or value == -2147483648:
        return None
    if isinstance(value, int):
        return {bit for bit in range(32) if value & (1 << bit)}
    return set(value)


def _describe_cluster_ops(node: Node) -> set[int] | None:
    got = node.alice.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1))
    assert got.error_code == 0
    return _operations(got.authorized_operations)


def test_describe_cluster_operations_need_describe_cluster(node: Node) -> None:
    try:
        assert _describe_cluster_ops(node) == set()  # 0: denied, not omitted
        got = node.alice.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=1))
        assert _operations(got.authorized_operations) is OMITTED
        # IDEMPOTENT_WRITE alone shows nothing: the operations need DESCRIBE CLUSTER.
        node.grant((*_CLUSTER, O.IDEMPOTENT_WRITE))
        assert _describe_cluster_ops(node) == set()
        node.grant((*_CLUSTER, O.DESCRIBE))
        assert _describe_cluster_ops(node) == {O.DESCRIBE, O.IDEMPOTENT_WRITE}
    finally:
        node.revoke_all()


def test_metadata_operations_and_all_topics_filtering(node: Node) -> None:
    def metadata(version: int, topics: Any) -> Any:
        return node.alice.request(ApiKey.METADATA, version, MetadataRequest(
            topics=topics, allow_auto_topic_creation=False, include_topic_authorized_operations=True,
            include_cluster_authorized_operations=True))

    try:
        assert [t.name for t in metadata(12, None).topics] == []
        assert [t.name for t in metadata(0, []).topics] == []  # v0: the empty list means all topics
        got = metadata(10, [MetadataRequest.MetadataRequestTopic(topic_id=None, name=TOPIC)])
        assert _operations(got.topics[0].authorized_operations) is OMITTED  # a denied topic
        assert _operations(got.authorized_operations) == set()
        node.grant((R.TOPIC, TOPIC, O.WRITE), (*_CLUSTER, O.DESCRIBE))
        assert [t.name for t in metadata(12, None).topics] == [TOPIC]  # "doomed" stays hidden
        got = metadata(10, None)
        # WRITE implies DESCRIBE (for ALLOW).
        assert _operations(got.topics[0].authorized_operations) == {O.WRITE, O.DESCRIBE}
        assert _operations(got.authorized_operations) == {O.DESCRIBE}
    finally:
        node.revoke_all()


def test_group_authorized_operations(node: Node) -> None:
    def ops(api: ApiKey, version: int, group: str = GROUP, include: bool = True) -> set[int] | None:
        if api == ApiKey.DESCRIBE_GROUPS:
            got = node.alice.request(api, version, DescribeGroupsRequest(groups=[group],
                                                                         include_authorized_operations=include))
        else:
            got = node.alice.request(api, version, ConsumerGroupDescribeRequest(
                group_ids=[group], include_authorized_operations=include))
        assert got.groups[0].error_code == 0 or _operations(got.groups[0].authorized_operations) is OMITTED
        return _operations(got.groups[0].authorized_operations)

    try:
        # Denied groups carry the default.
        assert ops(ApiKey.DESCRIBE_GROUPS, 5) is OMITTED
        assert ops(ApiKey.CONSUMER_GROUP_DESCRIBE, 0) is OMITTED
        node.grant((R.GROUP, GROUP, O.READ), (R.GROUP, GROUP, O.DELETE))
        # READ and DELETE imply DESCRIBE; of GROUP's operations only those.
        assert ops(ApiKey.DESCRIBE_GROUPS, 5) == {O.READ, O.DESCRIBE, O.DELETE}
        assert ops(ApiKey.DESCRIBE_GROUPS, 5, include=False) is OMITTED
        # The fixture's consumer group ("cg", subscribed to TOPIC).
        node.grant((R.GROUP, "cg", O.DESCRIBE), (R.TOPIC, TOPIC, O.DESCRIBE))
        assert ops(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, "cg") == {O.DESCRIBE}
        assert ops(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, "cg", include=False) is OMITTED
    finally:
        node.revoke_all()


def test_denied_answers_reveal_nothing(node: Node) -> None:
    """Beyond the code: a denied entry carries Kafka's empty values (KafkaApis ``handle*``)."""
    alice = node.alice
    got = alice.request(ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        topic_id=None, name=TOPIC)], allow_auto_topic_creation=False))
    assert (got.topics[0].error_code, got.topics[0].partitions) == (E.TOPIC_AUTHORIZATION_FAILED, [])
    assert got.topics[0].topic_id is None  # the zero id, as kafka-python decodes it
    got = alice.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]))
    c = got.coordinators[0]
    assert (c.error_code, c.node_id, c.host, c.port) == (E.GROUP_AUTHORIZATION_FAILED, -1, "", -1)
    got = alice.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=GROUP, key_type=0))
    assert (got.error_code, got.node_id, got.host, got.port) == (E.GROUP_AUTHORIZATION_FAILED, -1, "", -1)
    # A topic named by id that alice may not describe keeps its name to itself.
    got = alice.request(ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(timeout_ms=5000, topics=[
        DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=TOPIC_IDS["kept-by-id"])]))
    r = got.responses[0]
    assert (r.error_code, r.name, r.topic_id) == (E.TOPIC_AUTHORIZATION_FAILED, None, TOPIC_IDS["kept-by-id"])
    # Kafka's error responses (the requests' ``getErrorResponse`` and KafkaApis' callbacks).
    got = alice.request(ApiKey.JOIN_GROUP, 5, JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="m1", group_instance_id=None,
        protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert (got.error_code, got.generation_id, got.member_id, got.leader, got.members) == (
        E.GROUP_AUTHORIZATION_FAILED, -1, "m1", "", [])
    got = alice.request(ApiKey.LEAVE_GROUP, 3, LeaveGroupRequest(group_id=GROUP, members=[
        LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None)]))
    assert (got.error_code, got.members) == (E.GROUP_AUTHORIZATION_FAILED, [])
    got = alice.request(ApiKey.SYNC_GROUP, 3, SyncGroupRequest(
        group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None, assignments=[]))
    assert (got.error_code, got.assignment) == (E.GROUP_AUTHORIZATION_FAILED, b"")
    got = alice.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=TXN, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert (got.error_code, got.producer_id, got.producer_epoch) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    got = alice.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, _consumer_heartbeat())
    assert (got.error_code, got.member_id, got.member_epoch, got.assignment) == (
        E.GROUP_AUTHORIZATION_FAILED, None, 0, None)
    p = alice.request(ApiKey.PRODUCE, 9, _produce()).responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset) == (
        E.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1)
    p = alice.request(ApiKey.FETCH, 12, _fetch(TOPIC)).responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset, p.records) == (
        E.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, b"")  # MemoryRecords.EMPTY
    version, build, _, _ = _BY_TOPIC[ApiKey.LIST_OFFSETS]
    p = alice.request(ApiKey.LIST_OFFSETS, version, build(TOPIC)).topics[0].partitions[0]
    assert (p.error_code, p.offset, p.timestamp) == (E.TOPIC_AUTHORIZATION_FAILED, -1, -1)
    got = alice.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[GROUP]))
    g = got.groups[0]
    assert (g.error_code, g.group_state, g.protocol_type, g.members) == (E.GROUP_AUTHORIZATION_FAILED, "", "", [])
    try:
        node.grant((R.GROUP, GROUP, O.DESCRIBE))
        got = alice.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
            group_id=GROUP, topics=[OFT(name=TOPIC, partition_indexes=[0])], require_stable=False))
        p = got.topics[0].partitions[0]
        assert (p.error_code, p.committed_offset) == (E.TOPIC_AUTHORIZATION_FAILED, -1)
    finally:
        node.revoke_all()


def test_list_groups_and_offset_fetch_groups_answer_each_group_alone(node: Node) -> None:
    try:
        node.grant((R.GROUP, GROUP, O.DESCRIBE))
        got = node.alice.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=[]))
        assert [g.group_id for g in got.groups] == [GROUP]  # not "cg", which alice may not describe
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        got = node.alice.request(ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(
            groups=[G(group_id=GROUP, topics=None), G(group_id="cg", topics=None)], require_stable=False))
        assert [(g.group_id, g.error_code) for g in got.groups] == [(GROUP, 0), ("cg", E.GROUP_AUTHORIZATION_FAILED)]
        node.grant((*_CLUSTER, O.DESCRIBE))
        got = node.alice.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=[]))
        assert {GROUP, "cg"} <= {g.group_id for g in got.groups}
    finally:
        node.revoke_all()


def test_mixed_requests_answer_each_topic_alone(node: Node) -> None:
    """Denied topics get the error, the rest are served (or, in a transaction, not attempted)."""
    alice = node.alice
    A = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    try:
        node.grant((R.TOPIC, TOPIC, O.WRITE), (R.TRANSACTIONAL_ID, TXN, O.WRITE), (R.GROUP, GROUP, O.READ),
                   (R.TOPIC, TOPIC, O.READ), (R.TOPIC, "missing", O.READ))
        P = ProduceRequest.TopicProduceData
        got = alice.request(ApiKey.PRODUCE, 9, ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            P(name=name, partition_data=[P.PartitionProduceData(
                index=0, records=build_batch([(None, b"v")], timestamp_ms=1000))]) for name in (TOPIC, "kept-by-id")]))
        assert {r.name: r.partition_responses[0].error_code for r in got.responses} == {
            TOPIC: E.NONE, "kept-by-id": E.TOPIC_AUTHORIZATION_FAILED}
        got = alice.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TXN, v3_and_below_producer_id=999, v3_and_below_producer_epoch=0,
            v3_and_below_topics=[A(name=TOPIC, partitions=[0]), A(name="kept-by-id", partitions=[0])]))
        assert {t.name: t.results_by_partition[0].partition_error_code for t in got.results_by_topic_v3_and_below} == {
            TOPIC: E.OPERATION_NOT_ATTEMPTED, "kept-by-id": E.TOPIC_AUTHORIZATION_FAILED}
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        got = alice.request(ApiKey.OFFSET_COMMIT, 8, OffsetCommitRequest(
            group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=[
                T(name=name, partitions=[T.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])
                for name in (TOPIC, "kept-by-id", "missing")]))
        assert {t.name: t.partitions[0].error_code for t in got.topics} == {
            TOPIC: E.NONE, "kept-by-id": E.TOPIC_AUTHORIZATION_FAILED, "missing": E.UNKNOWN_TOPIC_OR_PARTITION}
    finally:
        node.revoke_all()


def test_acls_match_the_connections_principal_and_address(node: Node) -> None:
    """The server fills the principal and client address the ACLs are matched against: an ACL for
    another host does not apply, one for this host or ``*`` does; DENY wins; PREFIXED and
    ``User:*`` match."""
    def fetch_code() -> int:
        return int(node.alice.request(ApiKey.FETCH, 12, _fetch(TOPIC)).responses[0].partitions[0].error_code)

    try:
        node.grant((R.TOPIC, TOPIC, O.READ), host="10.9.9.9")
        assert fetch_code() == E.TOPIC_AUTHORIZATION_FAILED
        node.grant((R.TOPIC, TOPIC, O.READ), host="127.0.0.1")
        assert fetch_code() == E.NONE
        node.grant((R.TOPIC, TOPIC, O.READ), permission=AclPermissionType.DENY)
        assert fetch_code() == E.TOPIC_AUTHORIZATION_FAILED
        # DENY READ does not deny the DESCRIBE that an ALLOW READ implies.
        version, build, _, _ = _BY_TOPIC[ApiKey.LIST_OFFSETS]
        got = node.alice.request(ApiKey.LIST_OFFSETS, version, build(TOPIC))
        assert got.topics[0].partitions[0].error_code == E.NONE
        node.revoke_all()
        node.grant((R.TOPIC, TOPIC[:1], O.READ), pattern=PatternType.PREFIXED, principal="User:*")
        assert fetch_code() == E.NONE
    finally:
        node.revoke_all()
        node.revoke_all("User:*")


def test_regex_subscription_sees_only_describable_topics(node: Node) -> None:
    """KIP-848 regex subscriptions resolve with the member's ACLs (KAFKA-18813): alice's regex
    matches ``t`` and ``kept-by-id``, but she may describe only ``t``, so only ``t`` is assigned."""
    try:
        node.grant((R.GROUP, "rg", O.READ), (R.TOPIC, TOPIC, O.DESCRIBE))
        # v1: the member names itself (KIP-1082).
        member_id, epoch, assigned = "regexmember-0000000001", 0, None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = node.alice.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, ConsumerGroupHeartbeatRequest(
                group_id="rg", member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
                rebalance_timeout_ms=10000, subscribed_topic_names=None if epoch else [],
                subscribed_topic_regex="t|kept-by-id" if not epoch else None, server_assignor=None,
                topic_partitions=None if epoch else []))
            assert got.error_code == 0, got
            member_id, epoch = got.member_id, got.member_epoch
            if got.assignment is not None and got.assignment.topic_partitions:
                assigned = {tp.topic_id for tp in got.assignment.topic_partitions}
                break
            time.sleep(0.1)
        assert assigned == {TOPIC_IDS[TOPIC]}
    finally:
        node.revoke_all()
