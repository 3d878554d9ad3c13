"""The migration of a group's offsets from ZooKeeper to Kafka and back, as Kafka's docs give it for 0.8.2's
consumer ("Migrating offsets from ZooKeeper to Kafka", https://kafka.apache.org/0100/documentation.html),
end to end on one node connected to a real ZooKeeper; docs/zk_offsets.md gives the same steps as commands.

1. ZooKeeper storage: a ZooKeeper-era consumer reads the topic and commits with OffsetCommit v0 (kafka-python
   with ``api_version=(0, 8, 1)``), registered under ``/consumers/<group>/ids`` as the 0.8 consumer was.
2. Dual commit: the node mirrors the group's Kafka commits into ZooKeeper
   (``offsets.zookeeper.mirror.groups``); ``zk-offsets migrate --direction to-kafka`` (a dry run, then
   ``--execute``) copies the ZooKeeper offsets into Kafka and a current consumer of the group (kafka-python,
   OffsetCommit v2+) starts from them; ``groups --zookeeper --describe`` keeps seeing its progress.
3. Dual commit off: the node restarted without the setting; Kafka storage only.
4. Roll-back: ``migrate --direction to-zookeeper --execute``, and the ZooKeeper-era consumer resumes from
   ZooKeeper.

kafka-python at ``(0, 8, 1)`` cannot read records from a node: it fetches with Fetch v0, which this node does
not serve (Fetch 4+, as Kafka 4 after KIP-896). So the ZooKeeper-era consumer reads with a second kafka-python
client without a group and does its offset work (commit and fetch) through the v0 one.

Checked throughout: every record is read at least once; the committed offset never goes backwards, in
ZooKeeper (every value a watch saw) or in Kafka (each value read back); each consumer starts exactly at the
offset last committed before it started, so a record is read twice only when a consumer stopped after
reading it and before committing it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.tools.group_admin import GroupAdmin
from tests.clients.records_io import create_topic
from tests.conftest import ServerProcess
from tests.coordinator.cluster.conftest import wait_for
from tests.coordinator.cluster.test_zk_offsets_cli import zk_offsets
from tests.coordinator.tools.test_groups_zookeeper import groups

pytestmark = pytest.mark.timeout(120)

TOPIC = "orders"
GROUP = "billing"
PARTITIONS = (0, 1)
RECORDS = 40  # per partition
CHROOT = "/migration"
CONSUMER_ID = "billing_host1-1700000000000-1a2b3c4d"  # as the 0.8 consumer named itself (ZCC.consumerIdString)

TPS = [TopicPartition(TOPIC, p) for p in PARTITIONS]


class Ledger:
    """What the consumers read and what was committed where, for the checks at the end."""

    def __init__(self) -> None:
        self.reads: dict[int, list[int]] = {p: [] for p in PARTITIONS}
        #: Every offset committed, per side, in order: ZooKeeper's as its znodes' watches saw them.
        self.zookeeper: dict[int, list[int]] = {p: [] for p in PARTITIONS}
        self.kafka: dict[int, list[int]] = {p: [] for p in PARTITIONS}
        #: Per consumer, the first offset it read of each partition, and the last offset it committed.
        self.starts: list[dict[int, int]] = []
        self.last_commits: list[dict[int, int]] = []
        self._lock = threading.Lock()

    def next_consumer(self) -> None:
        self.starts.append({})
        self.last_commits.append({})

    def watch(self, partition: int) -> Callable[[bytes | None, object], None]:
        """A kazoo DataWatch function recording each value of ``partition``'s offset znode."""
        def changed(data: bytes | None, _stat: object) -> None:
            if data is not None:
                with self._lock:
                    self.zookeeper[partition].append(int(data))
        return changed


