"""End to end: a real server, real consumer groups (kafka-python), a stop, then the pipeline on
the data directory. The compacted view must equal what the server answered to OffsetFetch, the
generation history must hold the generations the clients were in, and lag must be the end
offsets minus the commits."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from pipeline.cli import run_job

pytestmark = pytest.mark.slow

TOPIC = "orders"
PARTITIONS = 4


def _generation(consumer: KafkaConsumer) -> int:
    return consumer._coordinator._generation.generation_id  # what this client was told it is in


def _settle(consumers: list[KafkaConsumer], timeout: float = 30.0) -> None:
    """Poll everyone until they share one generation and own every partition between them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(timeout_ms=100, max_records=1)
        gens = {_generation(c) for c in consumers}
        owned = sum(len(c.assignment()) for c in consumers)
        if len(gens) == 1 and min(gens) > 0 and owned == PARTITIONS:
            return
    raise AssertionError(f"group did not settle: {[(_generation(c), c.assignment()) for c in consumers]}")


def _consumer(server: Any, group: str) -> KafkaConsumer:
    return KafkaConsumer(TOPIC, bootstrap_servers=server.bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms=10_000, heartbeat_interval_ms=300,
                         max_poll_interval_ms=60_000)


def _commit_all(consumer: KafkaConsumer, base: int) -> None:
    consumer.commit({tp: OffsetAndMetadata(base + tp.partition, "", -1) for tp in consumer.assignment()})


def test_pipeline_matches_what_the_server_and_clients_saw(server_factory: Any, spark: Any, tmp_path: Path) -> None:
    server = server_factory({"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"})
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    for i in range(100):
        producer.send(TOPIC, key=str(i).encode(), value=b"v", partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    seen: dict[str, set[int]] = {"g1": set()}

    # g1: one member, then two (a rebalance), then one again (a leave): three generations.
    c1 = _consumer(server, "g1")
    _settle([c1])
    seen["g1"].add(_generation(c1))
    _commit_all(c1, 10)
    c2 = _consumer(server, "g1")
    _settle([c1, c2])
    seen["g1"].add(_generation(c1))
    _commit_all(c1, 20)
    _commit_all(c2, 20)
    c2.close()
    _settle([c1])
    seen["g1"].add(_generation(c1))
    _commit_all(c1, 22)
    c1.close()

    # g2: a simple consumer (assign + commit, no membership); g3: committed, then deleted.
    simple = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="g2", enable_auto_commit=False)
    simple.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    simple.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(5 * p, "meta", -1) for p in range(PARTITIONS)})
    simple.close()
    doomed = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="g3", enable_auto_commit=False)
    doomed.assign([TopicPartition(TOPIC, 0)])
    doomed.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(1, "", -1)})
    doomed.close()
    admin.delete_groups(["g3"])
    answered = admin.list_group_offsets(["g1", "g2", "g3"])  # OffsetFetch v8+, all three groups
    fetched = {g: {(tp.topic, tp.partition): om.offset for tp, om in answered.get(g, {}).items()}
               for g in ("g1", "g2", "g3")}
    admin.close()
    assert server.stop() == 0

    result = run_job(spark, str(server.data_dir), str(tmp_path / "out"), now_ms=int(time.time() * 1000))
    out = tmp_path / "out"

    latest = spark.read.parquet(str(out / "latest_offsets")).collect()
    view: dict[str, dict[tuple[str, int], int]] = {"g1": {}, "g2": {}, "g3": {}}
    for r in latest:
        view[r["group_id"]][(r["topic"], r["partition"])] = r["committed_offset"]
    assert view == fetched
    assert fetched["g3"] == {} and len(fetched["g1"]) == PARTITIONS

    generations = {r["generation"] for r in spark.read.parquet(str(out / "generations")).collect()
                   if r["group_id"] == "g1"}
    assert seen["g1"] <= generations and len(seen["g1"]) == 3

    lag = {(r["group_id"], r["partition"]): r["lag"] for r in spark.read.parquet(str(out / "consumer_lag")).collect()}
    assert lag == {(g, p): 25 - off for g, offs in fetched.items() for (_t, p), off in offs.items()}

    expired = {(r["group_id"], r["partition"]) for r in spark.read.parquet(str(out / "expired_offsets")).collect()}
    assert ("g3", 0) in expired
    assert result["totals"]["groups"] == 2
    assert (out / "report.html").read_text().count("<svg") == 3 and "g1" in (out / "report.md").read_text()
