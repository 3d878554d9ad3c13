"""Partition reassignment (KIP-455; issue 14 item 4): AlterPartitionReassignments and
ListPartitionReassignments. The pure layout rules first, then a real cluster: an operator adds a
node and moves a group's ``__consumer_offsets`` partition (and a topic partition) onto it while
the group commits — no acknowledged commit lost, no rebalance, the node that lost the partition
deletes its replica; then the errors Kafka's controller answers, and a cancellation."""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from coordinator.cluster.plan import finish_reassignment, reassign
from coordinator.cluster.znodes import PartitionState, TopicAssignment, decode_topic, encode_topic
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.hashing import partition_for
from tests.coordinator.cluster.committer import Committer
from tests.coordinator.cluster.conftest import running_cluster, wait_for
from tests.coordinator.cluster.test_replication import _create, _leader, _state, _zk

OFFSETS_PARTITIONS = 3


# --- the layout rules (pure) -----------------------------------------------------------------------

def _topic(**partitions: tuple[int, ...]) -> TopicAssignment:
    return TopicAssignment("t", uuid.UUID(int=7), {int(p[1:]): r for p, r in partitions.items()}, zk_version=4)


def test_a_move_lists_target_then_original_replicas_with_adding_and_removing() -> None:
    moved = reassign(_topic(p0=(1, 2, 3), p1=(2, 3, 1)), 0, (4, 2, 3))
    assert moved.partitions == {0: (4, 2, 3, 1), 1: (2, 3, 1)}
    assert moved.adding == {0: (4,)} and moved.removing == {0: (1,)}
    # The original replicas are the listed ones not being added, in listed order (as in Kafka's
    # ReplicaAssignment: the znode keeps no separate copy of the original order).
    assert moved.target(0) == (4, 2, 3) and moved.original(0) == (2, 3, 1)
    # The znode round-trips as Kafka writes it (v3, string keys, maps only for moving partitions).
    raw = json.loads(encode_topic(moved))
    assert raw["adding_replicas"] == {"0": [4]} and raw["removing_replicas"] == {"0": [1]}
    assert decode_topic("/brokers/topics/t", encode_topic(moved), 9) == TopicAssignment(
        "t", moved.topic_id, moved.partitions, moved.adding, moved.removing, 9)


def test_an_overriding_move_starts_from_the_original_replicas_and_a_cancel_goes_back() -> None:
    first = reassign(_topic(p0=(1, 2)), 0, (3, 4))
    assert first.partitions[0] == (3, 4, 1, 2)
    second = reassign(first, 0, (2, 5))
    assert second.partitions[0] == (2, 5, 1) and second.adding[0] == (5,) and second.removing[0] == (1,)
    cancelled = reassign(first, 0, None)
    assert cancelled.partitions[0] == (1, 2) and 0 not in cancelled.adding and 0 not in cancelled.removing


def test_a_move_finishes_once_every_target_replica_is_in_the_isr() -> None:
    moving = reassign(_topic(p0=(1, 2, 3)), 0, (4, 2, 3))
    live = frozenset({1, 2, 3, 4})
    waiting = PartitionState(1, 5, (1, 2, 3), 1, 10)
    assert finish_reassignment(moving, 0, waiting, live, frozenset(), 2) is None
    caught_up = PartitionState(1, 5, (1, 2, 3, 4), 1, 11)
    done = finish_reassignment(moving, 0, caught_up, live, frozenset(), 2)
    # The old leader is not in the target: the first live target replica in the ISR leads.
    assert done == PartitionState(4, 6, (2, 3, 4), 2)
    kept = finish_reassignment(reassign(_topic(p0=(1, 2, 3)), 0, (2, 4)), 0,
                               PartitionState(2, 5, (1, 2, 3, 4), 1, 11), live, frozenset(), 2)
    assert kept == PartitionState(2, 6, (2, 4), 2)


# --- on a real cluster --------------------------------------------------------------------------------

@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         "group.initial.rebalance.delay.ms=0") as c:
        yield c


