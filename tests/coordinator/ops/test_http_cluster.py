"""Cluster mode: three nodes with http.listen, each answering /readyz once its coordinator
partitions are loaded and its ZooKeeper session is up, and exposing the replica metrics (leader
count, in-sync replicas, under-replicated partitions) and the lag of the groups it coordinates."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families

from tests.coordinator.cluster.conftest import running_cluster, wait_for


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _values(port: int, name: str) -> list[tuple[dict[str, str], float]]:
    status, body = _get(port, "/metrics")
    assert status == 200
    return [(dict(s.labels), s.value) for f in text_string_to_metric_families(body) for s in f.samples
            if s.name == name]


def _http_port(log: Path) -> int | None:
    found = re.search(r"http_listen=\S+:(\d+)", log.read_text(errors="replace")) if log.exists() else None
    return int(found.group(1)) if found else None


def test_cluster_nodes_serve_readiness_and_replica_metrics(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster", "offsets.topic.num.partitions=3", "num.partitions=3",
                         "default.replication.factor=3", "offsets.topic.replication.factor=3",
                         "http.listen=127.0.0.1:0", "lag.sample.interval.ms=100") as cluster:
        ports = {b: wait_for(lambda b=b: _http_port(cluster.log_path(b)), 20, f"node {b}'s HTTP listener")
                 for b in (1, 2, 3)}
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
        for i in range(6):
            producer.send("events", value=b"%d" % i, partition=i % 3)
        producer.flush(20)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="g-cluster", enable_auto_commit=False)
        try:
            consumer.commit({TopicPartition("events", 0): OffsetAndMetadata(1, "", -1)})
        finally:
            consumer.close()
        for b, port in ports.items():
            wait_for(lambda port=port: _get(port, "/readyz") == (200, "ready\n"), 30, f"node {b} ready")
            assert _get(port, "/healthz")[0] == 200

        def leaders() -> int:
            return sum(int(_values(p, "kafka_server_replicamanager_leadercount")[0][1]) for p in ports.values())

        # 3 partitions of events and 3 of __consumer_offsets, each led by one node.
        wait_for(lambda: leaders() == 6, 30, "every partition led once")
        for port in ports.values():
            assert _values(port, "kafka_server_replicamanager_partitioncount")[0][1] == 6
            isr = _values(port, "kafka_cluster_partition_insyncreplicascount")
            assert all(v >= 1 for _l, v in isr)
            assert _values(port, "kafka_server_replicamanager_underreplicatedpartitions")
        # Each offsets partition (3, 3 replicas each) has a hot standby on its two followers: 6 in
        # all, caught up (no transaction ran: __transaction_state does not exist yet).
        def standbys() -> list[float]:
            return [v for p in ports.values() for _l, v in _values(p, "groupcoord_coordinator_standby_lag_records")]

        wait_for(lambda: len(standbys()) == 2 * 3 and not any(standbys()), 30, "standbys caught up")

        # The group's lag is exposed by the node coordinating it, against the high watermark.
        def lag() -> list[float]:
            return [v for p in ports.values() for l, v in _values(p, "kafka_consumergroup_group_lag")
                    if l["group"] == "g-cluster" and l["partition"] == "0"]

        wait_for(lambda: lag() == [1.0], 30, "g-cluster's lag, 1, on exactly one node")
