"""coordinator/cluster/zk_offset_apis.py with stand-ins for ZooKeeper, no server: the mirror's writes still
queued at a node's stop are written before the ZooKeeper session ends, within a bounded wait; a ZooKeeper
failing under a v0 request fails only the partitions it touched."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kazoo.exceptions import ConnectionLoss

from coordinator.cluster.zk_offset_apis import ZkOffsetApis
from coordinator.context import RequestContext
from coordinator.security.acl import NoAuthorizer
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.hot_responses import CommitPartition, CommitTopic, OffsetCommitAnswer

CT = OffsetCommitRequest.OffsetCommitRequestTopic
CP = CT.OffsetCommitRequestPartition
CTX = RequestContext(api_key=ApiKey.OFFSET_COMMIT, api_version=2, correlation_id=1, client_id=None, peer="test")


class SlowZooKeeper:
    """``ZkConsumers.set_offsets`` as a busy ZooKeeper answers it: each write waits until ``go`` is set,
    then a moment more."""

    def __init__(self) -> None:
        self.written: list[dict[tuple[str, int], int]] = []
        self.go = threading.Event()
        self.started = threading.Event()  # a write is under way

    def set_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        self.started.set()
        self.go.wait(30)
        time.sleep(0.05)
        self.written.append(dict(offsets))


def _mirroring(zookeeper: SlowZooKeeper) -> tuple[ZkOffsetApis, Any]:
    """The wrapped OffsetCommit handler of a node mirroring group ``g``; the coordinator behind it acknowledges
    every partition."""
    apis = ZkOffsetApis(zookeeper, lambda _topic: 1, metadata_max_bytes=4096,  # type: ignore[arg-type]
                        authorizer=NoAuthorizer(), mirror_groups="g")

    def acknowledge(_ctx: RequestContext, request: Any) -> OffsetCommitAnswer:
        return OffsetCommitAnswer([CommitTopic(t.name, [CommitPartition(p.partition_index, 0) for p in t.partitions])
                                   for t in request.topics])

    handlers: dict[ApiKey, Any] = {ApiKey.OFFSET_COMMIT: acknowledge, ApiKey.OFFSET_FETCH: acknowledge}
    apis.wrap(handlers)
    return apis, handlers[ApiKey.OFFSET_COMMIT]


def _commit(commit: Any, offset: int) -> None:
    request = OffsetCommitRequest(version=2, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                  retention_time_ms=-1, topics=[CT(name="t", partitions=[
                                      CP(partition_index=0, committed_offset=offset, committed_metadata="")])])
    answer = asyncio.run(commit(CTX, request))
    assert answer.topics[0].partitions[0].error_code == 0


def test_commits_acknowledged_before_the_stop_reach_zookeeper() -> None:
    zookeeper = SlowZooKeeper()
    apis, commit = _mirroring(zookeeper)
    for offset in (1, 2, 3):
        _commit(commit, offset)  # acknowledged: the mirror writes are queued
    assert zookeeper.written == []
    zookeeper.go.set()
    apis.close()
    # Coalesced: the first commit may be under way alone, the next ones merge; the last offset lands last.
    assert zookeeper.written in ([{("t", 0): 1}, {("t", 0): 3}], [{("t", 0): 3}])


def _commit_many(commit: Any, offsets: dict[tuple[str, int], int]) -> None:
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(CP(partition_index=partition, committed_offset=offset,
                                               committed_metadata=""))
    request = OffsetCommitRequest(version=2, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                  retention_time_ms=-1, topics=[CT(name=t, partitions=p) for t, p in topics.items()])
    asyncio.run(commit(CTX, request))


def test_commits_queued_behind_a_slow_zookeeper_merge_into_few_writes() -> None:
    """Only each partition's newest offset matters: 1,000 commits queued while ZooKeeper is held back end
    with ZooKeeper holding the last offsets, in a handful of writes, and no znode ever moved backwards."""
    zookeeper = SlowZooKeeper()
    apis, commit = _mirroring(zookeeper)
    for offset in range(1, 1001):
        # Partitions 0 and 1 every time, partition 2 every tenth commit.
        batch = {("t", 0): offset, ("t", 1): offset * 2} | ({("t", 2): offset} if offset % 10 == 0 else {})
        _commit_many(commit, batch)
    zookeeper.go.set()
    apis.close()
    assert len(zookeeper.written) <= 2  # the first commit may have been taken alone before the rest came
    assert zookeeper.written[-1] == {("t", 0): 1000, ("t", 1): 2000, ("t", 2): 1000}
    assert apis.mirror_queue.writes == len(zookeeper.written)
    znode: dict[tuple[str, int], int] = {}
    for write in zookeeper.written:
        for tp, offset in write.items():
            assert offset >= znode.get(tp, 0)
            znode[tp] = offset


def test_a_zookeeper_that_does_not_answer_holds_the_stop_only_so_long(caplog: pytest.LogCaptureFixture) -> None:
    zookeeper = SlowZooKeeper()
    apis, commit = _mirroring(zookeeper)
    _commit(commit, 1)
    assert zookeeper.started.wait(10)  # the writer has taken offset 1
    _commit(commit, 2)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="groupcoord.cluster.zk_offsets"):
        apis.close(timeout=0.3)
    assert time.monotonic() - started < 10
    # One write under way, one queued: both offsets named as not mirrored (one line).
    dropped = [r for r in caplog.records if "not mirrored" in r.getMessage()]
    assert len(dropped) == 1 and dropped[0].offsets == 2  # type: ignore[attr-defined]
    assert zookeeper.written == []
    zookeeper.go.set()  # lets the write under way end (the queued one was dropped)


class FailingZooKeeper:
    """``ZkConsumers`` whose ZooKeeper connection is lost for partition 1's znode."""

    def __init__(self) -> None:
        self.written: dict[tuple[str, str, int], int] = {}

    def set_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        if partition == 1:
            raise ConnectionLoss()
        self.written[(group, topic, partition)] = offset

    def get_offset(self, group: str, topic: str, partition: int) -> int | None:
        if partition == 1:
            raise ConnectionLoss()
        return self.written.get((group, topic, partition))