def _controller(cluster: LocalCluster) -> int:
    """The controller's id, waiting while there is none (between two controllers)."""
    from kazoo.exceptions import NoNodeError

    zk = _zk(cluster)

    def read() -> int | None:
        try:
            return int(json.loads(zk.get("/controller")[0])["brokerid"])
        except NoNodeError:
            return None

    try:
        return int(wait_for(read, 30, "a controller"))
    finally:
        zk.stop()
        zk.close()


def _alter(cluster: LocalCluster, broker: int, moves: dict[tuple[str, int], list[int] | None],
           version: int = 0, allow_rf_change: bool = True) -> Any:
    from kafka.protocol.admin import AlterPartitionReassignmentsRequest as Req

    from tests.wire_client import WireClient

    by_topic: dict[str, list[Any]] = {}
    for (name, p), replicas in moves.items():
        by_topic.setdefault(name, []).append(Req.ReassignableTopic.ReassignablePartition(
            partition_index=p, replicas=replicas))
    request = Req(version=version, timeout_ms=30000, allow_replication_factor_change=allow_rf_change,
                  topics=[Req.ReassignableTopic(name=n, partitions=ps) for n, ps in by_topic.items()])
    with WireClient(cluster.host, cluster.ports[broker - 1], timeout=30) as c:
        return c.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version, request)


def _alter_errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.responses for p in t.partitions}


def _list(cluster: LocalCluster, broker: int) -> tuple[int, dict[tuple[str, int], tuple[list[int], list[int], list[int]]]]:
    from kafka.protocol.admin import ListPartitionReassignmentsRequest as Req

    from tests.wire_client import WireClient

    with WireClient(cluster.host, cluster.ports[broker - 1], timeout=30) as c:
        response = c.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, Req(version=0, timeout_ms=30000, topics=None))
    return response.error_code, {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
                                 for t in response.topics for p in t.partitions}


def _free_port() -> int:
    from tests.conftest import free_ports

    return free_ports(1)


def test_an_offsets_partition_moves_onto_a_new_node_while_its_group_commits(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient

    _create(cluster, "events", 2, 3, {"min.insync.replicas": "2"})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    for i in range(6000):
        producer.send("events", b"%d" % i, partition=i % 2)
    producer.flush(30)

    group = "moving-group"
    partition = partition_for(group, OFFSETS_PARTITIONS)
    member = Committer(cluster.bootstrap, group, "events", max_poll_records=10, pause_s=0.05).__enter__()
    acked = member.acked
    zk = _zk(cluster)
    try:
        wait_for(lambda: sum(acked.values()) > 200, 60, "commits acknowledged before the move")
        new = cluster.add_node(_free_port())
        wait_for(lambda: zk.exists(f"/brokers/ids/{new}"), 20, "the new node registered")
        old_leader = _leader(cluster, "__consumer_offsets", partition)
        original = json.loads(zk.get("/brokers/topics/__consumer_offsets")[0])["partitions"][str(partition)]
        # The coordinator's node leaves the partition: leadership moves with the data.
        target = [new] + [b for b in original if b != old_leader]
        events_original = json.loads(zk.get("/brokers/topics/events")[0])["partitions"]["0"]
        events_target = [new] + events_original[1:]
        controller = _controller(cluster)
        before_move = dict(acked)
        response = _alter(cluster, controller, {("__consumer_offsets", partition): target, ("events", 0): events_target})
        assert response.error_code == ErrorCode.NONE, response
        assert set(_alter_errors(response).values()) == {ErrorCode.NONE}, response
        # Meanwhile Kafka's layout: target then original replicas, with the adding/removing maps.
        code, moving = _list(cluster, controller)
        assert code == ErrorCode.NONE
        if ("__consumer_offsets", partition) in moving:  # it may already be done
            replicas, adding, removing = moving[("__consumer_offsets", partition)]
            assert replicas == target + [old_leader] and adding == [new] and removing == [old_leader]

        wait_for(lambda: _list(cluster, controller) == (ErrorCode.NONE, {}), 60, "both moves finished")
        topic = json.loads(zk.get("/brokers/topics/__consumer_offsets")[0])
        assert topic["partitions"][str(partition)] == target and topic["adding_replicas"] == {}
        assert topic["removing_replicas"] == {}
        state = _state(zk, "__consumer_offsets", partition)
        assert state["leader"] == new and sorted(state["isr"]) == sorted(target)
        assert json.loads(zk.get("/brokers/topics/events")[0])["partitions"]["0"] == events_target
        # The node that lost the replica deleted it (Kafka's StopReplica with delete).
        wait_for(lambda: not (cluster.directory / f"node-{old_leader}" / f"__consumer_offsets-{partition}").exists(),
                 20, "the removed replica's log deleted")
        assert (cluster.directory / f"node-{new}" / "events-0").is_dir()
        wait_for(lambda: sum(acked.values()) > sum(before_move.values()) + 100, 60,
                 "commits acknowledged by the new coordinator")
    finally:
        member.stop()
        zk.stop()
        zk.close()
        producer.close()

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)
    try:
        committed = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    got = {tp.partition: meta.offset for tp, meta in committed.items()}
    assert got == acked, (got, acked)  # every acknowledged commit is there, none after it
    assert len(member.assigned) == 1, f"{len(member.assigned)} assignments: the move caused a rebalance"
    print(f"{len(member.failures)} commit errors during the move: {member.failures[:3]}")
    # The new node replayed the partition as a follower (hot standby) and took that state over.
    loaded = [line for line in cluster.log_path(new).read_text().splitlines()
              if "coordinator partition loaded" in line and f"partition=__consumer_offsets-{partition} " in line]
    assert loaded and "from_standby=True" in loaded[-1], loaded


