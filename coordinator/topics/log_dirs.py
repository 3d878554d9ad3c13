"""DescribeLogDirs (api key 35, v1-v4): this node's log directory and the partitions in it, for
``kafka-log-dirs.sh --describe``. One directory per node (``log.dirs`` names one); each partition's
size is the bytes of its segments. ``OffsetLag`` is how far a replica trails its log's high
watermark... in Kafka it is for "future" replicas moving between directories, which never exist
here, so it is 0. v4 adds the directory's total and usable bytes (KIP-827).
"""

from __future__ import annotations

import os

from kafka.protocol.admin import DescribeLogDirsResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from ..context import Handler, RequestContext
from ..security.acl import AclOperation, Authorizer
from ..security.request_checks import NO_AUTHORIZER, cluster_allowed
from .log_manager import LogManager

__all__ = ["LogDirApis"]

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicOut = Result.DescribeLogDirsTopic
PartitionOut = TopicOut.DescribeLogDirsPartition


class LogDirApis:
    def __init__(self, logs: LogManager, *, authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.logs = logs
        #: DESCRIBE on the cluster (KafkaApis handleDescribeLogDirsRequest).
        self.authorizer = authorizer

    def describe_log_dirs(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        version = ctx.api_version
        if self.authorizer.enabled and not cluster_allowed(self.authorizer, ctx, AclOperation.DESCRIBE):
            return DescribeLogDirsResponse(version=version, throttle_time_ms=0,
                                           error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
        hosted = self.logs.partitions()
        if request.topics is None:
            chosen = hosted
        else:
            wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
            chosen = [plog for plog in hosted if (plog.topic, plog.partition) in wanted]
        by_topic: dict[str, list[KafkaStruct]] = {}
        for plog in sorted(chosen, key=lambda x: (x.topic, x.partition)):
            by_topic.setdefault(plog.topic, []).append(PartitionOut(
                partition_index=plog.partition, partition_size=plog.log.size_bytes, offset_lag=0, is_future_key=False))
        directory = os.path.abspath(self.logs.data_dir)
        total = usable = -1
        try:
            st = os.statvfs(directory)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            pass
        result = Result(error_code=ErrorCode.NONE, log_dir=directory,
                        topics=[TopicOut(name=name, partitions=parts) for name, parts in sorted(by_topic.items())],
                        total_bytes=total, usable_bytes=usable)
        return DescribeLogDirsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                       results=[result])

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs}
