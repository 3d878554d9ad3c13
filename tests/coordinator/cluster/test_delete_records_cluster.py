"""DeleteRecords on a 3-node cluster: the leader answers once every follower in the ISR has taken
the new log start (Kafka's DelayedDeleteRecords), so the records stay deleted when the leader is
SIGKILLed and a follower takes over."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from storage.files import LOG_START_OFFSET_FILE, read_checkpoint
from tests.coordinator.cluster.conftest import SESSION_MS, running_cluster, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", "replica.lag.time.max.ms=10000") as c:
        yield c


def _leader(cluster: LocalCluster, topic: str) -> int:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zookeeper.connect, timeout=10.0)
    zk.start(timeout=10)
    try:
        return int(json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])["leader"])
    finally:
        zk.stop()
        zk.close()


def _earliest(bootstrap: str, topic: str) -> int | None:
    """The partition's log start as its leader tells; None while no node answers as its leader."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr-probe"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        return int(low)
    except KafkaException:
        return None
    finally:
        consumer.close()


def test_followers_take_the_new_log_start_before_the_answer(cluster: LocalCluster) -> None:
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("dr3", 1, 3, config={"segment.bytes": "300", "min.insync.replicas": "2"})],
                        request_timeout=15)["dr3"].result(20)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(30):
        producer.produce("dr3", b"value-%d" % i, partition=0)
        producer.flush(20)  # one batch each: segments of a few batches
    assert len(producer) == 0

    result = admin.delete_records([TopicPartition("dr3", 0, 17)], request_timeout=20)
    assert result[TopicPartition("dr3", 0)].result(25).low_watermark == 17
    # Answered: every replica's log start is already checkpointed at 17.
    starts = {b: read_checkpoint(cluster.directory / f"node-{b}" / "dr3-0" / LOG_START_OFFSET_FILE) for b in (1, 2, 3)}
    assert starts == {1: 17, 2: 17, 3: 17}

    leader = _leader(cluster, "dr3")
    cluster.procs[leader].kill()
    cluster.procs[leader].wait()
    wait_for(lambda: _leader(cluster, "dr3") not in (leader, -1), SESSION_MS / 1000 + 15, "a new leader of dr3-0")
    others = ",".join(f"{cluster.host}:{cluster.ports[b - 1]}" for b in (1, 2, 3) if b != leader)
    # The new leader has the records below 17 deleted too (before the fix it served them again).
    assert wait_for(lambda: _earliest(others, "dr3"), 20, "the new leader answering") == 17