def test_errors_as_kafka_answers_them_and_a_cancellation(cluster: LocalCluster) -> None:
    _create(cluster, "t", 2, 2, {})
    controller = _controller(cluster)
    other = next(b for b in (1, 2, 3) if b != controller)
    response = _alter(cluster, other, {("t", 0): [1, 2]})
    assert response.error_code == ErrorCode.NOT_CONTROLLER
    assert _list(cluster, other)[0] == ErrorCode.NOT_CONTROLLER

    errors = _alter_errors(_alter(cluster, controller, {
        ("t", 0): [1, 9], ("t", 1): [2, 2], ("t", 5): [1], ("nope", 0): [1]}))
    assert errors == {("t", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT, ("t", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _alter_errors(_alter(cluster, controller, {("t", 0): None})) == {("t", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    zk = _zk(cluster)
    try:
        # First a plain move, so that the node stopped below is not the controller.
        outsider = next(b for b in (3, 2, 1) if b != controller)
        original = [controller, next(b for b in (1, 2, 3) if b not in (controller, outsider))]
        assert _alter_errors(_alter(cluster, controller, {("t", 0): original})) == {("t", 0): ErrorCode.NONE}
        wait_for(lambda: _list(cluster, controller) == (ErrorCode.NONE, {}), 30, "the first move finished")
        assert json.loads(zk.get("/brokers/topics/t")[0])["partitions"]["0"] == original
        assert _alter_errors(_alter(cluster, controller, {("t", 0): [outsider]}, version=1, allow_rf_change=False)) == {
            ("t", 0): ErrorCode.INVALID_REPLICATION_FACTOR}
        # A move that cannot finish while its new replica is stopped (still registered: its
        # session outlives the request), then cancelled: back to the original replicas at once.
        cluster.procs[outsider].send_signal(signal.SIGSTOP)
        try:
            target = [outsider] + original
            assert _alter_errors(_alter(cluster, controller, {("t", 0): target})) == {("t", 0): ErrorCode.NONE}
            assert _list(cluster, controller) == (ErrorCode.NONE, {("t", 0): (target, [outsider], [])})
            assert _alter_errors(_alter(cluster, controller, {("t", 0): None})) == {("t", 0): ErrorCode.NONE}
            wait_for(lambda: _list(cluster, controller) == (ErrorCode.NONE, {}), 20, "the cancelled move gone")
            assert json.loads(zk.get("/brokers/topics/t")[0])["partitions"]["0"] == original
        finally:
            cluster.procs[outsider].send_signal(signal.SIGCONT)
    finally:
        zk.stop()
        zk.close()


def test_a_move_survives_its_controller_and_a_node_down_deletes_its_stray_replica_on_return(
        cluster: LocalCluster) -> None:
    """Two things a move must outlive: the controller failing mid-move (the next one reads the same
    topic znode and finishes it), and a node that was down while its replica was moved away (it
    deletes the stray log when it comes back, Kafka's stray-log cleanup)."""
    _create(cluster, "m", 1, 1, {})
    zk = _zk(cluster)
    try:
        controller = _controller(cluster)
        others = [b for b in (1, 2, 3) if b != controller]
        # Start on a node that is not the controller, then move toward a stopped node: the move waits.
        assert _alter_errors(_alter(cluster, controller, {("m", 0): [others[0]]})) == {("m", 0): ErrorCode.NONE}
        wait_for(lambda: _list(cluster, controller) == (ErrorCode.NONE, {}), 30, "the first move finished")
        wait_for(lambda: _state(zk, "m", 0)["leader"] == others[0], 20, "m-0 led by its new replica")
        cluster.procs[others[1]].send_signal(signal.SIGSTOP)
        try:
            assert _alter_errors(_alter(cluster, controller, {("m", 0): [others[1]]})) == {("m", 0): ErrorCode.NONE}
            cluster.procs[controller].kill()
            cluster.procs[controller].wait()
            new_controller = wait_for(lambda: (c := _controller(cluster)) != controller and c, 30, "a new controller")
            assert _list(cluster, new_controller)[1] == {("m", 0): ([others[1], others[0]], [others[1]], [others[0]])}
        finally:
            cluster.procs[others[1]].send_signal(signal.SIGCONT)
        wait_for(lambda: _list(cluster, new_controller) == (ErrorCode.NONE, {}), 60, "the move finished by the new controller")
        wait_for(lambda: _state(zk, "m", 0)["leader"] == others[1], 20, "m-0 led by its target")
        wait_for(lambda: not (cluster.directory / f"node-{others[0]}" / "m-0").exists(), 20, "the moved-away replica deleted")

        # A replica moved away while its node is down: the node deletes it when it returns.
        cluster.restart(controller)
        wait_for(lambda: zk.exists(f"/brokers/ids/{controller}"), 20, "the old controller back")
        _create(cluster, "s", 1, 2, {})
        holders = json.loads(zk.get("/brokers/topics/s")[0])["partitions"]["0"]
        down = holders[1]
        spare = next(b for b in (1, 2, 3) if b not in holders)
        wait_for(lambda: (cluster.directory / f"node-{down}" / "s-0").is_dir(), 20, "the replica on disk")
        wait_for(lambda: sorted(_state(zk, "s", 0)["isr"]) == sorted(holders), 20, "both replicas in the ISR")
        cluster.procs[down].kill()
        cluster.procs[down].wait()
        wait_for(lambda: down not in _state(zk, "s", 0)["isr"], 30, "the dead replica out of the ISR")
        mover = _controller(cluster)
        wait_for(lambda: _alter_errors(_alter(cluster, mover, {("s", 0): [holders[0], spare]})) == {("s", 0): ErrorCode.NONE},
                 20, "the move accepted")
        wait_for(lambda: _list(cluster, mover) == (ErrorCode.NONE, {}), 30, "moved away from the dead node")
        assert (cluster.directory / f"node-{down}" / "s-0").is_dir()  # it was down: nothing deleted it
        cluster.restart(down)
        wait_for(lambda: not (cluster.directory / f"node-{down}" / "s-0").exists(), 30, "the stray replica deleted")
        assert "stray replica deleted" in cluster.log_path(down).read_text()
    finally:
        zk.stop()
        zk.close()
