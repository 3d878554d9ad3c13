"""OffsetCommit v0 / OffsetFetch v0 on a cluster node with a SASL_PLAINTEXT listener and the ACL authorizer:
the ACL matrix's rows for the ZooKeeper-era versions (test_api_authz_matrix.py runs a node without ZooKeeper,
which refuses v0), and v0 before SASL authentication.

ACLs as Kafka 2.x's ``KafkaApis`` checked them for v0
(https://github.com/apache/kafka/blob/2.8/core/src/main/scala/kafka/server/KafkaApis.scala): OffsetCommit needs
READ on the group, then READ on the topic; OffsetFetch DESCRIBE on the group, then DESCRIBE on the topic; v0 has
no top-level error field, so a denied group is answered on every partition.

Before authentication, Kafka's ``SaslServerAuthenticator`` takes only ApiVersions and SaslHandshake: any other
request closes the connection without an answer ("Unexpected Kafka request of type ... during SASL handshake.");
after a SaslHandshake v1 a request other than SaslAuthenticate gets its own error response (ILLEGAL_SASL_STATE)
and then the close — for any version the broker knows, and a ZooKeeper-mode broker knows OffsetCommit v0
(https://github.com/apache/kafka/blob/2.8/clients/src/main/java/org/apache/kafka/common/security/authenticator/SaslServerAuthenticator.java).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.sasl import SaslHandshakeRequest

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.security.acl import AclOperation as O
from coordinator.security.acl import ResourceType as R
from protocol.apis import ApiKey
from protocol.client import decode_response
from protocol.errors import ErrorCode as E
from tests.coordinator.security.test_api_authz_matrix import AUTHZ, TOPIC, Case, Node, _create_topic, _per_partition
from tests.wire_client import WireClient

pytestmark = pytest.mark.timeout(90)

GROUP = "zk-era"
CT = OffsetCommitRequest.OffsetCommitRequestTopic
FT = OffsetFetchRequest.OffsetFetchRequestTopic


def _commit_v0(group: str = GROUP) -> Any:
    return OffsetCommitRequest(version=0, group_id=group, topics=[CT(name=TOPIC, partitions=[
        CT.OffsetCommitRequestPartition(partition_index=0, committed_offset=3, committed_metadata="")])])


def _fetch_v0() -> Any:
    return OffsetFetchRequest(version=0, group_id=GROUP, topics=[FT(name=TOPIC, partition_indexes=[0])])


@pytest.fixture(scope="module")
def node(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    # A cluster node talks to itself on its one listener too: as the super user admin.
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    node = Node(tmp_path_factory.mktemp("authz-zk-v0"), f"zookeeper.connect={zookeeper.connect}/authz_zk_v0",
                "broker.id=1", "zookeeper.session.timeout.ms=4000", "sasl.mechanism.inter.broker.protocol=PLAIN",
                f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}")
    try:
        _create_topic(node.admin, TOPIC)
        # The topic reaches the node's view of ZooKeeper; till then v0 answers unknown topic.
        deadline = time.monotonic() + 20
        while (code := node.admin.request(ApiKey.OFFSET_COMMIT, 0, _commit_v0("setup")).topics[0]
               .partitions[0].error_code) != E.NONE:
            assert time.monotonic() < deadline, code
            time.sleep(0.05)
        yield node
    finally:
        node.close()


CASES = [
    Case(ApiKey.OFFSET_COMMIT, 0, _commit_v0, _per_partition(),
         [([], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, GROUP, O.READ)], E.TOPIC_AUTHORIZATION_FAILED),
          ([(R.TOPIC, TOPIC, O.READ)], None)], name="v0"),
    Case(ApiKey.OFFSET_FETCH, 0, _fetch_v0, _per_partition(),
         [([], E.GROUP_AUTHORIZATION_FAILED), ([(R.GROUP, GROUP, O.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
          ([(R.TOPIC, TOPIC, O.DESCRIBE)], None)], name="v0"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_alice_needs_exactly_kafka_2_acls_for_v0(node: Node, case: Case) -> None:
    granted = []
    try:
        for grants, expected in case.stages:
            if grants:
                node.grant(*grants)
                granted += grants
            codes = case.codes(node.alice.request(case.api, case.version, case.request()))
            if expected is None:
                assert codes and not set(codes) & AUTHZ, (granted, codes)
            else:
                assert codes and set(codes) == {expected}, (granted, codes)
    finally:
        node.revoke_all()


def _closed_without_answer(client: WireClient) -> bool:
    try:
        client.read_frame()
    except ConnectionError:
        return True
    return False


def test_v0_before_the_sasl_handshake_closes_without_an_answer(node: Node) -> None:
    with WireClient("127.0.0.1", node.port) as client:
        client.send(ApiKey.OFFSET_COMMIT, 0, _commit_v0())
        assert _closed_without_answer(client)


def test_v0_during_sasl_authentication_gets_its_error_response_then_the_close(node: Node) -> None:
    with WireClient("127.0.0.1", node.port) as client:
        assert client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        sent = client.send(ApiKey.OFFSET_COMMIT, 0, _commit_v0())
        got, _ = decode_response(ApiKey.OFFSET_COMMIT, 0, client.read_frame())
        assert got == sent
        assert _closed_without_answer(client)
