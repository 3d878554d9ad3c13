"""Stock Apache Kafka 3.9.1 Java ``Admin`` client bootstraps against the server."""

from __future__ import annotations

import pytest

from tests.clients.tools import CLUSTER_ID_RE, NODE_ID, run_java, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]


def test_java_admin_bootstrap(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("java-admin")
    res = run_java("AdminBootstrap", [server.bootstrap, topic, "3", "5"], timeout=60).check()
    kv = res.kv()
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
    me = f"{NODE_ID}@{server.host}:{server.port}"

    # describeCluster
    assert CLUSTER_ID_RE.match(kv.get("cluster.id", "")), ctx
    assert kv.get("cluster.controller") == me, ctx
    assert kv.get("cluster.nodes") == me, ctx

    # createTopics, then a duplicate create fails with TopicExistsException
    assert kv.get("create.ok") == "true", ctx
    assert kv.get("create_again.exception") == "TopicExistsException", ctx

    # listTopics / describeTopics
    assert kv.get("list.contains") == "true", ctx
    assert kv.get("describe.name") == topic, ctx
    assert kv.get("describe.internal") == "false", ctx
    assert kv.get("describe.topic_id_set") == "true", ctx  # Metadata v10+ carries topic ids
    assert kv.get("describe.partitions") == "3", ctx
    assert kv.get("describe.leaders") == ",".join(f"{p}:{NODE_ID}" for p in range(3)), ctx
    for p in range(3):
        assert kv.get(f"describe.p{p}.leader") == me, ctx
        assert kv.get(f"describe.p{p}.replicas") == "1", ctx
        assert kv.get(f"describe.p{p}.isr") == "1", ctx

    # createPartitions 3 -> 5
    assert kv.get("grow.ok") == "true", ctx
    assert kv.get("after_grow.partitions") == "5", ctx
    assert kv.get("after_grow.leaders") == ",".join(f"{p}:{NODE_ID}" for p in range(5)), ctx

    # deleteTopics
    assert kv.get("delete.ok") == "true", ctx
    assert kv.get("list_after_delete.contains") == "false", ctx

    assert kv.get("failures") == "0", ctx


def test_java_admin_errors(server) -> None:  # type: ignore[no-untyped-def]
    prefix = unique_topic("java-err")
    res = run_java("AdminErrors", [server.bootstrap, prefix], timeout=60).check()
    kv = res.kv()
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
    assert kv.get("zero_partitions") == "InvalidPartitionsException", ctx
    assert kv.get("replication_3") == "InvalidReplicationFactorException", ctx
    assert kv.get("bad_name") == "InvalidTopicException", ctx
    assert kv.get("validate_only") == "ok", ctx
    assert kv.get("validate_only_listed") == "ok", ctx
    assert kv.get("create_defaults") == "ok", ctx  # num_partitions/replication_factor -1: broker defaults
    assert kv.get("create") == "ok", ctx
    assert kv.get("shrink") == "InvalidPartitionsException", ctx
    assert kv.get("grow_unknown") == "UnknownTopicOrPartitionException", ctx
    assert kv.get("delete_unknown") == "UnknownTopicOrPartitionException", ctx
