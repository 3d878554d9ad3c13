"""The internal topics of the coordinators, created in cluster mode the way ``__consumer_offsets`` is.

A coordinator topic (``__consumer_offsets``, ``__transaction_state``) is created on first use —
FindCoordinator for a key it owns — and, as Kafka's broker does, only once as many nodes are
alive as its replication factor: "Internal topic creation will fail until the cluster size meets
this replication factor requirement" (Kafka's documentation of
``offsets.topic.replication.factor`` and ``transaction.state.log.replication.factor``,
https://kafka.apache.org/documentation/#brokerconfigs). Until then FindCoordinator answers
COORDINATOR_NOT_AVAILABLE and clients retry. ``topics/service.py`` does this for the offsets
topic; :func:`ask_for_coordinator_topic` is the same step for any coordinator topic, given its
:class:`CoordinatorTopic`.

Once created, the topic is a topic like any other for the controller and the replica manager:
its partitions get leaders and followers, and ``coordinator_leadership.py`` makes the
coordinator type's service follow them (load where led, hot standby where followed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["CoordinatorTopic", "TRANSACTION_STATE", "transaction_state_topic", "ask_for_coordinator_topic"]

#: Kafka's ``Topic.TRANSACTION_STATE_TOPIC_NAME``.
TRANSACTION_STATE = "__transaction_state"


@dataclass(frozen=True)
class CoordinatorTopic:
    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)


def transaction_state_topic(num_partitions: int = 50, replication_factor: int = 3, min_insync_replicas: int = 2,
                            segment_bytes: int = 104_857_600) -> CoordinatorTopic:
    """``__transaction_state`` with Kafka's defaults (``transaction.state.log.num.partitions`` 50,
    ``.replication.factor`` 3, ``.min.isr`` 2, ``.segment.bytes`` 100 MiB) and the topic configs
    Kafka's ``TransactionStateManager.transactionTopicConfigs`` sets: compacted, uncompressed,
    no unclean leader election, ``min.insync.replicas`` from ``transaction.state.log.min.isr``.
    That minimum is capped at the replication factor (beyond Kafka, where a smaller factor makes
    every transaction state write fail with NOT_ENOUGH_REPLICAS)."""
    configs = {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(max(1, min(min_insync_replicas, replication_factor))),
        "segment.bytes": str(segment_bytes),
    }
    return CoordinatorTopic(TRANSACTION_STATE, num_partitions, replication_factor, configs)


class _Store(Protocol):
    """What of ``topics/service.py``'s ``TopicStore`` (``topic_store.ZkTopicStore``) is used."""

    def live_brokers(self) -> int: ...

    def create_in_background(self, name: str, num_partitions: int, replication_factor: int,
                             configs: dict[str, str]) -> None: ...


def ask_for_coordinator_topic(store: _Store, topic: CoordinatorTopic) -> bool:
    """Ask for ``topic`` to be created (in the background: every node adopts it from its view),
    if enough nodes are alive for its replication factor; False when too few are. Asking twice
    is harmless: the store creates a name once, and ZooKeeper refuses a second creation."""
    if store.live_brokers() < topic.replication_factor:
        return False
    store.create_in_background(topic.name, topic.num_partitions, topic.replication_factor, dict(topic.configs))
    return True
