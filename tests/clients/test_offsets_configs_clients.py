"""ListOffsets and DescribeConfigs through stock clients: Java ``Admin.listOffsets`` (earliest,
latest, maxTimestamp, forTimestamp) and ``Admin.describeConfigs``; kafka-python's
``beginning_offsets`` / ``end_offsets`` / ``offsets_for_times``; aiokafka's too."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.clients.records_io import Rec, create_topic, write_records
from tests.clients.test_produce_consume_java import java_produce
from tests.clients.tools import run_java, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]

P = 3  # partition 2 stays empty


def _records() -> list[Rec]:
    """Partitions 0 and 1: 100 records each, timestamps rising by 100 ms, except one record far
    in the future in the middle (the max timestamp) and one older record; partition 2: none."""
    base = int(time.time() * 1000) - 3_600_000
    recs = []
    for p in (0, 1):
        for k in range(100):
            ts = base + p * 7 + k * 100
            if k == 40 + p:
                ts = base + 1_000_000 + p
            if k == 60:
                ts = base - 50_000
            recs.append(Rec(p, ts, f"k{k}".encode(), f"v{p}-{k}".encode(), ()))
    return recs


def _expected_for(recs: list[Rec], p: int, ts: int) -> tuple[int, int] | None:
    """Kafka: the first offset whose timestamp is >= ts, with that record's timestamp."""
    for off, r in enumerate([r for r in recs if r.partition == p]):
        if r.timestamp >= ts:
            return off, r.timestamp
    return None


def _expected_max(recs: list[Rec], p: int) -> tuple[int, int] | None:
    part = [r for r in recs if r.partition == p]
    if not part:
        return None
    best = max(range(len(part)), key=lambda i: (part[i].timestamp, -i))
    return best, part[best].timestamp


@pytest.fixture
def loaded_topic(server, tmp_path):  # type: ignore[no-untyped-def]
    topic = unique_topic("offsets")
    create_topic(server.bootstrap, topic, P)
    recs = _records()
    # batches of a few records: the answers must name records inside batches
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "gzip",
                 "batch.size=300", "linger.ms=0").check()
    return topic, recs


def _probe_times(recs: list[Rec]) -> list[int]:
    p0 = [r.timestamp for r in recs if r.partition == 0]
    return [0, p0[0], p0[0] + 1, p0[10] - 1, p0[59] + 50, p0[99], p0[99] + 1, max(p0), max(p0) + 1]


def test_java_admin_list_offsets(server, loaded_topic) -> None:  # type: ignore[no-untyped-def]
    topic, recs = loaded_topic
    probes = _probe_times(recs)
    res = run_java("OffsetsConfigs", ["offsets", server.bootstrap, topic, str(P), ",".join(map(str, probes))],
                   timeout=60).check()
    kv = res.kv()
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-3000:]
    assert not [k for k in kv if k.endswith(".error")], ctx
    counts = {0: 100, 1: 100, 2: 0}
    for p in range(P):
        assert kv[f"earliest.{p}"] == "0", ctx
        assert kv[f"latest.{p}"] == str(counts[p]), ctx
        # KIP-1005: without tiered storage the local log start is the log start, and no offset
        # is tiered (-1)
        assert kv[f"earliest_local.{p}"] == "0", ctx
        assert kv[f"latest_tiered.{p}"] == "-1", ctx
        mx = _expected_max(recs, p)
        assert kv[f"max.{p}"] == (f"{mx[0]}:{mx[1]}" if mx else "-1:-1"), (p, ctx)
        for ts in probes:
            e = _expected_for(recs, p, ts)
            assert kv[f"for.{ts}.{p}"] == (f"{e[0]}:{e[1]}" if e else "-1:-1"), (p, ts, ctx)


def test_kafka_python_offsets(server, loaded_topic) -> None:  # type: ignore[no-untyped-def]
    from kafka import KafkaConsumer, TopicPartition

    topic, recs = loaded_topic
    c = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None, request_timeout_ms=10000)
    try:
        tps = [TopicPartition(topic, p) for p in range(P)]
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert c.end_offsets(tps) == {tps[0]: 100, tps[1]: 100, tps[2]: 0}
        for ts in _probe_times(recs):
            got = c.offsets_for_times({tp: ts for tp in tps})
            for p, tp in enumerate(tps):
                e = _expected_for(recs, p, ts)
                g = got[tp]
                assert (None if g is None else (g.offset, g.timestamp)) == e, (p, ts, g)
    finally:
        c.close()