def test_zookeeper_lost_under_a_v0_request_fails_only_its_partitions() -> None:
    zookeeper = FailingZooKeeper()
    apis = ZkOffsetApis(zookeeper, lambda _topic: 3, metadata_max_bytes=4096,  # type: ignore[arg-type]
                        authorizer=NoAuthorizer())
    handlers: dict[ApiKey, Any] = {ApiKey.OFFSET_COMMIT: None, ApiKey.OFFSET_FETCH: None}
    apis.wrap(handlers)
    v0 = RequestContext(api_key=ApiKey.OFFSET_COMMIT, api_version=0, correlation_id=1, client_id=None, peer="test")
    committed = asyncio.run(handlers[ApiKey.OFFSET_COMMIT](v0, OffsetCommitRequest(version=0, group_id="old", topics=[
        CT(name="t", partitions=[CP(partition_index=p, committed_offset=10 + p, committed_metadata="")
                                 for p in (0, 1, 2)])])))
    # As Kafka mapped an exception of its ZooKeeper client: UNKNOWN_SERVER_ERROR for that partition.
    assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [
        (0, ErrorCode.NONE), (1, ErrorCode.UNKNOWN_SERVER_ERROR), (2, ErrorCode.NONE)]
    assert zookeeper.written == {("old", "t", 0): 10, ("old", "t", 2): 12}
    fetched = asyncio.run(handlers[ApiKey.OFFSET_FETCH](v0, OffsetFetchRequest(version=0, group_id="old", topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1, 2])])))
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in fetched.topics[0].partitions] == [
        (0, 10, ErrorCode.NONE), (1, -1, ErrorCode.UNKNOWN_SERVER_ERROR), (2, 12, ErrorCode.NONE)]
