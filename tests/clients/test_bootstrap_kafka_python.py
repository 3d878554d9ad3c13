"""Stock kafka-python 3.0.12 ``KafkaAdminClient`` and ``KafkaConsumer`` bootstrap against the server."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError

from tests.clients.tools import CLUSTER_ID_RE, NODE_ID, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(60)]

CONF = {"request_timeout_ms": 8000, "reconnect_backoff_max_ms": 1000}


def _partitions(admin: KafkaAdminClient, topic: str) -> list[tuple[int, int, list[int], list[int], int]]:
    [t] = admin.describe_topics([topic])
    assert t["name"] == topic and t["error_code"] == 0, t
    return sorted((p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"], p["error_code"])
                  for p in t["partitions"])


def test_kafka_python_admin_bootstrap(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("kp-admin")
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="groupcoord-kp-admin", **CONF)
    try:
        # DescribeCluster
        cluster = admin.describe_cluster()
        assert CLUSTER_ID_RE.match(cluster["cluster_id"] or ""), cluster
        assert cluster["controller_id"] == NODE_ID, cluster
        assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == \
            [(NODE_ID, server.host, server.port)], cluster

        # CreateTopics
        res = admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}}, timeout_ms=5000)
        [created] = res["topics"]
        assert (created["name"], created["error_code"], created["num_partitions"], created["replication_factor"]) \
            == (topic, 0, 3, 1), res
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}}, timeout_ms=5000)

        # Metadata: list + describe
        assert topic in admin.list_topics()
        [desc] = admin.describe_topics([topic])
        assert desc["is_internal"] is False
        assert _partitions(admin, topic) == [(p, NODE_ID, [NODE_ID], [NODE_ID], 0) for p in range(3)]

        # CreatePartitions 3 -> 5
        resp = admin.create_partitions({topic: 5}, timeout_ms=5000)
        assert [(r.name, r.error_code) for r in resp.results] == [(topic, 0)]
        assert _partitions(admin, topic) == [(p, NODE_ID, [NODE_ID], [NODE_ID], 0) for p in range(5)]

        # DeleteTopics
        res = admin.delete_topics([topic], timeout_ms=5000)
        assert [(t["name"], t["error_code"]) for t in res["topics"]] == [(topic, 0)], res
        assert topic not in admin.list_topics()
    finally:
        admin.close()


def test_kafka_python_consumer_metadata(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("kp-consumer")
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, **CONF)
    try:
        admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}}, timeout_ms=5000)
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, client_id="groupcoord-kp-consumer", **CONF)
    try:
        assert topic in consumer.topics()
        assert consumer.partitions_for_topic(topic) == {0, 1, 2}
    finally:
        consumer.close()