def _read_until(consumer: KafkaConsumer, ledger: Ledger, until: int) -> dict[int, int]:
    """Poll until the consumer's position in each partition is ``until``, a record past it not counted as read
    (the position set back to ``until``); returns the first offset read of each partition."""
    first: dict[int, int] = {}
    positions: dict[int, int] = {}

    def done() -> bool:
        for tp, records in consumer.poll(timeout_ms=200, max_records=50).items():
            for record in records:
                if record.offset >= until:
                    break
                first.setdefault(tp.partition, record.offset)
                ledger.reads[tp.partition].append(record.offset)
                positions[tp.partition] = record.offset + 1
            if positions.get(tp.partition, 0) >= until:
                consumer.seek(tp, until)
                consumer.pause(tp)
        return all(positions.get(p) == until for p in PARTITIONS)

    wait_for(done, 30, f"records up to offset {until}")
    consumer.resume(*consumer.paused())
    return first


class ZooKeeperEraConsumer:
    """A consumer with offsets.storage=zookeeper: registered in ZooKeeper as the 0.8 consumer registered, its
    offsets committed and fetched with v0 (kafka-python ``api_version=(0, 8, 1)``); records read by a
    group-less client (see the module's docstring)."""

    def __init__(self, node: ServerProcess, zookeeper: LocalZooKeeper, ledger: Ledger) -> None:
        from kazoo.client import KazooClient

        self.ledger = ledger
        self.session = KazooClient(hosts=zookeeper.connect + CHROOT, timeout=10.0)
        self.session.start(timeout=10)
        registration = b'{"version":1,"subscription":{"orders":1},"pattern":"static","timestamp":"1700000000000"}'
        self.session.create(f"/consumers/{GROUP}/ids/{CONSUMER_ID}", registration, ephemeral=True, makepath=True)
        for p in PARTITIONS:
            self.session.create(f"/consumers/{GROUP}/owners/{TOPIC}/{p}", f"{CONSUMER_ID}-0".encode(),
                                ephemeral=True, makepath=True)
        self.offsets = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=GROUP, api_version=(0, 8, 1),
                                     enable_auto_commit=False)
        self.offsets.assign(TPS)
        self.reader = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="none")
        self.reader.assign(TPS)
        # The 0.8 consumer's start: the ZooKeeper offset, or (a new group) the log start, as
        # auto.offset.reset=smallest.
        for tp in TPS:
            committed = self.offsets.committed(tp)
            self.reader.seek(tp, 0 if committed is None else committed)

    def read_until(self, until: int) -> dict[int, int]:
        return _read_until(self.reader, self.ledger, until)

    def commit(self, offset: int) -> None:
        self.offsets.commit({tp: OffsetAndMetadata(offset, "", -1) for tp in TPS})  # OffsetCommit v0
        self.ledger.last_commits[-1] = {p: offset for p in PARTITIONS}

    def stop(self) -> None:
        self.reader.close()
        self.offsets.close()
        self.session.stop()  # the ephemeral registration goes with the session, as a stopped 0.8 consumer's
        self.session.close()


class KafkaStorageConsumer:
    """A current consumer of the group (kafka-python, Kafka's group protocol, OffsetCommit v2+)."""

    def __init__(self, node: ServerProcess, ledger: Ledger) -> None:
        self.ledger = ledger
        # auto_offset_reset none: a partition without a committed offset is an error, never a silent jump.
        self.consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=GROUP, enable_auto_commit=False,
                                      auto_offset_reset="none")
        self.consumer.subscribe([TOPIC])

    def read_until(self, until: int) -> dict[int, int]:
        return _read_until(self.consumer, self.ledger, until)

    def commit(self, partitions: tuple[int, ...] = PARTITIONS) -> None:
        """Commit the positions of ``partitions`` (one OffsetCommit)."""
        offsets = {tp: OffsetAndMetadata(self.consumer.position(tp), "", -1) for tp in TPS if tp.partition in partitions}
        self.consumer.commit(offsets)
        self.ledger.last_commits[-1].update({tp.partition: o.offset for tp, o in offsets.items()})

    def stop(self) -> None:
        self.consumer.close(autocommit=False)


