"""This node's warming replicas, published for the controller (``/admin/warming_replicas``).

A replica whose state machine is still catching up with its log — the hot standby of an offsets
partition just after a restart or a reassignment, which replays a snapshot and the tail after it
(coordinator/runtime rule 6) — is a poor leader: elected, it answers COORDINATOR_LOAD_IN_PROGRESS
until the replay is done (2–3 s for a million offsets on a 2-core machine, where a warm standby
takes over in 0.2 s). The controller therefore prefers, among the ISR members it may choose, one
that is not warming (``controller.plan_partition``). It is a preference only: when every
candidate is warming, the usual order decides, so availability never waits on it.

Each mark is an ephemeral znode, so a node that dies takes its marks with it. Writes are
asynchronous and unconfirmed (kazoo's ``*_async``, FIFO on the one session): a lost mark only
costs the preference, never safety, which rests on the ISR and leader epochs as before. A new
session (after an expiry) does not re-create the marks of the old one; the replicas concerned
then count as warm, as every replica did before this existed.
"""

from __future__ import annotations

import logging

from kazoo.exceptions import KazooException

from .znodes import WARMING_REPLICAS, warming_replica_name
from .zookeeper import ZooKeeper

__all__ = ["WarmingMarks"]

log = logging.getLogger("groupcoord.cluster.warming")


class WarmingMarks:
    """Creates and deletes this node's ``/admin/warming_replicas/<id>:<topic>:<partition>``."""

    def __init__(self, zk: ZooKeeper, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.marked: set[tuple[str, int]] = set()

    def set(self, topic: str, partition: int, warming: bool) -> None:
        """Mark or unmark one replica; callable from the event loop (never blocks)."""
        key = (topic, partition)
        if warming == (key in self.marked):
            return
        path = f"{WARMING_REPLICAS}/{warming_replica_name(self.broker_id, topic, partition)}"
        try:
            if warming:
                self.marked.add(key)
                # An old process of this node (SIGKILLed) may have left the same name until its
                # session expires: NodeExists then, and the mark stands either way.
                result = self.zk.client.create_async(path, b"", ephemeral=True, makepath=True)
            else:
                self.marked.discard(key)
                result = self.zk.client.delete_async(path)
        except KazooException as exc:  # no connection: the mark is simply not published
            log.debug("warming mark not written", extra={"path": path, "error": repr(exc)})
            return
        result.rawlink(lambda r, path=path: self._done(path, r))

    @staticmethod
    def _done(path: str, result: object) -> None:
        exc = getattr(result, "exception", None)
        if exc is not None:
            log.debug("warming mark not written", extra={"path": path, "error": repr(exc)})
