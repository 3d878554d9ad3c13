"""Per-listener endpoints in cluster mode: Metadata, FindCoordinator and DescribeCluster answer
with the endpoints of the listener the request came in on; a broker lacking it is left out, and a
leader lacking it is LISTENER_NOT_FOUND (Metadata v6+) or LEADER_NOT_AVAILABLE (reference/security.md §1)."""

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
from coordinator.topics.registry import CONSUMER_OFFSETS
from protocol.apis import ApiKey
from protocol.connection import encode_response
from protocol.errors import ErrorCode
from tests.coordinator.cluster.test_cluster_metadata_apis import StubTopics
from tests.wire_client import decode_response

NODE = NodeInfo(1, "h1", 9091, "AAAAAAAAAAAAAAAAAAAAAA", (("PLAINTEXT", "h1", 9091), ("SSL", "s1", 9191)))


def _view() -> ClusterView:
    # Broker 1 has PLAINTEXT and SSL, broker 2 PLAINTEXT only; broker 2 leads orders p1 and the
    # offsets partition.
    view = ClusterView()
    view.set_brokers({
        1: BrokerRegistration(1, "h1", 9091, None, 0, (("PLAINTEXT", "h1", 9091), ("SSL", "s1", 9191))),
        2: BrokerRegistration(2, "h2", 9092, None, 0, (("PLAINTEXT", "h2", 9092),))})
    view.set_controller(1)
    view.set_topic(TopicAssignment("orders", uuid.uuid4(), {0: (1, 2), 1: (2, 1)}), "orders")
    view.set_state("orders", 0, PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1, zk_version=0))
    view.set_state("orders", 1, PartitionState(leader=2, leader_epoch=0, isr=(2, 1), controller_epoch=1, zk_version=0))
    view.set_topic(TopicAssignment(CONSUMER_OFFSETS, uuid.uuid4(), {0: (2, 1)}), CONSUMER_OFFSETS)
    view.set_state(CONSUMER_OFFSETS, 0, PartitionState(leader=2, leader_epoch=0, isr=(2, 1), controller_epoch=1,
                                                       zk_version=0))
    return view


def _call(apis: ClusterApis, api_key: ApiKey, version: int, request: Any, listener: str) -> Any:
    ctx = RequestContext(int(api_key), version, 7, "t", "peer", listener=listener)
    handler = apis.handlers()[api_key]
    _cid, decoded = decode_response(api_key, version, encode_response(api_key, version, 7, handler(ctx, request))[4:])
    return decoded


@pytest.mark.parametrize(("version", "error"), [(5, ErrorCode.LEADER_NOT_AVAILABLE), (6, ErrorCode.LISTENER_NOT_FOUND),
                                                 (12, ErrorCode.LISTENER_NOT_FOUND)])
def test_metadata_per_listener(version: int, error: int) -> None:
    apis = ClusterApis(NODE, StubTopics(), _view())
    request = MetadataRequest(version=version, topics=[MetadataRequest.MetadataRequestTopic(name="orders", topic_id=None)],
                              allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                              include_topic_authorized_operations=False)
    plain = _call(apis, ApiKey.METADATA, version, request, "PLAINTEXT")
    assert [(b.node_id, b.host, b.port) for b in plain.brokers] == [(1, "h1", 9091), (2, "h2", 9092)]
    assert {p.partition_index: (p.error_code, p.leader_id) for p in plain.topics[0].partitions} == {0: (0, 1), 1: (0, 2)}
    secure = _call(apis, ApiKey.METADATA, version, request, "SSL")
    assert [(b.node_id, b.host, b.port) for b in secure.brokers] == [(1, "s1", 9191)]
    assert {p.partition_index: (p.error_code, p.leader_id) for p in secure.topics[0].partitions} == \
        {0: (0, 1), 1: (error, -1)}


