"""Coordinator types: what the runtime hosts, one per internal topic.

A coordinator type names its topic (``__consumer_offsets`` for consumer groups; later
``__transaction_state`` for transactions, KIP-98, and ``__share_group_state`` for share groups,
KIP-932), how to build the shard of one of its partitions, and the serde of its records. The
runtime is the same for all of them — batching, durability, loading, snapshots, the hot standby —
so a new coordinator is a new shard type registered here, not a new framework (Kafka's
``CoordinatorShard`` / ``CoordinatorShardBuilder`` of coordinator-common,
https://github.com/apache/kafka/pull/13795).

Pure: the rules of a coordinator wing import this module to describe themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from .contract import Clock, CoordinatorShard, RecordSerde, Timer

__all__ = ["CoordinatorType", "CoordinatorTypes", "ShardBuilder"]

ShardT_co = TypeVar("ShardT_co", bound=CoordinatorShard, covariant=True)


class ShardBuilder(Protocol[ShardT_co]):
    """Builds the shard of ``partition``, with the partition's keyed timers and the clock."""

    def __call__(self, partition: int, timer: Timer, clock: Clock, /) -> ShardT_co: ...


@dataclass(frozen=True)
class CoordinatorType(Generic[ShardT_co]):
    #: The internal, compacted topic whose partitions the shards own.
    topic: str
    build_shard: ShardBuilder[ShardT_co]
    serde: RecordSerde


class CoordinatorTypes:
    """The coordinator types of a node, by topic; the wiring (``coordinator/app.py``) builds one
    runtime per registered type."""

    def __init__(self) -> None:
        self._by_topic: dict[str, CoordinatorType[CoordinatorShard]] = {}

    def register(self, coordinator: CoordinatorType[CoordinatorShard]) -> None:
        if coordinator.topic in self._by_topic:
            raise ValueError(f"a coordinator is already registered for {coordinator.topic}")
        self._by_topic[coordinator.topic] = coordinator

    def get(self, topic: str) -> CoordinatorType[CoordinatorShard] | None:
        return self._by_topic.get(topic)

    def __contains__(self, topic: str) -> bool:
        return topic in self._by_topic

    def __iter__(self) -> Iterator[CoordinatorType[CoordinatorShard]]:
        return iter(self._by_topic.values())
