"""Edge cases of produce/fetch seen through stock clients: acks=0/1, LogAppendTime topics,
topic-side re-compression, oversized records, fetch size limits smaller than a batch, offsets out
of range, auto-created topics, and a consumer long-polling before the records exist."""

from __future__ import annotations

import time

import pytest

from tests.clients import py_clients as pc
from tests.clients.background import start_java
from tests.clients.records_io import Rec, assert_same, create_topic, make_records, parse_acks, parse_got, write_records
from tests.clients.test_produce_consume_java import java_consume, java_produce
from tests.clients.tools import unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]

P = 3
N = 300


@pytest.mark.parametrize("acks", ["0", "1"])
def test_java_acks_0_and_1(server, tmp_path, acks) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic(f"acks{acks}")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P)
    res = java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "snappy",
                       f"acks={acks}", "enable.idempotence=false")
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-3000:]
    assert res.returncode == 0, ctx
    if acks == "1":
        a = parse_acks(res.stdout)
        for p in range(P):
            idx = [i for i, r in enumerate(recs) if r.partition == p]
            assert [a[i] for i in idx] == [(p, o) for o in range(len(idx))], ctx
    got = pc.confluent_consume(server.bootstrap, topic, P, N)
    assert_same(recs, got, ctx)


def test_confluent_acks_0(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("cf-acks0")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P)
    pc.confluent_produce(server.bootstrap, topic, recs, "zstd", **{"acks": 0, "enable.idempotence": False})
    assert_same(recs, pc.kafka_python_consume(server.bootstrap, topic, P, N), server.log_text()[-3000:])


def test_log_append_time_topic(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("lat")
    create_topic(server.bootstrap, topic, P, {"message.timestamp.type": "LogAppendTime"})
    recs = make_records(N, P)
    t0 = int(time.time() * 1000)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "lz4").check()
    t1 = int(time.time() * 1000)
    for consume in (pc.kafka_python_consume, pc.confluent_consume, pc.aiokafka_consume):
        got = consume(server.bootstrap, topic, P, N)
        assert len(got) == N
        assert {g.timestamp_type for g in got} == {"LogAppendTime"}, consume
        assert all(t0 <= g.timestamp <= t1 for g in got), (t0, t1, got[:3])
        # everything but the timestamp as sent
        strip = [Rec(r.partition, 0, r.key, r.value, r.headers) for r in recs]
        assert_same(strip, [g.__class__(g.partition, g.offset, 0, "CreateTime", g.key, g.value, g.headers)
                            for g in got])
    res = java_consume(server.bootstrap, topic, P, N)
    assert res.returncode == 0, res.describe()[-3000:]
    assert {g.timestamp_type for g in parse_got(res.stdout)} == {"LogAppendTime"}


@pytest.mark.parametrize("topic_codec", ["gzip", "uncompressed", "zstd"])
def test_topic_compression_type_recompresses(server, tmp_path, topic_codec) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic(f"recompress-{topic_codec}")
    create_topic(server.bootstrap, topic, P, {"compression.type": topic_codec})
    recs = make_records(N, P)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "lz4").check()
    res = java_consume(server.bootstrap, topic, P, N)
    assert res.returncode == 0, res.describe()[-3000:]
    assert_same(recs, parse_got(res.stdout), server.log_text()[-3000:])
    assert_same(recs, pc.aiokafka_consume(server.bootstrap, topic, P, N))


