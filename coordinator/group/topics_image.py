"""What a consumer group sees of the topics: names, ids, partition counts and the racks of each
partition's replicas.

KIP-848 groups subscribe by topic name (or regex) but assign by topic id, and their group epoch
moves when a subscribed topic changes (partitions added, the topic deleted or recreated under a
new id, and since Kafka 4.1 a rack change of its replicas: KIP-1101,
https://cwiki.apache.org/confluence/display/KAFKA/KIP-1101%3A+Trigger+rebalance+on+rack+topology+changes).
The group wing does not import the topics wing; the node hands the shard an object with this
shape (the topic registry, ``coordinator/topics/registry.py``), and tests use
:class:`StaticTopicsImage`.

``version`` lets a group skip re-examining its topics on every heartbeat: it changes whenever any
topic is created, deleted, grows partitions or changes replica racks, so a group only looks again
when the version it last saw is stale (Kafka flags groups from each new metadata image instead).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["TopicDescription", "TopicsImage", "StaticTopic", "StaticTopicsImage"]


class TopicDescription(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def num_partitions(self) -> int: ...


class TopicsImage(Protocol):
    @property
    def version(self) -> int:
        """Changes whenever any topic is created, deleted, grows or changes replica racks."""
        ...

    def get(self, name: str) -> TopicDescription | None: ...

    def by_id(self, topic_id: uuid.UUID) -> TopicDescription | None: ...

    def all(self) -> Iterable[TopicDescription]: ...

    def partition_racks(self, topic_id: uuid.UUID, partition: int) -> tuple[str, ...]:
        """One rack per replica that has one, sorted (two replicas in one rack give it twice, as
        Kafka's KIP-1101 topic hash counts them); () when unknown."""
        ...


@dataclass(frozen=True, slots=True)
class StaticTopic:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    #: racks[p] are the racks of partition p's replicas (missing: no racks known).
    racks: tuple[tuple[str, ...], ...] = ()


class StaticTopicsImage:
    """A topics image held in memory (tests, tools)."""

    def __init__(self, topics: Iterable[StaticTopic] = ()) -> None:
        self.version = 0
        self._by_name: dict[str, StaticTopic] = {}
        self._by_id: dict[uuid.UUID, StaticTopic] = {}
        for topic in topics:
            self.put(topic)

    def put(self, topic: StaticTopic) -> StaticTopic:
        old = self._by_name.pop(topic.name, None)
        if old is not None:
            del self._by_id[old.topic_id]
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self.version += 1
        return topic

    def create(self, name: str, num_partitions: int, racks: tuple[tuple[str, ...], ...] = (),
               topic_id: uuid.UUID | None = None) -> StaticTopic:
        return self.put(StaticTopic(name, topic_id or uuid.uuid4(), num_partitions, racks))

    def delete(self, name: str) -> None:
        topic = self._by_name.pop(name)
        del self._by_id[topic.topic_id]
        self.version += 1

    def get(self, name: str) -> StaticTopic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> StaticTopic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[StaticTopic]:
        return list(self._by_name.values())

    def partition_racks(self, topic_id: uuid.UUID, partition: int) -> tuple[str, ...]:
        topic = self._by_id.get(topic_id)
        if topic is None or partition >= len(topic.racks):
            return ()
        return topic.racks[partition]
