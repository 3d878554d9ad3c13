"""Several stock producers writing the same partitions at once, many partitions, and records
near the default max.message.bytes."""

from __future__ import annotations

import threading
import time

import pytest

from tests.clients import py_clients as pc
from tests.clients.background import start_java
from tests.clients.records_io import Rec, assert_same, create_topic, parse_acks, parse_got, write_records
from tests.clients.test_produce_consume_java import java_consume, java_produce
from tests.clients.tools import unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]


def _recs(tag: str, n: int, partitions: int) -> list[Rec]:
    now = int(time.time() * 1000)
    return [Rec(i % partitions, now + i, f"{tag}-{i}".encode(), f"{tag}:{i}:".encode() * (1 + i % 5),
                (("producer", tag.encode()),)) for i in range(n)]


def test_concurrent_producers_same_partitions(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Java, confluent-kafka, kafka-python and aiokafka (all idempotent but kafka-python) write
    3 partitions at once: every record lands once, each producer's records keep their order
    within a partition, and every acked offset holds that producer's record."""
    topic = unique_topic("concurrent")
    P, N = 3, 3000
    create_topic(server.bootstrap, topic, P)
    sets = {t: _recs(t, N, P) for t in ("java", "confluent", "kpy", "aio")}
    java = start_java("ProduceConsume", ["produce", server.bootstrap, topic,
                                         str(write_records(tmp_path / "j.txt", sets["java"])), "lz4",
                                         "batch.size=2048", "linger.ms=1"], sources=["ProduceConsume.java"])
    acks: dict[str, dict[int, tuple[int, int]]] = {}
    errors: list[str] = []

    def run(tag: str, fn, *args) -> None:  # type: ignore[no-untyped-def]
        try:
            acks[tag] = fn(server.bootstrap, topic, sets[tag], *args)
        except Exception as e:  # noqa: BLE001
            errors.append(f"{tag}: {e!r}")

    threads = [threading.Thread(target=run, args=("confluent", pc.confluent_produce, "zstd")),
               threading.Thread(target=run, args=("kpy", pc.kafka_python_produce, "gzip")),
               threading.Thread(target=run, args=("aio", pc.aiokafka_produce, "snappy"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert java.wait(90) == 0, java.describe()
    acks["java"] = parse_acks(java.stdout)
    assert not errors, errors

    total = 4 * N
    got = pc.kafka_python_consume(server.bootstrap, topic, P, total, timeout=30)
    ctx = server.log_text()[-3000:]
    assert len(got) == total, ctx
    at = {(g.partition, g.offset): g.rec() for g in got}
    for p in range(P):
        offs = sorted(o for (q, o) in at if q == p)
        assert offs == list(range(len(offs))), ctx
    for tag, recs in sets.items():
        assert len(acks[tag]) == N, tag
        for i, r in enumerate(recs):
            assert at[acks[tag][i]] == r, (tag, i, acks[tag][i])
        for p in range(P):
            mine = [(o, r) for (q, o), r in sorted(at.items()) if q == p and r.key.startswith(tag.encode() + b"-")]
            assert [r for _, r in mine] == [r for r in recs if r.partition == p], (tag, p)
    # the Java consumer sees the same log
    res = java_consume(server.bootstrap, topic, P, total, timeout_ms=30000)
    assert res.returncode == 0, res.describe()[-3000:]
    assert {(g.partition, g.offset): g.rec() for g in parse_got(res.stdout)} == at


def test_many_partitions(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("many-parts")
    P = 48
    create_topic(server.bootstrap, topic, P)
    recs = _recs("m", 20 * P, P)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "zstd").check()
    res = java_consume(server.bootstrap, topic, P, len(recs))
    assert res.returncode == 0, res.describe()[-3000:]
    assert_same(recs, parse_got(res.stdout))
    assert_same(recs, pc.confluent_consume(server.bootstrap, topic, P, len(recs)))
    assert_same(recs, pc.aiokafka_consume(server.bootstrap, topic, P, len(recs)))


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_records_near_max_message_bytes(server, tmp_path, codec) -> None:  # type: ignore[no-untyped-def]
    """~900 KB records (default max.message.bytes 1048588): one per batch; consumers with the
    default 1 MiB max.partition.fetch.bytes read them (sendfile-sized responses)."""
    import os

    topic = unique_topic(f"big-{codec}")
    create_topic(server.bootstrap, topic, 2)
    now = int(time.time() * 1000)
    recs = [Rec(i % 2, now + i, f"big{i}".encode(), os.urandom(900_000), (("i", str(i).encode()),))
            for i in range(8)]
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), codec,
                 "max.request.size=1048576", "linger.ms=0").check()
    res = java_consume(server.bootstrap, topic, 2, len(recs))
    assert res.returncode == 0, res.describe()[-3000:]
    assert_same(recs, parse_got(res.stdout))
    assert_same(recs, pc.kafka_python_consume(server.bootstrap, topic, 2, len(recs)))
    assert_same(recs, pc.confluent_consume(server.bootstrap, topic, 2, len(recs)))
