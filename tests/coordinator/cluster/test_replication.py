"""Replication on a real cluster: ZooKeeper and three node processes, stock clients, SIGKILL.

What is checked (reference/cluster_replication.md §2-3, §9 scenario 3): partition states in
ZooKeeper as Kafka writes them; every acknowledged acks=all record is read back at the offset it
was acknowledged with, after the leader is SIGKILLed under load; a new leader serves within the
session timeout plus a second; followers hold the same bytes as the leader; acks=all is refused
below min.insync.replicas.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.coordinator.cluster.conftest import SESSION_MS, running_cluster, wait_for
from tests.wire_client import WireClient

pytestmark = pytest.mark.timeout(240)



@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", "replica.lag.time.max.ms=10000") as c:
        yield c


def _zk(cluster: LocalCluster) -> Any:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zookeeper.connect, timeout=10.0)
    client.start(timeout=10)
    return client


def _state(zk: Any, topic: str, partition: int) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return json.loads(data)


def _create(cluster: LocalCluster, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, partitions, rf, topic_configs=configs)])
    finally:
        admin.close()


def _read_all(cluster: LocalCluster, topic: str, partitions: int, expected: int, timeout: float = 30.0) -> dict[tuple[int, int], bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=3000, request_timeout_ms=20000)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < expected:
        for message in consumer:
            got[(message.partition, message.offset)] = message.value
    consumer.close()
    return got


def test_rf3_topic_is_in_zookeeper_as_kafka_writes_it_and_replicas_are_identical(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer

    _create(cluster, "r3", 2, 3, {"min.insync.replicas": "2"})
    zk = _zk(cluster)
    try:
        topic = json.loads(zk.get("/brokers/topics/r3")[0])
        assert topic["version"] == 3 and len(topic["topic_id"]) == 22
        assert sorted(topic["partitions"]) == ["0", "1"]
        assert all(sorted(r) == [1, 2, 3] for r in topic["partitions"].values())
        assert json.loads(zk.get("/config/topics/r3")[0]) == {"version": 1, "config": {"min.insync.replicas": "2"}}
        for p in (0, 1):
            state = _state(zk, "r3", p)
            assert state["version"] == 1 and state["leader"] == topic["partitions"][str(p)][0]
            assert state["leader_epoch"] == 0 and sorted(state["isr"]) == [1, 2, 3]
            assert state["controller_epoch"] >= 1
    finally:
        zk.stop()
        zk.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    for i in range(300):
        producer.send("r3", b"value-%d" % i, partition=i % 2)
    producer.flush(30)
    producer.close()
    got = _read_all(cluster, "r3", 2, 300)
    assert sorted(got.values()) == sorted(b"value-%d" % i for i in range(300))

    def segments(broker_id: int, p: int) -> bytes:
        d = cluster.directory / f"node-{broker_id}" / f"r3-{p}"
        return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))

    for p in (0, 1):
        # Followers copy the leader's batches byte for byte (offsets and leader epochs included).
        wait_for(lambda p=p: segments(1, p) == segments(2, p) == segments(3, p) and segments(1, p),
                 20, f"identical replicas of r3-{p}")
        epochs = {(cluster.directory / f"node-{b}" / f"r3-{p}" / "leader-epoch-checkpoint").read_text() for b in (1, 2, 3)}
        assert epochs == {"0\n1\n0 0\n"}


def _leader(cluster: LocalCluster, topic: str, partition: int) -> int:
    zk = _zk(cluster)
    try:
        return int(_state(zk, topic, partition)["leader"])
    finally:
        zk.stop()
        zk.close()


def test_every_acknowledged_record_survives_sigkill_of_the_leader_under_load(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer

    _create(cluster, "kill", 1, 3, {"min.insync.replicas": "2"})
    leader = _leader(cluster, "kill", 0)
    acked: dict[int, bytes] = {}
    ack_times: list[float] = []
    stop = threading.Event()
    errors: list[str] = []

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=2**31 - 1,
                                 max_in_flight_requests_per_connection=1, request_timeout_ms=5000,
                                 retry_backoff_ms=50, metadata_max_age_ms=1000)
        i = 0
        while not stop.is_set():
            value = b"v%d" % i
            try:
                meta = producer.send("kill", value, partition=0).get(timeout=30)
            except Exception as exc:  # an unacknowledged record may or may not be there
                errors.append(repr(exc))
                continue
            finally:
                i += 1
            acked[meta.offset] = value
            ack_times.append(time.monotonic())
        producer.close()

    thread = threading.Thread(target=produce)
    thread.start()
    wait_for(lambda: len(acked) > 200, 30, "200 acknowledged records before the kill")
    killed_at = time.monotonic()
    cluster.procs[leader].kill()
    wait_for(lambda: any(t > killed_at + 0.05 for t in ack_times) and _leader(cluster, "kill", 0) != leader,
             SESSION_MS / 1000 + 20, "an acknowledged write on the new leader")
    first_after = min(t for t in ack_times if t > killed_at + 0.05)
    served_after = first_after - killed_at
    count_at_kill = len(acked)
    wait_for(lambda: len(acked) > count_at_kill + 200, 30, "more acknowledged records on the new leader")
    cluster.restart(leader)
    wait_for(lambda: len(acked) > count_at_kill + 400, 30, "records acknowledged with the old leader back")
    stop.set()
    thread.join(60)
    got = _read_all(cluster, "kill", 1, len(acked))
    missing = {o: v for o, v in acked.items() if got.get((0, o)) != v}
    assert not missing, f"{len(missing)} acknowledged records not at their offsets, e.g. {sorted(missing)[:5]}"
    # Served again within the session timeout plus a second (the bound), measured.
    print(f"served again {served_after:.2f} s after SIGKILL; {len(acked)} acknowledged, {len(errors)} errors")
    assert served_after < SESSION_MS / 1000 + 1 + 1.0, served_after
    # The old leader truncated what it alone had and now follows: back in the ISR.
    zk = _zk(cluster)
    try:
        wait_for(lambda: leader in _state(zk, "kill", 0)["isr"], 30, "the restarted node back in the ISR")
    finally:
        zk.stop()
        zk.close()


def test_acks_all_is_refused_below_min_insync_replicas(cluster: LocalCluster) -> None:
    from kafka.protocol.producer import ProduceRequest

    from tests.coordinator.topics.test_hosted_topics import batch

    _create(cluster, "minisr", 1, 2, {"min.insync.replicas": "2"})
    leader = _leader(cluster, "minisr", 0)
    zk = _zk(cluster)
    try:
        follower = next(r for r in _state(zk, "minisr", 0)["isr"] if r != leader)
        cluster.procs[follower].kill()
        # The controller removes the dead follower from the ISR once its session expires.
        wait_for(lambda: _state(zk, "minisr", 0)["isr"] == [leader], SESSION_MS / 1000 + 15, "ISR shrunk to the leader")
    finally:
        zk.stop()
        zk.close()
    host, port = cluster.host, cluster.ports[leader - 1]
    P = ProduceRequest.TopicProduceData
    with WireClient(host, port) as c:
        from kafka.protocol.metadata import MetadataRequest

        def leader_sees_isr_of_one() -> bool:
            # ZooKeeper has the shrunk ISR a moment before the leader's watch delivers it.
            md = c.request(ApiKey.METADATA, 9, MetadataRequest(
                version=9, topics=[MetadataRequest.MetadataRequestTopic(name="minisr")],
                allow_auto_topic_creation=False, include_topic_authorized_operations=False))
            return list(md.topics[0].partitions[0].isr_nodes) == [leader]

        wait_for(leader_sees_isr_of_one, 10, "the leader's view of the ISR")
        def produce(acks: int) -> Any:
            req = ProduceRequest(version=9, transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
                P(name="minisr", partition_data=[P.PartitionProduceData(index=0, records=batch([b"x"]))])])
            return c.request(ApiKey.PRODUCE, 9, req).responses[0].partition_responses[0]

        answers = []

        def refused() -> bool:
            # Never NONE. The first try may still meet the old ISR for a moment (the apply loop
            # runs just after the view): then the write waits and fails after the append
            # (NOT_ENOUGH_REPLICAS_AFTER_APPEND or REQUEST_TIMED_OUT), as Kafka's would.
            answers.append(produce(-1).error_code)
            assert answers[-1] != ErrorCode.NONE, answers
            return answers[-1] == ErrorCode.NOT_ENOUGH_REPLICAS

        wait_for(refused, 20, "acks=all refused with NOT_ENOUGH_REPLICAS")
        assert produce(1).error_code == ErrorCode.NONE  # acks=1 needs only the leader


def test_a_zombie_leader_resumed_after_its_session_expired_acknowledges_nothing(cluster: LocalCluster) -> None:
    """SIGSTOP the leader past the session timeout, produce to it (the request waits in its socket),
    SIGCONT: the write must not be acknowledged, and no replica keeps it (§9 scenario 5)."""
    import signal

    from kafka.protocol.producer import ProduceRequest

    from tests.coordinator.topics.test_hosted_topics import batch

    _create(cluster, "zombie", 1, 3, {"min.insync.replicas": "2"})
    leader = _leader(cluster, "zombie", 0)
    P = ProduceRequest.TopicProduceData

    def request(value: bytes) -> Any:
        return ProduceRequest(version=9, transactional_id=None, acks=-1, timeout_ms=3000, topic_data=[
            P(name="zombie", partition_data=[P.PartitionProduceData(index=0, records=batch([value]))])])

    with WireClient(cluster.host, cluster.ports[leader - 1], timeout=30) as c:
        # The leader may apply its state a moment after CreateTopics answered (from another node).
        wait_for(lambda: c.request(ApiKey.PRODUCE, 9, request(b"before")).responses[0].partition_responses[0]
                 .error_code == 0, 10, "the leader accepting writes")
        cluster.procs[leader].send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: _leader(cluster, "zombie", 0) not in (leader, -1), SESSION_MS / 1000 + 15,
                     "a new leader elected while the old one is stopped")
            correlation = c.send(ApiKey.PRODUCE, 9, request(b"zombie-write"))
        finally:
            cluster.procs[leader].send_signal(signal.SIGCONT)
        from tests.wire_client import decode_response

        got, response = decode_response(ApiKey.PRODUCE, 9, c.read_frame())
        assert got == correlation
        answer = response.responses[0].partition_responses[0]
        print("zombie answered", ErrorCode(answer.error_code).name)
        assert answer.error_code != ErrorCode.NONE, answer
    zk = _zk(cluster)
    try:
        wait_for(lambda: leader in _state(zk, "zombie", 0)["isr"], 40, "the old leader back in the ISR as a follower")
    finally:
        zk.stop()
        zk.close()
    got_records = _read_all(cluster, "zombie", 1, 1, timeout=10)
    assert b"zombie-write" not in got_records.values()
    assert b"before" in got_records.values()
    # The old leader truncated the write only it had: its log equals the new leader's.
    new_leader = _leader(cluster, "zombie", 0)

    def log_bytes(broker_id: int) -> bytes:
        d = cluster.directory / f"node-{broker_id}" / "zombie-0"
        return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))

    wait_for(lambda: log_bytes(leader) == log_bytes(new_leader), 20, "the zombie's log equal to the new leader's")
    assert b"zombie-write" not in log_bytes(leader)


def test_controlled_shutdown_hands_leadership_over_before_the_node_stops(cluster: LocalCluster) -> None:
    """SIGTERM (controlled.shutdown.enable=true): the leader moves away while the node still
    serves, it leaves the ISRs, and a producer at acks=all loses no send and waits far less than a
