"""TxnOffsetCommit and OffsetFetch with RequireStable over a real socket, served by an in-process
group coordinator whose markers are written through ``GroupService.complete_transaction`` (what
WriteTxnMarkers calls for ``__consumer_offsets`` partitions, seam C4, docs/transactions.md)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.producer import TxnOffsetCommitRequest

from coordinator.config import load_config
from coordinator.group.config import GroupConfig
from coordinator.group.coordinator_type import group_coordinator_type
from coordinator.group.service import GroupService
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.runtime.snapshot import read_snapshot
from coordinator.server.server import KafkaServer
from coordinator.topics.log_manager import LogManager
from coordinator.topics.registry import TopicRegistry
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E
from tests.wire_client import WireClient

TOPIC = "__consumer_offsets"
Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic


def txn_commit(version: int, offset: int, producer_id: int = 42, producer_epoch: int = 1) -> Any:
    return TxnOffsetCommitRequest(
        version=version, transactional_id="t1", group_id="g", producer_id=producer_id, producer_epoch=producer_epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[Topic(name="foo", partitions=[Topic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_metadata="m", committed_leader_epoch=3)])])


def fetch(c: WireClient, require_stable: bool) -> tuple[int, int]:
    response = c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
        version=7, group_id="g", require_stable=require_stable,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="foo", partition_indexes=[0])]))
    part = response.topics[0].partitions[0]
    return part.committed_offset, part.error_code


def commit_error(c: WireClient, version: int, offset: int) -> int:
    response = c.request(ApiKey.TXN_OFFSET_COMMIT, version, txn_commit(version, offset))
    return int(response.topics[0].partitions[0].error_code)


class Verifier:
    """A transaction coordinator's VerifyOnly answer, set by the test."""

    def __init__(self) -> None:
        self.code = E.NONE
        self.calls: list[tuple[str, int, int, list[tuple[str, int]]]] = []

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.calls.append((transactional_id, producer_id, producer_epoch, partitions))
        return {p: self.code for p in partitions}


