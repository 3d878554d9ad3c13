"""Coordinators follow the leadership of their topic's partitions, one coordinator type at a time.

Each coordinator type the node hosts (``runtime/coordinator_types.py``: consumer groups on
``__consumer_offsets``, transactions on ``__transaction_state``) owns the partitions of one
internal topic. In cluster mode the replica manager decides who leads them; this module routes
what it tells its leadership listeners to the service of the type whose topic it is, as Kafka's
broker calls ``onElection`` / ``onResignation`` of the group and the transaction coordinator for
their own topics (``BrokerMetadataPublisher`` / the ZooKeeper-mode ``ReplicaManager``'s
``updateLeaderAndIsrCache`` callbacks):

* leading → ``become_coordinator(partition, leader_epoch)``: the service loads the partition (or
  takes over its hot standby) and uses the leader epoch as its coordinator epoch — the group
  coordinator's generation fence, and the transaction coordinator's ``coordinatorEpoch`` that
  every marker carries (KIP-98; reference: ``TransactionStateManager`` loads with the partition's
  leader epoch);
* following → ``resign(partition, standby=True)``: stop serving at once, keep a hot standby
  (runtime rule 6);
* not a replica any more (reassigned away, :data:`~.replica_manager.NOT_A_REPLICA`) →
  ``resign(partition, standby=False)``: no log is left to keep a standby of.

The cluster wing stands below the runtime in the import order, so it knows the services only by
the two methods above; the wiring (``app.py``) registers one per coordinator type.
"""

from __future__ import annotations

import logging
from typing import Protocol

from .replica_manager import NOT_A_REPLICA

__all__ = ["CoordinatorService", "CoordinatorLeadership"]

log = logging.getLogger("groupcoord.cluster.coordinators")


class CoordinatorService(Protocol):
    """What a coordinator type's service does when leadership of one of its partitions moves
    (``GroupService`` has both)."""

    def become_coordinator(self, partition: int, leader_epoch: int) -> None: ...

    def resign(self, partition: int, *, standby: bool = True) -> None: ...


class CoordinatorLeadership:
    """The replica manager's leadership listener for every coordinator topic: append
    :meth:`on_leadership` to ``ReplicaManager.leadership_listeners`` once, and :meth:`register`
    the service of each coordinator type."""

    def __init__(self) -> None:
        self._services: dict[str, CoordinatorService] = {}
        #: The latest leader epoch of each coordinator partition this node leads, by (topic,
        #: partition): its coordinator epoch. A newer epoch of the same leadership (the controller
        #: bumps it when it drops a replica from the ISR) replaces it; Kafka's transaction
        #: coordinator then stamps its markers with the newer one too.
        self._epochs: dict[tuple[str, int], int] = {}

    def register(self, topic: str, service: CoordinatorService) -> None:
        if topic in self._services:
            raise ValueError(f"a coordinator already follows {topic}")
        self._services[topic] = service

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._services)

    def on_leadership(self, topic: str, partition: int, leading: bool, leader_epoch: int) -> None:
        service = self._services.get(topic)
        if service is None:
            return  # a data partition, or a coordinator this node does not host
        if leading:
            self._epochs[(topic, partition)] = leader_epoch
            service.become_coordinator(partition, leader_epoch)
        else:
            self._epochs.pop((topic, partition), None)
            service.resign(partition, standby=leader_epoch != NOT_A_REPLICA)

    def coordinator_epoch(self, topic: str, partition: int) -> int | None:
        """The coordinator epoch of ``topic-partition`` (its latest leader epoch), or None if this
        node does not lead it."""
        return self._epochs.get((topic, partition))
