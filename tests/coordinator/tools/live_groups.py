"""Real consumer groups on a real server, for the groups tool's tests: a classic group of one
kafka-python consumer (Stable), a classic group whose consumer committed and left (Empty, offsets
kept), a KIP-848 group of one confluent-kafka consumer (``group.protocol=consumer``) and a classic
group held in PreparingRebalance by a second JoinGroup over the wire."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.apis import ApiKey, request_class
from tests.conftest import ServerProcess
from tests.wire_client import WireClient

SERVER_SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}

ORDERS, PAYMENTS = "orders", "payments"
CLASSIC, EMPTY, KIP848, REBALANCING = "shop-classic", "shop-empty", "shop-848", "shop-rebalancing"
#: What each group committed: CLASSIC leaves orders-2 and payments-1 without a commit.
COMMITS = {
    CLASSIC: {(ORDERS, 0): 10, (ORDERS, 1): 4, (PAYMENTS, 0): 5},
    EMPTY: {(ORDERS, 0): 3},
    KIP848: {(PAYMENTS, 1): 2},
}
RECORDS = {ORDERS: 10, PAYMENTS: 5}  # per partition
PARTITIONS = {ORDERS: 3, PAYMENTS: 2}


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class LiveGroups:
    server: ServerProcess
    closers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap


def _produce(bs: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in PARTITIONS.items()], request_timeout=15)
    for f in futures.values():
        f.result(timeout=20)
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for topic, n in PARTITIONS.items():
        for p in range(n):
            for i in range(RECORDS[topic]):
                producer.produce(topic, value=b"v%d" % i, partition=p)
    assert producer.flush(20) == 0


def _classic_consumer(bs: str, group: str, client_id: str) -> Any:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bs, group_id=group, client_id=client_id, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=30000, heartbeat_interval_ms=1000)
    # The leader assigns from its own metadata: with the new topics not yet in it, it would give out
    # nothing (kafka-python's range assignor: "No partition metadata") and not look again for a while.
    wait_until(lambda: all(consumer.partitions_for_topic(t) for t in PARTITIONS), 30, "the topics' metadata")
    consumer.subscribe([ORDERS, PAYMENTS])
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) < sum(PARTITIONS.values()):
        assert time.monotonic() < deadline, f"{group}: assigned only {consumer.assignment()}"
        consumer.poll(timeout_ms=200)
    consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in COMMITS[group].items()})
    return consumer


def _kip848_consumer(bs: str) -> Any:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bs, "group.id": KIP848, "group.protocol": "consumer",
                         "client.id": "pay-848", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([PAYMENTS])
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) < PARTITIONS[PAYMENTS]:
        assert time.monotonic() < deadline, "KIP-848 member: no assignment"
        consumer.poll(0.2)
    consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in COMMITS[KIP848].items()], asynchronous=False)
    return consumer


def _hold_rebalancing(bs: str) -> WireClient:
    """Member A joins and syncs (Stable); member B's JoinGroup then opens a rebalance that waits for A,
    which never rejoins while the tests run (60 s rebalance timeout)."""
    host, port = bs.rsplit(":", 1)
    J, S = request_class(ApiKey.JOIN_GROUP), request_class(ApiKey.SYNC_GROUP)

    def join(c: WireClient, member_id: str, send_only: bool = False) -> Any:
        request = J(version=5, group_id=REBALANCING, session_timeout_ms=60000, rebalance_timeout_ms=60000,
                    member_id=member_id, group_instance_id=None, protocol_type="consumer",
                    protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")])
        if send_only:
            c.send(ApiKey.JOIN_GROUP, 5, request)
            return None
        return c.request(ApiKey.JOIN_GROUP, 5, request)

    a = WireClient(host, int(port), timeout=30)
    first = join(a, "")
    joined = join(a, first.member_id)
    assert joined.error_code == 0, joined
    synced = a.request(ApiKey.SYNC_GROUP, 3, S(version=3, group_id=REBALANCING, generation_id=joined.generation_id,
                                               member_id=joined.member_id, group_instance_id=None,
                                               assignments=[S.SyncGroupRequestAssignment(
                                                   member_id=joined.member_id, assignment=b"")]))
    assert synced.error_code == 0, synced
    b = WireClient(host, int(port), timeout=30)
    b_first = join(b, "")
    join(b, b_first.member_id, send_only=True)
    return b


@contextmanager
def live_groups(data_dir: Path) -> Iterator[LiveGroups]:
    server = ServerProcess(data_dir, SERVER_SETTINGS)
    server.start()
    live = LiveGroups(server)
    try:
        bs = server.bootstrap
        _produce(bs)
        classic = _classic_consumer(bs, CLASSIC, "classic-client")
        live.closers.append(classic.close)
        _classic_consumer(bs, EMPTY, "empty-client").close()
        kip848 = _kip848_consumer(bs)
        live.closers.append(kip848.close)
        rebalancing = _hold_rebalancing(bs)
        live.closers.append(rebalancing.close)
        yield live
    finally:
        for close in reversed(live.closers):
            close()
        server.stop()