@pytest.mark.asyncio
async def test_txn_offset_commit_is_unstable_until_complete_transaction_writes_the_marker(tmp_path: Path) -> None:
    config = load_config(data_dir=str(tmp_path), overrides=["offsets.topic.num.partitions=1"])
    registry = TopicRegistry(tmp_path)
    logs = LogManager(tmp_path, registry, config)
    await logs.open_all()
    logs.topic_created(registry.create(TOPIC, 1, {"cleanup.policy": "compact"}))
    runtime = CoordinatorRuntime(logs, group_coordinator_type(GroupConfig()))
    groups = GroupService(runtime, lambda: 1)
    server = KafkaServer(groups.handlers(), max_request_size=1 << 20, max_connections=10, idle_timeout_ms=60_000)
    host, port = await server.bind("127.0.0.1", 0)
    await server.start()
    client = await asyncio.to_thread(WireClient, host, port)
    try:
        def call(*args: Any) -> Any:
            return asyncio.to_thread(*args)

        # Loading: clients before v2 are told COORDINATOR_NOT_AVAILABLE instead of
        # COORDINATOR_LOAD_IN_PROGRESS (they would not retry it).
        runtime.queue_loading([0])
        assert await call(commit_error, client, 1, 5) == E.COORDINATOR_NOT_AVAILABLE
        assert await call(commit_error, client, 2, 5) == E.COORDINATOR_LOAD_IN_PROGRESS
        await runtime.load(0)

        assert await call(commit_error, client, 3, 10) == E.NONE
        assert await call(fetch, client, False) == (-1, E.NONE)
        assert await call(fetch, client, True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        assert await groups.complete_transaction(TOPIC, 0, 42, 1, True, 5) == E.NONE
        assert await call(fetch, client, True) == (10, E.NONE)

        # v0 (aiokafka's, librdkafka's), then an abort: the committed offset stays.
        assert await call(commit_error, client, 0, 20) == E.NONE
        assert await call(fetch, client, True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        assert await groups.complete_transaction(TOPIC, 0, 42, 1, False, 5) == E.NONE
        assert await call(fetch, client, True) == (10, E.NONE)

        # A zombie: an older epoch of the producer than its last write here.
        response = await call(client.request, ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit(3, 99, producer_epoch=0))
        assert response.topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH
        assert await call(fetch, client, True) == (10, E.NONE)

        # KIP-890 verification: a producer with nothing pending here is checked first.
        verifier = Verifier()
        groups.verifier = verifier
        verifier.code = E.TRANSACTION_ABORTABLE  # its transaction ended: the late commit is refused
        assert await call(commit_error, client, 3, 30) == E.INVALID_TXN_STATE
        verifier.code = E.PRODUCER_FENCED
        assert await call(commit_error, client, 3, 30) == E.INVALID_PRODUCER_EPOCH
        assert await call(fetch, client, True) == (10, E.NONE)  # nothing was written
        verifier.code = E.NONE
        assert await call(commit_error, client, 3, 30) == E.NONE
        assert await call(commit_error, client, 3, 31) == E.NONE  # pending here: not asked again
        assert verifier.calls == [("t1", 42, 1, [(TOPIC, 0)])] * 3
        assert await groups.complete_transaction(TOPIC, 0, 42, 1, True, 5) == E.NONE
        assert await call(fetch, client, True) == (31, E.NONE)

        # Errors as WriteTxnMarkers answers them.
        assert await groups.complete_transaction(TOPIC, 0, 42, 0, True, 5) == E.INVALID_PRODUCER_EPOCH
        assert await groups.complete_transaction(TOPIC, 3, 42, 1, True, 5) == E.NOT_LEADER_OR_FOLLOWER
        assert await groups.complete_transaction("orders", 0, 42, 1, True, 5) == E.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        client.close()
        groups.shutdown()
        await server.shutdown(grace=1.0)
        await logs.close_all()


@pytest.mark.asyncio
async def test_pending_offsets_survive_a_restart_from_the_snapshot_file_and_the_log_tail(tmp_path: Path,
                                                                                          caplog: Any) -> None:
    """The group shard through the runtime and real files: pending offsets written to the
    snapshot (with their producers and offsets) and a marker in the log after it complete them."""
    config = load_config(data_dir=str(tmp_path), overrides=["offsets.topic.num.partitions=1"])

    async def start() -> tuple[LogManager, CoordinatorRuntime[Any], GroupService]:
        logs = LogManager(tmp_path, TopicRegistry(tmp_path), config)
        await logs.open_all()
        if logs.get(TOPIC, 0) is None:
            logs.topic_created(logs.registry.create(TOPIC, 1, {"cleanup.policy": "compact"}))
        runtime: CoordinatorRuntime[Any] = CoordinatorRuntime(logs, group_coordinator_type(GroupConfig()))
        await runtime.load(0)
        return logs, runtime, GroupService(runtime, lambda: 1)

    logs, runtime, groups = await start()
    commit = txn_commit(3, 10)
    await runtime.write(0, "txn-commit-offset", lambda s: s.txn_commit_offsets(commit, 3))
    other = txn_commit(3, 20, producer_id=43)
    await runtime.write(0, "txn-commit-offset", lambda s: s.txn_commit_offsets(other, 3))
    assert await groups.complete_transaction(TOPIC, 0, 43, 1, True, 5) == E.NONE  # 43's record is the later one
    await runtime.snapshot_all()  # 42's transaction is open: its offset goes into the snapshot
    expected = (runtime.shard(0).hard_state(), runtime.shard(0).pending_state())
    assert expected[1] == {42: {("g", "foo", 0): (0, expected[1][42][("g", "foo", 0)][1], True)}}  # superseded
    assert await groups.complete_transaction(TOPIC, 0, 42, 1, True, 5) == E.NONE  # in the log after the snapshot
    after = runtime.shard(0).hard_state()
    runtime.unload_all()
    await logs.close_all()

    snapshot = read_snapshot(tmp_path / f"{TOPIC}-0")
    # At offset 3 (two transactional records, 43's marker): the stored offset, 42's pending one and,
    # after it, the stored value again as the plain record that supersedes it on replay.
    assert snapshot is not None and (snapshot.offset, snapshot.records) == (3, 3)

    caplog.set_level(logging.INFO, logger="groupcoord")
    logs, runtime, groups = await start()
    assert [r for r in caplog.records if r.getMessage() == "snapshot loaded"]
    shard = runtime.shard(0)
    assert shard.hard_state() == after and shard.pending_state() == {}
    assert shard.offset_manager.committed("g")[("foo", 0)].offset == 20  # the last log position won
    runtime.unload_all()
    await logs.close_all()
