"""kafka-reassign-partitions through the Java Admin client (issue 14 item 4; ``java/Reassign.java``
makes the tool's calls).

1. An operator adds a node and moves a topic partition and a consumer group's
   ``__consumer_offsets`` partition onto it, throttled, while a librdkafka (confluent-kafka) group
   commits. Checked: the throttle holds the copy to its rate (the move of 10 MB at 1 MB/s cannot
   finish in under 4 s; unthrottled it takes well under one), ``--verify`` clears the throttles
   once the moves are done, every acknowledged commit is fetched back, the group never
   rebalances, and the nodes that lost a replica deleted it.
2. A Java 3.9.1 consumer group (two ``java/GroupConsumer.java`` members, commitSync after every
   poll) commits all along while its ``__consumer_offsets`` partition is moved, unthrottled, off
   its coordinator's node onto a newly added node 4, which then leads it. Checked: the move
   completes (ListPartitionReassignments empty, replicas and leader as requested), the old
   coordinator deletes its replica, the Java Admin client finds the group Stable on node 4 with
   every commit acknowledged so far, no commit fails, no member sees an assignment change, no
   record is consumed twice, and the final committed offsets are the log end.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.hashing import partition_for
from tests.clients.group_scenario import (
    P,
    all_consumed,
    check_exactly_once,
    ctx,
    produce,
    start_member,
    uid,
    wait_stable,
    wait_until,
)
from tests.clients.test_groups_admin_java import describe, offsets
from tests.clients.tools import run_java
from tests.coordinator.cluster.conftest import running_cluster, wait_for
from tests.coordinator.cluster.fault_tools import bad_log_lines
from tests.coordinator.cluster.test_replication import _create, _leader, _zk

pytestmark = [pytest.mark.clients, pytest.mark.timeout(300)]

OFFSETS_PARTITIONS = 3
RATE = 1_000_000  # bytes per second
RECORDS, RECORD_BYTES = 10_000, 1000


def reassign(bootstrap: str, *args: str) -> list[str]:
    res = run_java("Reassign", [bootstrap, *args], timeout=90).check()
    lines = res.stdout.splitlines()
    assert lines and lines[-1] == "OK", f"Reassign {args}: {res.describe()}"
    return lines[:-1]


def _committer(bootstrap: str, group: str, acked: dict[int, int], assigned: list[float], failures: list[str],
               stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 30000,
                         "heartbeat.interval.ms": 1000})
    consumer.subscribe(["events"], on_assign=lambda c, ps: assigned.append(time.monotonic()))
    try:
        while not stop.is_set():
            msgs = consumer.consume(20, 0.2)
            if not msgs:
                continue
            positions = {}
            for m in msgs:
                if m.error() is None:
                    positions[m.partition()] = m.offset() + 1
            try:
                committed = consumer.commit(asynchronous=False)
            except KafkaException as exc:  # not acknowledged: may or may not be there
                failures.append(repr(exc))
                continue
            for tp in committed or ():
                if tp.error is None and tp.offset >= 0:
                    acked[tp.partition] = tp.offset
            time.sleep(0.05)
    finally:
        consumer.close()


def test_kafka_reassign_partitions_with_a_throttle_through_the_java_admin_client(tmp_path: Path) -> None:
    from kafka import KafkaProducer

    from tests.conftest import free_ports

    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         "group.initial.rebalance.delay.ms=0", "replication.quota.window.num=2") as cluster:
        bs = cluster.bootstrap
        _create(cluster, "big", 1, 1, {})
        _create(cluster, "events", 2, 3, {"min.insync.replicas": "2"})
        producer = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=20, batch_size=256 * 1024)
        payload = b"x" * RECORD_BYTES
        for _ in range(RECORDS):
            producer.send("big", payload)
        for i in range(3000):
            producer.send("events", b"%d" % i, partition=i % 2)
        producer.flush(60)
        producer.close()

        group = "reassigned-group"
        partition = partition_for(group, OFFSETS_PARTITIONS)
        acked: dict[int, int] = {}
        assigned: list[float] = []
        failures: list[str] = []
        stop = threading.Event()
        thread = threading.Thread(target=_committer, args=(bs, group, acked, assigned, failures, stop))
        thread.start()
        zk = _zk(cluster)
        try:
            wait_for(lambda: sum(acked.values()) > 100, 60, "commits acknowledged before the move")
            new = cluster.add_node(free_ports(1))
            wait_for(lambda: zk.exists(f"/brokers/ids/{new}"), 20, "the new node registered")
            big_from = json.loads(zk.get("/brokers/topics/big")[0])["partitions"]["0"]
            offsets_from = json.loads(zk.get("/brokers/topics/__consumer_offsets")[0])["partitions"][str(partition)]
            coordinator = json.loads(zk.get(f"/brokers/topics/__consumer_offsets/partitions/{partition}/state")[0])["leader"]
            offsets_to = [new] + [b for b in offsets_from if b != coordinator]
            moves = [f"big:0={new}", f"__consumer_offsets:{partition}={','.join(map(str, offsets_to))}"]
            before = sum(acked.values())
            started = time.monotonic()
            out = reassign(bs, "execute", str(RATE), *moves)
            assert sorted(out) == sorted([f"R __consumer_offsets {partition} NONE", "R big 0 NONE"]), out
            # The throttles are in force where the tool put them.
            assert reassign(bs, "broker-config", str(new), "follower.replication.throttled.rate") == [
                f"C {RATE} DYNAMIC_BROKER_CONFIG"]
            assert reassign(bs, "topic-config", "big", "follower.replication.throttled.replicas") == [
                f"C 0:{new} DYNAMIC_TOPIC_CONFIG"]
            listed = reassign(bs, "list")
            assert f"L big 0 replicas={new},{big_from[0]} adding={new} removing={big_from[0]}" in listed, listed
            tps = ["big:0", f"__consumer_offsets:{partition}"]
            while reassign(bs, "verify", *tps) != ["COMPLETE"]:
                assert time.monotonic() - started < 120, "the moves did not finish within 120 s"
                time.sleep(0.5)
            took = time.monotonic() - started
            print(f"moved {RECORDS * RECORD_BYTES / 1e6:.0f} MB at {RATE / 1e6:.0f} MB/s in {took:.1f} s")
            # 10 MB at 1 MB/s over a 2 s window: a burst of one window, then the rate.
            assert took >= 4.0, f"the throttled move took {took:.1f} s: the throttle did not hold"
            # --verify cleared the throttles.
            assert reassign(bs, "broker-config", str(new), "follower.replication.throttled.rate")[0].endswith(
                "DEFAULT_CONFIG")
            assert reassign(bs, "topic-config", "big", "leader.replication.throttled.replicas") == ["C  DEFAULT_CONFIG"]
            assert reassign(bs, "describe", "big") == [f"P 0 leader={new} replicas={new} isr={new}"]
            wait_for(lambda: not (cluster.directory / f"node-{big_from[0]}" / "big-0").exists(), 20,
                     "the old replica of big-0 deleted")
            wait_for(lambda: not (cluster.directory / f"node-{coordinator}" / f"__consumer_offsets-{partition}").exists(),
                     20, "the old coordinator's replica deleted")
            assert json.loads(zk.get(f"/brokers/topics/__consumer_offsets/partitions/{partition}/state")[0])[
                "leader"] == new
            wait_for(lambda: sum(acked.values()) > before + 50, 60, "commits acknowledged by the new coordinator")
        finally:
            stop.set()
            thread.join(60)
            zk.stop()
            zk.close()

        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000)
        try:
            committed = admin.list_group_offsets(group)[group]
        finally:
            admin.close()
        got = {tp.partition: meta.offset for tp, meta in committed.items()}
        assert got == acked, (got, acked)  # every acknowledged commit fetched back
        assert len(assigned) == 1, f"{len(assigned)} assignments: the move caused a rebalance"
        print(f"{len(failures)} commit errors during the move: {failures[:3]}")
        # No ERROR line on any node (bad input would show there first).
        for b in range(1, new + 1):
            errors = [ln for ln in cluster.log_path(b).read_text().splitlines() if "level=ERROR" in ln]
            assert not errors, errors[:5]


# --- a Java consumer group through a move of its offsets partition ---------------------------------

#: The Java members' session: far longer than the move, so none can be expired by it.
JAVA_SESSION_MS = 20000
FIRST = 1200  # records produced before the members start (P partitions, FIRST // P each)


def _node_logs(cluster: LocalCluster) -> SimpleNamespace:
    """For ``ctx()``: ``log_text()`` gives every node's log tail, the added node's included."""
    return SimpleNamespace(log_text=lambda: "\n".join(
        f"[node {b}] {line}" for b in range(1, len(cluster.ports) + 1)
        for line in cluster.log_path(b).read_text(errors="replace").splitlines()[-15:]))


class _Load(threading.Thread):
    """Produces 6 records per partition every 0.3 s (about 200 a second), so the members always
    have records to consume and commit, until stopped; ``produced`` counts the records acknowledged."""

    def __init__(self, bootstrap: str, topic: str, start: int) -> None:
        super().__init__(name="load", daemon=True)
        self.bootstrap, self.topic, self.produced, self.start_at = bootstrap, topic, 0, start
        self.stop_event = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.wait(0.3):
                produce(self.bootstrap, self.topic, self.start_at + self.produced, 6 * P)
                self.produced += 6 * P
        except Exception as exc:  # reported by the test
            self.error = repr(exc)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(60)


def _acked(members: list, since: dict[str, int] | None = None) -> dict[int, int]:  # type: ignore[type-arg]
    """The highest acknowledged commit per partition over the members' ``C`` lines (after
    ``since[name]``, if given)."""
    out: dict[int, int] = {}
    for m in members:
        for tag, rest in m.events()[(since or {}).get(m.name, 0):]:
            if tag == "C":
                p, o = map(int, rest.split())
                out[p] = max(out.get(p, 0), o)
    return out


def test_a_java_group_commits_through_a_move_of_its_offsets_partition_onto_a_new_node(tmp_path: Path) -> None:
    from tests.conftest import free_ports

    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         "group.initial.rebalance.delay.ms=0") as cluster:
        bs = cluster.bootstrap
        topic, group = uid("rj-t"), uid("rj-g")
        partition = partition_for(group, OFFSETS_PARTITIONS)
        _create(cluster, topic, P, 3, {"min.insync.replicas": "2"})
        produce(bs, topic, 0, FIRST)
        members = [start_member("java", f"m{i}", bs, topic, group, "range", tmp_path, session_ms=JAVA_SESSION_MS)
                   for i in range(2)]
        logs = _node_logs(cluster)
        load = _Load(bs, topic, FIRST)
        try:
            assert wait_until(lambda: all_consumed(members, FIRST), 90), ctx(members, logs)
            assert wait_stable(members, 30), ctx(members, logs)
            marks = {m.name: m.mark() for m in members}
            load.start()
            zk = _zk(cluster)
            try:
                new = cluster.add_node(free_ports(1))
                wait_for(lambda: zk.exists(f"/brokers/ids/{new}"), 20, "the new node registered")
                coordinator = _leader(cluster, "__consumer_offsets", partition)
                original = json.loads(zk.get("/brokers/topics/__consumer_offsets")[0])["partitions"][str(partition)]
            finally:
                zk.stop()
                zk.close()
            # The coordinator's node leaves the partition and node 4 comes first: the controller
            # makes the first target replica in the ISR the leader once the move is done.
            target = [new] + [b for b in original if b != coordinator]
            # The members are committing when the move starts.
            before = _acked(members)
            assert wait_until(lambda: _acked(members) != before, 20), "no commit acknowledged before the move\n" + \
                ctx(members, logs)
            started = time.monotonic()
            moving = {m.name: m.mark() for m in members}
            move = f"__consumer_offsets:{partition}={','.join(map(str, target))}"
            assert reassign(bs, "execute", "-1", move) == [f"R __consumer_offsets {partition} NONE"]
            while (listed := reassign(bs, "list")) != []:
                assert time.monotonic() - started < 60, f"the move did not finish within 60 s: {listed}\n" + \
                    ctx(members, logs)
                time.sleep(0.3)
            took = time.monotonic() - started
            done = {m.name: m.mark() for m in members}
            described = [ln for ln in reassign(bs, "describe", "__consumer_offsets") if ln.startswith(f"P {partition} ")]
            fields = dict(kv.split("=") for kv in described[0].split()[2:]) if len(described) == 1 else {}
            assert fields.get("leader") == str(new) and fields.get("replicas") == ",".join(map(str, target)) and \
                sorted(fields.get("isr", "").split(",")) == sorted(map(str, target)), described
            wait_for(lambda: not (cluster.directory / f"node-{coordinator}" / f"__consumer_offsets-{partition}").exists(),
                     20, f"node {coordinator} (the old coordinator) deleted its replica")
            # Every commit acknowledged until now is there, answered by the new coordinator (the
            # Java Admin client's FindCoordinator + OffsetFetch).
            acked = _acked(members)
            head, _ = describe(bs, group)
            assert head["coordinator"] == str(new) and head["state"] == "Stable" and head["members"] == "2", head
            got = offsets(bs, group)
            lost = {p: (got.get(p), o) for p, o in acked.items() if got.get(p, -1) < o}
            assert not lost, f"acknowledged commits not fetched back after the move (partition: (got, acked)): " \
                             f"{lost}\n" + ctx(members, logs)
            # The members go on committing, to the new coordinator.
            assert wait_until(lambda: len(_acked(members, done)) == P, 30), \
                f"not every partition committed after the move: {_acked(members, done)}\n" + ctx(members, logs)
            load.stop()
            assert load.error is None, load.error
            total = FIRST + load.produced
            assert wait_until(lambda: all_consumed(members, total), 60), ctx(members, logs)
            # No rebalance: no assignment change since the group was stable; and no failed commit
            # (commitSync retries NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS itself: a failure
            # would come from a rebalance or a coordinator that lost the member).
            since = {m.name: [e for e in m.events()[marks[m.name]:] if e[0] in ("A", "REV", "LOST", "CF")]
                     for m in members}
            assert not any(since.values()), f"assignment changes or failed commits across the move: {since}\n" + \
                ctx(members, logs)
            check_exactly_once(members, total, lambda p, o, who: False, ctx(members, logs))
            for m in members:
                m.request_stop()
            for m in members:
                assert m.bg.wait(30) is not None, ctx(members, logs)
            final = offsets(bs, group)
            assert final == {p: total // P for p in range(P)}, f"final committed offsets {final}, " \
                f"{total // P} per partition produced\n" + ctx(members, logs)
            assert final == _acked(members), f"final committed {final}, last acknowledged {_acked(members)}"
            bad = bad_log_lines(cluster, range(1, new + 1))
            assert not bad, bad[:5]
            commits = sum(1 for m in members for e in m.events()[marks[m.name]:] if e[0] == "C")
            during = sum(1 for m in members for e in m.events()[moving[m.name]:done[m.name]] if e[0] == "C")
            print(f"move of __consumer_offsets-{partition} {original} -> {target} took {took:.1f} s; "
                  f"{commits} partition commits acknowledged since the group was stable, {during} while it moved; "
                  f"{total} records")
        finally:
            if load.is_alive():
                load.stop()
            ctx(members, logs)
            for m in members:
                if m.alive():
                    m.kill()