def test_record_too_large(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A batch over the topic's max.message.bytes: MESSAGE_TOO_LARGE (RecordTooLargeException);
    records before and after it still go through.

    The big record is sent last and alone: the Java producer splits a multi-record batch refused
    with MESSAGE_TOO_LARGE and retries, and a small record appended behind a big one makes it
    re-send the same two-record batch until delivery.timeout.ms (client behaviour, same with
    Kafka)."""
    topic = unique_topic("too-large")
    create_topic(server.bootstrap, topic, 1, {"max.message.bytes": "20000"})
    now = int(time.time() * 1000)
    recs = [Rec(0, now, b"a", b"small", ()), Rec(0, now, b"b", b"x" * 50_000, ())]
    res = java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "none",
                       "max.request.size=200000", "linger.ms=0", "max.in.flight.requests.per.connection=1")
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-3000:]
    assert res.returncode == 1, ctx
    errors = [line for line in res.stdout.splitlines() if line.startswith("E ")]
    assert len(errors) == 1 and errors[0].startswith("E 1 org.apache.kafka.common.errors.RecordTooLargeException"), ctx
    assert parse_acks(res.stdout) == {0: (0, 0)}, ctx
    recs2 = [Rec(0, now, b"c", b"small2", ())]
    res = java_produce(server.bootstrap, topic, write_records(tmp_path / "in2.txt", recs2), "none")
    assert parse_acks(res.check().stdout) == {0: (0, 1)}, res.describe()
    got = pc.kafka_python_consume(server.bootstrap, topic, 1, 2)
    assert [(g.offset, g.value) for g in got] == [(0, b"small"), (1, b"small2")]


def test_fetch_limits_smaller_than_a_batch(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """max.partition.fetch.bytes / fetch.max.bytes below one batch's size: the first batch is
    returned whole anyway (KIP-74), so consumers still make progress."""
    topic = unique_topic("fetch-small")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "none",
                 "batch.size=65536", "linger.ms=50").check()
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None, enable_auto_commit=False,
                      max_partition_fetch_bytes=512, fetch_max_bytes=1024, request_timeout_ms=10000)
    try:
        tps = [TopicPartition(topic, p) for p in range(P)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            for _tp, msgs in c.poll(timeout_ms=500).items():
                got += [pc.Got(m.partition, m.offset, m.timestamp, "CreateTime", m.key, m.value, pc._headers(m.headers))
                        for m in msgs]
    finally:
        c.close()
    assert_same(recs, got, server.log_text()[-3000:])

    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP
    cc = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                   "fetch.max.bytes": 1024, "max.partition.fetch.bytes": 512, "message.max.bytes": 1000,
                   "receive.message.max.bytes": 1_000_000})  # a client buffer limit
    try:
        cc.assign([CTP(topic, p, 0) for p in range(P)])
        n = 0
        deadline = time.monotonic() + 30
        while n < N and time.monotonic() < deadline:
            msgs = cc.consume(num_messages=500, timeout=0.5)
            assert all(m.error() is None for m in msgs), [m.error() for m in msgs if m.error()]
            n += len(msgs)
        assert n == N
    finally:
        cc.close()


def test_offset_out_of_range_resets(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A fetch beyond the log end gets OFFSET_OUT_OF_RANGE; auto.offset.reset=earliest starts over."""
    topic = unique_topic("oor")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "gzip").check()
    res = java_consume(server.bootstrap, topic, P, 200, offsets=[500, 1000, 100])  # 100 == log end: not out of range
    ctx = res.describe()[-4000:]
    assert res.returncode == 0, ctx
    got = parse_got(res.stdout)
    assert len([g for g in got if g.partition == 2]) == 0, ctx
    for p in (0, 1):
        assert [g.offset for g in got if g.partition == p] == list(range(100)), ctx
    assert_same([r for r in recs if r.partition in (0, 1)], [g for g in got if g.partition in (0, 1)], ctx)
    assert "consume.positions=0:100,1:100,2:100," in res.stdout, ctx


def test_java_producer_auto_creates_topic(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("auto")
    recs = [Rec(0, int(time.time() * 1000) + i, f"k{i}".encode(), f"v{i}".encode(), ()) for i in range(20)]
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "zstd").check()
    assert_same(recs, pc.kafka_python_consume(server.bootstrap, topic, 1, 20))


