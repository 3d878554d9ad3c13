"""The topic registry as the topics image KIP-848 groups read (coordinator/group/topics_image.py):
a version that moves on every change a group depends on, and the racks of each partition's
replicas — on one node this node's ``broker.rack``, in a cluster the view's replicas and the
brokers' registered racks (cluster/replica_racks.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

from coordinator.cluster.replica_racks import ReplicaRacks
from coordinator.cluster.view import ClusterView
from coordinator.cluster.znodes import BrokerRegistration, TopicAssignment
from coordinator.group.topics_image import TopicsImage
from coordinator.topics.registry import TopicInfo, TopicRegistry


def _image(registry: TopicsImage) -> TopicsImage:
    return registry  # mypy checks the registry has the image's shape


def test_version_moves_on_create_grow_delete_not_on_configs(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path)
    image = _image(registry)
    seen = [image.version]
    info = registry.create("orders", 2)
    seen.append(image.version)
    registry.set_partitions("orders", 4)
    seen.append(image.version)
    registry.set_configs("orders", {"retention.ms": "1000"})
    assert image.version == seen[-1]  # configs change no assignment
    assert image.get("orders") is info and image.by_id(info.topic_id) is info
    assert [t.name for t in image.all()] == ["orders"] and info.num_partitions == 4
    registry.delete("orders")
    seen.append(image.version)
    registry.add(TopicInfo("orders", uuid.uuid4(), 1))  # recreated under a new id
    seen.append(image.version)
    registry.topology_changed()
    seen.append(image.version)
    assert len(set(seen)) == len(seen) and seen == sorted(seen)


def test_one_node_racks_are_its_own(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path)
    info = registry.create("orders", 2)
    assert registry.partition_racks(info.topic_id, 0) == ()
    registry.node_rack = "rack-a"
    assert registry.partition_racks(info.topic_id, 1) == ("rack-a",)
    assert registry.partition_racks(info.topic_id, 2) == ()  # no such partition
    assert registry.partition_racks(uuid.uuid4(), 0) == ()  # no such topic


def test_cluster_racks_follow_replicas_and_registrations(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path, persistent=False)
    view = ClusterView()
    ReplicaRacks(view, registry)
    topic_id = uuid.uuid4()
    registry.add(TopicInfo("orders", topic_id, 2))
    view.set_brokers({1: BrokerRegistration(1, "h", 1, "b"), 2: BrokerRegistration(2, "h", 2, "a"),
                      3: BrokerRegistration(3, "h", 3, None)})
    view.set_topic(TopicAssignment("orders", topic_id, {0: (1, 2, 3), 1: (3, 1)}), "orders")
    assert registry.partition_racks(topic_id, 0) == ("a", "b")  # sorted, the rack-less broker adds none
    assert registry.partition_racks(topic_id, 1) == ("b",)
    view.set_brokers({1: BrokerRegistration(1, "h", 1, "b"), 2: BrokerRegistration(2, "h", 2, "a"),
                      3: BrokerRegistration(3, "h", 3, "b")})
    assert registry.partition_racks(topic_id, 0) == ("a", "b", "b")  # one per replica, as Kafka's hash counts
    view.set_brokers({1: BrokerRegistration(1, "h", 1, "b"), 2: BrokerRegistration(2, "h", 2, "a"),
                      3: BrokerRegistration(3, "h", 3, None)})

    before = registry.version
    view.set_topic(TopicAssignment("orders", topic_id, {0: (2, 3), 1: (3, 1)}), "orders")  # a reassignment
    assert registry.version > before and registry.partition_racks(topic_id, 0) == ("a",)

    before = registry.version
    view.set_shutting_down(frozenset({3}))  # told as a broker change, but no rack moved
    assert registry.version == before
    view.set_brokers({1: BrokerRegistration(1, "h", 1, "b"), 2: BrokerRegistration(2, "h", 2, "c"),
                      3: BrokerRegistration(3, "h", 3, None)})  # broker 2 came back on another rack
    assert registry.version > before and registry.partition_racks(topic_id, 0) == ("c",)

    before = registry.version
    view.set_brokers({1: BrokerRegistration(1, "h", 1, "b"), 3: BrokerRegistration(3, "h", 3, None)})
    assert registry.version > before and registry.partition_racks(topic_id, 0) == ()  # broker 2 down
