"""``__transaction_state`` in cluster mode (``TopicService.create_transaction_state_topic`` over
the cluster's ``ZkTopicStore``): written to a real ZooKeeper as Kafka's ZooKeeper mode writes a
topic, with Kafka's partition count, replication factor and topic configs — and not before as
many nodes are alive as its replication factor (Kafka's documentation of
``transaction.state.log.replication.factor``: creation fails until the cluster is that big)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.cluster.topic_store import ZkTopicStore
from coordinator.cluster.view import ClusterView
from coordinator.cluster.znodes import BrokerRegistration
from coordinator.cluster.zookeeper import ZooKeeper
from coordinator.config import load_config
from coordinator.topics.registry import TRANSACTION_STATE, TopicRegistry
from coordinator.topics.service import TopicService
from tests.coordinator.cluster.conftest import chroot_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def zk(zookeeper: LocalZooKeeper, request: pytest.FixtureRequest) -> Iterator[ZooKeeper]:
    session = ZooKeeper(zookeeper.connect + chroot_for(request), session_timeout_ms=2000, connection_timeout_ms=10000)
    session.start()
    yield session
    session.close()


def _service(tmp_path: Path, zk: ZooKeeper, brokers: int, *settings: str) -> TopicService:
    view = ClusterView()
    view.set_brokers({b: BrokerRegistration(b, "127.0.0.1", 9000 + b) for b in range(1, brokers + 1)})
    service = TopicService(TopicRegistry(tmp_path, persistent=False), load_config(overrides=list(settings)))
    service.store = ZkTopicStore(zk, view)
    return service


async def _created(zk: ZooKeeper, timeout_s: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if zk.client.exists(f"/brokers/topics/{TRANSACTION_STATE}") is not None:
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.mark.asyncio
async def test_transaction_state_is_created_with_kafkas_layout_once_enough_nodes_live(tmp_path: Path,
                                                                                     zk: ZooKeeper) -> None:
    # Two live nodes, replication factor 3: not yet (FindCoordinator answers COORDINATOR_NOT_AVAILABLE).
    assert _service(tmp_path, zk, 2).create_transaction_state_topic() is None
    assert not await _created(zk, 0.3)

    # Created in the background: every node adopts it from its view.
    assert _service(tmp_path, zk, 3).create_transaction_state_topic() is None
    assert await _created(zk, 10)
    topic = json.loads(zk.client.get(f"/brokers/topics/{TRANSACTION_STATE}")[0])
    assert sorted(map(int, topic["partitions"])) == list(range(50))
    assert all(sorted(replicas) == [1, 2, 3] for replicas in topic["partitions"].values())
    # Preferred leaders spread over the nodes, as for any topic.
    assert {replicas[0] for replicas in topic["partitions"].values()} == {1, 2, 3}
    configs = json.loads(zk.client.get(f"/config/topics/{TRANSACTION_STATE}")[0])["config"]
    assert configs == {"cleanup.policy": "compact", "compression.type": "uncompressed",
                       "unclean.leader.election.enable": "false", "min.insync.replicas": "2",
                       "segment.bytes": "104857600"}


@pytest.mark.asyncio
async def test_the_minimum_isr_never_exceeds_the_replication_factor(tmp_path: Path, zk: ZooKeeper) -> None:
    _service(tmp_path, zk, 1, "transaction.state.log.replication.factor=1",
             "transaction.state.log.num.partitions=2").create_transaction_state_topic()
    assert await _created(zk, 10)
    configs = json.loads(zk.client.get(f"/config/topics/{TRANSACTION_STATE}")[0])["config"]
    assert configs["min.insync.replicas"] == "1"
