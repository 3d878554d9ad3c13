"""OffsetCommit v0 / OffsetFetch v0 on a node with ZooKeeper: offsets in /consumers as Kafka 0.8.2–2.x kept them;
a node without ZooKeeper advertises Kafka 4's ranges (KIP-896) and refuses v0 as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest
from kafka.structs import OffsetAndMetadata

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.conftest import ServerProcess
from tests.coordinator.cluster.conftest import chroot_for, wait_for
from tests.wire_client import WireClient

pytestmark = pytest.mark.timeout(120)

CT = OffsetCommitRequest.OffsetCommitRequestTopic
CP = CT.OffsetCommitRequestPartition
FT = OffsetFetchRequest.OffsetFetchRequestTopic


def _ranges(client: WireClient) -> dict[int, tuple[int, int]]:
    answer = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        version=3, client_software_name="test", client_software_version="1"))
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def _commit(client: WireClient, group: str, parts: list[tuple[str, int, int, str]]) -> dict[tuple[str, int], int]:
    topics = sorted({t for t, _, _, _ in parts})
    request = OffsetCommitRequest(version=0, group_id=group, topics=[CT(name=t, partitions=[
        CP(partition_index=p, committed_offset=o, committed_metadata=m) for tt, p, o, m in parts if tt == t])
        for t in topics])
    answer = client.request(ApiKey.OFFSET_COMMIT, 0, request)
    return {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}


def _fetch(client: WireClient, group: str, parts: dict[str, list[int]]) -> dict[tuple[str, int], tuple[int, str, int]]:
    answer = client.request(ApiKey.OFFSET_FETCH, 0, OffsetFetchRequest(
        version=0, group_id=group, topics=[FT(name=t, partition_indexes=ps) for t, ps in parts.items()]))
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in answer.topics for p in t.partitions}


def test_v0_offsets_live_in_zookeeper_on_a_cluster_node(zookeeper, zk_client, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    chroot = chroot_for(request)
    node = ServerProcess(tmp_path / "zk-node", {"zookeeper.connect": zookeeper.connect + chroot, "broker.id": "1",
                                                "zookeeper.session.timeout.ms": "4000",
                                                "offsets.topic.replication.factor": "1",
                                                "offsets.topic.num.partitions": "1",
                                                "offsets.zookeeper.mirror.groups": "mirror-exact, mir*"})
    plain = ServerProcess(tmp_path / "plain")
    node.start()
    plain.start()
    try:
        with WireClient(node.host, node.port) as client:
            ranges = _ranges(client)
            assert ranges[ApiKey.OFFSET_COMMIT][0] == 0 and ranges[ApiKey.OFFSET_FETCH][0] == 0
            created = client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(version=5, timeout_ms=15000,
                validate_only=False, topics=[CreateTopicsRequest.CreatableTopic(
                    name="t", num_partitions=2, replication_factor=1, assignments=[], configs=[])])).topics[0]
            assert created.error_code == ErrorCode.NONE, created
            # The topic reaches the node's view of ZooKeeper; till then v0 answers unknown topic.
            wait_for(lambda: _commit(client, "old", [("t", 1, 5, "")]) == {("t", 1): ErrorCode.NONE}, 20,
                     "the topic in the node's view")

            # Commit: the znode holds the plain decimal, metadata is not stored; unknown topic or
            # partition and too-long metadata are refused per partition, the rest written.
            errors = _commit(client, "old", [("t", 0, 43, "x" * 5000), ("t", 1, 7, ""), ("t", 9, 1, ""),
                                             ("nope", 0, 1, "")])
            assert errors == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): ErrorCode.NONE,
                              ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            assert zk_client.exists(chroot + "/consumers/old/offsets/t/0") is None
            assert _commit(client, "old", [("t", 0, 42, "meta")]) == {("t", 0): ErrorCode.NONE}
            assert zk_client.get(chroot + "/consumers/old/offsets/t/0")[0] == b"42"
            assert zk_client.get(chroot + "/consumers/old/offsets/t/1")[0] == b"7"

            # Fetch v0 reads ZooKeeper (a value written there by someone else too); missing → -1, unknown.
            zk_client.set(chroot + "/consumers/old/offsets/t/1", b"99")
            assert _fetch(client, "old", {"t": [0, 1], "nope": [0]}) == {
                ("t", 0): (42, "", ErrorCode.NONE), ("t", 1): (99, "", ErrorCode.NONE),
                ("nope", 0): (-1, "", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
            assert _fetch(client, "other", {"t": [0]}) == {("t", 0): (-1, "", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}

            # offsets.zookeeper.mirror.groups: an acknowledged Kafka commit (v2) of a named group is
            # also written to ZooKeeper; other groups' are not.
            def kafka_commit(group: str, offset: int) -> bool:
                answer = client.request(ApiKey.OFFSET_COMMIT, 2, OffsetCommitRequest(
                    version=2, group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
                    topics=[CT(name="t", partitions=[CP(partition_index=0, committed_offset=offset,
                                                        committed_metadata="m")])]))
                return bool(answer.topics[0].partitions[0].error_code == ErrorCode.NONE)

            def coordinator_ready() -> bool:
                # FindCoordinator makes __consumer_offsets on first use, as Kafka's does.
                found = client.request(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(
                    version=1, key="mirrored", key_type=0))
                return found.error_code == ErrorCode.NONE and kafka_commit("mirrored", 17)

            wait_for(coordinator_ready, 30, "a Kafka commit (the offsets topic made and loaded)")
            wait_for(lambda: zk_client.exists(chroot + "/consumers/mirrored/offsets/t/0"), 10, "the mirrored znode")
            assert zk_client.get(chroot + "/consumers/mirrored/offsets/t/0")[0] == b"17"
            assert kafka_commit("plain-group", 5) and kafka_commit("mirrored", 18)
            wait_for(lambda: zk_client.get(chroot + "/consumers/mirrored/offsets/t/0")[0] == b"18", 10, "the update")
            assert zk_client.exists(chroot + "/consumers/plain-group") is None

        # A stock client of the ZooKeeper era: kafka-python with api_version=(0, 8, 1) commits and
        # fetches with v0 (ZooKeeper storage), asking whichever node it reaches.
        consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id="kp-old", api_version=(0, 8, 1),
                                 enable_auto_commit=False)
        try:
            tp = TopicPartition("t", 0)
            consumer.assign([tp])
            consumer.commit({tp: OffsetAndMetadata(12, "", -1)})
            assert zk_client.get(chroot + "/consumers/kp-old/offsets/t/0")[0] == b"12"
            zk_client.set(chroot + "/consumers/kp-old/offsets/t/0", b"13")
            assert consumer.committed(tp) == 13
        finally:
            consumer.close()

        # Without ZooKeeper: Kafka 4's ranges, and a v0 request is refused as before (connection closed).
        with WireClient(plain.host, plain.port) as client:
            ranges = _ranges(client)
            assert ranges[ApiKey.OFFSET_COMMIT] == (2, 9) and ranges[ApiKey.OFFSET_FETCH] == (1, 9)
            client.send(ApiKey.OFFSET_FETCH, 0, OffsetFetchRequest(version=0, group_id="old", topics=[]))
            assert client.sock.recv(1) == b""
    finally:
        node.stop()
        plain.stop()
