"""Handlers for the cluster-level APIs: ApiVersions, Metadata, FindCoordinator, DescribeCluster.

groupcoord is a single node that is broker, controller and the leader of every partition, so
these answers always name this node. Topic creation goes through :class:`TopicService`.
"""

from __future__ import annotations

import re
from typing import Any

from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorResponse, MetadataResponse

from protocol.acl_operations import CLUSTER_OPERATIONS, OMITTED, TOPIC_OPERATIONS, authorized
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.responses import api_version_entries

from ..context import NodeInfo, RequestContext
from ..topics.registry import CONSUMER_OFFSETS, TopicError, topic_name_error
from ..topics.service import TopicService

__all__ = ["ClusterApis"]


# KIP-511: ClientSoftwareName and ClientSoftwareVersion must match this; otherwise INVALID_REQUEST.
_SOFTWARE_FIELD = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

# FindCoordinator key types (FindCoordinatorRequest.json).
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1

# DescribeCluster endpoint types (KIP-919): 1 = brokers, 2 = controllers.
ENDPOINT_TYPE_BROKER = 1


class ClusterApis:
    def __init__(self, node: NodeInfo, topics: TopicService) -> None:
        self.node = node
        self.topics = topics

    def api_versions(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        if version >= 3:
            for value in (request.client_software_name, request.client_software_version):
                if not value or not _SOFTWARE_FIELD.match(value):
                    return ApiVersionsResponse(version=version, error_code=ErrorCode.INVALID_REQUEST,
                                               api_keys=api_version_entries())
        return ApiVersionsResponse(version=version, error_code=ErrorCode.NONE, api_keys=api_version_entries())

    # --- Metadata -------------------------------------------------------------------------------

    def metadata(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        node = self.node
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=node.node_id, host=node.host, port=node.port, rack=None)]
        # v0: an empty list means every topic. v1+: null means every topic, empty means none.
        wanted = request.topics
        topic_ops = authorized(version >= 8 and bool(request.include_topic_authorized_operations), TOPIC_OPERATIONS)
        if wanted is None or (version == 0 and not wanted):
            topics = [self._topic_metadata(info, topic_ops)
                      for info in sorted(self.topics.registry.all(), key=lambda t: t.name)]
        else:
            auto_create = self.topics.auto_create_enabled and (version < 4 or request.allow_auto_topic_creation)
            topics = [self._requested_topic(t, auto_create, topic_ops) for t in wanted]
        return MetadataResponse(
            version=version,
            throttle_time_ms=0,
            brokers=brokers,
            cluster_id=node.cluster_id,
            controller_id=node.node_id,
            topics=topics,
            authorized_operations=authorized(8 <= version <= 10 and bool(request.include_cluster_authorized_operations),
                                             CLUSTER_OPERATIONS),
        )

    def _requested_topic(self, wanted: Any, auto_create: bool, ops: set[int] | None) -> Any:
        name = wanted.name
        topic_id = getattr(wanted, "topic_id", None)
        if name is None:
            info = self.topics.registry.by_id(topic_id) if topic_id is not None else None
            if info is None:
                return self._error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id)
            return self._topic_metadata(info, ops)
        info = self.topics.registry.get(name)
        if info is None:
            if topic_name_error(name) is not None:
                return self._error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
            if not auto_create:
                return self._error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            try:
                info = self.topics.auto_create(name)
            except TopicError as exc:
                return self._error_topic(name, exc.error_code)
        return self._topic_metadata(info, ops)

    @staticmethod
    def _error_topic(name: str | None, error: int, topic_id: Any = None) -> Any:
        return MetadataResponse.MetadataResponseTopic(
            error_code=error, name=name, topic_id=topic_id, is_internal=False, partitions=[],
            authorized_operations=OMITTED,
        )

    def _topic_metadata(self, info: Any, ops: set[int] | None) -> Any:
        node_id = self.node.node_id
        partitions = [
            MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                error_code=0, partition_index=p, leader_id=node_id,
                leader_epoch=self.topics.leader_epoch(info.name, p),
                replica_nodes=[node_id], isr_nodes=[node_id], offline_replicas=[],
            )
            for p in range(info.num_partitions)
        ]
        return MetadataResponse.MetadataResponseTopic(
            error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
            partitions=partitions, authorized_operations=ops,
        )

    # --- FindCoordinator ------------------------------------------------------------------------

    def find_coordinator(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
        if version >= 4:
            entries = []
            for key in request.coordinator_keys:
                error, message = self._coordinator_error(key_type)
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=self.node.node_id if error == 0 else -1,
                    host=self.node.host if error == 0 else "", port=self.node.port if error == 0 else -1,
                    error_code=error, error_message=message,
                ))
            return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=entries)
        error, message = self._coordinator_error(key_type)
        ok = error == 0
        return FindCoordinatorResponse(
            version=version, throttle_time_ms=0, error_code=error, error_message=message,
            node_id=self.node.node_id if ok else -1, host=self.node.host if ok else "",
            port=self.node.port if ok else -1,
        )

    def _coordinator_error(self, key_type: int) -> tuple[int, str | None]:
        if key_type == KEY_TYPE_GROUP:
            # The coordinator of a group is the leader of its __consumer_offsets partition; the
            # topic is created on first use, as Kafka does. While it cannot be created, Kafka
            # answers COORDINATOR_NOT_AVAILABLE and the client retries.
            if CONSUMER_OFFSETS not in self.topics.registry:
                try:
                    self.topics.create_offsets_topic()
                except (TopicError, OSError):
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
            return ErrorCode.NONE, None
        if key_type == KEY_TYPE_TRANSACTION:
            # No transaction coordinator runs here: the answer Kafka gives while its transaction
            # state topic cannot be created.
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        # Share coordinators (KIP-932) and unknown key types.
        return ErrorCode.INVALID_REQUEST, f"Unsupported key type {key_type}"

    # --- DescribeCluster ------------------------------------------------------------------------

    def describe_cluster(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        node = self.node
        endpoint_type = request.endpoint_type if version >= 1 else ENDPOINT_TYPE_BROKER
        if endpoint_type != ENDPOINT_TYPE_BROKER:
            return DescribeClusterResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
                endpoint_type=endpoint_type, cluster_id=node.cluster_id, controller_id=-1, brokers=[],
                authorized_operations=OMITTED,
            )
        return DescribeClusterResponse(
            version=version, throttle_time_ms=0, error_code=0, error_message=None,
            endpoint_type=ENDPOINT_TYPE_BROKER, cluster_id=node.cluster_id, controller_id=node.node_id,
            brokers=[DescribeClusterResponse.DescribeClusterBroker(
                broker_id=node.node_id, host=node.host, port=node.port, rack=None, is_fenced=False)],
            authorized_operations=authorized(bool(request.include_cluster_authorized_operations), CLUSTER_OPERATIONS),
        )

    def handlers(self) -> dict[ApiKey, Any]:
        return {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
        }
