"""``offsets.zookeeper.mirror.groups`` at a node's stop (coordinator/cluster/zk_offset_apis.py): the mirror writes
still queued are written before the ZooKeeper session ends, within a bounded wait. Pure: a stand-in for
ZooKeeper that takes its time, no server."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetCommitRequest

from coordinator.cluster.zk_offset_apis import ZkOffsetApis
from coordinator.context import RequestContext
from coordinator.security.acl import NoAuthorizer
from protocol.apis import ApiKey
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

    def set_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
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
    assert zookeeper.written == [{("t", 0): 1}, {("t", 0): 2}, {("t", 0): 3}]


def test_a_zookeeper_that_does_not_answer_holds_the_stop_only_so_long(caplog: pytest.LogCaptureFixture) -> None:
    zookeeper = SlowZooKeeper()
    apis, commit = _mirroring(zookeeper)
    for offset in (1, 2):
        _commit(commit, offset)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="groupcoord.cluster.zk_offsets"):
        apis.close(timeout=0.3)
    assert time.monotonic() - started < 10
    # One write under way, one queued: both named as not mirrored.
    dropped = [r for r in caplog.records if "not mirrored" in r.getMessage()]
    assert len(dropped) == 1 and dropped[0].writes == 2  # type: ignore[attr-defined]
    assert zookeeper.written == []
    zookeeper.go.set()  # lets the write under way end (the queued one was dropped)
