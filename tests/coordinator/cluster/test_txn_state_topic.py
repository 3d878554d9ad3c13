"""``__transaction_state`` in cluster mode: asked for on first use, written to a real ZooKeeper
as Kafka's ZooKeeper mode writes a topic, with Kafka's partition count, replication factor and
topic configs — and not before as many nodes are alive as its replication factor."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from coordinator.cluster.coordinator_topics import TRANSACTION_STATE, ask_for_coordinator_topic, transaction_state_topic
from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.cluster.topic_store import ZkTopicStore
from coordinator.cluster.view import ClusterView
from coordinator.cluster.znodes import BrokerRegistration
from coordinator.cluster.zookeeper import ZooKeeper
from tests.coordinator.cluster.conftest import chroot_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def zk(zookeeper: LocalZooKeeper, request: pytest.FixtureRequest) -> Iterator[ZooKeeper]:
    session = ZooKeeper(zookeeper.connect + chroot_for(request), session_timeout_ms=2000, connection_timeout_ms=10000)
    session.start()
    yield session
    session.close()


def _view(brokers: int) -> ClusterView:
    view = ClusterView()
    view.set_brokers({b: BrokerRegistration(b, "127.0.0.1", 9000 + b) for b in range(1, brokers + 1)})
    return view


async def _created(zk: ZooKeeper, timeout_s: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if zk.client.exists(f"/brokers/topics/{TRANSACTION_STATE}") is not None:
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.mark.asyncio
async def test_transaction_state_is_created_with_kafkas_layout_once_enough_nodes_live(zk: ZooKeeper) -> None:
    spec = transaction_state_topic()
    # Two live nodes, replication factor 3: not yet (FindCoordinator answers COORDINATOR_NOT_AVAILABLE).
    assert not ask_for_coordinator_topic(ZkTopicStore(zk, _view(2)), spec)
    assert not await _created(zk, 0.3)

    view = _view(3)
    assert ask_for_coordinator_topic(ZkTopicStore(zk, view), spec)
    assert await _created(zk)
    topic = json.loads(zk.client.get(f"/brokers/topics/{TRANSACTION_STATE}")[0])
    assert sorted(map(int, topic["partitions"])) == list(range(50))
    assert all(sorted(replicas) == [1, 2, 3] for replicas in topic["partitions"].values())
    # Preferred leaders spread over the nodes, as for any topic.
    assert {replicas[0] for replicas in topic["partitions"].values()} == {1, 2, 3}
    configs = json.loads(zk.client.get(f"/config/topics/{TRANSACTION_STATE}")[0])["config"]
    assert configs == {"cleanup.policy": "compact", "compression.type": "uncompressed",
                       "unclean.leader.election.enable": "false", "min.insync.replicas": "2",
                       "segment.bytes": "104857600"}


def test_the_minimum_isr_never_exceeds_the_replication_factor() -> None:
    assert transaction_state_topic(replication_factor=1).configs["min.insync.replicas"] == "1"
    assert transaction_state_topic(num_partitions=5, replication_factor=3, min_insync_replicas=3).configs[
        "min.insync.replicas"] == "3"
