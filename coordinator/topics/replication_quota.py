"""Replication throttles (KIP-73), the brake ``kafka-reassign-partitions --throttle`` puts on a move
so that copying a partition to a new replica does not starve clients.

Two halves, both per node and both in bytes per second:

* the leader sends at most ``leader.replication.throttled.rate`` to replicas its topics list in
  ``leader.replication.throttled.replicas`` (``<partition>:<broker>`` pairs naming this node, or
  ``*``);
* a follower fetches at most ``follower.replication.throttled.rate`` for the replicas listed in
  ``follower.replication.throttled.replicas`` for it.

As in Kafka, a replica in the ISR is never throttled: only the copying of a replica that is not
caught up (a reassignment's new replica, a replica back from a long absence) is slowed. When the
measured rate is above the quota the throttled partitions are left out of the fetch (follower) or
answered without records (leader) until the rate falls again. The rate is measured over the last
``replication.quota.window.num`` × ``replication.quota.window.size.seconds`` (Kafka's window
settings), so a move may burst for one window at the start.
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Callable, Mapping

__all__ = ["ReplicationQuota", "ReplicationThrottle", "parse_throttled_replicas", "throttled_replicas_error", "UNLIMITED"]

UNLIMITED = 2**63 - 1
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


@functools.lru_cache(maxsize=1024)
def parse_throttled_replicas(value: str) -> frozenset[tuple[int, int]] | None:
    """``"0:1,0:2,1:3"`` → {(0, 1), (0, 2), (1, 3)}; ``"*"`` → None (every replica). Malformed
    entries are ignored (the config was validated when it was set; this only reads it)."""
    value = value.strip()
    if value == "*":
        return None
    out = set()
    for item in value.split(","):
        partition, _, broker = item.strip().partition(":")
        try:
            out.add((int(partition), int(broker)))
        except ValueError:
            continue
    return frozenset(out)


def throttled_replicas_error(value: str) -> bool:
    """Whether ``value`` is a valid throttled-replicas list (Kafka's ThrottledReplicaListValidator)."""
    value = value.strip()
    if value in ("", "*"):
        return True
    for item in value.split(","):
        partition, sep, broker = item.strip().partition(":")
        if not sep or not partition.isdigit() or not broker.isdigit():
            return False
    return True


class ReplicationQuota:
    """Bytes per second over a sliding window: exceeded once the window holds more than it allows."""

    def __init__(self, rate: Callable[[], int], window_s: Callable[[], float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.window_s = window_s
        self.clock = clock
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self._total = 0

    def _expire(self, now: float) -> None:
        horizon = now - self.window_s()
        while self._samples and self._samples[0][0] < horizon:
            self._total -= self._samples.popleft()[1]

    def record(self, nbytes: int) -> None:
        if nbytes <= 0 or self.rate() >= UNLIMITED:
            return
        now = self.clock()
        self._samples.append((now, nbytes))
        self._total += nbytes
        self._expire(now)

    def exceeded(self) -> bool:
        rate = self.rate()
        if rate >= UNLIMITED:
            return False
        self._expire(self.clock())
        return self._total > rate * self.window_s()


class ReplicationThrottle:
    """This node's two quotas and the rule for which replicas they apply to."""

    def __init__(self, broker_id: int, rate: Callable[[str], int], window_s: Callable[[], float],
                 topic_configs: Callable[[str], Mapping[str, str] | None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        self.topic_configs = topic_configs
        self.leader = ReplicationQuota(lambda: rate(LEADER_RATE), window_s, clock)
        self.follower = ReplicationQuota(lambda: rate(FOLLOWER_RATE), window_s, clock)

    def _listed(self, topic: str, partition: int, key: str) -> bool:
        configs = self.topic_configs(topic)
        value = configs.get(key) if configs else None
        if not value:
            return False
        listed = parse_throttled_replicas(value)
        return listed is None or (partition, self.broker_id) in listed

    def leader_applies(self, topic: str, partition: int, replica_id: int, isr: tuple[int, ...]) -> bool:
        """Whether what this leader sends to ``replica_id`` for this partition counts against the
        leader quota (listed here, and the replica not in the ISR)."""
        return replica_id not in isr and self._listed(topic, partition, LEADER_REPLICAS)

    def follower_applies(self, topic: str, partition: int, isr: tuple[int, ...]) -> bool:
        return self.broker_id not in isr and self._listed(topic, partition, FOLLOWER_REPLICAS)
