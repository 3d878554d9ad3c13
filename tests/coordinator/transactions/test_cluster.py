"""Transactions on a 3-node cluster (ZooKeeper, node processes): kafka-python's transactional
producer commits and aborts with `__transaction_state` and its data replicated 3 ways; the
markers go to each partition's leader (the cluster's marker channel), a read_committed consumer
sees the committed records only, and offsets sent to the transaction become the group's."""

from __future__ import annotations

from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from tests.coordinator.cluster.conftest import running_cluster, wait_for


def test_commit_and_abort_on_three_nodes(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster", "transaction.state.log.num.partitions=3",
                         "offsets.topic.num.partitions=3") as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            admin.create_topics([NewTopic("orders", 2, 3)])
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="cl", max_block_ms=30_000)
        group = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="cl-group", enable_auto_commit=False)
        source = TopicPartition("orders", 1)
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("orders", b"kept-0", partition=0)
            producer.send("orders", b"kept-1", partition=1)
            producer.send_offsets_to_transaction({source: OffsetAndMetadata(7, "", -1)}, group.group_metadata())
            producer.commit_transaction()
            assert wait_for(lambda: group.committed(source) == 7, 20, "the offset committed in the transaction")
            producer.begin_transaction()
            producer.send("orders", b"dropped", partition=0)
            producer.flush()
            producer.abort_transaction()
        finally:
            producer.close(timeout=5)
            group.close()

        def read(isolation: str) -> list[bytes]:
            consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, isolation_level=isolation,
                                     consumer_timeout_ms=2000)
            try:
                consumer.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
                consumer.seek_to_beginning()
                return sorted(m.value for m in consumer)
            finally:
                consumer.close()

        assert wait_for(lambda: read("read_committed") == [b"kept-0", b"kept-1"], 20, "committed records")
        assert read("read_uncommitted") == [b"dropped", b"kept-0", b"kept-1"]
