"""Handlers for the cluster-level APIs: ApiVersions, Metadata, FindCoordinator, DescribeCluster.

Alone (no :class:`ClusterView`), groupcoord is a single node that is broker, controller and the
leader of every partition, so these answers always name this node. In cluster mode they come from
the :class:`ClusterView`, this node's copy of what ZooKeeper holds: live brokers, the controller,
topic assignments and partition states. Topic creation goes through :class:`TopicService` in both.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import NamedTuple

from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorResponse, MetadataResponse

from protocol.acl_operations import CLUSTER_OPERATIONS, OMITTED, TOPIC_OPERATIONS, authorized
from protocol.apis import SUPPORTED_VERSIONS, ZOOKEEPER_MODE_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct
from protocol.responses import api_version_entries

from ..cluster.view import ClusterView, PartitionInfo
from ..context import Handler, NodeInfo, RequestContext
from ..security.acl import CLUSTER_NAME, AclOperation, Authorizer, ResourceType
from ..security.request_checks import (
    NO_AUTHORIZER,
    allowed,
    allowed_names,
    cluster_allowed,
    operations_of,
    operations_set,
)
from ..topics.registry import CONSUMER_OFFSETS, INTERNAL_TOPICS, TRANSACTION_STATE, TopicError, topic_name_error
from ..topics.service import TopicService

__all__ = ["ClusterApis"]


# KIP-511: ClientSoftwareName and ClientSoftwareVersion must match this; otherwise INVALID_REQUEST.
_SOFTWARE_FIELD = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

# FindCoordinator key types (FindCoordinatorRequest.json).
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1

# DescribeCluster endpoint types (KIP-919): 1 = brokers, 2 = controllers.
ENDPOINT_TYPE_BROKER = 1

_Partition = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition
_NOT_AVAILABLE = "The coordinator is not available."


class _Endpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


class _Coordinator(NamedTuple):
    """One FindCoordinator answer: an error (and message) or the coordinator's endpoint."""

    error: int
    message: str | None
    node_id: int = -1
    host: str = ""
    port: int = -1