def test_find_coordinator_and_describe_cluster_per_listener() -> None:
    apis = ClusterApis(NODE, StubTopics(), _view())
    request = FindCoordinatorRequest(version=3, key="g", key_type=0)
    plain = _call(apis, ApiKey.FIND_COORDINATOR, 3, request, "PLAINTEXT")
    assert (plain.error_code, plain.node_id, plain.host, plain.port) == (0, 2, "h2", 9092)
    secure = _call(apis, ApiKey.FIND_COORDINATOR, 3, request, "SSL")
    assert secure.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    described = _call(apis, ApiKey.DESCRIBE_CLUSTER, 0,
                      DescribeClusterRequest(version=0, include_cluster_authorized_operations=False), "SSL")
    assert [(b.broker_id, b.host, b.port) for b in described.brokers] == [(1, "s1", 9191)]


class SingleNodeTopics(StubTopics):
    """A single node whose registry already holds __consumer_offsets."""

    registry = frozenset({CONSUMER_OFFSETS})  # type: ignore[assignment]


def test_single_node_answers_with_the_listener_endpoint() -> None:
    apis = ClusterApis(NODE, SingleNodeTopics())
    request = FindCoordinatorRequest(version=3, key="g", key_type=0)
    found = _call(apis, ApiKey.FIND_COORDINATOR, 3, request, "SSL")
    assert (found.error_code, found.node_id, found.host, found.port) == (0, 1, "s1", 9191)
    found = _call(apis, ApiKey.FIND_COORDINATOR, 3, request, "PLAINTEXT")
    assert (found.error_code, found.node_id, found.host, found.port) == (0, 1, "h1", 9091)


def test_nodes_reach_each_other_on_the_inter_broker_listener() -> None:
    view = ClusterView()
    view.set_brokers({
        1: BrokerRegistration(1, "pub1", 9092, None, 0, (("PLAINTEXT", "pub1", 9092), ("INTERNAL", "10.0.0.1", 9093))),
        2: BrokerRegistration(2, "old", 9092)})  # registered without endpoints: PLAINTEXT only
    assert view.inter_broker_endpoint(1) == ("pub1", 9092)
    view.inter_broker_listener = "INTERNAL"
    assert view.inter_broker_endpoint(1) == ("10.0.0.1", 9093)
    assert view.inter_broker_endpoint(2) is None and view.inter_broker_endpoint(3) is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_the_node_client_authenticates_against_our_sasl_server(mechanism: str) -> None:
    # What a node sends on a SASL inter-broker listener, answered by the server side's mechanisms.
    import asyncio

    from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

    from coordinator.security.node_client import NodeClientSecurity, SaslClientError
    from coordinator.security.sasl.plain import PlainServer
    from coordinator.security.sasl.scram import ScramServer
    from coordinator.security.sasl.scram_formatter import make_credential

    credential = make_credential(mechanism, "n0de,=secret") if mechanism != "PLAIN" else None

    def run(password: str) -> None:
        server = (PlainServer({"node=1": "n0de,=secret"}) if mechanism == "PLAIN" else
                  ScramServer(mechanism, lambda user, _m: credential if user == "node=1" else None))

        async def call(api_key: int, version: int, request: Any) -> Any:
            if api_key == ApiKey.SASL_HANDSHAKE:
                return SaslHandshakeResponse(version=version, error_code=0, mechanisms=[mechanism])
            try:
                reply = server.evaluate(bytes(request.auth_bytes))
            except Exception as exc:  # noqa: BLE001 - any refusal is error 58 on the wire
                return SaslAuthenticateResponse(version=version, error_code=58, error_message=str(exc), auth_bytes=b"",
                                                session_lifetime_ms=0)
            return SaslAuthenticateResponse(version=version, error_code=0, error_message=None, auth_bytes=reply,
                                            session_lifetime_ms=0)

        asyncio.run(NodeClientSecurity(None, mechanism, "node=1", password).authenticate(call))
        assert server.complete and server.username == "node=1"

    run("n0de,=secret")
    with pytest.raises(SaslClientError):
        run("wrong")
