"""Stock Python clients produce and consume through the server: confluent-kafka 2.16,
kafka-python 3.0.12 and aiokafka 0.14, each with every codec, and across clients (Java too).

Consumers use manual assignment without a consumer group (group coordination is not there yet).
Every record comes back per partition, in order, at consecutive offsets, with its key, value,
headers and timestamp exactly as sent."""

from __future__ import annotations

import pytest

from tests.clients import py_clients as pc
from tests.clients.records_io import assert_same, create_topic, make_records, parse_got, write_records
from tests.clients.test_produce_consume_java import java_consume, java_produce
from tests.clients.tools import unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(60)]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 300
P = 3


def _check_acks(recs, acks, ctx: str = "") -> None:  # type: ignore[no-untyped-def]
    assert len(acks) == len(recs), ctx
    for p in range(P):
        idx = [i for i, r in enumerate(recs) if r.partition == p]
        assert [acks[i] for i in idx] == [(p, o) for o in range(len(idx))], ctx


@pytest.mark.parametrize("compression", CODECS)
def test_confluent_produce_consume(server, compression) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic(f"cf-pc-{compression}")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P)
    _check_acks(recs, pc.confluent_produce(server.bootstrap, topic, recs, compression), server.log_text()[-3000:])
    assert_same(recs, pc.confluent_consume(server.bootstrap, topic, P, N), server.log_text()[-3000:])


@pytest.mark.parametrize("compression", CODECS)
def test_kafka_python_produce_consume(server, compression) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic(f"kp-pc-{compression}")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P, null_header_values=False)  # kafka-python: header values must be bytes
    codec = None if compression == "none" else compression
    _check_acks(recs, pc.kafka_python_produce(server.bootstrap, topic, recs, codec), server.log_text()[-3000:])
    assert_same(recs, pc.kafka_python_consume(server.bootstrap, topic, P, N), server.log_text()[-3000:])


def test_kafka_python_idempotent_produce(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("kp-idem")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P, null_header_values=False)
    _check_acks(recs, pc.kafka_python_produce(server.bootstrap, topic, recs, "gzip", enable_idempotence=True),
                server.log_text()[-3000:])
    assert_same(recs, pc.kafka_python_consume(server.bootstrap, topic, P, N), server.log_text()[-3000:])


@pytest.mark.parametrize("compression", CODECS)
def test_aiokafka_produce_consume(server, compression) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic(f"aio-pc-{compression}")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P)
    codec = None if compression == "none" else compression
    _check_acks(recs, pc.aiokafka_produce(server.bootstrap, topic, recs, codec), server.log_text()[-3000:])
    assert_same(recs, pc.aiokafka_consume(server.bootstrap, topic, P, N), server.log_text()[-3000:])


# ------------------------------------------------------------------------------ cross-client

PRODUCERS = ["java", "confluent", "kafka-python", "aiokafka"]
CONSUMERS = ["java", "confluent", "kafka-python", "aiokafka"]


def _produce(who: str, bootstrap: str, topic: str, recs, codec: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if who == "java":
        java_produce(bootstrap, topic, write_records(tmp_path / "in.txt", recs), codec).check()
    elif who == "confluent":
        pc.confluent_produce(bootstrap, topic, recs, codec)
    elif who == "kafka-python":
        pc.kafka_python_produce(bootstrap, topic, recs, None if codec == "none" else codec)
    else:
        pc.aiokafka_produce(bootstrap, topic, recs, None if codec == "none" else codec)


def _consume(who: str, bootstrap: str, topic: str, total: int):  # type: ignore[no-untyped-def]
    if who == "java":
        res = java_consume(bootstrap, topic, P, total)
        assert res.returncode == 0, res.describe()[-4000:]
        return parse_got(res.stdout)
    return {"confluent": pc.confluent_consume, "kafka-python": pc.kafka_python_consume,
            "aiokafka": pc.aiokafka_consume}[who](bootstrap, topic, P, total)


# Each producer with a different codec; every other client reads it.
CROSS = [("java", "gzip"), ("confluent", "zstd"), ("kafka-python", "lz4"), ("aiokafka", "snappy")]


@pytest.mark.parametrize("producer,codec", CROSS, ids=[f"{p}-{c}" for p, c in CROSS])
def test_cross_client(shared_server, tmp_path, producer, codec) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic(f"cross-{producer}-{codec}")
    create_topic(shared_server.bootstrap, topic, P)
    recs = make_records(N, P, null_header_values=producer != "kafka-python")
    _produce(producer, shared_server.bootstrap, topic, recs, codec, tmp_path)
    for consumer in CONSUMERS:
        if consumer == producer:
            continue
        got = _consume(consumer, shared_server.bootstrap, topic, N)
        assert_same(recs, got, f"{producer} ({codec}) -> {consumer}\n" + shared_server.log_text()[-3000:])