def test_aiokafka_offsets(server, loaded_topic) -> None:  # type: ignore[no-untyped-def]
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic, recs = loaded_topic

    async def go() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None, request_timeout_ms=10000)
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(P)]
            assert await c.beginning_offsets(tps) == {tp: 0 for tp in tps}
            assert await c.end_offsets(tps) == {tps[0]: 100, tps[1]: 100, tps[2]: 0}
            for ts in _probe_times(recs):
                got = await c.offsets_for_times({tp: ts for tp in tps})
                for p, tp in enumerate(tps):
                    e = _expected_for(recs, p, ts)
                    g = got[tp]
                    assert (None if g is None else (g.offset, g.timestamp)) == e, (p, ts, g)
        finally:
            await c.stop()

    asyncio.run(go())


def test_java_admin_describe_configs(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory({"log.retention.ms": "86400000"})
    topic = unique_topic("configs")
    create_topic(server.bootstrap, topic, 1, {"flush.messages": "1", "cleanup.policy": "compact"})
    res = run_java("OffsetsConfigs", ["configs", server.bootstrap, topic, "1"], timeout=60).check()
    kv = res.kv()
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-3000:]

    def entry(k: str) -> list[str]:
        assert k in kv, f"{k} missing\n{ctx}"
        return kv[k].split("|")

    # topic overrides: DYNAMIC_TOPIC_CONFIG, not default, synonyms start with the override
    v, source, is_default, read_only, sensitive, syn, _type = entry("topic.flush.messages")
    assert (v, source, is_default, sensitive) == ("1", "DYNAMIC_TOPIC_CONFIG", "false", "false"), ctx
    assert syn.split(",")[0] == "flush.messages:DYNAMIC_TOPIC_CONFIG", ctx
    v, source, is_default, *_ = entry("topic.cleanup.policy")
    assert (v, source, is_default) == ("compact", "DYNAMIC_TOPIC_CONFIG", "false"), ctx
    # inherited from the broker's explicit setting
    v, source, is_default, _ro, _s, syn, _t = entry("topic.retention.ms")
    assert (v, source, is_default) == ("86400000", "STATIC_BROKER_CONFIG", "false"), ctx
    assert syn.startswith("log.retention.ms:STATIC_BROKER_CONFIG"), ctx
    # plain default
    v, source, is_default, *_ = entry("topic.segment.bytes")
    assert (v, source, is_default) == ("1073741824", "DEFAULT_CONFIG", "true"), ctx
    v, source, *_ = entry("topic.compression.type")
    assert (v, source) == ("producer", "DEFAULT_CONFIG"), ctx
    assert int(kv["topic.count"]) >= 10, ctx

    # broker "1"
    assert "broker.error" not in kv, ctx
    v, source, is_default, *_ = entry("broker.log.retention.ms")
    assert (v, source, is_default) == ("86400000", "STATIC_BROKER_CONFIG", "false"), ctx
    v, source, is_default, *_ = entry("broker.num.partitions")
    assert (v, source, is_default) == ("1", "DEFAULT_CONFIG", "true"), ctx
    assert int(kv["broker.count"]) >= 5, ctx

    # an unknown topic
    assert kv.get("missing.error", "").startswith("UnknownTopicOrPartitionException"), ctx


# Kafka's ConfigDef types of the broker settings this server has (KafkaConfig / ServerConfigs):
# integers defined as INT are reported as INT, not LONG.
KAFKA_BROKER_TYPES = {
    "node.id": "INT",
    "num.partitions": "INT",
    "default.replication.factor": "INT",
    "message.max.bytes": "INT",
    "log.segment.bytes": "INT",
    "socket.request.max.bytes": "INT",
    "max.connections": "INT",
    "offsets.topic.num.partitions": "INT",
    "offsets.topic.segment.bytes": "INT",
    "offsets.retention.minutes": "INT",
    "offset.metadata.max.bytes": "INT",
    "group.initial.rebalance.delay.ms": "INT",
    "group.min.session.timeout.ms": "INT",
    "group.max.session.timeout.ms": "INT",
    "group.max.size": "INT",
    "log.retention.ms": "LONG",
    "log.retention.bytes": "LONG",
    "log.flush.interval.messages": "LONG",
    "connections.max.idle.ms": "LONG",
    "log.retention.check.interval.ms": "LONG",
    "log.cleaner.backoff.ms": "LONG",
    "offsets.retention.check.interval.ms": "LONG",
    "auto.create.topics.enable": "BOOLEAN",
    "delete.topic.enable": "BOOLEAN",
    "listeners": "STRING",
    "advertised.listeners": "STRING",
    "log.dirs": "STRING",
}


