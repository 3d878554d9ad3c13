"""Topics in cluster mode: written to ZooKeeper as Kafka's ZooKeeper mode writes them
(``AdminZkClient.createTopic``): ``/config/topics/<t>`` with the overrides, then
``/brokers/topics/<t>`` with the replica assignment, in one transaction, so no node ever sees a
topic without its configs. The controller then creates each partition's state (leader and ISR),
and every node adopts the topic from its view.

Placement is :func:`.assignment.assign_replicas` over the live brokers (rack-aware when they
have racks), or the one the request gave (``kafka-topics --replica-assignment``), which
``topics/apis.py`` has checked as Kafka's controller checks it. Creation answers once every partition has a live leader in this node's view, or
when the request's timeout runs out (Kafka's DelayedCreatePartitions), so a client that creates
and then produces finds the leaders.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError

from protocol.errors import ErrorCode

from ..topics.registry import TopicError, TopicInfo
from .assignment import AssignmentError, Broker, assign_replicas
from .dynamic_configs import ZkConfigs
from .view import ClusterView
from .znodes import (
    DELETE_TOPICS,
    TopicAssignment,
    decode_topic,
    encode_topic,
    encode_topic_config,
    topic_config_path,
    topic_path,
)
from .zookeeper import ZooKeeper

__all__ = ["ZkTopicStore"]

log = logging.getLogger("groupcoord.cluster.topics")


class ZkTopicStore:
    def __init__(self, zk: ZooKeeper, view: ClusterView) -> None:
        self.zk = zk
        self.view = view
        self._creating: set[str] = set()

    def live_brokers(self) -> int:
        return len(self.view.brokers)

    def broker_ids(self) -> frozenset[int]:
        """The registered (live) brokers: the ones a manual assignment may name."""
        return frozenset(self.view.brokers)

    def shutting_down(self) -> frozenset[int]:
        return self.view.shutting_down

    def replication_factor(self, name: str) -> int:
        """Replicas of the topic's first partition (what CreatePartitions' assignments must match);
        0 if the view does not have the topic."""
        assignment = self.view.topics.get(name)
        if assignment is None or not assignment.partitions:
            return 0
        return len(assignment.partitions[min(assignment.partitions)])

    def create(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
               placement: dict[int, list[int]] | None = None) -> TopicInfo:
        """Blocking (a worker thread). TopicError TOPIC_ALREADY_EXISTS if another node won.
        ``placement`` (partition → replicas) is used as given; without it the brokers are chosen."""
        if placement is None:
            brokers = [Broker(b.broker_id, b.rack) for b in self.view.brokers.values()]
            try:
                placement = assign_replicas(brokers, num_partitions, replication_factor)
            except AssignmentError as exc:
                raise TopicError(exc.error_code, str(exc)) from None
        assignment = TopicAssignment(name, uuid.uuid4(), {p: tuple(r) for p, r in placement.items()})
        client = self.zk.client
        client.ensure_path(DELETE_TOPICS)
        marker = f"{DELETE_TOPICS}/{name}"
        tx = client.transaction()
        # No creation while a deletion of the name is in flight (Kafka's AdminZkClient refuses a
        # topic "marked for deletion"): creating and deleting the marker in the same transaction
        # fails it, atomically with the rest, if the marker exists — whatever this node's view says.
        tx.create(marker, b"")
        tx.delete(marker)
        tx.create(topic_config_path(name), encode_topic_config(configs))
        tx.create(topic_path(name), encode_topic(assignment))
        results = tx.commit()
        errors = [r for r in results if isinstance(r, Exception)]
        if isinstance(results[0], NodeExistsError):
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion.")
        if any(isinstance(r, NodeExistsError) for r in errors):
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if errors:
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper refused the topic: {errors[0]!r}")
        log.info("topic created", extra={"topic": name, "partitions": num_partitions,
                                         "replication_factor": replication_factor,
                                         "assignment": {p: list(r) for p, r in placement.items()}})
        return TopicInfo(name, assignment.topic_id, num_partitions, dict(configs))

    def create_in_background(self, name: str, num_partitions: int, replication_factor: int,
                             configs: dict[str, str]) -> None:
        if name in self._creating or name in self.view.topics or name in self.view.deleting:
            return
        self._creating.add(name)

        async def run() -> None:
            try:
                await asyncio.to_thread(self.create, name, num_partitions, replication_factor, configs)
            except TopicError as exc:
                if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.warning("auto-creation failed", extra={"topic": name, "reason": exc.message})
            except KazooException as exc:
                log.warning("auto-creation failed", extra={"topic": name, "reason": repr(exc)})
            finally:
                self._creating.discard(name)

        asyncio.get_running_loop().create_task(run())

    async def wait_ready(self, name: str, timeout_s: float) -> bool:
        """True once the view has the topic and a live leader for each partition."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            assignment = self.view.topics.get(name)
            if assignment is not None and all(self.view.leader(name, p) >= 0 for p in assignment.partitions):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.01)

    # --- deletion and growth (blocking: a worker thread) -------------------------------------------

    def request_deletion(self, name: str) -> None:
        """Queue ``name`` in ``/admin/delete_topics`` for the controller (Kafka's ZooKeeper mode)."""
        try:
            self.zk.client.create(f"{DELETE_TOPICS}/{name}", b"", makepath=True)
        except NodeExistsError:
            pass  # already queued

    async def wait_deleted(self, name: str, timeout_s: float) -> bool:
        """True once the deletion completed: the topic is gone from this node's view and so is its
        marker, which the controller removes only after every live node acknowledged dropping the
        topic (controller.py) — so no node serves it any more (Kafka's controller answers
        DeleteTopics once the deletion completed)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while name in self.view.topics or name in self.view.deleting:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def add_partitions(self, name: str, count: int, placement: dict[int, list[int]] | None = None) -> None:
        """Grow the topic's assignment to ``count`` partitions (a conditional write of its znode);
        the controller then creates the new partitions' states. ``placement`` gives the new
        partitions' replicas; without it the brokers are chosen."""
        client = self.zk.client
        data, stat = client.get(topic_path(name))
        current = decode_topic(topic_path(name), data)
        if current.adding or current.removing:  # Kafka refuses too: the new layout would race the move
            raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS, f"A partition reassignment of '{name}' is in progress.")
        old = len(current.partitions)
        if placement is None:
            brokers = [Broker(b.broker_id, b.rack) for b in self.view.brokers.values()]
            replication = len(current.partitions[0])
            try:
                placement = assign_replicas(brokers, count - old, replication, first_partition=old)
            except AssignmentError as exc:
                raise TopicError(exc.error_code, str(exc)) from None
        elif sorted(placement) != list(range(old, count)):
            # The topic grew (or shrank) since the request was checked against the view.
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Topic '{name}' has {old} partitions now; the assignments were for "
                             f"partitions {min(placement)} to {max(placement)}.")
        partitions = dict(current.partitions)
        partitions.update({p: tuple(r) for p, r in placement.items()})
        try:
            client.set(topic_path(name), encode_topic(TopicAssignment(name, current.topic_id, partitions)),
                       version=stat.version)
        except BadVersionError:
            raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS, f"Topic '{name}' changed while partitions were added; retry.") from None
        log.info("partitions added", extra={"topic": name, "count": count,
                                            "assignment": {p: list(r) for p, r in placement.items()}})

    def alter_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's overrides (IncrementalAlterConfigs): every node's view follows."""
        ZkConfigs(self.zk).set_topic(name, configs)

    async def wait_partitions(self, name: str, count: int, timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            assignment = self.view.topics.get(name)
            if assignment is not None and len(assignment.partitions) >= count and all(
                    self.view.leader(name, p) >= 0 for p in assignment.partitions):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.01)