def _kafka_offsets(node: ServerProcess, ledger: Ledger) -> dict[int, int]:
    with GroupAdmin(node.bootstrap) as admin:
        committed = admin.committed_offsets([GROUP]).get(GROUP, {})
    offsets = {p: committed[(TOPIC, p)].offset for p in PARTITIONS if (TOPIC, p) in committed}
    for p, offset in offsets.items():
        ledger.kafka[p].append(offset)
    return offsets


def _zookeeper_offsets(zk_client: Any) -> dict[int, int]:
    found = {}
    for p in PARTITIONS:
        path = f"{CHROOT}/consumers/{GROUP}/offsets/{TOPIC}/{p}"
        if zk_client.exists(path):
            found[p] = int(zk_client.get(path)[0])
    return found


@pytest.fixture
def node(zookeeper: LocalZooKeeper, tmp_path: Path) -> Iterator[ServerProcess]:
    """One node in ZooKeeper mode, its group's Kafka commits mirrored to ZooKeeper (dual commit on)."""
    node = ServerProcess(tmp_path / "data", {
        "zookeeper.connect": zookeeper.connect + CHROOT, "broker.id": "1", "zookeeper.session.timeout.ms": "4000",
        "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0", "offsets.zookeeper.mirror.groups": GROUP})
    node.start()
    try:
        yield node
    finally:
        node.stop()


