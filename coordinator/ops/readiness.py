"""Liveness and readiness, for /healthz and /readyz.

Live: the process answers (the event loop runs this). Ready: it can serve its groups now — every
coordinator partition (``__consumer_offsets``, ``__transaction_state``) whose log this node leads
is loaded (a loading one answers COORDINATOR_LOAD_IN_PROGRESS; a failed one NOT_COORDINATOR), and
in cluster mode its ZooKeeper session is connected (without it the node can neither keep its
registration nor hear of leadership changes).
"""

from __future__ import annotations

from ..cluster.zookeeper import ZooKeeper
from ..runtime.errors import CoordinatorState
from .state_view import StateView

__all__ = ["Readiness"]


class Readiness:
    def __init__(self, view: StateView, zookeeper: ZooKeeper | None = None) -> None:
        self.view = view
        self.zookeeper = zookeeper

    def live(self) -> bool:
        return True

    def ready(self) -> tuple[bool, list[str]]:
        """Whether the node is ready, and why not (one reason a line)."""
        reasons: list[str] = []
        zookeeper = self.zookeeper
        if zookeeper is not None and not (zookeeper.client.connected and not zookeeper.closing):
            reasons.append(f"zookeeper session not connected ({zookeeper.client.state})")
        seen: set[tuple[str, int]] = set()
        for topic, partition, state in self.view.led_coordinator_partitions():
            seen.add((topic, partition))
            if state is not CoordinatorState.ACTIVE:
                what = "not loaded" if state is None else state.value
                reasons.append(f"coordinator partition {topic}-{partition} {what}")
        # Partitions promised to the loader (``queue_loading``) before their log says who leads.
        for part in self.view.coordinator_partitions():
            if part.state == CoordinatorState.LOADING.value and (part.topic, part.partition) not in seen:
                reasons.append(f"coordinator partition {part.topic}-{part.partition} loading")
        return not reasons, reasons
