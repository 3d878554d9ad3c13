"""Faults around the cluster's coordination: ZooKeeper restarted, the controller SIGKILLed together
with the leaders it held, a follower whose log tail was torn by a crash (§9 scenarios 4, 7, 11)."""

from __future__ import annotations

import json
import time

from coordinator.cluster.local_cluster import LocalCluster
from tests.coordinator.cluster.conftest import wait_for
from tests.coordinator.cluster.test_replication import SESSION_MS, _create, _leader, _read_all, _state, _zk
from tests.coordinator.cluster.test_replication import cluster as cluster  # noqa: F401  (the fixture)


def _metadata_controller(cluster: LocalCluster, broker: int) -> int:
    from kafka.protocol.metadata import MetadataRequest

    from protocol.apis import ApiKey
    from tests.wire_client import WireClient

    with WireClient(cluster.host, cluster.ports[broker - 1]) as c:
        return int(c.request(ApiKey.METADATA, 9, MetadataRequest(version=9, topics=[], allow_auto_topic_creation=False,
                                                                 include_topic_authorized_operations=False)).controller_id)


def test_zookeeper_restarted_within_the_session_timeout_changes_no_leader(cluster: LocalCluster) -> None:  # noqa: F811
    """ZooKeeper down for less than the session timeout: the sessions survive (SUSPENDED then
    CONNECTED), no leadership moves, leaders keep acknowledging acks=all writes meanwhile, and
    Metadata says the controller is unknown while a node is cut off."""
    from kafka import KafkaProducer

    _create(cluster, "zkdown", 1, 3, {"min.insync.replicas": "2"})
    zk = _zk(cluster)
    before = _state(zk, "zkdown", 0)
    zk.stop()
    zk.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", request_timeout_ms=5000)
    producer.send("zkdown", b"before", partition=0).get(timeout=20)
    cluster.zookeeper.stop()
    try:
        # Acknowledged while ZooKeeper is away: replication needs no ZooKeeper.
        assert producer.send("zkdown", b"during", partition=0).get(timeout=10).offset == 1
        leader = before["leader"]
        wait_for(lambda: _metadata_controller(cluster, leader) == -1, SESSION_MS / 1000, "Metadata: controller unknown")
    finally:
        time.sleep(0.5)
        cluster.zookeeper.start()
    zk = _zk(cluster)
    try:
        wait_for(lambda: _metadata_controller(cluster, before["leader"]) > 0, 20, "Metadata: controller known again")
        assert producer.send("zkdown", b"after", partition=0).get(timeout=20).offset == 2
        after = _state(zk, "zkdown", 0)
        assert (after["leader"], after["leader_epoch"]) == (before["leader"], before["leader_epoch"])
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
    finally:
        zk.stop()
        zk.close()
        producer.close()
    assert sorted(_read_all(cluster, "zkdown", 1, 3).values()) == [b"after", b"before", b"during"]


def test_sigkill_of_the_controller_elects_another_and_its_partitions_get_leaders(cluster: LocalCluster) -> None:  # noqa: F811
    """Exactly one controller afterwards, /controller_epoch + 1, and the partitions the dead node
    led are led again by ISR members at a new leader epoch."""
    _create(cluster, "ctl", 3, 3, {"min.insync.replicas": "2"})
    zk = _zk(cluster)
    try:
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
        epoch = int(zk.get("/controller_epoch")[0])
        led = {p: _state(zk, "ctl", p) for p in range(3) if _state(zk, "ctl", p)["leader"] == controller}
        assert led, "the test needs the controller to lead a partition (assignment is round-robin)"
        cluster.procs[controller].kill()
        def new_controller() -> bool:
            from kazoo.exceptions import NoNodeError

            try:  # the znode may go between a check and a read (the dead node's session expiring)
                return json.loads(zk.get("/controller")[0])["brokerid"] != controller
            except NoNodeError:
                return False

        wait_for(new_controller, SESSION_MS / 1000 + 15, "a new controller")
        assert int(zk.get("/controller_epoch")[0]) == epoch + 1
        for p, old in led.items():
            wait_for(lambda p=p: _state(zk, "ctl", p)["leader"] not in (controller, -1), 15, f"a new leader for ctl-{p}")
            new = _state(zk, "ctl", p)
            assert new["leader"] in old["isr"] and new["leader_epoch"] == old["leader_epoch"] + 1
            assert controller not in new["isr"]
            assert new["controller_epoch"] == epoch + 1
    finally:
        zk.stop()
        zk.close()


def test_a_follower_with_a_torn_log_tail_recovers_and_converges(cluster: LocalCluster) -> None:  # noqa: F811
    """SIGKILL a follower, tear the tail of its active segment (a crash mid-write), restart: it
    recovers to its last whole batch, fetches the rest, rejoins the ISR, and holds the same bytes
    as the leader."""
    from kafka import KafkaProducer

    _create(cluster, "torn", 1, 3, {"min.insync.replicas": "2"})
    leader = _leader(cluster, "torn", 0)
    follower = next(b for b in (1, 2, 3) if b != leader)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    for i in range(500):
        producer.send("torn", b"r%d" % i, partition=0)
    producer.flush(30)
    directory = cluster.directory / f"node-{follower}" / "torn-0"

    def log_bytes(broker: int) -> bytes:
        d = cluster.directory / f"node-{broker}" / "torn-0"
        return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))

    wait_for(lambda: log_bytes(follower) == log_bytes(leader), 20, "the follower caught up")
    cluster.procs[follower].kill()
    cluster.procs[follower].wait()
    segment = sorted(directory.glob("*.log"))[-1]
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size - 37)  # a torn last batch
    for i in range(500, 700):
        producer.send("torn", b"r%d" % i, partition=0)
    producer.flush(30)
    producer.close()
    cluster.restart(follower)
    zk = _zk(cluster)
    try:
        wait_for(lambda: follower in _state(zk, "torn", 0)["isr"], 40, "the follower back in the ISR")
    finally:
        zk.stop()
        zk.close()
    wait_for(lambda: log_bytes(follower) == log_bytes(leader), 20, "identical logs")
    values = _read_all(cluster, "torn", 1, 700)
    assert sorted(values) == [(0, o) for o in range(700)]
