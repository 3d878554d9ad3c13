"""ApiVersions, Metadata, FindCoordinator and DescribeCluster against a real server process."""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest

from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from tests.wire_client import WireClient


def _metadata(version: int, names: list[str] | None, allow_auto: bool = True) -> object:
    topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n, topic_id=None) for n in names]
    return MetadataRequest(version=version, topics=topics, allow_auto_topic_creation=allow_auto,
                           include_topic_authorized_operations=False)


def test_api_versions_lists_exactly_the_supported_table(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        for version in range(0, 5):
            req = ApiVersionsRequest(version=version, client_software_name="tests", client_software_version="1.0")
            resp = c.request(ApiKey.API_VERSIONS, version, req)
            assert resp.error_code == 0
            got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            assert got == {int(k): v for k, v in SUPPORTED_VERSIONS.items()}


def test_api_versions_v3_rejects_invalid_software_name(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        req = ApiVersionsRequest(version=3, client_software_name="bad name!", client_software_version="1")
        assert c.request(ApiKey.API_VERSIONS, 3, req).error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", range(0, 13))
def test_metadata_every_version_names_this_node(shared_server, version: int) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        name = f"meta-v{version}"
        resp = c.request(ApiKey.METADATA, version, _metadata(version, [name]))
        assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(1, "127.0.0.1", shared_server.port)]
        (topic,) = resp.topics
        assert (topic.error_code, topic.name, len(topic.partitions)) == (0, name, 1)
        p = topic.partitions[0]
        assert (p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) == (1, [1], [1])
        if version >= 1:
            assert resp.controller_id == 1
        if version >= 2:
            assert len(resp.cluster_id) == 22
        if version >= 10:
            assert isinstance(topic.topic_id, uuid.UUID) and topic.topic_id.int != 0


def test_metadata_all_topics_forms(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        c.request(ApiKey.METADATA, 9, _metadata(9, ["listed-a"]))
        # v0: an empty list means all topics; v1+: null means all, empty means none.
        assert "listed-a" in {t.name for t in c.request(ApiKey.METADATA, 0, _metadata(0, [])).topics}
        assert "listed-a" in {t.name for t in c.request(ApiKey.METADATA, 1, _metadata(1, None)).topics}
        assert c.request(ApiKey.METADATA, 1, _metadata(1, [])).topics == []


def test_metadata_auto_creation_respects_request_flag_and_names(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        (t,) = c.request(ApiKey.METADATA, 9, _metadata(9, ["no-auto"], allow_auto=False)).topics
        assert t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        (t,) = c.request(ApiKey.METADATA, 9, _metadata(9, ["bad name"])).topics
        assert t.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_metadata_without_auto_creation(server_factory) -> None:
    server = server_factory({"auto.create.topics.enable": "false"})
    with WireClient(server.host, server.port) as c:
        (t,) = c.request(ApiKey.METADATA, 12, _metadata(12, ["absent"])).topics
        assert t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_v12_by_unknown_topic_id(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        req = MetadataRequest(version=12, topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=uuid.uuid4())],
                              allow_auto_topic_creation=True, include_topic_authorized_operations=False)
        (t,) = c.request(ApiKey.METADATA, 12, req).topics
        assert t.error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_find_coordinator_creates_offsets_topic_and_answers_every_version(server) -> None:
    with WireClient(server.host, server.port) as c:
        names = {t.name for t in c.request(ApiKey.METADATA, 1, _metadata(1, None)).topics}
        assert "__consumer_offsets" not in names
        for version in range(0, 4):
            req = FindCoordinatorRequest(version=version, key="my-group", key_type=0)
            resp = c.request(ApiKey.FIND_COORDINATOR, version, req)
            assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 1, "127.0.0.1", server.port)
        for version in (4, 5, 6):
            req = FindCoordinatorRequest(version=version, key_type=0, coordinator_keys=["g1", "g2"])
            resp = c.request(ApiKey.FIND_COORDINATOR, version, req)
            assert [(e.key, e.error_code, e.node_id, e.port) for e in resp.coordinators] == [
                ("g1", 0, 1, server.port), ("g2", 0, 1, server.port)]
        (t,) = c.request(ApiKey.METADATA, 9, _metadata(9, ["__consumer_offsets"])).topics
        assert t.is_internal and len(t.partitions) == 50


def test_find_coordinator_other_key_types(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        # A transactional id's coordinator: this node (__transaction_state is created on first use).
        resp = c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key="txn", key_type=1))
        assert (resp.error_code, resp.node_id, resp.port) == (ErrorCode.NONE, 1, shared_server.port)
        (t,) = c.request(ApiKey.METADATA, 9, _metadata(9, ["__transaction_state"])).topics
        assert t.is_internal and len(t.partitions) == 50
        resp = c.request(ApiKey.FIND_COORDINATOR, 6, FindCoordinatorRequest(version=6, key_type=2, coordinator_keys=["s"]))
        assert resp.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster(shared_server, version: int) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        req = DescribeClusterRequest(version=version, include_cluster_authorized_operations=False,
                                     endpoint_type=1, include_fenced_brokers=False)
        resp = c.request(ApiKey.DESCRIBE_CLUSTER, version, req)
        assert resp.error_code == 0 and resp.controller_id == 1 and len(resp.cluster_id) == 22
        assert [(b.broker_id, b.port) for b in resp.brokers] == [(1, shared_server.port)]
        if version >= 1:
            bad = DescribeClusterRequest(version=version, include_cluster_authorized_operations=False, endpoint_type=2)
            assert c.request(ApiKey.DESCRIBE_CLUSTER, version, bad).error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE


def test_authorized_operations_when_asked_and_omitted_otherwise(shared_server) -> None:
    from kafka.protocol.admin import DescribeClusterRequest as DC

    with WireClient(shared_server.host, shared_server.port) as c:
        req = MetadataRequest(version=10, topics=[MetadataRequest.MetadataRequestTopic(name="ops", topic_id=None)],
                              allow_auto_topic_creation=True, include_cluster_authorized_operations=True,
                              include_topic_authorized_operations=True)
        resp = c.request(ApiKey.METADATA, 10, req)
        assert resp.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
        assert resp.topics[0].authorized_operations == {3, 4, 5, 6, 7, 8, 10, 11}
        plain = c.request(ApiKey.METADATA, 10, _metadata(10, ["ops"]))
        assert plain.authorized_operations is None and plain.topics[0].authorized_operations is None
        cluster = c.request(ApiKey.DESCRIBE_CLUSTER, 1, DC(version=1, include_cluster_authorized_operations=True,
                                                         endpoint_type=1))
        assert cluster.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
