"""This node's picture of the cluster, as ZooKeeper holds it: live brokers, the controller, topic
assignments and configs, and every partition's leader, leader epoch and ISR.

ZooKeeper is the one source of truth for cluster metadata, and every node reads it directly
through watches (:mod:`.zk_watcher`) instead of being told by the controller (Kafka's
UpdateMetadata / LeaderAndIsr push, which docs/architecture.md explains we replace). The view is
mutated on the event loop only, in the order ZooKeeper delivered the changes, and tells its
listeners after each change. It is plain data: the controller, the replica manager and the
Metadata handler all read the same object.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from protocol.hashing import partition_for

from ..security.node_client import NodeClientSecurity
from .znodes import DEFAULT_ENTITY, BrokerRegistration, PartitionState, TopicAssignment

__all__ = ["ClusterView", "ViewListener", "PartitionInfo"]

log = logging.getLogger("groupcoord.cluster.view")


class ViewListener(Protocol):
    def brokers_changed(self, view: ClusterView) -> None: ...

    def topic_changed(self, view: ClusterView, name: str) -> None: ...

    def state_changed(self, view: ClusterView, topic: str, partition: int) -> None: ...


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as clients see it in Metadata."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    state: PartitionState | None


class ClusterView:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        #: The broker id in ``/controller``, -1 while there is none.
        self.controller_id = -1
        self.topics: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        #: Whether this node's ZooKeeper session is connected: while it is not, the view may be
        #: stale and a leader must not trust its ISR to acknowledge writes.
        self.connected = True
        #: Nodes in controlled shutdown: they lead nothing they can hand over and leave the ISRs.
        self.shutting_down: frozenset[int] = frozenset()
        #: Replicas still warming up, as ``(broker, topic, partition)`` (cluster/warming.py): the
        #: controller prefers others as leaders. No listener is told: it changes no placement.
        self.warming: frozenset[tuple[int, str, int]] = frozenset()
        #: Topics queued for deletion (``/admin/delete_topics``), removed by the controller.
        self.deleting: frozenset[str] = frozenset()
        #: Dynamic broker configs (``/config/brokers/<id>`` and ``/config/brokers/<default>``)
        #: of this node, by entity name: only the replication throttles are read from them.
        self.broker_configs: dict[str, dict[str, str]] = {}
        #: KIP-848 groups' config overrides (``/config/groups/<group>``), by group id; read when
        #: a group needs them, so no listener is told.
        self.group_configs: dict[str, dict[str, str]] = {}
        self.listeners: list[ViewListener] = []
        #: The listener nodes reach each other on (``inter.broker.listener.name``, set by app.py),
        #: and how this node speaks on it as a client (TLS, SASL; None: PLAINTEXT).
        self.inter_broker_listener = "PLAINTEXT"
        self.inter_broker_security: NodeClientSecurity | None = None

    # --- reading ------------------------------------------------------------------------------

    def inter_broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """Where this node reaches broker ``broker_id``: its endpoint on the inter-broker listener
        (Kafka's replica fetchers and controller channels use that listener's endpoints)."""
        reg = self.brokers.get(broker_id)
        return None if reg is None else reg.endpoint_for(self.inter_broker_listener)

    def live(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def state(self, topic: str, partition: int) -> PartitionState | None:
        return self.states.get((topic, partition))

    def partitions(self, topic: str) -> list[PartitionInfo]:
        assignment = self.topics.get(topic)
        if assignment is None:
            return []
        return [PartitionInfo(topic, p, replicas, self.states.get((topic, p)))
                for p, replicas in sorted(assignment.partitions.items())]

    def leader(self, topic: str, partition: int) -> int:
        """The live leader of the partition, or -1."""
        state = self.states.get((topic, partition))
        if state is None or state.leader < 0 or state.leader not in self.brokers:
            return -1
        return state.leader

    def partition_count(self, topic: str) -> int:
        """The topic's partitions, 0 while the view does not have it."""
        assignment = self.topics.get(topic)
        return 0 if assignment is None else len(assignment.partitions)

    def coordinator(self, topic: str, key: str) -> BrokerRegistration | None:
        """The coordinator of ``key`` on the coordinator topic ``topic``: the live leader of
        partition ``abs(javaHash(key)) % partitions`` — a group id on ``__consumer_offsets``, a
        transactional id on ``__transaction_state`` (Kafka's ``partitionFor`` of both
        coordinators, and ``KafkaApis.getCoordinator`` for FindCoordinator). None while the view
        does not have the topic or the partition has no live leader (FindCoordinator then
        answers COORDINATOR_NOT_AVAILABLE, and asks for a missing topic first)."""
        count = self.partition_count(topic)
        if count == 0:
            return None
        return self.brokers.get(self.leader(topic, partition_for(key, count)))

    def dynamic_broker_config(self, broker_id: int, key: str) -> str | None:
        """A dynamic broker config in force for ``broker_id``: its own, else the cluster default."""
        for entity in (str(broker_id), DEFAULT_ENTITY):
            value = self.broker_configs.get(entity, {}).get(key)
            if value is not None:
                return value
        return None

    # --- changes (event loop, in ZooKeeper's order) --------------------------------------------

    def set_brokers(self, brokers: dict[int, BrokerRegistration]) -> None:
        if brokers == self.brokers:
            return
        gone, came = set(self.brokers) - set(brokers), set(brokers) - set(self.brokers)
        # Registered again with a new broker epoch (KIP-380): the controller fails it over (plan.py).
        bounced = {b for b, reg in brokers.items() if b in self.brokers and reg.epoch != self.brokers[b].epoch}
        self.brokers = dict(brokers)
        log.info("live brokers changed", extra={"brokers": sorted(brokers), "gone": sorted(gone), "new": sorted(came),
                                                "bounced": sorted(bounced)})
        for listener in list(self.listeners):
            listener.brokers_changed(self)

    def set_controller(self, broker_id: int) -> None:
        self.controller_id = broker_id

    def set_topic(self, assignment: TopicAssignment | None, name: str) -> None:
        if assignment is None:
            if self.topics.pop(name, None) is None:
                return
            self.configs.pop(name, None)
            for key in [k for k in self.states if k[0] == name]:
                del self.states[key]
        else:
            if self.topics.get(name) == assignment:
                return
            self.topics[name] = assignment
        for listener in list(self.listeners):
            listener.topic_changed(self, name)

    def set_config(self, name: str, configs: dict[str, str]) -> None:
        if self.configs.get(name) == configs:
            return
        self.configs[name] = configs
        if name in self.topics:  # a change after creation (IncrementalAlterConfigs)
            for listener in list(self.listeners):
                listener.topic_changed(self, name)

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        self.broker_configs[entity] = configs

    def set_group_config(self, group_id: str, configs: dict[str, str]) -> None:
        if configs:
            self.group_configs[group_id] = configs
        else:
            self.group_configs.pop(group_id, None)

    def set_state(self, topic: str, partition: int, state: PartitionState | None) -> None:
        key = (topic, partition)
        old = self.states.get(key)
        if state is None:
            if old is None:
                return
            del self.states[key]
        else:
            if old is not None and old.zk_version >= state.zk_version >= 0:
                return  # an older read delivered late: never go back
            self.states[key] = state
        for listener in list(self.listeners):
            listener.state_changed(self, topic, partition)

    def set_shutting_down(self, brokers: frozenset[int]) -> None:
        if brokers == self.shutting_down:
            return
        self.shutting_down = brokers
        for listener in list(self.listeners):
            listener.brokers_changed(self)

    def set_warming(self, marks: frozenset[tuple[int, str, int]]) -> None:
        self.warming = marks

    def set_deleting(self, topics: frozenset[str]) -> None:
        if topics == self.deleting:
            return
        self.deleting = topics
        for listener in list(self.listeners):
            listener.brokers_changed(self)

    def set_connected(self, connected: bool) -> None:
        self.connected = connected
