"""The racks of each partition's replicas, for the topic registry that consumer groups read.

A KIP-848 group's rack-aware assignment and its metadata hash depend on which racks hold a
partition's replicas; since Kafka 4.1 a change of them moves the group epoch (KIP-1101,
https://cwiki.apache.org/confluence/display/KAFKA/KIP-1101%3A+Trigger+rebalance+on+rack+topology+changes).
The replicas are the cluster's assignment (``/brokers/topics/<t>``), the racks the brokers'
``broker.rack`` in their registrations (``/brokers/ids/<id>``); both are in the cluster view.
A broker not registered (down) has no known rack: its replicas count no rack until it is back.
"""

from __future__ import annotations

from ..topics.registry import TopicRegistry
from .view import ClusterView

__all__ = ["ReplicaRacks"]


class ReplicaRacks:
    """Answers the registry's ``replica_racks`` from the view, and bumps the registry's version
    when a topic's replicas or a registered broker's rack change (a ``ViewListener``)."""

    def __init__(self, view: ClusterView, registry: TopicRegistry) -> None:
        self.view = view
        self.registry = registry
        self._broker_racks = self._racks_of_brokers()
        registry.replica_racks = self.racks
        view.listeners.append(self)

    def racks(self, topic: str, partition: int) -> tuple[str, ...]:
        assignment = self.view.topics.get(topic)
        if assignment is None:
            return ()
        brokers = self.view.brokers
        racks = []
        for replica in assignment.partitions.get(partition, ()):
            registration = brokers.get(replica)
            if registration is not None and registration.rack:
                racks.append(registration.rack)
        return tuple(sorted(racks))

    def _racks_of_brokers(self) -> dict[int, str | None]:
        return {broker_id: reg.rack for broker_id, reg in self.view.brokers.items()}

    # --- ViewListener -------------------------------------------------------------------------------

    def brokers_changed(self, view: ClusterView) -> None:
        # Also told for brokers entering controlled shutdown and topics queued for deletion,
        # which change no rack: only a real change moves the version.
        racks = self._racks_of_brokers()
        if racks != self._broker_racks:
            self._broker_racks = racks
            self.registry.topology_changed()

    def topic_changed(self, view: ClusterView, name: str) -> None:
        # The assignment (replicas) or the configs of the topic changed; creation, deletion and
        # growth move the version in the registry itself, a replica change here.
        self.registry.topology_changed()

    def state_changed(self, view: ClusterView, topic: str, partition: int) -> None:
        pass  # leaders and ISR: no rack changes
