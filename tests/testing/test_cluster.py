"""GroupcoordCluster (coordinator/testing/cluster.py): three nodes on a real ZooKeeper, and the
faults a test injects across them. A kafka-python consumer commits after every batch while its
group's coordinator moves (a real leadership move of the group's offsets partition) or its node is
SIGKILLed and restarted: the coordinator changes, the consumer goes on to the end of the topic,
every record is consumed (nothing skipped) and no acknowledged commit is lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.testing.cluster import GroupcoordCluster, zookeeper_missing
from tests.conftest import wait_for

pytestmark = pytest.mark.timeout(240)

TOPIC = "events"
PARTITIONS = 2
RECORDS = 600


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupcoordCluster]:
    missing = zookeeper_missing()
    if missing is not None:  # a failure saying what to install, never a silent skip
        pytest.fail(missing, pytrace=False)
    with GroupcoordCluster(tmp_path_factory.mktemp("groupcoord") / "cluster") as c:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers, request_timeout_ms=15000)
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})])
        finally:
            admin.close()
        _produce(c, RECORDS)
        yield c


def _produce(cluster: GroupcoordCluster, count: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
    for i in range(count):
        producer.send(TOPIC, b"%d" % i, partition=i % PARTITIONS)
    producer.flush(30)
    producer.close()


def _end_offsets(cluster: GroupcoordCluster) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        ends = consumer.end_offsets([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    finally:
        consumer.close()
    return {tp.partition: offset for tp, offset in ends.items()}


def _committed(cluster: GroupcoordCluster, group: str) -> dict[int, int]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=15000)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == TOPIC}


class Member:
    """A kafka-python consumer in ``group`` on a thread: polls small batches, commits after each.
    ``consumed`` the offsets it received per partition, ``acked`` the position of each
    acknowledged commit in order, ``assignments`` one entry per assignment it got."""

    def __init__(self, cluster: GroupcoordCluster, group: str) -> None:
        self.bootstrap, self.group = cluster.bootstrap_servers, group
        self.consumed: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.assignments: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{group}", daemon=True)

    def __enter__(self) -> Member:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def last_acked(self) -> dict[int, int]:
        return {p: acks[-1] for p, acks in self.acked.items() if acks}

    def _run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener

        assignments = self.assignments

        class Count(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            def on_partitions_assigned(self, got: Any) -> None:
                assignments.append(time.monotonic())

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False,
                                 auto_offset_reset="earliest", session_timeout_ms=30000, heartbeat_interval_ms=1000,
                                 max_poll_records=10, request_timeout_ms=40000, retry_backoff_ms=100)
        consumer.subscribe([TOPIC], listener=Count())
        try:
            # The topic's metadata before the first join: kafka-python 3.0 can otherwise join without
            # it and lose the rejoin's assignment (docs/testing.md, kafka-python).
            while not consumer.partitions_for_topic(TOPIC) and not self._stop.is_set():
                time.sleep(0.05)
            while not self._stop.is_set():
                batch = consumer.poll(timeout_ms=200)
                for tp, records in batch.items():
                    self.consumed[tp.partition] += [r.offset for r in records]
                if not batch:
                    continue
                try:
                    consumer.commit()
                except Exception as exc:  # not acknowledged: it may or may not be there
                    self.errors.append(repr(exc))
                    continue
                for tp in consumer.assignment():
                    self.acked[tp.partition].append(consumer.position(tp))
                time.sleep(0.02)
        finally:
            consumer.close(autocommit=False)


def _check_nothing_lost(member: Member, ends: dict[int, int]) -> None:
    """Every record was consumed, from 0 on, with nothing skipped (a redelivery after a commit
    that was not acknowledged is allowed); the acknowledged commits never went backwards."""
    for p, end in ends.items():
        assert set(member.consumed[p]) == set(range(end)), f"partition {p}: skipped or foreign offsets"
        acks = member.acked[p]
        assert acks == sorted(acks), f"partition {p}: acknowledged commits went backwards: {acks}"


def _run_through(cluster: GroupcoordCluster, group: str, fault: Callable[[], None]) -> Member:
    """A member consumes part of the topic, ``fault`` happens, more records come; returns the
    member once its acknowledged commits reached the end of the topic."""
    with Member(cluster, group) as member:
        wait_for(lambda: sum(member.last_acked().values()) >= 100, 60, "commits acknowledged before the fault")
        at_fault = member.last_acked()
        fault()
        # Every commit acknowledged before the fault is at the coordinator now.
        committed = _committed(cluster, group)
        assert all(committed.get(p, -1) >= offset for p, offset in at_fault.items()), (at_fault, committed)
        _produce(cluster, 200)
        ends = _end_offsets(cluster)
        wait_for(lambda: member.last_acked() == ends, 90, f"commits acknowledged up to the end {ends}")
    assert _committed(cluster, group) == ends
    _check_nothing_lost(member, ends)
    return member


def test_start_gives_a_usable_cluster(cluster: GroupcoordCluster) -> None:
    assert sorted(cluster.nodes) == [1, 2, 3]
    assert all(node.running for node in cluster.nodes.values())
    assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    assert cluster.coordinator_of("any-group") in cluster.nodes
    for node in cluster.nodes.values():
        assert node.faults.list() == []  # each node's fault endpoint answers


def test_move_coordinator_moves_the_group_for_real_and_the_consumer_keeps_committing(
        cluster: GroupcoordCluster) -> None:
    group = "moved-group"
    moves: list[dict[str, Any]] = []
    before: list[int] = []
    moved_at: list[float] = []

    def move() -> None:
        before.append(cluster.coordinator_of(group))
        moved_at.append(time.monotonic())
        moves.append(cluster.faults.move_coordinator(group))

    member = _run_through(cluster, group, move)
    result = moves[0]
    assert result["group"] == group and result["from"] == before[0] and result["to"] != before[0]
    assert cluster.coordinator_of(group) == result["to"]
    # The group's state moved with the partition (the new leader's hot standby): no rejoin.
    assert not [t for t in member.assignments if t > moved_at[0]], "the move made the group rebalance"


def test_crash_restart_of_the_coordinator_node_is_survived(cluster: GroupcoordCluster) -> None:
    group = "crashed-group"
    crashed: list[int] = []

    def crash() -> None:
        crashed.append(cluster.faults.crash_restart(group=group))

    _run_through(cluster, group, crash)
    assert cluster.nodes[crashed[0]].running
    # Some node coordinates the group again (another one, or the restarted one if it came back
    # before the controller saw it gone: its registration waits out its old session).
    assert cluster.coordinator_of(group) in cluster.nodes


def test_crash_restart_needs_a_node_or_a_group(cluster: GroupcoordCluster) -> None:
    with pytest.raises(ValueError, match="node_id= or group="):
        cluster.faults.crash_restart()


def test_zookeeper_missing_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import coordinator.cluster.local_zookeeper as local_zookeeper

    monkeypatch.setattr(local_zookeeper, "DEBIAN_JAR", tmp_path / "no-such.jar")
    monkeypatch.delenv("GROUPCOORD_ZOOKEEPER_CLASSPATH", raising=False)
    message = zookeeper_missing()
    assert message is not None
    assert message.startswith("groupcoord_cluster needs ZooKeeper: install Debian's zookeeper package "
                              "(apt-get install zookeeper)")


def test_move_coordinator_of_an_unknown_group_or_with_timed_windows_is_refused(cluster: GroupcoordCluster) -> None:
    from coordinator.testing.faults import FaultError

    with pytest.raises(FaultError, match="group 'nobody-here' does not exist") as unknown:
        cluster.faults.move_coordinator("nobody-here")
    assert unknown.value.status == 404
    group = "windowed-group"
    with Member(cluster, group) as member:
        wait_for(lambda: member.last_acked(), 60, "a commit acknowledged")
        coordinator = cluster.coordinator_of(group)
        with pytest.raises(FaultError, match="load_ms and not_coordinator_ms apply to a single node") as windowed:
            cluster.faults.move_coordinator(group, load_ms=500)
        assert windowed.value.status == 400
        assert cluster.coordinator_of(group) == coordinator  # nothing moved


def test_request_faults_go_to_every_node_and_clear_on_all(cluster: GroupcoordCluster) -> None:
    with cluster.faults.leader_unavailable(TOPIC, 0, duration_ms=30000) as fault:
        assert sorted(fault.ids) == [1, 2, 3]
        listed = cluster.faults.list()
        assert {node: [f["fault"] for f in faults] for node, faults in listed.items()} == {
            1: ["leader-unavailable"], 2: ["leader-unavailable"], 3: ["leader-unavailable"]}
    assert cluster.faults.list() == {1: [], 2: [], 3: []}
    assert cluster.faults.drop_connections("no-such-client") == {"dropped": 0, "by_node": {1: 0, 2: 0, 3: 0}}
