"""Stock confluent-kafka 2.16 (librdkafka 2.16) ``AdminClient`` bootstraps against the server."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.clients.tools import CLUSTER_ID_RE, NODE_ID, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(60)]

TIMEOUT = 10.0


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({
        "bootstrap.servers": bootstrap,
        "client.id": "groupcoord-confluent-admin",
        "socket.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
    })


def _partitions(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    md = admin.list_topics(topic=topic, timeout=TIMEOUT)
    t = md.topics[topic]
    assert t.error is None, t.error
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}


def test_confluent_admin_bootstrap(server) -> None:  # type: ignore[no-untyped-def]
    admin = _admin(server.bootstrap)
    topic = unique_topic("confluent-admin")

    # ClusterMetadata from a Metadata request
    md = admin.list_topics(timeout=TIMEOUT)
    assert CLUSTER_ID_RE.match(md.cluster_id or ""), md.cluster_id
    assert md.controller_id == NODE_ID
    # -1 when the bootstrap connection (not yet known as node 1) answered: client-side, both fine
    assert md.orig_broker_id in (NODE_ID, -1)
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {NODE_ID: (server.host, server.port)}

    # DescribeCluster
    desc = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert desc.cluster_id == md.cluster_id
    assert desc.controller is not None and desc.controller.id == NODE_ID
    assert [(n.id, n.host, n.port) for n in desc.nodes] == [(NODE_ID, server.host, server.port)]

    # CreateTopics
    fut = admin.create_topics([NewTopic(topic, 3, 1)], request_timeout=TIMEOUT, operation_timeout=5)
    assert fut[topic].result(timeout=TIMEOUT) is None
    assert _partitions(admin, topic) == {p: (NODE_ID, [NODE_ID], [NODE_ID]) for p in range(3)}
    assert topic in admin.list_topics(timeout=TIMEOUT).topics

    # Creating it again fails with TOPIC_ALREADY_EXISTS
    fut = admin.create_topics([NewTopic(topic, 3, 1)], request_timeout=TIMEOUT)
    with pytest.raises(KafkaException) as exc:
        fut[topic].result(timeout=TIMEOUT)
    assert exc.value.args[0].name() == "TOPIC_ALREADY_EXISTS", exc.value

    # CreatePartitions 3 -> 5
    fut = admin.create_partitions([NewPartitions(topic, 5)], request_timeout=TIMEOUT, operation_timeout=5)
    assert fut[topic].result(timeout=TIMEOUT) is None
    assert _partitions(admin, topic) == {p: (NODE_ID, [NODE_ID], [NODE_ID]) for p in range(5)}

    # DeleteTopics
    fut = admin.delete_topics([topic], request_timeout=TIMEOUT, operation_timeout=5)
    assert fut[topic].result(timeout=TIMEOUT) is None
    deadline = time.monotonic() + 5
    while topic in admin.list_topics(timeout=TIMEOUT).topics:
        assert time.monotonic() < deadline, f"{topic} still listed after delete_topics"
        time.sleep(0.1)


def test_confluent_describe_topics(server) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import TopicCollection

    admin = _admin(server.bootstrap)
    topic = unique_topic("confluent-describe")
    admin.create_topics([NewTopic(topic, 3, 1)], request_timeout=TIMEOUT)[topic].result(timeout=TIMEOUT)
    fut = admin.describe_topics(TopicCollection([topic]), request_timeout=TIMEOUT)
    d = fut[topic].result(timeout=TIMEOUT)
    assert d.name == topic
    assert d.is_internal is False
    assert [p.id for p in d.partitions] == [0, 1, 2]
    assert all(p.leader is not None and p.leader.id == NODE_ID for p in d.partitions)
    assert all([r.id for r in p.replicas] == [NODE_ID] and [r.id for r in p.isr] == [NODE_ID]
               for p in d.partitions)


def _error_name(fut) -> str:  # type: ignore[no-untyped-def]
    try:
        fut.result(timeout=TIMEOUT)
    except KafkaException as e:
        return str(e.args[0].name())
    return "OK"


def test_confluent_admin_errors(server) -> None:  # type: ignore[no-untyped-def]
    admin = _admin(server.bootstrap)
    p = unique_topic("confluent-err")

    def create(name: str, partitions: int = 1, rf: int = 1, **kw) -> str:  # type: ignore[no-untyped-def]
        return _error_name(admin.create_topics([NewTopic(name, partitions, rf)], request_timeout=TIMEOUT, **kw)[name])

    assert create(f"{p}-zero", 0) == "INVALID_PARTITIONS"
    assert create(f"{p}-rf3", 1, 3) == "INVALID_REPLICATION_FACTOR"
    assert create(f"{p} bad!") == "TOPIC_EXCEPTION"
    assert create(".") == "TOPIC_EXCEPTION"
    assert create("x" * 250) == "TOPIC_EXCEPTION"
    assert create(f"{p}-val", 2, validate_only=True) == "OK"
    assert f"{p}-val" not in admin.list_topics(timeout=TIMEOUT).topics

    # -1/-1: the broker's num.partitions (1) and default.replication.factor (1)
    assert _error_name(admin.create_topics([NewTopic(f"{p}-def")], request_timeout=TIMEOUT)[f"{p}-def"]) == "OK"
    assert _partitions(admin, f"{p}-def") == {0: (NODE_ID, [NODE_ID], [NODE_ID])}

    assert create(f"{p}-ok", 3) == "OK"

    def grow(name: str, count: int) -> str:
        return _error_name(admin.create_partitions([NewPartitions(name, count)], request_timeout=TIMEOUT)[name])

    assert grow(f"{p}-ok", 2) == "INVALID_PARTITIONS"
    assert grow(f"{p}-ok", 3) == "INVALID_PARTITIONS"
    assert grow(f"{p}-missing", 3) == "UNKNOWN_TOPIC_OR_PART"
    assert _error_name(admin.delete_topics([f"{p}-missing"], request_timeout=TIMEOUT)[f"{p}-missing"]) \
        == "UNKNOWN_TOPIC_OR_PART"
    assert _partitions(admin, f"{p}-ok") == {i: (NODE_ID, [NODE_ID], [NODE_ID]) for i in range(3)}


def test_confluent_topics_and_cluster_id_survive_restart(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("confluent-restart")
    admin = _admin(server.bootstrap)
    cluster_id = admin.list_topics(timeout=TIMEOUT).cluster_id
    admin.create_topics([NewTopic(topic, 3, 1)], request_timeout=TIMEOUT)[topic].result(timeout=TIMEOUT)
    admin.create_partitions([NewPartitions(topic, 4)], request_timeout=TIMEOUT)[topic].result(timeout=TIMEOUT)
    del admin

    server.restart()

    admin = _admin(server.bootstrap)
    md = admin.list_topics(timeout=TIMEOUT)
    assert md.cluster_id == cluster_id
    assert _partitions(admin, topic) == {i: (NODE_ID, [NODE_ID], [NODE_ID]) for i in range(4)}
