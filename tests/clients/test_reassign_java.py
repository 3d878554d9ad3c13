"""kafka-reassign-partitions through the Java Admin client (issue 14 item 4; ``java/Reassign.java``
makes the tool's calls): an operator adds a node and moves a topic partition and a consumer group's
``__consumer_offsets`` partition onto it, throttled, while a librdkafka (confluent-kafka) group
commits. Checked: the throttle holds the copy to its rate (the move of 10 MB at 1 MB/s cannot finish
in under 4 s; unthrottled it takes well under one), ``--verify`` clears the throttles once the moves
are done, every acknowledged commit is fetched back, the group never rebalances, and the nodes that
lost a replica deleted it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
import pytest

from protocol.hashing import partition_for
from tests.cluster.conftest import running_cluster, wait_for
from tests.cluster.test_replication import _create, _zk
from tests.clients.tools import run_java

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

    from tests.cluster.test_local_cluster import _free_ports

    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         "group.initial.rebalance.delay.ms=0", "replication.quota.window.num=2") as cluster:
        bs = cluster.bootstrap
        _create(cluster, "big", 1, 1, {})
        _create(cluster, "events", 2, 3, {"min.insync.replicas": "2"})
        producer = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=20, batch_size=256 * 1024)
        payload = b"x" * RECORD_BYTES
        for i in range(RECORDS):
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
            new = cluster.add_node(_free_ports(1))
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
