"""Stock kcat (librdkafka 2.0.2, Debian) lists the cluster, and auto-creates topics via Metadata."""

from __future__ import annotations

import re

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.clients.tools import NODE_ID, run_kcat, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(60)]

UNKNOWN_TOPIC = "Broker: Unknown topic or partition"


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=10)[topic].result(timeout=15)


def _kcat_json(server, *extra: str):  # type: ignore[no-untyped-def]
    res = run_kcat(["-b", server.bootstrap, "-m", "10", "-L", "-J", *extra]).check()
    return res, res.json()


def _topics(meta) -> dict:  # type: ignore[no-untyped-def]
    return {t["topic"]: t for t in meta["topics"]}


def test_kcat_lists_broker_and_topic(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("kcat-list")
    _create_topic(server.bootstrap, topic, 3)

    # Plain-text listing.
    res = run_kcat(["-b", server.bootstrap, "-m", "10", "-L"]).check()
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
    # librdkafka names the answering connection: the learned node, or the bootstrap one (id -1)
    assert re.search(rf"^Metadata for all topics \(from broker (?:{NODE_ID}: {re.escape(server.bootstrap)}/{NODE_ID}"
                     rf"|-1: {re.escape(server.bootstrap)}/bootstrap)\):$", res.stdout, re.M), ctx
    assert re.search(r"^ 1 brokers:$", res.stdout, re.M), ctx
    assert f"  broker {NODE_ID} at {server.bootstrap} (controller)" in res.stdout, ctx
    assert f'  topic "{topic}" with 3 partitions:' in res.stdout, ctx
    for p in range(3):
        assert f"    partition {p}, leader {NODE_ID}, replicas: {NODE_ID}, isrs: {NODE_ID}" in res.stdout, ctx

    # JSON listing.
    res, meta = _kcat_json(server)
    ctx = res.describe()
    assert meta["controllerid"] == NODE_ID, ctx
    assert meta["brokers"] == [{"id": NODE_ID, "name": server.bootstrap}], ctx
    t = _topics(meta)[topic]
    assert "error" not in t, ctx
    assert t["partitions"] == [
        {"partition": p, "leader": NODE_ID, "replicas": [{"id": NODE_ID}], "isrs": [{"id": NODE_ID}]}
        for p in range(3)
    ], ctx


def test_kcat_metadata_auto_creates_topic(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("kcat-auto")
    res, meta = _kcat_json(server, "-t", topic)
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
    assert meta["query"] == {"topic": topic}, ctx
    t = _topics(meta).get(topic)
    assert t is not None and "error" not in t, ctx
    # num.partitions defaults to 1
    assert t["partitions"] == [{"partition": 0, "leader": NODE_ID, "replicas": [{"id": NODE_ID}],
                                "isrs": [{"id": NODE_ID}]}], ctx

    # It now exists for a full listing too.
    res, meta = _kcat_json(server)
    assert topic in _topics(meta), res.describe()


def test_kcat_metadata_does_not_auto_create_when_disabled(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory({"auto.create.topics.enable": "false"})
    topic = unique_topic("kcat-noauto")
    res, meta = _kcat_json(server, "-t", topic)
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
    t = _topics(meta).get(topic)
    assert t is not None, ctx
    assert t.get("error") == UNKNOWN_TOPIC, ctx
    assert t["partitions"] == [], ctx

    res, meta = _kcat_json(server)
    assert topic not in _topics(meta), res.describe()
    assert meta["brokers"] == [{"id": NODE_ID, "name": server.bootstrap}], res.describe()
