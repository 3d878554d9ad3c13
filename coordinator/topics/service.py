"""Topic lifecycle on this node: create, auto-create, delete, add partitions.

The registry records what exists; listeners (the log manager, later the group coordinator) are
told after each change so they can create or remove partition logs.

In cluster mode a :class:`TopicStore` (the cluster wing's, on ZooKeeper) makes the changes: a new
topic is written there with its replica assignment, and reaches this registry — on every node —
when the cluster wing sees it and calls :meth:`TopicService.adopt`.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from protocol.errors import ErrorCode

from ..config import Config
from .configs import offsets_topic_configs, topic_config_error
from .registry import (
    CONSUMER_OFFSETS,
    TRANSACTION_STATE,
    TopicError,
    TopicInfo,
    TopicRegistry,
    transaction_state_topic_configs,
)

__all__ = ["TopicService", "TopicListener", "MAX_PARTITIONS"]

#: Partitions one topic may have. Each partition is a directory with open files; a request for a
#: million of them is a mistake we refuse rather than a workload we attempt.
MAX_PARTITIONS = 100_000


class TopicListener(Protocol):
    def topic_created(self, info: TopicInfo) -> None: ...

    def topic_deleted(self, info: TopicInfo) -> None: ...

    def partitions_added(self, info: TopicInfo, old_count: int) -> None: ...


class TopicStore(Protocol):
    """Where topics live in cluster mode. Blocking calls: run them off the event loop."""

    def live_brokers(self) -> int: ...

    def broker_ids(self) -> frozenset[int]: ...

    def shutting_down(self) -> frozenset[int]: ...

    def replication_factor(self, name: str) -> int: ...

    def create(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
               placement: dict[int, list[int]] | None = None) -> TopicInfo: ...

    def create_in_background(self, name: str, num_partitions: int, replication_factor: int,
                             configs: dict[str, str]) -> None: ...

    async def wait_ready(self, name: str, timeout_s: float) -> bool: ...

    def request_deletion(self, name: str) -> None: ...

    async def wait_deleted(self, name: str, timeout_s: float) -> bool: ...

    def add_partitions(self, name: str, count: int, placement: dict[int, list[int]] | None = None) -> None: ...

    def alter_configs(self, name: str, configs: dict[str, str]) -> None: ...

    async def wait_partitions(self, name: str, count: int, timeout_s: float) -> bool: ...


class TopicService:
    def __init__(self, registry: TopicRegistry, config: Config) -> None:
        self.registry = registry
        self.config = config
        self.listeners: list[TopicListener] = []
        #: Cluster mode: where topics are made (None on a single node).
        self.store: TopicStore | None = None

    @property
    def auto_create_enabled(self) -> bool:
        return bool(self.config["auto.create.topics.enable"])

    def leader_epoch(self, topic: str, partition: int) -> int:
        # One node leads every partition from creation on and leadership never moves, so the
        # leader epoch stays at the initial 0.
        return 0

    def validate_new(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str | None]) -> tuple[int, int]:
        """Check a CreateTopics entry; returns the effective (partitions, replication factor)."""
        self.registry.check_create(name)
        if num_partitions == -1:
            num_partitions = int(self.config["num.partitions"])
        if num_partitions <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions was set to an invalid non-positive value.")
        if num_partitions > MAX_PARTITIONS:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions {num_partitions} exceeds this server's limit of {MAX_PARTITIONS}.")
        if replication_factor == -1:
            replication_factor = int(self.config["default.replication.factor"])
        if replication_factor <= 0:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default value.")
        brokers = 1 if self.store is None else self.store.live_brokers()
        if replication_factor > brokers:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target replication factor "
                f"of {replication_factor} cannot be reached because only {brokers} broker(s) are registered.",
            )
        for key, value in configs.items():
            problem = topic_config_error(key, value)
            if problem is not None:
                raise TopicError(ErrorCode.INVALID_CONFIG, problem)
        return num_partitions, replication_factor

    def create(self, name: str, num_partitions: int, configs: dict[str, str]) -> TopicInfo:
        info = self.registry.create(name, num_partitions, configs)
        for listener in self.listeners:
            listener.topic_created(info)
        return info

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create a topic a client asked for by name; in cluster mode it is written to ZooKeeper in
        the background and None returned (the topic appears once every node has seen it)."""
        if name == CONSUMER_OFFSETS:
            return self.create_offsets_topic()
        if name == TRANSACTION_STATE:
            return self.create_transaction_state_topic()
        if self.store is not None:
            self.store.create_in_background(name, int(self.config["num.partitions"]),
                                            int(self.config["default.replication.factor"]), {})
            return None
        return self.create(name, int(self.config["num.partitions"]), {})

    def create_offsets_topic(self) -> TopicInfo | None:
        existing = self.registry.get(CONSUMER_OFFSETS)
        if existing is not None:
            return existing
        if self.store is not None:
            # As Kafka: the offsets topic waits until offsets.topic.replication.factor nodes are
            # alive (reference/cluster_replication.md §4.1); until then FindCoordinator answers
            # COORDINATOR_NOT_AVAILABLE and clients retry.
            replication = int(self.config["offsets.topic.replication.factor"])
            if self.store.live_brokers() >= replication:
                configs = offsets_topic_configs(int(self.config["offsets.topic.segment.bytes"]))
                if replication >= 2:
                    # Beyond Kafka (which leaves it at 1): a commit is acknowledged only once two
                    # replicas hold it, so it never dies with a leader left alone in the ISR.
                    configs["min.insync.replicas"] = "2"
                self.store.create_in_background(
                    CONSUMER_OFFSETS, int(self.config["offsets.topic.num.partitions"]), replication, configs)
            return None
        return self.create(
            CONSUMER_OFFSETS,
            int(self.config["offsets.topic.num.partitions"]),
            offsets_topic_configs(int(self.config["offsets.topic.segment.bytes"])),
        )

    def create_transaction_state_topic(self) -> TopicInfo | None:
        """``__transaction_state``, created on first use (FindCoordinator for a transactional id,
        InitProducerId), as Kafka does; in cluster mode once enough nodes are alive, in the
        background (None meanwhile: the client is answered COORDINATOR_NOT_AVAILABLE and retries)."""
        existing = self.registry.get(TRANSACTION_STATE)
        if existing is not None:
            return existing
        partitions = int(self.config["transaction.state.log.num.partitions"])
        segment_bytes = int(self.config["transaction.state.log.segment.bytes"])
        if self.store is not None:
            replication = int(self.config["transaction.state.log.replication.factor"])
            if self.store.live_brokers() >= replication:
                min_isr = min(int(self.config["transaction.state.log.min.isr"]), replication)
                self.store.create_in_background(TRANSACTION_STATE, partitions, replication,
                                                transaction_state_topic_configs(segment_bytes, min_isr))
            return None
        return self.create(TRANSACTION_STATE, partitions, transaction_state_topic_configs(segment_bytes))

    # --- cluster mode: the registry mirrors ZooKeeper -------------------------------------------

    def adopt(self, info: TopicInfo) -> None:
        self.registry.add(info)
        for listener in self.listeners:
            listener.topic_created(info)

    def forget(self, name: str) -> None:
        info = self.registry.delete(name)
        for listener in self.listeners:
            listener.topic_deleted(info)

    def resize(self, name: str, count: int) -> None:
        self.add_partitions(name, count)

    def delete(self, name: str) -> TopicInfo:
        info = self.registry.delete(name)
        for listener in self.listeners:
            listener.topic_deleted(info)
        return info

    def settling(self, name: str) -> bool:
        """Whether a listener is still opening new partitions of ``name`` in the background (a
        topic created or grown by many partitions, see ``log_manager.SYNC_OPEN_MAX``)."""
        return any(getattr(listener, "opening", lambda _name: False)(name) for listener in self.listeners)

    async def settle(self, name: str) -> None:
        """Until no listener is opening new partitions of ``name`` any more."""
        for listener in self.listeners:
            wait = getattr(listener, "wait_opened", None)
            if wait is not None:
                await wait(name)

    def add_partitions(self, name: str, count: int) -> None:
        info = self.registry.get(name)
        assert info is not None
        old = info.num_partitions
        self.registry.set_partitions(name, count)
        for listener in self.listeners:
            listener.partitions_added(info, old)

    async def alter_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides (IncrementalAlterConfigs). Cluster mode writes them to the
        store and answers once this node applied them (``set_configs`` from the view)."""
        if self.store is None:
            self.set_configs(name, configs)
            return
        await asyncio.to_thread(self.store.alter_configs, name, configs)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while loop.time() < deadline:
            info = self.registry.get(name)
            if info is None or info.configs == configs:
                return
            await asyncio.sleep(0.01)

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        """The topic's overrides are now ``configs``: persisted, then applied by the listeners
        that hold something derived from them (the open logs' options)."""
        self.registry.set_configs(name, configs)
        info = self.registry.get(name)
        for listener in self.listeners:
            changed = getattr(listener, "configs_changed", None)
            if changed is not None:
                changed(info)

    def describe_configs(self, info: TopicInfo) -> dict[str, str]:
        return dict(info.configs)
