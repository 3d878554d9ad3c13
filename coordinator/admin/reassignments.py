"""AlterPartitionReassignments (api key 45, v0-v1) and ListPartitionReassignments (api key 46, v0):
moving partition replicas between nodes (KIP-455), the APIs behind ``kafka-reassign-partitions.sh``.

In cluster mode the controller carries the moves out (``cluster/controller.py``); a node that is
not the controller answers NOT_CONTROLLER, and clients send these to the controller Metadata
names. Alter answers once the move is written to ZooKeeper; the data moves afterwards, and List
shows each partition still moving with its replicas, adding and removing replicas. On a single
node nothing can move: a target of this node alone is already in place, any other names a broker
that is not alive (INVALID_REPLICA_ASSIGNMENT), and nothing is ever in progress.
"""

from __future__ import annotations

from kafka.protocol.admin import AlterPartitionReassignmentsResponse, ListPartitionReassignmentsResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from ..cluster.controller import Controller
from ..context import Handler, NodeInfo, Reply, RequestContext
from ..security.acl import AclOperation, Authorizer
from ..security.request_checks import NO_AUTHORIZER, cluster_allowed
from ..topics.service import TopicService

__all__ = ["ReassignmentApis"]

AlterTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
AlterPartition = AlterTopic.ReassignablePartitionResponse
ListTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
ListPartition = ListTopic.OngoingPartitionReassignment


#: The message of a refusal (Kafka's names the request; ours says what failed).
_DENIED = "Cluster authorization failed."


class ReassignmentApis:
    def __init__(self, node: NodeInfo, topics: TopicService, controller: Controller | None = None, *,
                 authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.node = node
        self.topics = topics
        self.controller = controller
        #: AlterPartitionReassignments: ALTER on the cluster; ListPartitionReassignments: DESCRIBE
        #: (KafkaApis; CLUSTER_AUTHORIZATION_FAILED at the top and on each partition named).
        self.authorizer = authorizer

    def _denied(self, ctx: RequestContext, operation: AclOperation) -> bool:
        return self.authorizer.enabled and not cluster_allowed(self.authorizer, ctx, operation)

    # --- AlterPartitionReassignments -------------------------------------------------------------

    def alter(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        version = ctx.api_version
        if self._denied(ctx, AclOperation.ALTER):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return AlterPartitionReassignmentsResponse(
                version=version, throttle_time_ms=0, error_code=denied, error_message=_DENIED,
                responses=[AlterTopic(name=t.name, partitions=[
                    AlterPartition(partition_index=p.partition_index, error_code=denied, error_message=_DENIED)
                    for p in t.partitions]) for t in request.topics])
        wanted: dict[tuple[str, int], tuple[int, ...] | None] = {}
        for topic in request.topics:
            for part in topic.partitions:
                wanted[(topic.name, part.partition_index)] = None if part.replicas is None else tuple(part.replicas)
        allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True)) if version >= 1 else True
        if self.controller is not None:
            return self._alter_in_cluster(version, wanted, allow_rf_change)
        outcome: dict[tuple[str, int], tuple[int, str | None]] = {}
        for (name, p), target in wanted.items():
            info = self.topics.registry.get(name)
            if info is None or not 0 <= p < info.num_partitions:
                outcome[(name, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Partition {name}-{p} does not exist.")
            elif target is None:
                outcome[(name, p)] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No reassignment of {name}-{p} is in progress.")
            elif tuple(target) == (self.node.node_id,):
                outcome[(name, p)] = (ErrorCode.NONE, None)
            else:
                outcome[(name, p)] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      f"Replica assignment has brokers that are not alive. Replica list: "
                                      f"{list(target)}, live broker list: [{self.node.node_id}]")
        return self._alter_response(version, outcome)

    async def _alter_in_cluster(self, version: int, wanted: dict[tuple[str, int], tuple[int, ...] | None],
                                allow_rf_change: bool) -> KafkaResponse:
        assert self.controller is not None
        if self.controller.token is None:
            return AlterPartitionReassignmentsResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                error_message="This node is not the controller.", responses=[])
        return self._alter_response(version, await self.controller.alter_reassignments(wanted, allow_rf_change))

    @staticmethod
    def _alter_response(version: int, outcome: dict[tuple[str, int], tuple[int, str | None]]) -> KafkaResponse:
        by_topic: dict[str, list[KafkaStruct]] = {}
        for (name, p), (code, message) in sorted(outcome.items()):
            by_topic.setdefault(name, []).append(AlterPartition(partition_index=p, error_code=code, error_message=message))
        return AlterPartitionReassignmentsResponse(
            version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
            responses=[AlterTopic(name=name, partitions=parts) for name, parts in by_topic.items()])

    # --- ListPartitionReassignments --------------------------------------------------------------

    def list(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        version = ctx.api_version
        if self._denied(ctx, AclOperation.DESCRIBE):
            return ListPartitionReassignmentsResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message=_DENIED, topics=[])
        wanted = None if request.topics is None else [
            (t.name, p) for t in request.topics for p in t.partition_indexes]
        if self.controller is None:
            return ListPartitionReassignmentsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                      error_message=None, topics=[])
        moving = self.controller.list_reassignments(wanted)
        if moving is None:
            return ListPartitionReassignmentsResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                error_message="This node is not the controller.", topics=[])
        by_topic: dict[str, list[KafkaStruct]] = {}
        for (name, p), assignment in sorted(moving.items()):
            by_topic.setdefault(name, []).append(ListPartition(
                partition_index=p, replicas=list(assignment.partitions[p]),
                adding_replicas=list(assignment.adding.get(p, ())), removing_replicas=list(assignment.removing.get(p, ()))))
        return ListPartitionReassignmentsResponse(
            version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
            topics=[ListTopic(name=name, partitions=parts) for name, parts in by_topic.items()])

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.alter, ApiKey.LIST_PARTITION_REASSIGNMENTS: self.list}
