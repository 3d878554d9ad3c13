"""Metadata, FindCoordinator and DescribeCluster answered from a ClusterView (cluster mode).

The view is built by hand, as the ZooKeeper watcher would fill it; the handlers are called
directly and every response goes through the wire codec at the request's version, so what is
checked is what a client would decode. Expected answers: reference/cluster_replication.md §5
(Metadata) and §4.3 (FindCoordinator).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from coordinator.admin.cluster_apis import ClusterApis
from coordinator.cluster.view import ClusterView
from coordinator.cluster.znodes import BrokerRegistration, PartitionState, TopicAssignment
from coordinator.context import NodeInfo, RequestContext
from coordinator.topics.registry import CONSUMER_OFFSETS, TopicError
from protocol.apis import ApiKey
from protocol.connection import encode_response
from protocol.errors import ErrorCode
from protocol.hashing import partition_for
from tests.wire_client import decode_response

CLUSTER_ID = "AAAAAAAAAAAAAAAAAAAAAA"
NODE = NodeInfo(node_id=1, host="h1", port=9091, cluster_id=CLUSTER_ID)
ORDERS_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
OFFSETS_ID = uuid.UUID("99999999-2222-3333-4444-555555555555")


class StubTopics:
    """The TopicService calls ClusterApis makes; in cluster mode creation only writes ZooKeeper."""

    def __init__(self, auto_create_enabled: bool = True, fail_with: int | None = None) -> None:
        self.auto_create_enabled = auto_create_enabled
        self.fail_with = fail_with
        self.auto_created: list[str] = []
        self.offsets_requests = 0
        self.transaction_state_requests = 0

    @property
    def registry(self) -> Any:
        raise AssertionError("cluster mode must not read the local topic registry")

    def auto_create(self, name: str) -> None:
        self.auto_created.append(name)
        if self.fail_with is not None:
            raise TopicError(self.fail_with, "refused")

    def create_offsets_topic(self) -> None:
        self.offsets_requests += 1

    def create_transaction_state_topic(self) -> None:
        self.transaction_state_requests += 1


def _view() -> ClusterView:
    """Brokers 1 and 2 live, 3 dead; controller 2.

    orders p0: leader 1, replicas (1, 2, 3), ISR (1, 2)   -> fine, but replica 3 dead
    orders p1: leader 3 (dead), replicas (3, 1), ISR (3)  -> LEADER_NOT_AVAILABLE
    orders p2: no state yet, replicas (2, 1)              -> LEADER_NOT_AVAILABLE
    orders p3: leader 2, replicas (2, 1), ISR (2, 1)      -> fine everywhere
    """
    view = ClusterView()
    view.set_brokers({1: BrokerRegistration(1, "h1", 9091, rack="r1"),
                      2: BrokerRegistration(2, "h2", 9092, rack=None)})
    view.set_controller(2)
    view.set_topic(TopicAssignment("orders", ORDERS_ID, {0: (1, 2, 3), 1: (3, 1), 2: (2, 1), 3: (2, 1)}), "orders")
    view.set_state("orders", 0, PartitionState(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=1, zk_version=3))
    view.set_state("orders", 1, PartitionState(leader=3, leader_epoch=7, isr=(3,), controller_epoch=1, zk_version=2))
    view.set_state("orders", 3, PartitionState(leader=2, leader_epoch=0, isr=(2, 1), controller_epoch=1, zk_version=0))
    return view


def _wire(api_key: ApiKey, version: int, response: Any) -> Any:
    """``response`` as a client decodes it at ``version``."""
    correlation_id, decoded = decode_response(api_key, version, encode_response(api_key, version, 7, response)[4:])
    assert correlation_id == 7
    return decoded


def _ctx(api_key: ApiKey, version: int) -> RequestContext:
    return RequestContext(api_key=int(api_key), api_version=version, correlation_id=7, client_id="t", peer="test")


def _metadata(apis: ClusterApis, version: int, names: list[str] | None, allow_auto: bool = True,
              topic_ids: list[uuid.UUID] | None = None, ops: bool = False) -> Any:
    if topic_ids is not None:
        topics = [MetadataRequest.MetadataRequestTopic(name=None, topic_id=t) for t in topic_ids]
    elif names is None:
        topics = None
    else:
        topics = [MetadataRequest.MetadataRequestTopic(name=n, topic_id=None) for n in names]
    request = MetadataRequest(version=version, topics=topics, allow_auto_topic_creation=allow_auto,
                              include_cluster_authorized_operations=ops, include_topic_authorized_operations=ops)
    return _wire(ApiKey.METADATA, version, apis.metadata(_ctx(ApiKey.METADATA, version), request))


def _partitions(topic: Any) -> dict[int, tuple]:
    return {p.partition_index: (p.error_code, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
            for p in topic.partitions}


# --- Metadata -------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 5, 9, 12])
def test_metadata_brokers_controller_and_partitions(version: int) -> None:
    apis = ClusterApis(NODE, StubTopics(), _view())
    resp = _metadata(apis, version, ["orders"])
    assert [(b.node_id, b.host, b.port, b.rack) for b in resp.brokers] == [(1, "h1", 9091, "r1"), (2, "h2", 9092, None)]
    assert resp.controller_id == 2
    if version >= 2:
        assert resp.cluster_id == CLUSTER_ID
    (topic,) = resp.topics
    assert (topic.error_code, topic.name, topic.is_internal) == (0, "orders", False)
    # v1+: the lists are not filtered; a dead or missing leader is LEADER_NOT_AVAILABLE, lists still filled.
    assert _partitions(topic) == {
        0: (0, 1, [1, 2, 3], [1, 2]),
        1: (ErrorCode.LEADER_NOT_AVAILABLE, -1, [3, 1], [3]),
        2: (ErrorCode.LEADER_NOT_AVAILABLE, -1, [2, 1], []),
        3: (0, 2, [2, 1], [2, 1]),
    }
    by_index = {p.partition_index: p for p in topic.partitions}
    if version >= 5:
        assert {i: list(p.offline_replicas) for i, p in by_index.items()} == {0: [3], 1: [3], 2: [], 3: []}
    if version >= 7:
        assert {i: p.leader_epoch for i, p in by_index.items()} == {0: 4, 1: 7, 2: -1, 3: 0}
    if version >= 10:
        assert topic.topic_id == ORDERS_ID


def test_metadata_v0_filters_dead_replicas() -> None:
    apis = ClusterApis(NODE, StubTopics(), _view())
    resp = _metadata(apis, 0, ["orders"])
    assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(1, "h1", 9091), (2, "h2", 9092)]
    (topic,) = resp.topics
    assert _partitions(topic) == {
        0: (ErrorCode.REPLICA_NOT_AVAILABLE, 1, [1, 2], [1, 2]),  # leader fine, replica 3 dropped
        1: (ErrorCode.LEADER_NOT_AVAILABLE, -1, [1], []),  # the leader error wins; lists still filtered
        2: (ErrorCode.LEADER_NOT_AVAILABLE, -1, [2, 1], []),
        3: (0, 2, [2, 1], [2, 1]),
    }


def test_metadata_v0_reports_a_dead_isr_member() -> None:
    view = _view()
    view.set_state("orders", 3, PartitionState(leader=2, leader_epoch=1, isr=(2, 3), controller_epoch=1, zk_version=1))
    view.set_topic(TopicAssignment("orders", ORDERS_ID, {3: (2, 1)}), "orders")
    (topic,) = _metadata(ClusterApis(NODE, StubTopics(), view), 0, ["orders"]).topics
    assert _partitions(topic) == {3: (ErrorCode.REPLICA_NOT_AVAILABLE, 2, [2, 1], [2])}


def test_metadata_all_topics_come_from_the_view() -> None:
    view = _view()
    view.set_topic(TopicAssignment(CONSUMER_OFFSETS, OFFSETS_ID, {0: (2,)}), CONSUMER_OFFSETS)
    view.set_state(CONSUMER_OFFSETS, 0, PartitionState(leader=2, leader_epoch=0, isr=(2,), controller_epoch=1))
    apis = ClusterApis(NODE, StubTopics(), view)
    # v0: an empty list means all; v1+: null means all, empty means none.
    assert [t.name for t in _metadata(apis, 0, []).topics] == [CONSUMER_OFFSETS, "orders"]
    assert [(t.name, t.is_internal) for t in _metadata(apis, 9, None).topics] == [  # is_internal: v1+
        (CONSUMER_OFFSETS, True), ("orders", False)]
    assert _metadata(apis, 9, []).topics == []


def test_metadata_by_topic_id() -> None:
    apis = ClusterApis(NODE, StubTopics(), _view())
    known, unknown = _metadata(apis, 12, None, topic_ids=[ORDERS_ID, uuid.uuid4()]).topics
    assert (known.error_code, known.name, known.topic_id, len(known.partitions)) == (0, "orders", ORDERS_ID, 4)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("version", [0, 1, 5, 9, 12])
def test_metadata_unknown_topic_is_auto_created_and_not_available_yet(version: int) -> None:
    topics = StubTopics()
    apis = ClusterApis(NODE, topics, _view())
    (topic,) = _metadata(apis, version, ["fresh"]).topics
    assert topics.auto_created == ["fresh"]
    assert (topic.error_code, topic.name, topic.is_internal, topic.partitions) == (
        ErrorCode.LEADER_NOT_AVAILABLE, "fresh", False, [])


def test_metadata_auto_created_offsets_topic_is_internal() -> None:
    topics = StubTopics()
    (topic,) = _metadata(ClusterApis(NODE, topics, _view()), 9, [CONSUMER_OFFSETS]).topics
    assert topics.auto_created == [CONSUMER_OFFSETS]
    assert (topic.error_code, topic.is_internal) == (ErrorCode.LEADER_NOT_AVAILABLE, True)


def test_metadata_no_auto_creation() -> None:
    # Off by request (v4+) ...
    topics = StubTopics()
    (topic,) = _metadata(ClusterApis(NODE, topics, _view()), 9, ["fresh"], allow_auto=False).topics
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and topics.auto_created == []
    # ... or by the broker's auto.create.topics.enable.
    topics = StubTopics(auto_create_enabled=False)
    (topic,) = _metadata(ClusterApis(NODE, topics, _view()), 1, ["fresh"]).topics
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and topics.auto_created == []


def test_metadata_invalid_name_and_refused_creation() -> None:
    topics = StubTopics()
    (topic,) = _metadata(ClusterApis(NODE, topics, _view()), 9, ["bad name"]).topics
    assert topic.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION and topics.auto_created == []
    refused = StubTopics(fail_with=ErrorCode.INVALID_REPLICATION_FACTOR)
    (topic,) = _metadata(ClusterApis(NODE, refused, _view()), 9, ["fresh"]).topics
    assert topic.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    # Another broker created it first: just not available yet.
    raced = StubTopics(fail_with=ErrorCode.TOPIC_ALREADY_EXISTS)
    (topic,) = _metadata(ClusterApis(NODE, raced, _view()), 9, ["fresh"]).topics
    assert topic.error_code == ErrorCode.LEADER_NOT_AVAILABLE


def test_metadata_no_controller_and_authorized_operations() -> None:
    view = _view()
    view.set_controller(-1)
    resp = _metadata(ClusterApis(NODE, StubTopics(), view), 10, ["orders"], ops=True)
    assert resp.controller_id == -1
    assert resp.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
    assert resp.topics[0].authorized_operations == {3, 4, 5, 6, 7, 8, 10, 11}


def test_metadata_controller_not_registered_yet_is_unknown() -> None:
    """/controller names broker 3 before this node saw /brokers/ids/3: -1, which clients retry,
    rather than an id missing from the brokers listed (kafka-python's admin failed on it)."""
    view = _view()
    view.set_controller(3)
    resp = _metadata(ClusterApis(NODE, StubTopics(), view), 12, ["orders"])
    assert resp.controller_id == -1 and {b.node_id for b in resp.brokers} == {1, 2}


# --- FindCoordinator ------------------------------------------------------------------------------


def _offsets_view(leaders: dict[int, int]) -> ClusterView:
    """__consumer_offsets with 3 partitions; ``leaders`` maps partition -> leader (absent: no state)."""
    view = _view()
    view.set_topic(TopicAssignment(CONSUMER_OFFSETS, OFFSETS_ID, {0: (1, 2), 1: (2, 1), 2: (3, 1)}),
                   CONSUMER_OFFSETS)
    for p, leader in leaders.items():
        view.set_state(CONSUMER_OFFSETS, p, PartitionState(leader=leader, leader_epoch=0, isr=(leader,),
                                                           controller_epoch=1))
    return view


def _group_for(partition: int, partitions: int = 3) -> str:
    return next(g for g in (f"group-{i}" for i in range(1000)) if partition_for(g, partitions) == partition)


def _find_v1(apis: ClusterApis, key: str, key_type: int = 0) -> Any:
    request = FindCoordinatorRequest(version=1, key=key, key_type=key_type)
    return _wire(ApiKey.FIND_COORDINATOR, 1, apis.find_coordinator(_ctx(ApiKey.FIND_COORDINATOR, 1), request))


def _find_v4(apis: ClusterApis, keys: list[str], key_type: int = 0) -> Any:
    request = FindCoordinatorRequest(version=4, key_type=key_type, coordinator_keys=keys)
    return _wire(ApiKey.FIND_COORDINATOR, 4, apis.find_coordinator(_ctx(ApiKey.FIND_COORDINATOR, 4), request))


def test_find_coordinator_is_the_live_leader_of_the_groups_partition() -> None:
    apis = ClusterApis(NODE, StubTopics(), _offsets_view({0: 1, 1: 2, 2: 3}))
    g0, g1, g2 = _group_for(0), _group_for(1), _group_for(2)
    resp = _find_v1(apis, g1)
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 2, "h2", 9092)
    resp = _find_v1(apis, g0)
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 1, "h1", 9091)
    resp = _find_v1(apis, g2)  # leader 3 is dead
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    resp = _find_v4(apis, [g0, g1, g2])
    assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in resp.coordinators] == [
        (g0, 0, 1, "h1", 9091), (g1, 0, 2, "h2", 9092),
        (g2, ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)]