def test_consumer_long_polls_before_records_exist(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A Java consumer is already waiting in Fetch when the producer starts; appends wake it."""
    topic = unique_topic("longpoll")
    create_topic(server.bootstrap, topic, P)
    consumer = start_java("ProduceConsume", ["consume", server.bootstrap, topic, str(P), str(N), "30000"],
                          sources=["ProduceConsume.java"])
    try:
        assert consumer.wait_for(lambda ls: "consume.started=true" in ls, 30), consumer.describe()
        time.sleep(1.0)
        recs = make_records(N, P)
        t0 = time.monotonic()
        pc.aiokafka_produce(server.bootstrap, topic, recs, "gzip")
        assert consumer.wait_for(lambda ls: sum(1 for line in ls if line.startswith("R ")) >= N, 20), \
            consumer.describe()
        took = time.monotonic() - t0
        assert consumer.wait(20) == 0, consumer.describe()
        assert_same(recs, parse_got(consumer.stdout), consumer.describe(10))
        assert took < 10, took
    finally:
        consumer.stop()


def test_read_committed_consumers(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """isolation.level=read_committed: with no transactions the last stable offset is the high
    watermark, so read_committed consumers see everything and endOffsets equal the log end."""
    topic = unique_topic("read-committed")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "zstd").check()
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    try:
        for p in range(P):
            assert c.get_watermark_offsets(CTP(topic, p), timeout=10) == (0, 100)
        c.assign([CTP(topic, p, 0) for p in range(P)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < N and time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(pc.Got(m.partition(), m.offset(), m.timestamp()[1], "CreateTime", m.key(), m.value(),
                                  pc._headers(m.headers())))
        assert_same(recs, got)
    finally:
        c.close()

    from kafka import KafkaConsumer, TopicPartition

    kc = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None, isolation_level="read_committed")
    try:
        tps = [TopicPartition(topic, p) for p in range(P)]
        assert kc.end_offsets(tps) == {tp: 100 for tp in tps}
        kc.assign(tps)
        kc.seek_to_beginning(*tps)
        n = 0
        deadline = time.monotonic() + 20
        while n < N and time.monotonic() < deadline:
            n += sum(len(v) for v in kc.poll(timeout_ms=500).values())
        assert n == N
    finally:
        kc.close()


def test_timestamp_bounds_are_enforced(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Kafka (LogValidator, KIP-937) refuses a CreateTime batch holding a timestamp more than
    ``message.timestamp.before.max.ms`` in the past or ``message.timestamp.after.max.ms`` in the
    future with INVALID_TIMESTAMP (32): the Java producer reports InvalidTimestampException and
    nothing is appended. A LogAppendTime topic ignores the producer's timestamps."""
    topic = unique_topic("ts-bounds")
    create_topic(server.bootstrap, topic, 3, {"message.timestamp.before.max.ms": "3600000",
                                              "message.timestamp.after.max.ms": "3600000"})
    now = int(time.time() * 1000)
    two_hours = 2 * 3_600_000
    recs = [Rec(0, now, b"ok", b"ok", ()), Rec(1, now - two_hours, b"past", b"past", ()),
            Rec(2, now + two_hours, b"future", b"future", ())]
    res = java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "none",
                       "enable.idempotence=false", "acks=1", "retries=0", "linger.ms=0")
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-3000:]
    errors = {line.split(" ")[1]: line for line in res.stdout.splitlines() if line.startswith("E ")}
    assert parse_acks(res.stdout) == {0: (0, 0)}, ctx
    assert sorted(errors) == ["1", "2"], ctx
    assert all("InvalidTimestampException" in e for e in errors.values()), ctx
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        assert c.end_offsets(tps) == {tps[0]: 1, tps[1]: 0, tps[2]: 0}, ctx
    finally:
        c.close()

    lat = unique_topic("ts-bounds-lat")
    create_topic(server.bootstrap, lat, 3, {"message.timestamp.type": "LogAppendTime",
                                            "message.timestamp.before.max.ms": "3600000",
                                            "message.timestamp.after.max.ms": "3600000"})
    res = java_produce(server.bootstrap, lat, write_records(tmp_path / "in2.txt", recs), "none",
                       "enable.idempotence=false", "acks=1", "retries=0", "linger.ms=0")
    assert parse_acks(res.stdout) == {0: (0, 0), 1: (1, 0), 2: (2, 0)}, res.describe()


def test_min_insync_replicas_is_enforced_for_acks_all(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Kafka (Partition.appendRecordsToLeader): with acks=all and fewer in-sync replicas (here
    the single replica) than the topic's ``min.insync.replicas``, the append is refused with
    NOT_ENOUGH_REPLICAS (19); acks=1 is not affected. The Java producer (retries=0) reports
    NotEnoughReplicasException."""
    topic = unique_topic("min-isr")
    create_topic(server.bootstrap, topic, 1, {"min.insync.replicas": "2"})
    now = int(time.time() * 1000)
    recs = [Rec(0, now, b"k", b"v", ())]
    res = java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "none",
                       "enable.idempotence=false", "acks=all", "retries=0")
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-3000:]
    assert parse_acks(res.stdout) == {}, ctx
    assert "org.apache.kafka.common.errors.NotEnoughReplicasException" in res.stdout, ctx
    res = java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "none",
                       "enable.idempotence=false", "acks=1", "retries=0")
    assert parse_acks(res.stdout) == {0: (0, 0)}, res.describe()


def test_idempotent_producer_continues_after_a_refused_batch(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A refused batch (MESSAGE_TOO_LARGE) leaves a gap in the idempotent producer's sequence;
    the Java producer bumps its epoch (InitProducerId v3+ with the current id and epoch, KIP-360)
    and goes on from sequence 0. Everything after the refused record is appended."""
    topic = unique_topic("epoch-bump")
    create_topic(server.bootstrap, topic, 2, {"max.message.bytes": "20000"})
    now = int(time.time() * 1000)
    recs = [Rec(0, now, b"a", b"1", ()), Rec(1, now, b"b", b"2", ()), Rec(0, now, b"big", b"x" * 50_000, ()),
            Rec(0, now, b"c", b"3", ()), Rec(1, now, b"d", b"4", ()), Rec(0, now, b"e", b"5", ())]
    res = java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "none",
                       "max.request.size=200000", "x.flush.each=true")
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-3000:]
    errors = [line for line in res.stdout.splitlines() if line.startswith("E ")]
    assert len(errors) == 1 and errors[0].startswith("E 2 org.apache.kafka.common.errors.RecordTooLargeException"), ctx
    assert parse_acks(res.stdout) == {0: (0, 0), 1: (1, 0), 3: (0, 1), 4: (1, 1), 5: (0, 2)}, ctx
    want = [r for i, r in enumerate(recs) if i != 2]
    assert_same(want, pc.kafka_python_consume(server.bootstrap, topic, 2, 5), ctx)
