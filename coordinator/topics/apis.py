"""Handlers for CreateTopics, DeleteTopics and CreatePartitions, with Kafka's checks and errors.

A request may place the replicas itself (``replicas_assignments``, what ``kafka-topics
--replica-assignment`` sends). On a single node every list must be just this broker. In cluster
mode the lists are checked as Kafka's controller checks them (``ReplicationControlManager``,
https://github.com/apache/kafka/blob/trunk/metadata/src/main/java/org/apache/kafka/controller/ReplicationControlManager.java):
the partition count and replication factor must then be -1 (INVALID_REQUEST); each partition is
assigned once, its list is not empty, names only registered brokers and none twice, is as long
as the others (or, for new partitions, as the topic's first partition), and has a broker not in
controlled shutdown; the partitions run 0..n-1 (all INVALID_REPLICA_ASSIGNMENT). The topic is
then created with exactly that placement, the first broker of each list its preferred leader.
"""

from __future__ import annotations

import asyncio
import uuid

from kafka.protocol.admin import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from ..context import Handler, NodeInfo, Reply, RequestContext
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import NO_AUTHORIZER, allowed_names, cluster_allowed
from .registry import TopicError
from .service import MAX_PARTITIONS, TopicService

__all__ = ["TopicApis"]

# DescribeConfigs/CreateTopics config sources (DescribeConfigsResponse.json).
CONFIG_SOURCE_DYNAMIC_TOPIC = 1

#: Kafka's controller writes at most this many records for one request
#: (``QuorumController.MAX_RECORDS_PER_USER_OP``) and fails a CreateTopics or CreatePartitions
#: that would need more with POLICY_VIOLATION "Unable to perform excessively large batch
#: operation." We count the same records: one per topic, per partition and per config.
MAX_RECORDS_PER_USER_OP = 10_000
_TOO_LARGE = "Unable to perform excessively large batch operation."


def _hide_configs(results: list[KafkaStruct], describable: set[str] | None) -> None:
    """CreateTopics shows a topic's configs only with DESCRIBE_CONFIGS on it; otherwise its
    TopicConfigErrorCode (v5+) says TOPIC_AUTHORIZATION_FAILED (KafkaApis handleCreateTopicsRequest)."""
    if describable is None:
        return
    for result in results:
        if result.name not in describable:
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.configs = []


