"""Shared pieces of the transaction tests (tests/clients/test_txn_*.py): the server settings, a
seeded input topic, reading a topic at either isolation level with confluent-kafka, a group's
committed offsets, and the exactly-once comparison of an output topic with its input.

Records are text: input value ``in-<partition>-<i>`` with key ``k<i>``; copiers write each record
to the same partition of the output, so each output partition must equal its input partition.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tests.clients.records_io import create_topic as _create_topic

#: Every transaction test's server: a classic group with one member forms at once (Kafka's 3 s
#: initial delay would only slow the copiers' joins down).
TXN_SERVER = {"group.initial.rebalance.delay.ms": "0"}


@dataclass(frozen=True)
class Read:
    partition: int
    offset: int
    key: str | None
    value: str


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1) -> None:
    if replication_factor == 1:
        _create_topic(bootstrap, topic, partitions)
        return
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    fut = admin.create_topics([NewTopic(topic, partitions, replication_factor)], request_timeout=15)
    fut[topic].result(timeout=20)


def seed_input(bootstrap: str, topic: str, partitions: int, per_partition: int,
               replication_factor: int = 1) -> dict[int, list[str]]:
    """Create ``topic`` and fill it (idempotent, non-transactional); returns partition -> values."""
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions, replication_factor)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def done(err, _msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(str(err))

    values: dict[int, list[str]] = {q: [] for q in range(partitions)}
    for i in range(per_partition):
        for q in range(partitions):
            v = f"in-{q}-{i}"
            p.produce(topic, value=v.encode(), key=f"k{i}".encode(), partition=q, on_delivery=done)
            values[q].append(v)
        p.poll(0)
    assert p.flush(30) == 0 and not errors, f"seeding {topic}: {errors[:5]}"
    return values


def read_topic(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int = 0,
               timeout: float = 30.0) -> list[Read]:
    """Every record a consumer at ``isolation`` (read_committed / read_uncommitted) gets from the
    start: reads until it has ``expected`` records and stands at the end of every partition (for
    read_committed the last stable offset), or until ``timeout``."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader-unused", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, "isolation.level": isolation,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    out: list[Read] = []
    try:
        c.assign([TopicPartition(topic, q, 0) for q in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (len(out) < expected or len(at_end) < partitions):
            for m in c.consume(num_messages=500, timeout=0.3):
                err = m.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, f"{isolation} consumer error: {err}"
                    at_end.add(m.partition())
                    continue
                at_end.discard(m.partition())
                key = m.key()
                out.append(Read(m.partition(), m.offset(), None if key is None else key.decode(), m.value().decode()))
        return out
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    """ListOffsets(latest) at ``isolation``: the high watermark, or for read_committed the LSO."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader-unused", "isolation.level": isolation})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, q), timeout=10, cached=False)[1]
                for q in range(partitions)]
    finally:
        c.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets (OffsetFetch with RequireStable, as librdkafka sends it); -1001
    where none."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, q) for q in range(partitions)], timeout=15)
        return [tp.offset for tp in sorted(got, key=lambda tp: tp.partition)]
    finally:
        c.close()


def by_partition(reads: list[Read]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for r in reads:
        out.setdefault(r.partition, []).append(r.value)
    return out


def assert_exactly_once(inputs: dict[int, list[str]], output: list[Read], ctx: str = "") -> None:
    """Each output partition holds its input partition's values once each, in input order, at
    increasing offsets (the gaps are the aborted records and the markers)."""
    got = by_partition(output)
    for q, values in inputs.items():
        have = got.get(q, [])
        dups = sorted({v for v in have if have.count(v) > 1})
        missing = sorted(set(values) - set(have))
        extra = sorted(set(have) - set(values))
        assert not dups and not missing and not extra, (
            f"partition {q}: {len(have)} records for {len(values)} inputs; duplicates {dups[:10]} "
            f"({len(dups)}), missing {missing[:10]} ({len(missing)}), extra {extra[:10]}\n{ctx}")
        assert have == values, f"partition {q}: the order differs from the input\n{ctx}"
        offsets = [r.offset for r in output if r.partition == q]
        assert offsets == sorted(set(offsets)), f"partition {q}: offsets not increasing {offsets[:30]}\n{ctx}"
    assert set(got) <= set(inputs), f"records in partitions {sorted(set(got) - set(inputs))}\n{ctx}"