def test_find_coordinator_partition_without_state() -> None:
    apis = ClusterApis(NODE, StubTopics(), _offsets_view({0: 1}))
    resp = _find_v4(apis, [_group_for(0), _group_for(1)])
    assert [(c.error_code, c.node_id) for c in resp.coordinators] == [
        (0, 1), (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)]


def test_find_coordinator_creates_missing_offsets_topic() -> None:
    topics = StubTopics()
    apis = ClusterApis(NODE, topics, _view())
    resp = _find_v1(apis, "g")
    assert (resp.error_code, resp.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    assert topics.offsets_requests == 1
    resp = _find_v4(apis, ["a", "b"])
    assert [c.error_code for c in resp.coordinators] == [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
    assert topics.offsets_requests == 3


def test_find_coordinator_other_key_types() -> None:
    topics = StubTopics()
    view = _offsets_view({0: 1, 1: 1, 2: 1})
    apis = ClusterApis(NODE, topics, view)
    # A transactional id: __transaction_state is asked for and, until the view has it, the
    # answer is COORDINATOR_NOT_AVAILABLE (clients retry).
    assert _find_v1(apis, "txn", key_type=1).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert topics.transaction_state_requests == 1
    view.set_topic(TopicAssignment("__transaction_state", uuid.uuid4(), {0: (2, 1), 1: (1, 2)}), "__transaction_state")
    for p, leader in ((0, 2), (1, 1)):
        view.set_state("__transaction_state", p, PartitionState(leader=leader, leader_epoch=0, isr=(leader,),
                                                                controller_epoch=1))
    txn = next(t for t in (f"txn-{i}" for i in range(1000)) if partition_for(t, 2) == 0)
    found = _find_v1(apis, txn, key_type=1)
    assert (found.error_code, found.node_id) == (ErrorCode.NONE, 2)
    assert topics.transaction_state_requests == 1
    assert _find_v4(apis, ["s"], key_type=2).coordinators[0].error_code == ErrorCode.INVALID_REQUEST


# --- DescribeCluster ------------------------------------------------------------------------------


def test_describe_cluster_lists_live_brokers_and_controller() -> None:
    apis = ClusterApis(NODE, StubTopics(), _view())
    request = DescribeClusterRequest(version=0, include_cluster_authorized_operations=False)
    resp = _wire(ApiKey.DESCRIBE_CLUSTER, 0, apis.describe_cluster(_ctx(ApiKey.DESCRIBE_CLUSTER, 0), request))
    assert (resp.error_code, resp.cluster_id, resp.controller_id) == (0, CLUSTER_ID, 2)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [
        (1, "h1", 9091, "r1"), (2, "h2", 9092, None)]