class TopicApis:
    def __init__(self, node: NodeInfo, topics: TopicService, *, authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.node = node
        self.topics = topics
        #: CreateTopics: CREATE on the cluster or on each topic (its configs shown with
        #: DESCRIBE_CONFIGS); DeleteTopics: DELETE (and DESCRIBE to name a topic given by id);
        #: CreatePartitions: ALTER (KafkaApis).
        self.authorizer = authorizer

    def _permitted(self, ctx: RequestContext, operation: AclOperation, names: list[str]) -> set[str] | None:
        """The names the check passes for; None without an authorizer (all of them)."""
        if not self.authorizer.enabled:
            return None
        return allowed_names(self.authorizer, ctx, operation, ResourceType.TOPIC, names)

    # --- CreateTopics ---------------------------------------------------------------------------

    def create_topics(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        version = ctx.api_version
        names = [t.name for t in request.topics]
        duplicates = {n for n in names if names.count(n) > 1}
        results = []
        default_partitions = int(self.topics.config["num.partitions"])
        records = sum(1 + len(t.configs or ())
                      + (len(t.assignments) if t.assignments else
                         default_partitions if t.num_partitions == -1 else max(t.num_partitions, 0))
                      for t in request.topics)
        if records > MAX_RECORDS_PER_USER_OP:
            results = [self._create_result(version, t.name, ErrorCode.POLICY_VIOLATION, _TOO_LARGE)
                       for t in request.topics]
            return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=results)
        placements: dict[str, dict[int, list[int]]] = {}
        creatable = describable = None
        if self.authorizer.enabled:
            creatable = (None if cluster_allowed(self.authorizer, ctx, AclOperation.CREATE)
                         else self._permitted(ctx, AclOperation.CREATE, names))
            describable = self._permitted(ctx, AclOperation.DESCRIBE_CONFIGS, names)
        for topic in request.topics:
            if topic.name in duplicates:
                results.append(self._create_result(version, topic.name, ErrorCode.INVALID_REQUEST,
                                                   "Duplicate topic name."))
                continue
            if creatable is not None and topic.name not in creatable:  # before any existence check
                results.append(self._create_result(version, topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                   "Authorization failed."))
                continue
            try:
                results.append(self._create_one(version, topic, request.validate_only if version >= 1 else False,
                                                placements))
            except TopicError as exc:
                results.append(self._create_result(version, topic.name, exc.error_code, exc.message))
        if self.topics.store is not None and not (version >= 1 and request.validate_only):
            return self._create_in_cluster(version, request, results, placements, describable)
        _hide_configs(results, describable)
        response = CreateTopicsResponse(version=version, throttle_time_ms=0, topics=results)
        return self._after_settled([r.name for r in results if r.error_code == ErrorCode.NONE], response)

    def _after_settled(self, names: list[str], response: KafkaResponse) -> Reply:
        """The response, once the new partitions of ``names`` opened in the background are open
        (a client that produces right after its CreateTopics finds them), at once if none are."""
        settling = [name for name in names if self.topics.settling(name)]
        if not settling:
            return response

        async def settled() -> KafkaResponse:
            for name in settling:
                await self.topics.settle(name)
            return response

        return settled()

    async def _create_in_cluster(self, version: int, request: KafkaRequest, results: list[KafkaStruct],
                                 placements: dict[str, dict[int, list[int]]],
                                 describable: set[str] | None = None) -> KafkaResponse:
        """Cluster mode: the validated topics are written to ZooKeeper (off the event loop), with
        the request's placement where it gave one, and the answer waits until each has a live
        leader per partition or the request times out."""
        store = self.topics.store
        assert store is not None
        created = []
        for result in results:
            if result.error_code != ErrorCode.NONE:
                continue
            configs = {c.name: c.value for c in result.configs if c.value is not None}
            try:
                info = await asyncio.to_thread(store.create, result.name, result.num_partitions,
                                               result.replication_factor, configs, placements.get(result.name))
            except TopicError as exc:
                result.error_code, result.error_message = exc.error_code, exc.message
                result.num_partitions = result.replication_factor = -1
                result.configs = []
                continue
            result.topic_id = info.topic_id
            created.append(result.name)
        timeout_s = max(request.timeout_ms, 0) / 1000.0
        for name in created:
            if not await store.wait_ready(name, timeout_s):
                break  # Kafka answers NONE after its timeout too: the topic exists
        _hide_configs(results, describable)
        return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=results)

    def _create_one(self, version: int, topic: KafkaStruct, validate_only: bool,
                    placements: dict[str, dict[int, list[int]]]) -> KafkaStruct:
        configs = {c.name: c.value for c in topic.configs}
        num_partitions, replication_factor = topic.num_partitions, topic.replication_factor
        if topic.assignments and self.topics.store is not None:
            self.topics.registry.check_create(topic.name)  # Kafka names an existing topic first
            placement = self._manual_placement(topic)
            placements[topic.name] = placement
            num_partitions, replication_factor = len(placement), len(placement[0])
        elif topic.assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                 "Both cannot be used at the same time.")
            indexes = sorted(a.partition_index for a in topic.assignments)
            if indexes != list(range(len(indexes))):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "Partitions should be consecutive, starting at 0.")
            for a in topic.assignments:
                if list(a.broker_ids) != [self.node.node_id]:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Replica assignment {list(a.broker_ids)} for partition {a.partition_index} "
                                     f"names brokers other than the only broker, {self.node.node_id}.")
            num_partitions, replication_factor = len(indexes), 1
        num_partitions, replication_factor = self.topics.validate_new(
            topic.name, num_partitions, replication_factor, configs)
        topic_id = None
        if not validate_only and self.topics.store is None:
            info = self.topics.create(topic.name, num_partitions, {k: v for k, v in configs.items() if v is not None})
            topic_id = info.topic_id
        return self._create_result(version, topic.name, ErrorCode.NONE, None, topic_id=topic_id,
                                   num_partitions=num_partitions, replication_factor=replication_factor,
                                   configs=configs)

    def _manual_placement(self, topic: KafkaStruct) -> dict[int, list[int]]:
        """Cluster mode: CreateTopics' own assignment, checked as Kafka checks it (module docstring)."""
        if topic.replication_factor != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "A manual partition assignment was specified, but replication factor was not set to -1.")
        if topic.num_partitions != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "A manual partition assignment was specified, but numPartitions was not set to -1.")
        placement: dict[int, list[int]] = {}
        replication_factor = None
        for a in topic.assignments:
            if a.partition_index in placement:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Found multiple manual partition assignments for partition {a.partition_index}")
            replicas = self._checked_replicas(a.partition_index, list(a.broker_ids), replication_factor)
            replication_factor = len(replicas)
            placement[a.partition_index] = replicas
        if sorted(placement) != list(range(len(placement))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
        return dict(sorted(placement.items()))

    def _checked_replicas(self, partition: int, replicas: list[int], replication_factor: int | None) -> list[int]:
        """One partition's replica list as Kafka's ``validateManualPartitionAssignment`` takes it:
        brokers in ascending order, so an error names the lowest offender."""
        store = self.topics.store
        assert store is not None
        if not replicas:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes an empty replica list.")
        registered = store.broker_ids()
        previous = None
        for broker in sorted(replicas):
            if broker not in registered:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes broker {broker}, "
                                 "but no such broker is registered.")
            if broker == previous:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes the broker {broker} more than once.")
            previous = broker
        if replication_factor is not None and len(replicas) != replication_factor:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                             f"but this is not consistent with previous partitions, which have "
                             f"{replication_factor} replica(s).")
        if set(replicas) <= store.shutting_down():
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"All brokers specified in the manual partition assignment for partition {partition} "
                             "are fenced or in controlled shutdown.")
        return replicas

    @staticmethod
    def _create_result(version: int, name: str, error: int, message: str | None, *, topic_id: uuid.UUID | None = None,
                       num_partitions: int = -1, replication_factor: int = -1,
                       configs: dict[str, str | None] | None = None) -> KafkaStruct:
        entries = [
            CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs(
                name=k, value=v, read_only=False, config_source=CONFIG_SOURCE_DYNAMIC_TOPIC, is_sensitive=False)
            for k, v in sorted((configs or {}).items())
        ]
        return CreateTopicsResponse.CreatableTopicResult(
            name=name, topic_id=topic_id, error_code=error, error_message=message,
            num_partitions=num_partitions, replication_factor=replication_factor, configs=entries,
        )

    # --- DeleteTopics ---------------------------------------------------------------------------

    def delete_topics(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        version = ctx.api_version
        if version >= 6:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        else:
            wanted = [(name, None) for name in request.topic_names]
        registry = self.topics.registry
        found = [registry.get(name) if name is not None else registry.by_id(topic_id) if topic_id is not None
                 else None for name, topic_id in wanted]
        settling = [info.name for info in found if info is not None and self.topics.settling(info.name)]
        if settling:
            # A topic whose new partitions are still being opened is deleted once they are all
            # open (then closed and set aside with the others).
            async def after_settled() -> KafkaResponse:
                for name in settling:
                    await self.topics.settle(name)
                result = self.delete_topics(ctx, request)
                return await result if asyncio.iscoroutine(result) else result

            return after_settled()
        results = []
        doomed: list[str] = []
        named = [n for n in (name if name is not None else info.name if info is not None else None
                             for (name, _), info in zip(wanted, found, strict=True)) if n is not None]
        # With deletion disabled every topic says so, before any check (KafkaApis).
        enabled = bool(self.topics.config["delete.topic.enable"])
        deletable = self._permitted(ctx, AclOperation.DELETE, named) if enabled else None
        describable = self._permitted(ctx, AclOperation.DESCRIBE, named) if enabled else None
        for name, topic_id in wanted:
            info = None
            if name is not None:
                info = self.topics.registry.get(name)
                missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                info = self.topics.registry.by_id(topic_id) if topic_id is not None else None
                missing = ErrorCode.UNKNOWN_TOPIC_ID
            if name is None and info is not None and describable is not None and info.name not in describable:
                # By id without DESCRIBE: refused, and the name is not revealed.
                results.append(DeleteTopicsResponse.DeletableTopicResult(
                    name=None, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None))
                continue
            checked = name if name is not None else info.name if info is not None else None
            if deletable is not None and checked is not None and checked not in deletable:
                error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None  # before existence
                results.append(DeleteTopicsResponse.DeletableTopicResult(
                    name=checked, topic_id=info.topic_id if info is not None and name is None else topic_id,
                    error_code=error, error_message=message))
                continue
            if info is None:
                error, message = missing, None
            elif not self.topics.config["delete.topic.enable"]:
                error, message = ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
            elif self.topics.store is not None:
                doomed.append(info.name)
                error, message = ErrorCode.NONE, None
            else:
                self.topics.delete(info.name)
                error, message = ErrorCode.NONE, None
            results.append(DeleteTopicsResponse.DeletableTopicResult(
                name=info.name if info is not None else name,
                topic_id=info.topic_id if info is not None else topic_id,
                error_code=error, error_message=message,
            ))
        if doomed:
            return self._delete_in_cluster(version, request.timeout_ms, results, doomed)
        return DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=results)

    async def _delete_in_cluster(self, version: int, timeout_ms: int, results: list[KafkaStruct], doomed: list[str]) -> KafkaResponse:
        """Cluster mode: queue the deletions for the controller (``/admin/delete_topics``) and
        answer once they are gone from this node's view, or REQUEST_TIMED_OUT (Kafka's
        DelayedDeleteTopics)."""
        store = self.topics.store
        assert store is not None
        for name in doomed:
            await asyncio.to_thread(store.request_deletion, name)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        for name in doomed:
            if not await store.wait_deleted(name, max(deadline - loop.time(), 0.0)):
                for result in results:
                    if result.name == name:
                        result.error_code = ErrorCode.REQUEST_TIMED_OUT
        return DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=results)

    # --- CreatePartitions -----------------------------------------------------------------------

    def create_partitions(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        version = ctx.api_version
        names = [t.name for t in request.topics]
        results = []
        records = 0
        for topic in request.topics:
            info = self.topics.registry.get(topic.name)
            if info is not None:
                records += max(topic.count - info.num_partitions, 0)
        if records > MAX_RECORDS_PER_USER_OP:
            results = [CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=_TOO_LARGE)
                for t in request.topics]
            return CreatePartitionsResponse(version=version, throttle_time_ms=0, results=results)
        growing: list[tuple[str, int, dict[int, list[int]] | None]] = []
        error: int
        message: str | None
        alterable = self._permitted(ctx, AclOperation.ALTER, names)
        for topic in request.topics:
            try:
                if names.count(topic.name) > 1:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                if alterable is not None and topic.name not in alterable:  # before existence
                    raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed.")
                grow, placement = self._add_partitions(topic, request.validate_only)
                if grow:
                    growing.append((topic.name, topic.count, placement))
                error, message = ErrorCode.NONE, None
            except TopicError as exc:
                error, message = exc.error_code, exc.message
            results.append(CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=topic.name, error_code=error, error_message=message))
        if growing:
            return self._grow_in_cluster(version, request.timeout_ms, results, growing)
        response = CreatePartitionsResponse(version=version, throttle_time_ms=0, results=results)
        return self._after_settled([r.name for r in results if r.error_code == ErrorCode.NONE], response)

    async def _grow_in_cluster(self, version: int, timeout_ms: int, results: list[KafkaStruct],
                               growing: list[tuple[str, int, dict[int, list[int]] | None]]) -> KafkaResponse:
        """Cluster mode: rewrite each topic's assignment in ZooKeeper (with the request's placement
        of the new partitions where it gave one), then wait for the new partitions' leaders (or
        the timeout, as CreateTopics does)."""
        store = self.topics.store
        assert store is not None
        by_name = {r.name: r for r in results}
        timeout_s = max(timeout_ms, 0) / 1000.0
        for name, count, placement in growing:
            try:
                await asyncio.to_thread(store.add_partitions, name, count, placement)
            except TopicError as exc:
                by_name[name].error_code, by_name[name].error_message = exc.error_code, exc.message
                continue
            await store.wait_partitions(name, count, timeout_s)
        return CreatePartitionsResponse(version=version, throttle_time_ms=0, results=results)

    def _add_partitions(self, topic: KafkaStruct, validate_only: bool) -> tuple[bool, dict[int, list[int]] | None]:
        """Validate; on a single node add the partitions. (True, the request's placement of the
        new partitions or None) if cluster mode must add them."""
        info = self.topics.registry.get(topic.name)
        if info is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        current = info.num_partitions
        if topic.count < current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {topic.count}.")
        if topic.count == current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if topic.count > MAX_PARTITIONS:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions {topic.count} exceeds this server's limit of {MAX_PARTITIONS}.")
        placement = None
        store = self.topics.store
        if topic.assignments is not None and store is not None:
            additional = topic.count - current
            if len(topic.assignments) != additional:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {additional} additional partition(s), but only "
                                 f"{len(topic.assignments)} assignment(s) were specified.")
            replication_factor = store.replication_factor(topic.name)
            placement = {current + i: self._checked_replicas(current + i, list(a.broker_ids), replication_factor)
                         for i, a in enumerate(topic.assignments)}
        elif topic.assignments is not None:
            if len(topic.assignments) != topic.count - current:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {topic.count - current} but "
                                 f"{len(topic.assignments)} assignments provided.")
            for a in topic.assignments:
                if list(a.broker_ids) != [self.node.node_id]:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Replica assignment {list(a.broker_ids)} names brokers other than "
                                     f"the only broker, {self.node.node_id}.")
        if validate_only:
            return False, None
        if store is not None:
            return True, placement
        self.topics.add_partitions(topic.name, topic.count)
        return False, None

    def handlers(self) -> dict[ApiKey, Handler]:
        return {
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
        }
