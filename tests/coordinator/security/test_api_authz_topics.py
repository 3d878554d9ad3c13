"""The topic, cluster and config APIs' ACL checks (coordinator/topics/*, coordinator/admin/*), one
test per row of Kafka's table (KafkaApis ``handle*``; coordinator/security/request_checks.py): each shows the answer
allowed and denied, that a denied request changes nothing, and that authorization comes before
existence (a denied name answers the same whether or not it exists). Handlers are called in
process on one node's real logs, with the real ACL authorizer (``Rules`` of the group tests).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest, WriteTxnMarkersRequest

from coordinator.admin.cluster_apis import ClusterApis
from coordinator.admin.config_apis import ConfigApis
from coordinator.admin.elect_leaders import ElectLeadersApis
from coordinator.admin.reassignments import ReassignmentApis
from coordinator.config import load_config
from coordinator.context import NodeInfo
from coordinator.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from coordinator.topics.apis import TopicApis
from coordinator.topics.delete_records import DeleteRecordsApis
from coordinator.topics.describe_producers import DescribeProducersApis
from coordinator.topics.fetch import FetchApis
from coordinator.topics.log_dirs import LogDirApis
from coordinator.topics.log_manager import LogManager
from coordinator.topics.offset_apis import OffsetApis
from coordinator.topics.produce import ProduceApis
from coordinator.topics.producer_ids import ProducerIdApis, ProducerIdManager
from coordinator.topics.registry import TopicRegistry
from coordinator.topics.service import TopicService
from coordinator.topics.txn_markers import TxnMarkerApis
from protocol.errors import ErrorCode as E
from protocol.records import build_batch
from tests.coordinator.security.test_api_authz_groups import ALICE, Rules, answer, ctx

O, R = AclOperation, ResourceType
CLUSTER = (R.CLUSTER, CLUSTER_NAME)


@dataclass
class Node:
    rules: Rules
    topics: TopicService
    logs: LogManager
    produce: ProduceApis
    fetch: FetchApis
    offsets: OffsetApis
    topic_apis: TopicApis
    cluster: ClusterApis
    configs: ConfigApis
    config: Any


@pytest_asyncio.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    config = load_config(data_dir=str(tmp_path), overrides=["auto.create.topics.enable=true"])
    registry = TopicRegistry(config.data_dir, persistent=True)
    topics = TopicService(registry, config)
    logs = LogManager(config.data_dir, registry, config)
    topics.listeners.append(logs)
    await logs.open_all()
    for name in ("t1", "t2"):
        topics.create(name, 1, {})
    for name in ("t1", "t2"):
        await topics.settle(name)
    rules = Rules()
    info = NodeInfo(0, "127.0.0.1", 9092, "authz-cluster")
    yield Node(rules, topics, logs, ProduceApis(logs, authorizer=rules), FetchApis(logs, authorizer=rules),
               OffsetApis(logs, authorizer=rules), TopicApis(info, topics, authorizer=rules),
               ClusterApis(info, topics, authorizer=rules), ConfigApis(info, config, topics, authorizer=rules), config)
    await logs.close_all()


def batch(transactional: bool = False) -> bytes:
    if transactional:
        return build_batch([(None, b"v")], timestamp_ms=int(time.time() * 1000), producer_id=5, producer_epoch=0,
                           base_sequence=0, transactional=True)
    return build_batch([(None, b"v")], timestamp_ms=int(time.time() * 1000))


def produce_request(topics: list[str], transactional_id: str | None = None, transactional: bool = False) -> Any:
    P = ProduceRequest.TopicProduceData
    return ProduceRequest[9](transactional_id=transactional_id, acks=1, timeout_ms=5000, topic_data=[
        P(name=t, partition_data=[P.PartitionProduceData(index=0, records=batch(transactional))]) for t in topics])


def ends(node: Node) -> dict[str, int]:
    return {t: node.logs.get(t, 0).log_end_offset for t in ("t1", "t2")}  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_produce_needs_write_per_topic_and_on_the_transactional_id(node: Node) -> None:
    node.rules.allow((ALICE, O.WRITE, R.TOPIC, "t1"))
    got = await answer(node.produce.produce(ctx(9), produce_request(["t1", "t2", "missing"])))
    assert [(r.name, r.partition_responses[0].error_code) for r in got.responses] == [
        ("t1", E.NONE), ("t2", E.TOPIC_AUTHORIZATION_FAILED), ("missing", E.TOPIC_AUTHORIZATION_FAILED)]
    assert ends(node) == {"t1": 1, "t2": 0}
    # A transactional batch: WRITE on the transactional id, or the whole request is refused.
    got = await answer(node.produce.produce(ctx(9), produce_request(["t1"], "tx", transactional=True)))
    assert got.responses[0].partition_responses[0].error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert ends(node) == {"t1": 1, "t2": 0}


def fetch_request(topics: list[str], replica_id: int = -1) -> Any:
    F = FetchRequest.FetchTopic
    return FetchRequest[11](replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                            session_id=0, session_epoch=-1, topics=[F(topic=t, partitions=[F.FetchPartition(
                                partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                                partition_max_bytes=1 << 20)]) for t in topics], forgotten_topics_data=[], rack_id="")


def fetched(encoded: Any) -> dict[str, tuple[int, int]]:
    """(error, bytes of records) per topic of an encoded Fetch v11 answer."""
    frame = b"".join(p if isinstance(p, bytes) else bytes(p.source) for p in encoded.parts)
    resp = FetchResponse.decode(frame[8:], version=11)  # size, correlation id
    return {t.topic: (t.partitions[0].error_code, len(t.partitions[0].records or b"")) for t in resp.responses}


@pytest.mark.asyncio
async def test_fetch_needs_read_per_topic_and_a_follower_cluster_action(node: Node) -> None:
    node.rules.allow((ALICE, O.WRITE, R.TOPIC, "*"))
    await answer(node.produce.produce(ctx(9), produce_request(["t1", "t2"])))
    node.rules.allow((ALICE, O.READ, R.TOPIC, "t1"))
    got = fetched(await answer(node.fetch.fetch(ctx(11), fetch_request(["t1", "t2", "missing"]))))
    assert got["t1"][0] == E.NONE and got["t1"][1] > 0
    assert got["t2"] == got["missing"] == (E.TOPIC_AUTHORIZATION_FAILED, 0)
    # A follower (replica id >= 0) needs CLUSTER_ACTION, whatever its topic ACLs.
    got = fetched(await answer(node.fetch.fetch(ctx(11), fetch_request(["t1"], replica_id=1))))
    assert got["t1"] == (E.TOPIC_AUTHORIZATION_FAILED, 0)
    node.rules.allow((ALICE, O.CLUSTER_ACTION, *CLUSTER))
    got = fetched(await answer(node.fetch.fetch(ctx(11), fetch_request(["t2"], replica_id=1))))
    assert got["t2"][0] in (E.NONE, E.NOT_LEADER_OR_FOLLOWER)  # past the check: the follower path


@pytest.mark.asyncio
async def test_list_offsets_and_offset_for_leader_epoch_need_describe(node: Node) -> None:
    node.rules.allow((ALICE, O.DESCRIBE, R.TOPIC, "t1"))
    T = ListOffsetsRequest[5].ListOffsetsTopic
    request = ListOffsetsRequest[5](replica_id=-1, isolation_level=0, topics=[T(name=t, partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)]) for t in ("t1", "t2", "x")])
    got = node.offsets.list_offsets(ctx(5), request)
    assert [(t.name, t.partitions[0].error_code) for t in got.topics] == [
        ("t1", E.NONE), ("t2", E.TOPIC_AUTHORIZATION_FAILED), ("x", E.TOPIC_AUTHORIZATION_FAILED)]
    L = OffsetForLeaderEpochRequest[3].OffsetForLeaderTopic
    request = OffsetForLeaderEpochRequest[3](replica_id=-1, topics=[L(topic=t, partitions=[
        L.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)]) for t in ("t1", "t2")])
    got = node.offsets.offset_for_leader_epoch(ctx(3), request)
    assert [(t.topic, t.partitions[0].error_code) for t in got.topics] == [("t1", E.NONE),
                                                                         ("t2", E.TOPIC_AUTHORIZATION_FAILED)]
    node.rules.allow((ALICE, O.CLUSTER_ACTION, *CLUSTER))  # a broker may ask for any topic
    got = node.offsets.offset_for_leader_epoch(ctx(3), request)
    assert [t.partitions[0].error_code for t in got.topics] == [E.NONE, E.NONE]


@pytest.mark.asyncio
async def test_metadata_omits_or_refuses_topics_without_describe_and_auto_creates_only_with_create(
        node: Node) -> None:
    node.rules.allow((ALICE, O.DESCRIBE, R.TOPIC, "t1"), (ALICE, O.DESCRIBE, R.TOPIC, "new"))
    T = MetadataRequest[8].MetadataRequestTopic
    everything = MetadataRequest[8](topics=None, allow_auto_topic_creation=True,
                                    include_cluster_authorized_operations=True,
                                    include_topic_authorized_operations=True)
    got = node.cluster.metadata(ctx(8), everything)
    assert [t.name for t in got.topics] == ["t1"]  # the all-topics form leaves t2 out, silently
    assert got.topics[0].authorized_operations == {int(O.DESCRIBE)}
    assert got.authorized_operations == set()  # no DESCRIBE on the cluster: 0
    named = MetadataRequest[8](topics=[T(name=n) for n in ("t1", "t2", "unknown", "new")],
                               allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
                               include_topic_authorized_operations=False)
    got = node.cluster.metadata(ctx(8), named)
    assert [(t.name, t.error_code, len(t.partitions)) for t in got.topics] == [
        ("t1", E.NONE, 1), ("t2", E.TOPIC_AUTHORIZATION_FAILED, 0), ("unknown", E.TOPIC_AUTHORIZATION_FAILED, 0),
        ("new", E.TOPIC_AUTHORIZATION_FAILED, 0)]  # "new" may be described but not created
    assert node.topics.registry.get("new") is None
    node.rules.allow((ALICE, O.CREATE, R.TOPIC, "new"), (ALICE, O.DESCRIBE, *CLUSTER))
    got = node.cluster.metadata(ctx(8), named)
    assert got.topics[3].error_code == E.NONE and node.topics.registry.get("new") is not None
    got = node.cluster.metadata(ctx(8), everything)
    assert got.authorized_operations == {int(O.DESCRIBE)}


@pytest.mark.asyncio
async def test_find_coordinator_needs_describe_on_the_group_or_transactional_id(node: Node) -> None:
    node.rules.allow((ALICE, O.DESCRIBE, R.GROUP, "g"))
    got = node.cluster.find_coordinator(ctx(4), FindCoordinatorRequest[4](key_type=0, coordinator_keys=["g", "h"]))
    assert [(c.key, c.error_code, c.node_id) for c in got.coordinators] == [
        ("g", E.NONE, 0), ("h", E.GROUP_AUTHORIZATION_FAILED, -1)]
    got = node.cluster.find_coordinator(ctx(3), FindCoordinatorRequest[3](key="tx", key_type=1))
    assert (got.error_code, got.error_message, got.node_id) == (
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.", -1)
    node.rules.allow((ALICE, O.DESCRIBE, R.TRANSACTIONAL_ID, "tx"))
    got = node.cluster.find_coordinator(ctx(3), FindCoordinatorRequest[3](key="tx", key_type=1))
    assert (got.error_code, got.node_id) == (E.NONE, 0)


@pytest.mark.asyncio
async def test_describe_cluster_reports_cluster_operations_only_with_describe(node: Node) -> None:
    request = DescribeClusterRequest[0](include_cluster_authorized_operations=True)
    got = node.cluster.describe_cluster(ctx(0), request)
    assert (got.error_code, got.authorized_operations) == (E.NONE, set())
    node.rules.allow((ALICE, O.ALTER, *CLUSTER))  # ALTER implies DESCRIBE
    got = node.cluster.describe_cluster(ctx(0), request)
    assert got.authorized_operations == {int(O.ALTER), int(O.DESCRIBE)}


@pytest.mark.asyncio
async def test_create_topics_needs_create_on_the_cluster_or_the_topic(node: Node) -> None:
    CT = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest[5](timeout_ms=5000, validate_only=False, topics=[
        CT(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[]) for n in ("a", "b", "t1")])
    node.rules.allow((ALICE, O.CREATE, R.TOPIC, "a"))
    got = await answer(node.topic_apis.create_topics(ctx(5), request))
    assert [(t.name, t.error_code, t.topic_config_error_code) for t in got.topics] == [
        ("a", E.NONE, E.TOPIC_AUTHORIZATION_FAILED), ("b", E.TOPIC_AUTHORIZATION_FAILED, E.TOPIC_AUTHORIZATION_FAILED),
        ("t1", E.TOPIC_AUTHORIZATION_FAILED, E.TOPIC_AUTHORIZATION_FAILED)]  # exists, but that is not said
    assert node.topics.registry.get("b") is None
    node.rules.allow((ALICE, O.CREATE, *CLUSTER), (ALICE, O.DESCRIBE_CONFIGS, R.TOPIC, "b"))
    got = await answer(node.topic_apis.create_topics(ctx(5), request))
    assert [(t.name, t.error_code) for t in got.topics] == [
        ("a", E.TOPIC_ALREADY_EXISTS), ("b", E.NONE), ("t1", E.TOPIC_ALREADY_EXISTS)]
    assert got.topics[1].topic_config_error_code == E.NONE


@pytest.mark.asyncio
async def test_delete_topics_needs_delete(node: Node) -> None:
    request = DeleteTopicsRequest[5](topic_names=["t1", "t2", "missing"], timeout_ms=5000)
    node.rules.allow((ALICE, O.DELETE, R.TOPIC, "t2"))
    got = await answer(node.topic_apis.delete_topics(ctx(5), request))
    assert [(r.name, r.error_code) for r in got.responses] == [
        ("t1", E.TOPIC_AUTHORIZATION_FAILED), ("t2", E.NONE), ("missing", E.TOPIC_AUTHORIZATION_FAILED)]
    assert node.topics.registry.get("t1") is not None and node.topics.registry.get("t2") is None
    # By id (v6+): without DESCRIBE the name is not revealed.
    t1 = node.topics.registry.get("t1")
    assert t1 is not None
    S = DeleteTopicsRequest[6].DeleteTopicState
    by_id = DeleteTopicsRequest[6](topics=[S(name=None, topic_id=t1.topic_id)], timeout_ms=5000)
    got = await answer(node.topic_apis.delete_topics(ctx(6), by_id))
    assert [(r.name, r.topic_id, r.error_code) for r in got.responses] == [
        (None, t1.topic_id, E.TOPIC_AUTHORIZATION_FAILED)]
    node.rules.allow((ALICE, O.DESCRIBE, R.TOPIC, "t1"))
    got = await answer(node.topic_apis.delete_topics(ctx(6), by_id))
    assert [(r.name, r.error_code) for r in got.responses] == [("t1", E.TOPIC_AUTHORIZATION_FAILED)]
    assert node.topics.registry.get("t1") is not None


@pytest.mark.asyncio
async def test_create_partitions_needs_alter(node: Node) -> None:
    P = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest[2](timeout_ms=5000, validate_only=False,
                                         topics=[P(name=n, count=3, assignments=None) for n in ("t1", "t2")])
    node.rules.allow((ALICE, O.ALTER, R.TOPIC, "t1"))
    got = await answer(node.topic_apis.create_partitions(ctx(2), request))
    assert [(r.name, r.error_code) for r in got.results] == [("t1", E.NONE), ("t2", E.TOPIC_AUTHORIZATION_FAILED)]
    assert [node.topics.registry.get(n).num_partitions for n in ("t1", "t2")] == [3, 1]  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_delete_records_needs_delete(node: Node) -> None:
    node.rules.allow((ALICE, O.WRITE, R.TOPIC, "*"))
    await answer(node.produce.produce(ctx(9), produce_request(["t1", "t2"])))
    apis = DeleteRecordsApis(node.logs, authorizer=node.rules)
    T = DeleteRecordsRequest.DeleteRecordsTopic
    request = DeleteRecordsRequest[2](timeout_ms=5000, topics=[T(name=n, partitions=[
        T.DeleteRecordsPartition(partition_index=0, offset=1)]) for n in ("t1", "t2")])
    node.rules.allow((ALICE, O.DELETE, R.TOPIC, "t1"))
    got = await apis.delete_records(ctx(2), request)
    assert [(t.name, t.partitions[0].error_code) for t in got.topics] == [("t1", E.NONE),
                                                                         ("t2", E.TOPIC_AUTHORIZATION_FAILED)]
    assert [node.logs.get(n, 0).log_start_offset for n in ("t1", "t2")] == [1, 0]  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_describe_producers_needs_read(node: Node) -> None:
    apis = DescribeProducersApis(node.logs, authorizer=node.rules)
    T = DescribeProducersRequest.TopicRequest
    request = DescribeProducersRequest[0](topics=[T(name=n, partition_indexes=[0]) for n in ("t1", "t2")])
    node.rules.allow((ALICE, O.READ, R.TOPIC, "t1"))
    got = apis.describe_producers(ctx(0), request)
    assert [(t.name, t.partitions[0].error_code) for t in got.topics] == [("t1", E.NONE),
                                                                         ("t2", E.TOPIC_AUTHORIZATION_FAILED)]


@pytest.mark.asyncio
async def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(node: Node) -> None:
    apis = ProducerIdApis(ProducerIdManager(Path(node.config.data_dir)), authorizer=node.rules)
    request = InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                       producer_epoch=-1)
    got = await answer(apis.init_producer_id(ctx(4), request))
    assert (got.error_code, got.producer_id) == (E.CLUSTER_AUTHORIZATION_FAILED, -1)
    node.rules.allow((ALICE, O.WRITE, R.TOPIC, "t2"))  # authorizeByResourceType
    assert (await answer(apis.init_producer_id(ctx(4), request))).error_code == E.NONE
    bob = "User:bob"
    node.rules.allow((bob, O.IDEMPOTENT_WRITE, *CLUSTER))
    assert (await answer(apis.init_producer_id(ctx(4, bob), request))).error_code == E.NONE
    with_id = InitProducerIdRequest[4](transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1,
                                       producer_epoch=-1)
    assert (await answer(apis.init_producer_id(ctx(4, bob), with_id))).error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@pytest.mark.asyncio
async def test_write_txn_markers_needs_cluster_action(node: Node) -> None:
    apis = TxnMarkerApis(node.logs, authorizer=node.rules)
    M = WriteTxnMarkersRequest.WritableTxnMarker
    request = WriteTxnMarkersRequest[1](markers=[M(producer_id=5, producer_epoch=0, transaction_result=True,
                                                   coordinator_epoch=0, topics=[M.WritableTxnMarkerTopic(
                                                       name="t1", partition_indexes=[0])])])
    got = await apis.write_txn_markers(ctx(1), request)
    assert got.markers[0].topics[0].partitions[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert ends(node)["t1"] == 0
    node.rules.allow((ALICE, O.CLUSTER_ACTION, *CLUSTER))
    got = await apis.write_txn_markers(ctx(1), request)
    assert got.markers[0].topics[0].partitions[0].error_code == E.NONE
    assert ends(node)["t1"] == 1


@pytest.mark.asyncio
async def test_describe_log_dirs_needs_describe_on_the_cluster(node: Node) -> None:
    apis = LogDirApis(node.logs, authorizer=node.rules)
    got = apis.describe_log_dirs(ctx(1), DescribeLogDirsRequest[1](topics=None))
    assert (got.error_code, got.results) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    node.rules.allow((ALICE, O.DESCRIBE, *CLUSTER))
    got = apis.describe_log_dirs(ctx(1), DescribeLogDirsRequest[1](topics=None))
    assert got.error_code == E.NONE and {t.name for t in got.results[0].topics} >= {"t1", "t2"}


@pytest.mark.asyncio
async def test_configs_need_describe_configs_and_alter_configs_per_resource(node: Node) -> None:
    D = DescribeConfigsRequest.DescribeConfigsResource
    describe = DescribeConfigsRequest[4](resources=[D(resource_type=2, resource_name="t1", configuration_keys=None),
                                                    D(resource_type=4, resource_name="0", configuration_keys=None),
                                                    D(resource_type=32, resource_name="g", configuration_keys=None)],
                                         include_synonyms=False, include_documentation=False)
    got = node.configs.describe_configs(ctx(4), describe)
    assert [r.error_code for r in got.results] == [E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED,
                                                   E.GROUP_AUTHORIZATION_FAILED]
    assert all(r.configs == [] for r in got.results)
    node.rules.allow((ALICE, O.DESCRIBE_CONFIGS, R.TOPIC, "t1"), (ALICE, O.ALTER_CONFIGS, *CLUSTER))
    got = node.configs.describe_configs(ctx(4), describe)
    assert [r.error_code for r in got.results] == [E.NONE, E.NONE, E.GROUP_AUTHORIZATION_FAILED]
    A = IncrementalAlterConfigsRequest.AlterConfigsResource
    alter = IncrementalAlterConfigsRequest[1](validate_only=False, resources=[A(
        resource_type=2, resource_name=n, configs=[A.AlterableConfig(name="retention.ms", config_operation=0,
                                                                     value="1000")]) for n in ("t1", "t2")])
    node.rules.allow((ALICE, O.ALTER_CONFIGS, R.TOPIC, "t2"))
    got = await node.configs.incremental_alter_configs(ctx(1), alter)
    assert [(r.resource_name, r.error_code) for r in got.responses] == [("t1", E.TOPIC_AUTHORIZATION_FAILED),
                                                                         ("t2", E.NONE)]
    assert [node.topics.registry.get(n).configs.get("retention.ms") for n in ("t1", "t2")] == [  # type: ignore
        None, "1000"]


@pytest.mark.asyncio
async def test_elect_leaders_and_reassignments_need_alter_or_describe_on_the_cluster(node: Node) -> None:
    info = NodeInfo(0, "127.0.0.1", 9092, "authz-cluster")
    elect = ElectLeadersApis(node.topics, authorizer=node.rules)
    T = ElectLeadersRequest.TopicPartitions
    request = ElectLeadersRequest[1](election_type=0, topic_partitions=[T(topic="t1", partitions=[0])],
                                     timeout_ms=5000)
    got = await answer(elect.elect_leaders(ctx(1), request))
    assert got.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert got.replica_election_results[0].partition_result[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    moves = ReassignmentApis(info, node.topics, authorizer=node.rules)
    RT = AlterPartitionReassignmentsRequest.ReassignableTopic
    alter = AlterPartitionReassignmentsRequest[0](timeout_ms=5000, topics=[RT(name="t1", partitions=[
        RT.ReassignablePartition(partition_index=0, replicas=[0])])])
    got = await answer(moves.alter(ctx(0), alter))
    assert (got.error_code, got.responses[0].partitions[0].error_code) == (E.CLUSTER_AUTHORIZATION_FAILED,) * 2
    listed = moves.list(ctx(0), ListPartitionReassignmentsRequest[0](timeout_ms=5000, topics=None))
    assert listed.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    node.rules.allow((ALICE, O.ALTER, *CLUSTER))  # ALTER implies DESCRIBE
    got = await answer(elect.elect_leaders(ctx(1), request))
    assert (got.error_code, got.replica_election_results[0].partition_result[0].error_code) == (
        E.NONE, E.ELECTION_NOT_NEEDED)
    assert (await answer(moves.alter(ctx(0), alter))).error_code == E.NONE
    assert moves.list(ctx(0), ListPartitionReassignmentsRequest[0](timeout_ms=5000, topics=None)).error_code == E.NONE
