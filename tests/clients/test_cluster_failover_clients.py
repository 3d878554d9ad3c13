"""Stock idempotent producers (Java 3.9.1 and librdkafka, acks=all) against a three-node cluster
whose partition leader is SIGKILLed mid-stream: every acknowledged record is in the log exactly
once, at the offset it was acknowledged with, in send order (issue 13's "done when").
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from tests.clients.background import start_java
from tests.coordinator.cluster.conftest import wait_for
from tests.coordinator.cluster.test_replication import SESSION_MS, _create, _leader, _read_all
from tests.coordinator.cluster.test_replication import cluster as cluster  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

COUNT = 6000


def _check(cluster: LocalCluster, topic: str, acks: dict[int, tuple[int, int]], ctx: str) -> None:
    got = _read_all(cluster, topic, 1, len(acks), timeout=60)
    by_value: dict[bytes, list[int]] = {}
    for (_p, offset), value in got.items():
        by_value.setdefault(value, []).append(offset)
    problems = []
    for seq, (_p, offset) in sorted(acks.items()):
        value = f"seq-{seq}".encode()
        if got.get((0, offset)) != value:
            problems.append(f"seq {seq} acknowledged at {offset}, log has {got.get((0, offset))!r}")
        elif len(by_value[value]) != 1:
            problems.append(f"seq {seq} is in the log {len(by_value[value])} times")
    seqs_in_log = [int(v.split(b"-")[1]) for _o, v in sorted((o, v) for (_p, o), v in got.items())]
    assert seqs_in_log == sorted(seqs_in_log), "records out of send order"
    assert not problems, f"{len(problems)} problems, e.g. {problems[:5]}\n{ctx}"


def _kill_leader_mid_stream(cluster: LocalCluster, topic: str, acks: dict[int, Any]) -> float:
    leader = _leader(cluster, topic, 0)
    wait_for(lambda: len(acks) > COUNT // 4, 60, "a quarter of the stream acknowledged")
    at_kill = len(acks)
    killed = time.monotonic()
    cluster.procs[leader].kill()
    wait_for(lambda: len(acks) > at_kill + 100, SESSION_MS / 1000 + 30, "acknowledgements from the new leader")
    return time.monotonic() - killed


def test_java_idempotent_producer_keeps_every_acknowledged_record_through_a_leader_sigkill(cluster: LocalCluster) -> None:  # noqa: F811
    topic = "java-failover"
    _create(cluster, topic, 1, 3, {"min.insync.replicas": "2"})
    stream = start_java("ProduceConsume", ["stream", cluster.bootstrap, topic, "1", str(COUNT),
                                           "stream.rate=1500", "delivery.timeout.ms=120000",
                                           "request.timeout.ms=5000", "metadata.max.age.ms=1000"],
                        sources=["ProduceConsume.java"])
    acks: dict[int, tuple[int, int]] = {}

    def pump() -> None:
        seen = 0
        while stream.proc.poll() is None or seen < len(stream.lines):
            lines = stream.lines[seen:]
            seen += len(lines)
            for line in lines:
                if line.startswith("A "):
                    _a, seq, p, offset = line.split()
                    acks[int(seq)] = (int(p), int(offset))
            time.sleep(0.01)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        waited = _kill_leader_mid_stream(cluster, topic, acks)
        rc = stream.wait(120)
        t.join(10)
        ctx = stream.describe()
        assert rc == 0, ctx
        assert len(acks) == COUNT, ctx
        print(f"java: new leader acknowledged within {waited:.2f} s of the kill")
        _check(cluster, topic, acks, ctx)
    finally:
        stream.stop()


def test_librdkafka_idempotent_producer_keeps_every_acknowledged_record_through_a_leader_sigkill(cluster: LocalCluster) -> None:  # noqa: F811
    from confluent_kafka import Producer

    topic = "rdkafka-failover"
    _create(cluster, topic, 1, 3, {"min.insync.replicas": "2"})
    acks: dict[int, tuple[int, int]] = {}
    errors: list[str] = []

    def run() -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 2, "batch.size": 4096, "message.timeout.ms": 120000,
                      "reconnect.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 1000})

        def cb(seq: int):  # type: ignore[no-untyped-def]
            def done(err, msg) -> None:  # type: ignore[no-untyped-def]
                if err is not None:
                    errors.append(f"{seq}: {err}")
                else:
                    acks[seq] = (msg.partition(), msg.offset())
            return done

        for seq in range(COUNT):
            while seq - len(acks) - len(errors) > 500:
                p.poll(0.005)
            p.produce(topic, value=f"seq-{seq}".encode(), partition=0, on_delivery=cb(seq))
            p.poll(0)
            time.sleep(0.0005)
        p.flush(120)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    waited = _kill_leader_mid_stream(cluster, topic, acks)
    t.join(150)
    assert not errors, errors[:5]
    assert len(acks) == COUNT
    print(f"librdkafka: new leader acknowledged within {waited:.2f} s of the kill")
    _check(cluster, topic, acks, f"errors {errors[:5]}")
