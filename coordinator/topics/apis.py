"""Handlers for CreateTopics, DeleteTopics and CreatePartitions, with Kafka's checks and errors."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..context import NodeInfo, RequestContext
from .registry import TopicError
from .service import MAX_PARTITIONS, TopicService

__all__ = ["TopicApis"]

# DescribeConfigs/CreateTopics config sources (DescribeConfigsResponse.json).
CONFIG_SOURCE_DYNAMIC_TOPIC = 1


class TopicApis:
    def __init__(self, node: NodeInfo, topics: TopicService) -> None:
        self.node = node
        self.topics = topics

    # --- CreateTopics ---------------------------------------------------------------------------

    def create_topics(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        names = [t.name for t in request.topics]
        duplicates = {n for n in names if names.count(n) > 1}
        results = []
        for topic in request.topics:
            if topic.name in duplicates:
                results.append(self._create_result(version, topic.name, ErrorCode.INVALID_REQUEST,
                                                   "Duplicate topic name."))
                continue
            try:
                results.append(self._create_one(version, topic, request.validate_only if version >= 1 else False))
            except TopicError as exc:
                results.append(self._create_result(version, topic.name, exc.error_code, exc.message))
        return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=results)

    def _create_one(self, version: int, topic: Any, validate_only: bool) -> Any:
        configs = {c.name: c.value for c in topic.configs}
        num_partitions, replication_factor = topic.num_partitions, topic.replication_factor
        if topic.assignments:
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
        if not validate_only:
            info = self.topics.create(topic.name, num_partitions, {k: v for k, v in configs.items() if v is not None})
            topic_id = info.topic_id
        return self._create_result(version, topic.name, ErrorCode.NONE, None, topic_id=topic_id,
                                   num_partitions=num_partitions, replication_factor=replication_factor,
                                   configs=configs)

    @staticmethod
    def _create_result(version: int, name: str, error: int, message: str | None, *, topic_id: Any = None,
                       num_partitions: int = -1, replication_factor: int = -1,
                       configs: dict[str, str | None] | None = None) -> Any:
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

    def delete_topics(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        if version >= 6:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        else:
            wanted = [(name, None) for name in request.topic_names]
        results = []
        for name, topic_id in wanted:
            info = None
            if name is not None:
                info = self.topics.registry.get(name)
                missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                info = self.topics.registry.by_id(topic_id) if topic_id is not None else None
                missing = ErrorCode.UNKNOWN_TOPIC_ID
            if info is None:
                error, message = missing, None
            elif not self.topics.config["delete.topic.enable"]:
                error, message = ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
            else:
                self.topics.delete(info.name)
                error, message = ErrorCode.NONE, None
            results.append(DeleteTopicsResponse.DeletableTopicResult(
                name=info.name if info is not None else name,
                topic_id=info.topic_id if info is not None else topic_id,
                error_code=error, error_message=message,
            ))
        return DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=results)

    # --- CreatePartitions -----------------------------------------------------------------------

    def create_partitions(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        names = [t.name for t in request.topics]
        results = []
        for topic in request.topics:
            try:
                if names.count(topic.name) > 1:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                self._add_partitions(topic, request.validate_only)
                error, message = ErrorCode.NONE, None
            except TopicError as exc:
                error, message = exc.error_code, exc.message
            results.append(CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=topic.name, error_code=error, error_message=message))
        return CreatePartitionsResponse(version=version, throttle_time_ms=0, results=results)

    def _add_partitions(self, topic: Any, validate_only: bool) -> None:
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
        if topic.assignments is not None:
            if len(topic.assignments) != topic.count - current:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {topic.count - current} but "
                                 f"{len(topic.assignments)} assignments provided.")
            for a in topic.assignments:
                if list(a.broker_ids) != [self.node.node_id]:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Replica assignment {list(a.broker_ids)} names brokers other than "
                                     f"the only broker, {self.node.node_id}.")
        if not validate_only:
            self.topics.add_partitions(topic.name, topic.count)

    def handlers(self) -> dict[ApiKey, Any]:
        return {
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
        }
