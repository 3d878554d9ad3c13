"""The registry of hosted topics: name, id, partition count and per-topic configs.

It persists as ``topics.json`` in the data directory, rewritten atomically on each change (topic
changes are rare; a crash leaves the previous or the next version, never a torn file). Topic data
lives in the log engine, one directory per partition; this registry is what Metadata, CreateTopics
and the produce/fetch paths consult to know which partitions exist.

Name rules are Kafka's (``org.apache.kafka.common.internals.Topic``): 1-249 characters of
``[a-zA-Z0-9._-]``, not ``.`` or ``..``; and two names that differ only by ``.`` versus ``_``
collide, because they map to the same metric names.

The registry is also what KIP-848 consumer groups see of the topics (``TopicsImage`` of
``coordinator/group/topics_image.py``): ``version`` moves on every change a group's assignment
depends on, and ``partition_racks`` gives the racks of a partition's replicas.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..data_dir import atomic_write

__all__ = ["TopicInfo", "TopicRegistry", "TopicError", "topic_name_error", "CONSUMER_OFFSETS", "TRANSACTION_STATE",
           "transaction_state_topic_configs"]

CONSUMER_OFFSETS = "__consumer_offsets"
#: The transaction coordinator's topic (KIP-98), created on first use like the offsets topic.
TRANSACTION_STATE = "__transaction_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return f"Topic name {name!r} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def transaction_state_topic_configs(segment_bytes: int, min_isr: int | None = None) -> dict[str, str]:
    """``__transaction_state`` topic configs, as Kafka's ``TransactionStateManager.transactionTopicConfigs``
    forces them: compacted (one live record per transactional id), uncompressed, never an unclean
    leader (a lost decision could resurrect an aborted transaction)."""
    configs = {"cleanup.policy": "compact", "compression.type": "uncompressed",
               "unclean.leader.election.enable": "false", "segment.bytes": str(segment_bytes)}
    if min_isr is not None:
        configs["min.insync.replicas"] = str(min_isr)
    return configs


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


class TopicError(Exception):
    """A rejected topic operation; ``error_code`` is the Kafka error to answer with."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicRegistry:
    """All topics of this node. Mutations persist before they return."""

    FILE = "topics.json"

    def __init__(self, data_dir: Path, *, persistent: bool = True) -> None:
        self._path = data_dir / self.FILE
        #: False in cluster mode: ZooKeeper holds the topics and this registry mirrors it.
        self.persistent = persistent
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._collisions: dict[str, str] = {}
        #: Moves whenever a topic is created, deleted or grows, or the replicas of a partition or
        #: their racks change (``topology_changed``): a consumer group re-examines its topics only
        #: when the version it last saw is stale (KIP-1101 counts racks in).
        self.version = 0
        #: This node's ``broker.rack`` ("" when unset): on a single node it holds every replica.
        self.node_rack = ""
        #: Cluster mode: the racks of a partition's replicas by topic name and partition, set by
        #: the cluster wing (``cluster/replica_racks.py``), which also calls ``topology_changed``.
        self.replica_racks: Callable[[str, int], tuple[str, ...]] | None = None
        if persistent and self._path.exists():
            self._load()

    def _load(self) -> None:
        from ..config import ConfigError

        try:
            doc = json.loads(self._path.read_text(encoding="utf-8"))
            for entry in doc["topics"]:
                info = TopicInfo(entry["name"], uuid.UUID(entry["id"]), int(entry["partitions"]),
                                 {str(k): str(v) for k, v in entry.get("configs", {}).items()})
                self._index(info)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{self._path}: unreadable topic registry ({type(exc).__name__}: {exc})") from None

    def _index(self, info: TopicInfo) -> None:
        self.version += 1
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info
        self._collisions[_collision_key(info.name)] = info.name

    def _save(self) -> None:
        if not self.persistent:
            return
        doc = {"version": 1, "topics": [
            {"name": t.name, "id": str(t.topic_id), "partitions": t.num_partitions, "configs": t.configs}
            for t in sorted(self._topics.values(), key=lambda t: t.name)
        ]}
        atomic_write(self._path, json.dumps(doc, indent=1).encode())

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __len__(self) -> int:
        return len(self._topics)

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicInfo]:
        return list(self._topics.values())

    def check_create(self, name: str) -> None:
        """Raise TopicError if ``name`` cannot be created (illegal, exists, or collides)."""
        from protocol.errors import ErrorCode

        problem = topic_name_error(name)
        if problem is not None:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if name in self._topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        other = self._collisions.get(_collision_key(name))
        if other is not None:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{name}' collides with existing topic: {other}")

    def create(self, name: str, num_partitions: int, configs: dict[str, str] | None = None) -> TopicInfo:
        self.check_create(name)
        info = TopicInfo(name, uuid.uuid4(), num_partitions, dict(configs or {}))
        self._index(info)
        self._save()
        return info

    def add(self, info: TopicInfo) -> None:
        """Index a topic made elsewhere (cluster mode: read from ZooKeeper)."""
        self._index(info)
        self._save()

    def delete(self, name: str) -> TopicInfo:
        info = self._topics.pop(name)
        del self._by_id[info.topic_id]
        self._collisions.pop(_collision_key(name), None)
        self.version += 1
        self._save()
        return info

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self._topics[name].configs = dict(configs)
        self._save()

    def set_partitions(self, name: str, count: int) -> None:
        self._topics[name].num_partitions = count
        self.version += 1
        self._save()

    # --- what consumer groups read besides names and partitions -----------------------------------

    def topology_changed(self) -> None:
        """The replicas of some partition, or a broker's rack, changed (cluster mode)."""
        self.version += 1

    def partition_racks(self, topic_id: uuid.UUID, partition: int) -> tuple[str, ...]:
        """One rack per replica that has one, sorted (two replicas in one rack give it twice, as
        Kafka's KIP-1101 topic hash counts them); () when unknown."""
        info = self._by_id.get(topic_id)
        if info is None or not 0 <= partition < info.num_partitions:
            return ()
        if self.replica_racks is not None:
            return self.replica_racks(info.name, partition)
        return (self.node_rack,) if self.node_rack else ()
