"""Stock aiokafka 0.14 ``AIOKafkaAdminClient`` and ``AIOKafkaConsumer`` bootstrap against the server."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic

from tests.clients.tools import CLUSTER_ID_RE, NODE_ID, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(60)]

CONF = {"request_timeout_ms": 8000}


def _partitions(topics: list[dict], topic: str) -> list[tuple[int, int, list[int], list[int], int]]:
    [t] = [t for t in topics if t["topic"] == topic]
    assert t["error_code"] == 0, t
    return sorted((p["partition"], p["leader"], p["replicas"], p["isr"], p["error_code"]) for p in t["partitions"])


@pytest.mark.asyncio
async def test_aiokafka_admin_bootstrap(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("aio-admin")
    admin = AIOKafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="groupcoord-aio-admin", **CONF)
    await admin.start()
    try:
        # describe_cluster (aiokafka builds it from Metadata)
        cluster = await admin.describe_cluster()
        assert CLUSTER_ID_RE.match(cluster["cluster_id"] or ""), cluster
        assert cluster["controller_id"] == NODE_ID, cluster
        assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == \
            [(NODE_ID, server.host, server.port)], cluster

        # CreateTopics (aiokafka returns the response; it does not raise on topic errors)
        resp = (await admin.create_topics([NewTopic(topic, 3, 1)], timeout_ms=5000)).to_object()
        assert [(e["topic"], e["error_code"]) for e in resp["topic_errors"]] == [(topic, 0)], resp
        resp = (await admin.create_topics([NewTopic(topic, 3, 1)], timeout_ms=5000)).to_object()
        assert [(e["topic"], e["error_code"]) for e in resp["topic_errors"]] == [(topic, 36)], resp  # exists

        # Metadata: list + describe
        assert topic in await admin.list_topics()
        described = await admin.describe_topics([topic])
        assert [t["is_internal"] for t in described] == [False]
        assert _partitions(described, topic) == [(p, NODE_ID, [NODE_ID], [NODE_ID], 0) for p in range(3)]

        # CreatePartitions 3 -> 5 (raises on a topic error)
        resp = (await admin.create_partitions({topic: NewPartitions(5)}, timeout_ms=5000)).to_object()
        assert [(e["topic"], e["error_code"]) for e in resp["topic_errors"]] == [(topic, 0)], resp
        assert _partitions(await admin.describe_topics([topic]), topic) == \
            [(p, NODE_ID, [NODE_ID], [NODE_ID], 0) for p in range(5)]

        # DeleteTopics
        resp = (await admin.delete_topics([topic], timeout_ms=5000)).to_object()
        assert [(e["topic"], e["error_code"]) for e in resp["topic_error_codes"]] == [(topic, 0)], resp
        assert topic not in await admin.list_topics()
    finally:
        await admin.close()


@pytest.mark.asyncio
async def test_aiokafka_consumer_metadata(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("aio-consumer")
    admin = AIOKafkaAdminClient(bootstrap_servers=server.bootstrap, **CONF)
    await admin.start()
    try:
        resp = (await admin.create_topics([NewTopic(topic, 3, 1)], timeout_ms=5000)).to_object()
        assert resp["topic_errors"][0]["error_code"] == 0, resp
    finally:
        await admin.close()

    # A consumer given the topic tracks it in its cluster metadata (no group: group_id=None).
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=server.bootstrap, client_id="groupcoord-aio-consumer",
                                enable_auto_commit=False, **CONF)
    await consumer.start()
    try:
        assert topic in await consumer.topics()
        assert consumer.partitions_for_topic(topic) == {0, 1, 2}
    finally:
        await consumer.stop()
