"""ElectLeaders (api key 43, v0-v2): preferred (type 0, KIP-183) or unclean (type 1, KIP-460)
leader election, the API behind ``kafka-leader-election.sh``.

In cluster mode the controller runs it (``cluster/controller.py``); a node that is not the
controller answers NOT_CONTROLLER, and clients send it to the controller Metadata names. On a
single node every partition is already led by its preferred (and only) replica:
ELECTION_NOT_NEEDED.
"""

from __future__ import annotations

from kafka.protocol.admin import ElectLeadersResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from ..cluster.controller import Controller
from ..context import Handler, Reply, RequestContext
from ..security.acl import AclOperation, Authorizer
from ..security.request_checks import NO_AUTHORIZER, cluster_allowed
from ..topics.service import TopicService

__all__ = ["ElectLeadersApis"]

PREFERRED, UNCLEAN = 0, 1
Result = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = Result.PartitionResult


class ElectLeadersApis:
    def __init__(self, topics: TopicService, controller: Controller | None = None, *,
                 authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.topics = topics
        self.controller = controller
        #: ALTER on the cluster (KafkaApis handleElectLeaders).
        self.authorizer = authorizer

    def elect_leaders(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        version = ctx.api_version
        if self.authorizer.enabled and not cluster_allowed(self.authorizer, ctx, AclOperation.ALTER):
            # CLUSTER_AUTHORIZATION_FAILED at the top and on each named partition, no message.
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return ElectLeadersResponse(version=version, throttle_time_ms=0, error_code=denied,
                                        replica_election_results=[
                                            Result(topic=t.topic, partition_result=[
                                                PartitionResult(partition_id=p, error_code=denied, error_message=None)
                                                for p in t.partitions]) for t in request.topic_partitions or []])
        election_type = request.election_type if version >= 1 else PREFERRED
        if election_type not in (PREFERRED, UNCLEAN):
            return ElectLeadersResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                        replica_election_results=[])
        wanted = None if request.topic_partitions is None else [
            (t.topic, p) for t in request.topic_partitions for p in t.partitions]
        if self.controller is not None:
            return self._in_cluster(version, wanted, election_type == UNCLEAN)
        if wanted is None:
            wanted = [(i.name, p) for i in self.topics.registry.all() for p in range(i.num_partitions)]
        outcome: dict[tuple[str, int], int] = {}
        for name, p in wanted:
            info = self.topics.registry.get(name)
            known = info is not None and 0 <= p < info.num_partitions
            outcome[(name, p)] = ErrorCode.ELECTION_NOT_NEEDED if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return self._response(version, outcome)

    async def _in_cluster(self, version: int, wanted: list[tuple[str, int]] | None, unclean: bool) -> KafkaResponse:
        assert self.controller is not None
        return self._response(version, await self.controller.elect_leaders(wanted, unclean))

    @staticmethod
    def _response(version: int, outcome: dict[tuple[str, int], int]) -> KafkaResponse:
        by_topic: dict[str, list[KafkaStruct]] = {}
        for (name, p), error in outcome.items():
            message = None if error in (ErrorCode.NONE,) else ErrorCode(error).name
            by_topic.setdefault(name, []).append(PartitionResult(partition_id=p, error_code=error, error_message=message))
        results = [Result(topic=name, partition_result=parts) for name, parts in sorted(by_topic.items())]
        return ElectLeadersResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    replica_election_results=results)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.ELECT_LEADERS: self.elect_leaders}