class ClusterApis:
    def __init__(self, node: NodeInfo, topics: TopicService, cluster: ClusterView | None = None, *,
                 authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.node = node
        self.topics = topics
        #: None: the single-node mode. Otherwise every answer is read from this view.
        self.cluster = cluster
        #: Metadata: DESCRIBE per topic (CREATE to auto-create); FindCoordinator: DESCRIBE on the
        #: group or transactional id; the KIP-430 fields from it (KafkaApis; coordinator/security/request_checks.py).
        self.authorizer = authorizer
        #: What ApiVersions lists: Kafka 4's ranges, or with ZooKeeper the ZooKeeper-era offsets APIs too.
        self.versions = ZOOKEEPER_MODE_VERSIONS if cluster is not None else SUPPORTED_VERSIONS

    def api_versions(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        version = ctx.api_version
        if version >= 3:
            for value in (request.client_software_name, request.client_software_version):
                if not value or not _SOFTWARE_FIELD.match(value):
                    return ApiVersionsResponse(version=version, error_code=ErrorCode.INVALID_REQUEST,
                                               api_keys=api_version_entries(self.versions))
        return ApiVersionsResponse(version=version, error_code=ErrorCode.NONE, api_keys=api_version_entries(self.versions))

    # --- who is in the cluster -----------------------------------------------------------------

    def _brokers(self, listener: str) -> list[_Endpoint]:
        """The live brokers as clients of ``listener`` reach them: brokers without that listener
        are left out (Kafka's ``getAliveBrokerNodes(listenerName)``, reference/security.md §1)."""
        view = self.cluster
        if view is None:
            own = self.node.endpoint(listener)
            return [] if own is None else [_Endpoint(self.node.node_id, own[0], own[1], None)]
        result = []
        for _, b in sorted(view.brokers.items()):
            address = b.endpoint_for(listener)
            if address is not None:
                result.append(_Endpoint(b.broker_id, address[0], address[1], b.rack))
        return result

    def _controller_id(self) -> int:
        if self.cluster is None:
            return self.node.node_id
        # A node cut off from ZooKeeper cannot know the controller: it says so with -1 (and in
        # its log) while it keeps serving what it leads.
        return self.cluster.controller_id if self.cluster.connected else -1

    # --- Metadata -------------------------------------------------------------------------------
    #
    # In cluster mode the answer is what Kafka's ZooKeeper-mode broker gives from its metadata
    # cache (reference/cluster_replication.md §5): the live brokers, the /controller broker, and per
    # partition the live leader (else LEADER_NOT_AVAILABLE with the lists still filled), the
    # leader epoch, the assigned replicas, the ISR and the replicas not on a live broker
    # (OfflineReplicas, v5+). Only v0 drops dead brokers from the lists, and then says
    # REPLICA_NOT_AVAILABLE. A topic this node just asked to auto-create is not in the view yet:
    # LEADER_NOT_AVAILABLE with no partitions, which clients retry.

    def metadata(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        version = ctx.api_version
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                   for b in self._brokers(ctx.listener)]
        # The controller is one of the brokers listed, as in Kafka, whose metadata cache learns both
        # from one UpdateMetadata: here /controller and /brokers/ids are two watches, and a node may
        # see the controller before its registration. -1 (not known yet) then, which clients retry;
        # an id missing from the list fails them (kafka-python's admin: UnknownBrokerIdError).
        controller_id = self._controller_id()
        if controller_id >= 0 and all(b.node_id != controller_id for b in brokers):
            controller_id = -1
        # v0: an empty list means every topic. v1+: null means every topic, empty means none.
        wanted = request.topics
        topic_ops = authorized(version >= 8 and bool(request.include_topic_authorized_operations), TOPIC_OPERATIONS)
        if wanted is None or (version == 0 and not wanted):
            topics = [self._topic_metadata(name, version, topic_ops, ctx.listener)
                      for name in self._describable(ctx, self._topic_names())]
        else:
            auto_create = self.topics.auto_create_enabled and (version < 4 or request.allow_auto_topic_creation)
            topics = [self._authorized_requested_topic(ctx, t, version, auto_create, topic_ops) for t in wanted]
        if self.authorizer.enabled and topic_ops is not OMITTED:
            self._set_topic_operations(ctx, topics)
        return MetadataResponse(
            version=version,
            throttle_time_ms=0,
            brokers=brokers,
            cluster_id=self.node.cluster_id,
            controller_id=controller_id,
            topics=topics,
            authorized_operations=self._cluster_operations(
                ctx, 8 <= version <= 10 and bool(request.include_cluster_authorized_operations)),
        )

    # --- authorization (KafkaApis handleTopicMetadataRequest, getCoordinator) ---

    def _describable(self, ctx: RequestContext, names: list[str]) -> list[str]:
        """All-topics Metadata: the topics the principal may not DESCRIBE are left out, silently."""
        if not self.authorizer.enabled:
            return names
        permitted = allowed_names(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        return [n for n in names if n in permitted]

    def _authorized_requested_topic(self, ctx: RequestContext, wanted: KafkaStruct, version: int, auto_create: bool,
                                    ops: set[int] | None) -> KafkaStruct:
        """A named topic: TOPIC_AUTHORIZATION_FAILED without DESCRIBE, before any existence check
        (by id: the id is echoed, the name withheld); a missing one auto-created only with CREATE
        on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED."""
        if not self.authorizer.enabled:
            return self._requested_topic(wanted, version, auto_create, ops, ctx.listener)
        name = wanted.name
        topic_id = getattr(wanted, "topic_id", None)
        if name is None:
            found = self._topic_name_by_id(topic_id) if topic_id is not None else None
            if found is not None and not allowed(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                 found):
                return self._error_topic(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic_id)
            return self._requested_topic(wanted, version, auto_create, ops, ctx.listener)
        if not allowed(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            return self._error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if auto_create and not self._topic_exists(name) and topic_name_error(name) is None \
                and not cluster_allowed(self.authorizer, ctx, AclOperation.CREATE) \
                and not allowed(self.authorizer, ctx, AclOperation.CREATE, ResourceType.TOPIC, name):
            refused = self._error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            refused.is_internal = name in INTERNAL_TOPICS
            return refused
        return self._requested_topic(wanted, version, auto_create, ops, ctx.listener)

    def _set_topic_operations(self, ctx: RequestContext, topics: list[KafkaStruct]) -> None:
        for topic in topics:
            if topic.authorized_operations is not OMITTED and topic.name is not None:
                topic.authorized_operations = operations_set(
                    operations_of(self.authorizer, ctx, ResourceType.TOPIC, topic.name))

    def _cluster_operations(self, ctx: RequestContext, requested: bool) -> set[int] | None:
        """KIP-430's cluster field: what the principal may do on the cluster, 0 without DESCRIBE."""
        if not requested or not self.authorizer.enabled:
            return authorized(requested, CLUSTER_OPERATIONS)
        if not cluster_allowed(self.authorizer, ctx, AclOperation.DESCRIBE):
            return set()
        return operations_set(operations_of(self.authorizer, ctx, ResourceType.CLUSTER, CLUSTER_NAME))

    def _authorized_coordinator(self, ctx: RequestContext, version: int, key_type: int, key: str) -> _Coordinator:
        """DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the transactional id
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), no node; v4+ per key without a message."""
        if self.authorizer.enabled:
            refusal = None
            if key_type == KEY_TYPE_GROUP and not allowed(self.authorizer, ctx, AclOperation.DESCRIBE,
                                                          ResourceType.GROUP, key):
                refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
            elif key_type == KEY_TYPE_TRANSACTION and not allowed(self.authorizer, ctx, AclOperation.DESCRIBE,
                                                                  ResourceType.TRANSACTIONAL_ID, key):
                refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed."
            if refusal is not None:
                return _Coordinator(refusal[0], refusal[1] if version < 4 else None)
        return self._coordinator(key_type, key, ctx.listener)

    def _topic_names(self) -> list[str]:
        if self.cluster is None:
            return sorted(info.name for info in self.topics.registry.all())
        # A topic queued for deletion is no longer listed (so a regex subscription does not match it).
        return sorted(name for name in self.cluster.topics if name not in self.cluster.deleting)

    def _topic_exists(self, name: str) -> bool:
        if self.cluster is None:
            return self.topics.registry.get(name) is not None
        return name in self.cluster.topics and name not in self.cluster.deleting

    def _topic_name_by_id(self, topic_id: uuid.UUID) -> str | None:
        if self.cluster is None:
            info = self.topics.registry.by_id(topic_id)
            return None if info is None else info.name
        return next((a.name for a in self.cluster.topics.values() if a.topic_id == topic_id), None)

    def _requested_topic(self, wanted: KafkaStruct, version: int, auto_create: bool, ops: set[int] | None,
                         listener: str = "PLAINTEXT") -> KafkaStruct:
        name = wanted.name
        topic_id = getattr(wanted, "topic_id", None)
        if name is None:
            found = self._topic_name_by_id(topic_id) if topic_id is not None else None
            if found is None:
                return self._error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id)
            return self._topic_metadata(found, version, ops, listener)
        if not self._topic_exists(name):
            if topic_name_error(name) is not None:
                return self._error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
            if not auto_create or (self.cluster is not None and name in self.cluster.deleting):
                # A topic whose deletion is in flight is unknown, and not auto-created: it would
                # come back right after its deletion completes (topic_store.py refuses it too).
                return self._error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            try:
                self.topics.auto_create(name)
            except TopicError as exc:
                # Another broker creating the same topic at the same time is not a failure.
                if self.cluster is not None and exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                    return self._pending_topic(name, ops)
                return self._error_topic(name, exc.error_code)
            if self.cluster is not None:
                # Written to ZooKeeper; the view learns of it a moment later (§5).
                return self._pending_topic(name, ops)
        return self._topic_metadata(name, version, ops, listener)

    @staticmethod
    def _error_topic(name: str | None, error: int, topic_id: uuid.UUID | None = None) -> KafkaStruct:
        return MetadataResponse.MetadataResponseTopic(
            error_code=error, name=name, topic_id=topic_id, is_internal=False, partitions=[],
            authorized_operations=OMITTED,
        )

    @staticmethod
    def _pending_topic(name: str, ops: set[int] | None) -> KafkaStruct:
        """Cluster mode: a topic whose creation is under way and not yet in the view."""
        return MetadataResponse.MetadataResponseTopic(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, topic_id=None, is_internal=name in INTERNAL_TOPICS,
            partitions=[], authorized_operations=ops,
        )

    def _topic_metadata(self, name: str, version: int, ops: set[int] | None, listener: str = "PLAINTEXT") -> KafkaStruct:
        """A topic known to exist (in the registry alone, in the view in cluster mode)."""
        view = self.cluster
        if view is None:
            info = self.topics.registry.get(name)
            assert info is not None
            topic_id, internal = info.topic_id, info.internal
            node_id = self.node.node_id
            partitions = [
                _Partition(error_code=0, partition_index=p, leader_id=node_id,
                           leader_epoch=self.topics.leader_epoch(name, p),
                           replica_nodes=[node_id], isr_nodes=[node_id], offline_replicas=[])
                for p in range(info.num_partitions)
            ]
        else:
            topic_id, internal = view.topics[name].topic_id, name in INTERNAL_TOPICS
            partitions = [self._cluster_partition(view, part, version, listener) for part in view.partitions(name)]
        return MetadataResponse.MetadataResponseTopic(
            error_code=0, name=name, topic_id=topic_id, is_internal=internal,
            partitions=partitions, authorized_operations=ops,
        )

    @staticmethod
    def _cluster_partition(view: ClusterView, part: PartitionInfo, version: int,
                           listener: str = "PLAINTEXT") -> KafkaStruct:
        state = part.state
        replicas = list(part.replicas)
        isr = list(state.isr) if state is not None else []
        leader = view.leader(part.topic, part.partition)
        error = ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
        if leader >= 0 and view.brokers[leader].endpoint_for(listener) is None:
            # A leader clients of this listener cannot reach (Kafka's MetadataCache): v6+ says
            # so with LISTENER_NOT_FOUND, older versions with LEADER_NOT_AVAILABLE; no leader.
            error = ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
            leader = -1
        if version == 0:
            live_replicas = [r for r in replicas if view.live(r)]
            live_isr = [r for r in isr if view.live(r)]
            if error == ErrorCode.NONE and (len(live_replicas) < len(replicas) or len(live_isr) < len(isr)):
                error = ErrorCode.REPLICA_NOT_AVAILABLE
            replicas, isr = live_replicas, live_isr
        return _Partition(
            error_code=error, partition_index=part.partition, leader_id=leader,
            leader_epoch=state.leader_epoch if state is not None else -1,
            replica_nodes=replicas, isr_nodes=isr,
            offline_replicas=[r for r in part.replicas if not view.live(r)],
        )

    # --- FindCoordinator ------------------------------------------------------------------------

    def find_coordinator(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        version = ctx.api_version
        key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
        if version >= 4:
            entries = []
            for key in request.coordinator_keys:
                c = self._authorized_coordinator(ctx, version, key_type, key)
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=c.node_id, host=c.host, port=c.port, error_code=c.error, error_message=c.message,
                ))
            return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=entries)
        c = self._authorized_coordinator(ctx, version, key_type, request.key)
        return FindCoordinatorResponse(
            version=version, throttle_time_ms=0, error_code=c.error, error_message=c.message,
            node_id=c.node_id, host=c.host, port=c.port,
        )

    def _coordinator(self, key_type: int, key: str, listener: str = "PLAINTEXT") -> _Coordinator:
        found = self._coordinator_on_any_listener(key_type, key)
        if found.error != ErrorCode.NONE:
            return found
        # The coordinator's address on the request's listener (Kafka's getCoordinator asks the
        # metadata cache for the node of that listener; without one, COORDINATOR_NOT_AVAILABLE).
        if self.cluster is None:
            address = self.node.endpoint(listener)
        else:
            broker = self.cluster.brokers.get(found.node_id)
            address = None if broker is None else broker.endpoint_for(listener)
        if address is None:
            return _Coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, _NOT_AVAILABLE)
        return _Coordinator(ErrorCode.NONE, None, found.node_id, address[0], address[1])

    def _coordinator_on_any_listener(self, key_type: int, key: str) -> _Coordinator:
        if key_type == KEY_TYPE_GROUP:
            if self.cluster is None:
                return self._single_node_group_coordinator()
            return self._cluster_group_coordinator(self.cluster, key)
        if key_type == KEY_TYPE_TRANSACTION:
            # The coordinator of a transactional id is the leader of its __transaction_state
            # partition (Kafka's KafkaApis.getCoordinator); the topic is created on first use.
            if self.cluster is None:
                return self._single_node_transaction_coordinator()
            return self._cluster_coordinator(self.cluster, TRANSACTION_STATE, key,
                                             self.topics.create_transaction_state_topic)
        # Share coordinators (KIP-932) and unknown key types.
        return _Coordinator(ErrorCode.INVALID_REQUEST, f"Unsupported key type {key_type}")

    def _create_offsets_topic(self) -> bool:
        """Ask for __consumer_offsets (created on first use, as Kafka does); False if refused."""
        try:
            self.topics.create_offsets_topic()
        except (TopicError, OSError):
            return False
        return True

    def _single_node_group_coordinator(self) -> _Coordinator:
        # The coordinator of a group is the leader of its __consumer_offsets partition: this node.
        # While the topic cannot be created, Kafka answers COORDINATOR_NOT_AVAILABLE and the
        # client retries.
        if CONSUMER_OFFSETS not in self.topics.registry and not self._create_offsets_topic():
            return _Coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, _NOT_AVAILABLE)
        return _Coordinator(ErrorCode.NONE, None, self.node.node_id, self.node.host, self.node.port)

    def _single_node_transaction_coordinator(self) -> _Coordinator:
        if TRANSACTION_STATE not in self.topics.registry:
            try:
                self.topics.create_transaction_state_topic()
            except (TopicError, OSError):
                return _Coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, _NOT_AVAILABLE)
        return _Coordinator(ErrorCode.NONE, None, self.node.node_id, self.node.host, self.node.port)

    def _cluster_group_coordinator(self, view: ClusterView, group: str) -> _Coordinator:
        return self._cluster_coordinator(view, CONSUMER_OFFSETS, group, self._create_offsets_topic)

    def _cluster_coordinator(self, view: ClusterView, topic: str, key: str, create: Callable[[], object]) -> _Coordinator:
        # reference/cluster_replication.md §4.3: the coordinator is the live leader of partition
        # abs(javaHash(key)) % N of the coordinator's topic (__consumer_offsets for a group,
        # __transaction_state for a transactional id). A missing topic is created and, like a
        # partition without a live leader, answered COORDINATOR_NOT_AVAILABLE (clients retry).
        # Whether the partition is loaded there yet is not checked.
        broker = view.coordinator(topic, key)
        if broker is None:
            if topic not in view.topics:
                try:
                    create()
                except (TopicError, OSError):
                    pass
            return _Coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, _NOT_AVAILABLE)
        return _Coordinator(ErrorCode.NONE, None, broker.broker_id, broker.host, broker.port)

    # --- DescribeCluster ------------------------------------------------------------------------

    def describe_cluster(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
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
            endpoint_type=ENDPOINT_TYPE_BROKER, cluster_id=node.cluster_id, controller_id=self._controller_id(),
            brokers=[DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=False)
                for b in self._brokers(ctx.listener)],
            authorized_operations=self._cluster_operations(ctx, bool(request.include_cluster_authorized_operations)),
        )

    def handlers(self) -> dict[ApiKey, Handler]:
        return {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
        }