session timeout for the new leader (§9 scenario 2)."""
    from kafka import KafkaProducer

    _create(cluster, "bounce", 1, 3, {"min.insync.replicas": "2"})
    leader = _leader(cluster, "bounce", 0)
    acked: list[int] = []
    times: list[float] = []
    errors: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=10,
                                 retry_backoff_ms=20, max_in_flight_requests_per_connection=1,
                                 request_timeout_ms=5000)
        i = 0
        while not stop.is_set():
            try:
                acked.append(producer.send("bounce", b"%d" % i, partition=0).get(timeout=10).offset)
                times.append(time.monotonic())
            except Exception as exc:
                errors.append(repr(exc))
            i += 1
        producer.close()

    thread = threading.Thread(target=produce)
    thread.start()
    wait_for(lambda: len(acked) > 100, 30, "records acknowledged before the shutdown")
    proc = cluster.procs[leader]
    stopped_at = time.monotonic()
    proc.terminate()
    assert proc.wait(30) == 0
    count = len(acked)
    wait_for(lambda: len(acked) > count + 100, 30, "records acknowledged by the new leader")
    stop.set()
    thread.join(30)
    zk = _zk(cluster)
    try:
        state = _state(zk, "bounce", 0)
    finally:
        zk.stop()
        zk.close()
    assert state["leader"] != leader and leader not in state["isr"]
    assert errors == [], errors[:3]
    around = [b - a for a, b in itertools.pairwise(times) if b > stopped_at - 1]
    print(f"longest pause between acknowledgements around the shutdown: {max(around):.3f} s")
    assert max(around) < 1.0  # a hard kill pauses for the session timeout (4 s here)