def test_java_admin_broker_config_types(server) -> None:  # type: ignore[no-untyped-def]
    """DescribeConfigs v3+ config_type for broker "1" matches Kafka's definitions (an Admin
    client shows ConfigEntry.type(); tools use it to parse and validate values)."""
    topic = unique_topic("types")
    create_topic(server.bootstrap, topic, 1)
    res = run_java("OffsetsConfigs", ["configs", server.bootstrap, topic, "1"], timeout=60).check()
    kv = res.kv()
    got = {k: kv[f"broker.{k}"].split("|")[-1] for k in KAFKA_BROKER_TYPES if f"broker.{k}" in kv}
    wrong = {k: f"{got[k]} (Kafka: {t})" for k, t in KAFKA_BROKER_TYPES.items() if k in got and got[k] != t}
    assert not wrong, f"broker config types differ from Kafka's: {wrong}\n{res.describe()}"


def test_list_offsets_on_log_append_time_topic(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """On a LogAppendTime topic the broker's append time is every record's timestamp, for
    consumers and for ListOffsets alike: the producer's (here two-hour-old) timestamps play no
    part in timestamp lookups."""
    topic = unique_topic("lat-offsets")
    create_topic(server.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    now = int(time.time() * 1000)
    recs = [Rec(0, now - 7_200_000 + i, f"k{i}".encode(), f"v{i}".encode(), ()) for i in range(50)]
    t0 = int(time.time() * 1000)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "none",
                 "linger.ms=100").check()
    t1 = int(time.time() * 1000)
    from kafka import KafkaConsumer, TopicPartition

    from tests.clients import py_clients as pc

    got = pc.kafka_python_consume(server.bootstrap, topic, 1, 50)
    assert all(g.timestamp_type == "LogAppendTime" and t0 <= g.timestamp <= t1 for g in got), got[:3]
    first_ts = got[0].timestamp
    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None)
    try:
        hour_ago = now - 3_600_000
        r = c.offsets_for_times({tp: hour_ago})[tp]
        assert r is not None and (r.offset, r.timestamp) == (0, first_ts), r
        assert c.offsets_for_times({tp: t1 + 60_000})[tp] is None
    finally:
        c.close()
    res = run_java("OffsetsConfigs", ["offsets", server.bootstrap, topic, "1", f"{hour_ago},{t1 + 60_000}"],
                   timeout=60).check()
    kv = res.kv()
    assert kv[f"for.{hour_ago}.0"] == f"0:{first_ts}", res.describe()
    assert kv[f"for.{t1 + 60_000}.0"] == "-1:-1", res.describe()
    mx_off, mx_ts = map(int, kv["max.0"].split(":"))
    assert mx_ts == max(g.timestamp for g in got) and got[mx_off].timestamp == mx_ts, res.describe()


def test_confluent_and_kafka_python_describe_configs(server) -> None:  # type: ignore[no-untyped-def]
    """DescribeConfigs through librdkafka and kafka-python (their own request versions): the
    topic override's source is DYNAMIC_TOPIC_CONFIG, defaults are DEFAULT_CONFIG."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    topic = unique_topic("cfg-py")
    create_topic(server.bootstrap, topic, 1, {"retention.ms": "123456789"})
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res], request_timeout=10)[res].result(timeout=15)
    e = entries["retention.ms"]
    assert (e.value, e.source, e.is_default) == ("123456789", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False), e
    e = entries["segment.bytes"]
    assert (e.value, e.source, e.is_default) == ("1073741824", ConfigSource.DEFAULT_CONFIG.value, True), e
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    bentries = admin.describe_configs([broker], request_timeout=10)[broker].result(timeout=15)
    assert bentries["num.partitions"].value == "1"

    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    ka = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        resp = ka.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        configs = resp["topic"][topic]
        c = configs["retention.ms"]
        assert (c["value"], c["config_source"], c["config_type"]) == ("123456789", "DYNAMIC_TOPIC_CONFIG", "LONG"), c
        c = configs["segment.bytes"]
        assert (c["value"], c["config_source"], c["config_type"]) == ("1073741824", "DEFAULT_CONFIG", "INT"), c
    finally:
        ka.close()