def test_zookeeper_to_kafka_and_back_loses_and_rewinds_nothing(node: ServerProcess, zookeeper: LocalZooKeeper,
                                                                zk_client: Any) -> None:
    from kazoo.recipe.watchers import DataWatch

    connect = zookeeper.connect + CHROOT
    ledger = Ledger()
    create_topic(node.bootstrap, TOPIC, partitions=len(PARTITIONS))
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all")
    for i in range(RECORDS):
        for p in PARTITIONS:
            producer.send(TOPIC, f"{p}-{i}".encode(), partition=p)
    producer.flush(30)
    producer.close()
    for p in PARTITIONS:
        DataWatch(zk_client, f"{CHROOT}/consumers/{GROUP}/offsets/{TOPIC}/{p}", ledger.watch(p))

    # --- 1. ZooKeeper storage: commits with v0; a stop after reading past the last commit. -----------------
    ledger.next_consumer()
    old = ZooKeeperEraConsumer(node, zookeeper, ledger)
    ledger.starts[-1] = old.read_until(10)
    old.commit(10)
    old.read_until(15)
    old.commit(15)
    old.read_until(18)  # 15..17 read, not committed: read again after the switch
    old.stop()
    assert _zookeeper_offsets(zk_client) == {0: 15, 1: 15}

    # --- 2. Dual commit: the offsets copied to Kafka, a current consumer starts from them. -------------------
    common = ["--zookeeper", connect, "migrate", "--group", GROUP, "--bootstrap-server", node.bootstrap]
    dry = zk_offsets(*common)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [  # as docs/zk_offsets.md shows it
        "GROUP   TOPIC  PARTITION ZK-OFFSET KAFKA-OFFSET ACTION",
        "billing orders 0         15        -            moves",
        "billing orders 1         15        -            moves",
        "Dry run: nothing written; --execute moves the 2 offset(s) marked 'moves'."]
    assert _kafka_offsets(node, ledger) == {}
    done = zk_offsets(*common, "--execute")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "Moved 2 offset(s) of group billing to-kafka."
    assert _kafka_offsets(node, ledger) == {0: 15, 1: 15}

    ledger.next_consumer()
    new = KafkaStorageConsumer(node, ledger)
    ledger.starts[-1] = new.read_until(25)
    new.commit()
    assert _kafka_offsets(node, ledger) == {0: 25, 1: 25}
    # The mirror: ZooKeeper's readers see the progress.
    wait_for(lambda: _zookeeper_offsets(zk_client) == {0: 25, 1: 25}, 10, "the commit mirrored to ZooKeeper")

    def described() -> list[list[str]] | None:
        status, out, err = groups("--zookeeper", connect, "--describe", "--group", GROUP)
        assert status == 0, (out, err)
        rows = [line.split() for line in out.splitlines() if line.startswith(TOPIC)]
        return rows if rows and all(r[3] != "-" for r in rows) else None

    assert wait_for(described, 20, "the log ends") == [[TOPIC, "0", "25", "40", "15", "-"],
                                                      [TOPIC, "1", "25", "40", "15", "-"]]

    # The last commits, acknowledged just before the node stops, reach ZooKeeper: a stopping node writes
    # the mirror's queue before its ZooKeeper session ends (tests/coordinator/cluster/test_zk_offset_apis.py
    # holds ZooKeeper back to show it).
    new.read_until(30)
    new.commit((0,))
    new.commit((1,))
    new.stop()
    assert node.stop() == 0
    assert _zookeeper_offsets(zk_client) == {0: 30, 1: 30}

    # --- 3. Dual commit off: the node without the mirror; Kafka storage only. ----------------------------
    del node.settings["offsets.zookeeper.mirror.groups"]
    node.start()
    assert _kafka_offsets(node, ledger) == {0: 30, 1: 30}
    ledger.next_consumer()
    new = KafkaStorageConsumer(node, ledger)
    ledger.starts[-1] = new.read_until(35)
    new.commit()
    new.read_until(37)  # 35..36 read, not committed
    new.stop()
    assert _kafka_offsets(node, ledger) == {0: 35, 1: 35}

    # --- 4. Roll-back: Kafka's offsets copied over ZooKeeper's older ones; the ZooKeeper-era consumer resumes.
    back = [*common, "--direction", "to-zookeeper"]
    dry = zk_offsets(*back)
    assert dry.returncode == 0, dry.stderr
    # ZooKeeper still holds what the mirror last wrote: no mirror in step 3.
    assert dry.stdout.splitlines() == [
        "GROUP   TOPIC  PARTITION ZK-OFFSET KAFKA-OFFSET ACTION",
        "billing orders 0         30        35           moves",
        "billing orders 1         30        35           moves",
        "Dry run: nothing written; --execute moves the 2 offset(s) marked 'moves'."]
    done = zk_offsets(*back, "--execute")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "Moved 2 offset(s) of group billing to-zookeeper."
    assert _zookeeper_offsets(zk_client) == {0: 35, 1: 35}

    ledger.next_consumer()
    old = ZooKeeperEraConsumer(node, zookeeper, ledger)
    ledger.starts[-1] = old.read_until(RECORDS)
    old.commit(RECORDS)
    old.stop()
    assert _zookeeper_offsets(zk_client) == {0: RECORDS, 1: RECORDS}
    assert _kafka_offsets(node, ledger) == {0: 35, 1: 35}

    # --- Nothing lost, nothing rewound. ---------------------------------------------------------------------
    wait_for(lambda: all(ledger.zookeeper[p][-1:] == [RECORDS] for p in PARTITIONS), 10, "the watches' last value")
    for p in PARTITIONS:
        assert set(ledger.reads[p]) == set(range(RECORDS)), f"partition {p}: a record never read"
        assert ledger.zookeeper[p] == sorted(ledger.zookeeper[p]), f"ZooKeeper went backwards: {ledger.zookeeper}"
        assert ledger.kafka[p] == sorted(ledger.kafka[p]), f"Kafka went backwards: {ledger.kafka}"
    # Each consumer started exactly where the one before it last committed (0 for the first).
    assert ledger.starts == [{0: 0, 1: 0}, {0: 15, 1: 15}, {0: 30, 1: 30}, {0: 35, 1: 35}]
    assert ledger.last_commits == [{0: 15, 1: 15}, {0: 30, 1: 30}, {0: 35, 1: 35}, {0: RECORDS, 1: RECORDS}]
    # Read twice: only what was read after a consumer's last commit, before it stopped.
    for p in PARTITIONS:
        twice = sorted(o for o in set(ledger.reads[p]) if ledger.reads[p].count(o) > 1)
        assert twice == [15, 16, 17, 35, 36], f"partition {p}"
