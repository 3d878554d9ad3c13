"""CreateTopics and CreatePartitions with the request's own replica placement, on a 3-node
cluster (``kafka-topics --replica-assignment``; librdkafka's test 0081 creates topics so).

The topic is written to ZooKeeper with exactly the lists given, the first broker of each its
leader; a placement Kafka's controller refuses is refused with its code and message: names a
broker that is not registered, a broker twice, partitions of different sizes (or, when adding
partitions, of another size than the topic's), or comes with a partition count or replication
factor other than -1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.coordinator.cluster.conftest import running_cluster, wait_for
from tests.wire_client import WireClient

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("manual") / "cluster") as c:
        yield c


@pytest.fixture
def zk(cluster: LocalCluster) -> Iterator[Any]:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zookeeper.connect, timeout=10.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def _placement(zk: Any, topic: str) -> dict[int, list[int]]:
    data, _ = zk.get(f"/brokers/topics/{topic}")
    return {int(p): r for p, r in json.loads(data)["partitions"].items()}


def _leader(zk: Any, topic: str, partition: int) -> int:
    path = f"/brokers/topics/{topic}/partitions/{partition}/state"
    if zk.exists(path) is None:
        return -1
    return int(json.loads(zk.get(path)[0])["leader"])


def _admin(cluster: LocalCluster) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 10000})


def _refusal(future: Any) -> tuple[str, str]:
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as refused:
        future.result(timeout=20)
    error = refused.value.args[0]
    return error.name(), error.str()


def test_create_topic_and_partitions_with_the_given_placement(cluster: LocalCluster, zk: Any) -> None:
    from confluent_kafka.admin import NewPartitions, NewTopic

    admin = _admin(cluster)
    wanted = {0: [2, 3], 1: [3, 1], 2: [1, 2]}
    futures = admin.create_topics([NewTopic("placed", len(wanted), replica_assignment=list(wanted.values()))],
                                  operation_timeout=15, request_timeout=20)
    futures["placed"].result(timeout=30)
    assert _placement(zk, "placed") == wanted
    # The first broker of each list leads (the controller elects the preferred replica).
    wait_for(lambda: all(_leader(zk, "placed", p) == r[0] for p, r in wanted.items()), 20,
             "each partition led by the first broker of its list")

    grow = admin.create_partitions([NewPartitions("placed", 5, replica_assignment=[[3, 2], [2, 1]])],
                                   operation_timeout=15, request_timeout=20)
    grow["placed"].result(timeout=30)
    assert _placement(zk, "placed") == {**wanted, 3: [3, 2], 4: [2, 1]}
    wait_for(lambda: _leader(zk, "placed", 3) == 3 and _leader(zk, "placed", 4) == 2, 20, "the new leaders")

    # Refused as Kafka's controller refuses them, nothing written.
    too_small = admin.create_partitions([NewPartitions("placed", 6, replica_assignment=[[1]])], request_timeout=20)
    assert _refusal(too_small["placed"]) == (
        "INVALID_REPLICA_ASSIGNMENT", ("The manual partition assignment includes a partition with 1 replica(s), but "
                                       "this is not consistent with previous partitions, which have 2 replica(s)."))
    unknown = admin.create_partitions([NewPartitions("placed", 6, replica_assignment=[[1, 9]])], request_timeout=20)
    assert _refusal(unknown["placed"]) == (
        "INVALID_REPLICA_ASSIGNMENT", "The manual partition assignment includes broker 9, but no such broker is registered.")
    assert len(_placement(zk, "placed")) == 5


@pytest.mark.parametrize(("assignment", "message"), [
    ([[1, 4], [2, 3]], "The manual partition assignment includes broker 4, but no such broker is registered."),
    ([[1, 1]], "The manual partition assignment includes the broker 1 more than once."),
    ([[1, 2], [3]], ("The manual partition assignment includes a partition with 1 replica(s), but this is not "
                     "consistent with previous partitions, which have 2 replica(s).")),
])
def test_a_placement_kafka_refuses_is_refused(cluster: LocalCluster, zk: Any, assignment: list[list[int]],
                                              message: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(cluster)
    futures = admin.create_topics([NewTopic("refused", len(assignment), replica_assignment=assignment)], request_timeout=20)
    assert _refusal(futures["refused"]) == ("INVALID_REPLICA_ASSIGNMENT", message)
    assert zk.exists("/brokers/topics/refused") is None


def test_counts_beside_an_assignment_and_gaps_are_refused(cluster: LocalCluster, zk: Any) -> None:
    """What stock admin clients refuse before sending, on the wire: a replication factor or a
    partition count beside the assignment (INVALID_REQUEST), partitions not 0..n-1, one twice."""
    CT = CreateTopicsRequest.CreatableTopic
    A = CT.CreatableReplicaAssignment

    def create(name: str, partitions: int, rf: int, assignment: dict[int, list[int]] | list[tuple[int, list[int]]],
               validate_only: bool = False) -> tuple[int, str | None]:
        pairs = assignment.items() if isinstance(assignment, dict) else assignment
        request = CreateTopicsRequest(version=7, timeout_ms=15000, validate_only=validate_only, topics=[CT(
            name=name, num_partitions=partitions, replication_factor=rf, configs=[],
            assignments=[A(partition_index=p, broker_ids=b) for p, b in pairs])])
        with WireClient(cluster.host, cluster.ports[0]) as c:
            (result,) = c.request(ApiKey.CREATE_TOPICS, 7, request).topics
        return result.error_code, result.error_message

    assert create("wire", -1, 2, {0: [1, 2]}) == (
        ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but replication factor was not set to -1.")
    assert create("wire", 1, -1, {0: [1, 2]}) == (
        ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to -1.")
    assert create("wire", -1, -1, {0: [1, 2], 2: [2, 3]}) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
    assert create("wire", -1, -1, [(0, [1, 2]), (0, [2, 3])]) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition assignments for partition 0")
    assert create("wire", -1, -1, {0: []}) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    # validate_only checks the placement and writes nothing.
    assert create("wire", -1, -1, {0: [3, 1, 2]}, validate_only=True) == (ErrorCode.NONE, None)
    assert zk.exists("/brokers/topics/wire") is None
    assert create("wire", -1, -1, {0: [3, 1, 2]}) == (ErrorCode.NONE, None)
    assert _placement(zk, "wire") == {0: [3, 1, 2]}


def test_single_node_keeps_its_check(server_factory) -> None:  # type: ignore[no-untyped-def]
    """A single node still takes only lists that name itself (it is the only broker): unchanged."""
    from confluent_kafka.admin import AdminClient, NewTopic

    server = server_factory()
    admin = AdminClient({"bootstrap.servers": server.bootstrap, "socket.timeout.ms": 5000})
    ok = admin.create_topics([NewTopic("mine", 2, replica_assignment=[[1], [1]])], request_timeout=10)
    ok["mine"].result(timeout=15)
    other = admin.create_topics([NewTopic("theirs", 1, replica_assignment=[[2]])], request_timeout=10)
    name, message = _refusal(other["theirs"])
    assert name == "INVALID_REPLICA_ASSIGNMENT" and "the only broker, 1" in message
