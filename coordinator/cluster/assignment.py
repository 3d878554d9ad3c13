"""Replica assignment for new topics and partitions, as Kafka's controller places them.

Kafka's rules (``AdminUtils.assignReplicasToBrokers``), restated:

* Without racks: the leaders of partitions 0, 1, 2, ... go round-robin over the brokers (sorted
  by id) from a random start; each partition's followers are the brokers after its leader at a
  distance that grows by one every full round ("shift"), so the followers of one broker's
  partitions spread over the others instead of always being its neighbours.
* With racks (every broker has one): the brokers are first arranged so that racks alternate
  (r1-a, r2-a, r3-a, r1-b, ...), leaders go round-robin over that list, and each follower is
  taken from that list only if its rack holds no replica of the partition yet, until every rack
  has one; after that, any broker not already holding a replica.
* Some brokers with a rack and some without is an error (Kafka's
  ``AdminOperationException``), as is a replication factor above the broker count
  (INVALID_REPLICATION_FACTOR).

The first replica of each list is the preferred leader. Randomness is injected (``start`` and
``shift``) so tests and the controller's replays are deterministic. Pure: no I/O.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

__all__ = ["AssignmentError", "Broker", "assign_replicas", "rack_alternated"]


class AssignmentError(ValueError):
    """A placement Kafka refuses; ``error_code`` is what CreateTopics/CreatePartitions answer."""

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code


INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39


@dataclass(frozen=True, slots=True)
class Broker:
    broker_id: int
    rack: str | None = None


def rack_alternated(brokers: list[Broker]) -> list[int]:
    """Broker ids ordered so racks alternate: the first broker of each rack (racks by name,
    brokers by id), then the second of each, and so on."""
    by_rack: dict[str, list[int]] = defaultdict(list)
    for b in sorted(brokers, key=lambda b: b.broker_id):
        by_rack[b.rack or ""].append(b.broker_id)
    racks = sorted(by_rack)
    out: list[int] = []
    depth = max(len(ids) for ids in by_rack.values())
    for i in range(depth):
        out += [by_rack[r][i] for r in racks if i < len(by_rack[r])]
    return out


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(brokers: list[Broker], partitions: int, replication_factor: int, *,
                    first_partition: int = 0, start: int | None = None, shift: int | None = None,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Partition id → replica broker ids (preferred leader first) for ``partitions`` new
    partitions numbered from ``first_partition`` (CreatePartitions continues a topic)."""
    n = len(brokers)
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.", INVALID_REPLICATION_FACTOR)
    if partitions <= 0:
        raise AssignmentError("Number of partitions must be larger than 0.", INVALID_REPLICA_ASSIGNMENT)
    if replication_factor > n:
        raise AssignmentError(f"Replication factor: {replication_factor} larger than available brokers: {n}.",
                              INVALID_REPLICATION_FACTOR)
    with_rack = [b for b in brokers if b.rack]
    if with_rack and len(with_rack) != n:
        raise AssignmentError("Not all brokers have rack information for replica rack aware assignment.",
                              INVALID_REPLICA_ASSIGNMENT)
    rng = rng or random.Random()
    start = rng.randrange(n) if start is None else start
    shift = rng.randrange(n) if shift is None else shift
    # Without racks every broker is in the same (unnamed) rack: the order is by id and the rack
    # rule never skips a candidate, which is the plain round-robin placement.
    order = rack_alternated(brokers)
    rack_of = {b.broker_id: b.rack or "" for b in brokers}
    return _place(order, rack_of, partitions, replication_factor, first_partition, start, shift)


def _place(order: list[int], rack_of: dict[int, str], partitions: int, replication_factor: int,
          first_partition: int, start: int, shift: int) -> dict[int, list[int]]:
    n = len(order)
    rack_count = len(set(rack_of.values()))
    out: dict[int, list[int]] = {}
    current = first_partition
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start) % n
        leader = order[first]
        replicas = [leader]
        racks = {rack_of[leader]}
        k = 0
        while len(replicas) < replication_factor:
            candidate = order[_follower_index(first, shift, k, n)]
            k += 1
            # A rack gets a second replica only once every rack has one; a broker never two.
            if candidate in replicas:
                continue
            if rack_of[candidate] in racks and len(racks) < rack_count:
                continue
            replicas.append(candidate)
            racks.add(rack_of[candidate])
        out[current] = replicas
        current += 1
    return out
