"""A real server holding records with known timestamps and groups committed among them, for the tests of
lag in seconds (``--describe --output json``, ``--watch``, ``GroupAdmin.first_unconsumed_timestamps``).

Topic ``stamped``, 3 partitions, produced with kafka-python and explicit ``timestamp_ms``:

* partition 0: 5 small records stamped ``BASE_MS + i * 1000`` (one or a few batches);
* partition 1: 2 small records;
* partition 2: 3 records of 70 KiB, each batch bigger than the tool's 64 KiB share per partition,
  stamped ``BASE_MS + 100_000 + i * 1000``.

Topic ``txn`` (1 partition): a committed transaction of two records stamped ``TXN_MS`` (offsets 0, 1),
its COMMIT marker (offset 2), then a plain record stamped ``AFTER_TXN_MS`` (offset 3).
Topic ``trimmed`` (1 partition): 3 records stamped ``BASE_MS + i * 1000``, the first two deleted
(DeleteRecords: the log starts at 2).

Groups (admin commits, no members, so Empty): ``lag-a`` at p0=2, p1=2 (caught up), p2=1; ``lag-b`` at
p0=4 (a second offset on the same partition)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from coordinator.tools.group_admin import GroupAdmin
from tests.conftest import ServerProcess

TOPIC = "stamped"
#: An hour ago, to the second: every record's age is known from it.
BASE_MS = (int(time.time()) - 3600) * 1000
BIG = 70 * 1024
TIMESTAMPS = {
    0: [BASE_MS + i * 1000 for i in range(5)],
    1: [BASE_MS + i * 1000 for i in range(2)],
    2: [BASE_MS + 100_000 + i * 1000 for i in range(3)],
}
TXN, TRIMMED = "txn", "trimmed"
TXN_MS, AFTER_TXN_MS = BASE_MS + 200_000, BASE_MS + 300_000
COMMITS = {"lag-a": {(TOPIC, 0): 2, (TOPIC, 1): 2, (TOPIC, 2): 1}, "lag-b": {(TOPIC, 0): 4}}


def _produce(bs: str) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    from kafka.structs import TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(TOPIC, 3, 1), NewTopic(TXN, 1, 1), NewTopic(TRIMMED, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bs, linger_ms=20, batch_size=1 << 20, max_request_size=1 << 20)
    try:
        for p, stamps in TIMESTAMPS.items():
            for i, ts in enumerate(stamps):
                value = bytes(BIG) if p == 2 else b"v%d" % i
                producer.send(TOPIC, value=value, partition=p, timestamp_ms=ts).get(timeout=20)
        for i in range(3):
            producer.send(TRIMMED, value=b"t%d" % i, partition=0, timestamp_ms=BASE_MS + i * 1000).get(timeout=20)
        transactional = KafkaProducer(bootstrap_servers=bs, transactional_id="stamped-txn")
        try:
            transactional.init_transactions()
            transactional.begin_transaction()
            for i in range(2):
                transactional.send(TXN, value=b"x%d" % i, partition=0, timestamp_ms=TXN_MS)
            transactional.commit_transaction()
        finally:
            transactional.close()
        producer.send(TXN, value=b"after", partition=0, timestamp_ms=AFTER_TXN_MS).get(timeout=20)
    finally:
        producer.close()
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.delete_records({TopicPartition(TRIMMED, 0): 2})
    finally:
        admin.close()


@contextmanager
def stamped_server(data_dir: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(data_dir, {"offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"})
    server.start()
    try:
        _produce(server.bootstrap)
        with GroupAdmin(server.bootstrap) as admin:
            for group, offsets in COMMITS.items():
                assert set(admin.alter_offsets(group, offsets).values()) == {0}
        yield server
    finally:
        server.stop()
