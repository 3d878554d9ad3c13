"""Transactional writes and transaction markers in the coordinator runtime (KIP-447): a result with
a producer id goes in a transactional batch of its own after the open batch; ``complete_transaction``
appends a control batch and replays the marker; loading, a snapshot taken while a transaction is
open, and the hot standby give the shard the same records with their producers and offsets."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest

from coordinator.runtime.errors import MarkerRefused, ProducerFenced
from coordinator.runtime.runtime import CoordinatorRuntime, CoordinatorState, NotActiveError
from coordinator.runtime.snapshot import read_snapshot
from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue
from protocol.errors import ErrorCode as E
from protocol.records import (
    ControlRecordType,
    decode_control_record,
    decode_records,
    encode_end_txn_marker,
    read_batch_header,
    read_end_txn_marker,
)
from tests.coordinator.runtime.test_runtime import (
    COUNTERS,
    ManualLog,
    Result,
    _active_runtime,
    _commits,
    _open_logs,
)
from tests.coordinator.runtime.test_runtime_standby import _follower, _leader, _replicate, _shard, _until

pytestmark = pytest.mark.asyncio


class HeaderLog(ManualLog):
    """A manual log that keeps every batch it is given, and producer state as a real one does."""

    def __init__(self) -> None:
        super().__init__()
        self.appended: list[tuple[int, Any, bytes]] = []

    def append_batch(self, batch: bytearray, header: Any) -> tuple[int, asyncio.Future[None]]:
        base, durable = super().append_batch(batch, header)
        self.appended.append((base, header, bytes(batch)))
        if header.is_control:
            marker = read_end_txn_marker(batch, 0, header)
            assert marker is not None
            self.producers.complete_txn(header.producer_id, header.producer_epoch, marker[1], marker[0], base,
                                        header.max_timestamp)
        else:
            self.producers.update(header, base)
        return base, durable

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      timestamp_ms: int) -> tuple[int, asyncio.Future[None]] | int:
        """What ``PartitionLog.append_marker`` does, on this log."""
        error = self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if error:
            return error
        batch = bytearray(encode_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch, timestamp_ms))
        return self.append_batch(batch, read_batch_header(batch, 0))


def txn_commit(group: str, offset: int, producer_id: int, producer_epoch: int = 0) -> Any:
    return lambda shard: Result([(OffsetCommitKey(group, "t", 0), OffsetCommitValue(offset))], "ok",
                                producer_id=producer_id, producer_epoch=producer_epoch)


def marker_of(batch: bytes, header: Any) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control batch's one record."""
    [record] = decode_records(batch, 0, header)
    assert record.value is not None
    return decode_control_record(record)[1], struct.unpack(">hi", record.value)[1]


async def test_a_transactional_write_flushes_the_open_batch_and_goes_in_its_own_batch() -> None:
    plog = HeaderLog()
    runtime = await _active_runtime(plog)
    plain = runtime.write(0, "commit-offset", lambda s: s.commit("a", 1))
    txn = runtime.write(0, "txn-commit-offset", txn_commit("b", 5, producer_id=7, producer_epoch=3))
    # Both at once: the open batch first, then the producer's batch (no linger).
    assert [(base, h.records_count, h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional)
            for base, h, _ in plog.appended] == [(0, 1, -1, -1, -1, False), (1, 1, 7, 3, 0, True)]
    shard = runtime.shard(0)
    assert shard.pending == {7: {("b", "t", 0): (1, 3, 5)}} and shard.offsets == {("a", "t", 0): 1}
    after = runtime.write(0, "commit-offset", lambda s: s.commit("c", 2))
    await asyncio.sleep(0)
    assert [base for base, _h, _b in plog.appended] == [0, 1, 2]  # a new open batch after it
    assert not txn.done()
    plog.make_durable()
    assert await txn == "ok" and (await plain)[0] == "ok" and (await after)[0] == "ok"


async def test_a_transactional_write_of_an_older_producer_epoch_is_refused_before_replay() -> None:
    plog = HeaderLog()
    runtime = await _active_runtime(plog)
    runtime.write(0, "txn-commit-offset", txn_commit("b", 5, producer_id=7, producer_epoch=3))
    with pytest.raises(ProducerFenced):  # a zombie of the same transactional id
        runtime.write(0, "txn-commit-offset", txn_commit("b", 6, producer_id=7, producer_epoch=2))
    assert len(plog.appended) == 1 and runtime.shard(0).pending == {7: {("b", "t", 0): (0, 3, 5)}}
    runtime.write(0, "txn-commit-offset", txn_commit("b", 7, producer_id=7, producer_epoch=4))  # a newer one: fine
    assert runtime.shard(0).pending == {7: {("b", "t", 0): (1, 4, 7)}}


async def test_complete_transaction_writes_a_control_batch_replays_the_marker_and_answers_once_durable() -> None:
    plog = HeaderLog()
    runtime = await _active_runtime(plog)
    await_txn = runtime.write(0, "txn-commit-offset", txn_commit("b", 5, producer_id=7, producer_epoch=3))
    plain = runtime.write(0, "commit-offset", lambda s: s.commit("a", 1))  # in the open batch
    done = runtime.complete_transaction(0, 7, 3, True, 11)
    base, header, batch = plog.appended[-1]
    assert [b for b, _h, _x in plog.appended] == [0, 1, 2]  # the open batch went first
    assert (base, header.is_control, header.is_transactional, header.producer_id, header.producer_epoch,
            header.base_sequence, header.records_count) == (2, True, True, 7, 3, -1, 1)
    assert marker_of(batch, header) == (ControlRecordType.COMMIT, 11)
    shard = runtime.shard(0)
    assert shard.markers == [(7, 3, True)] and shard.offsets[("b", "t", 0)] == 5
    assert not done.done()
    plog.make_durable()
    await done
    await asyncio.gather(await_txn, plain)


async def test_a_marker_the_log_refuses_is_neither_written_nor_replayed() -> None:
    plog = HeaderLog()
    runtime = await _active_runtime(plog)
    runtime.write(0, "txn-commit-offset", txn_commit("b", 5, producer_id=7, producer_epoch=3))
    with pytest.raises(MarkerRefused) as refused:
        runtime.complete_transaction(0, 7, 2, False, 0)
    assert refused.value.error_code == E.INVALID_PRODUCER_EPOCH
    assert len(plog.appended) == 1 and runtime.shard(0).markers == []
    runtime.complete_transaction(0, 7, 3, False, 4)
    with pytest.raises(MarkerRefused) as refused:
        runtime.complete_transaction(0, 7, 3, True, 3)  # an older transaction coordinator
    assert refused.value.error_code == E.TRANSACTION_COORDINATOR_FENCED
    assert len(plog.appended) == 2 and runtime.shard(0).markers == [(7, 3, False)]
    runtime.unload(0)
    with pytest.raises(NotActiveError):
        runtime.complete_transaction(0, 7, 3, False, 4)


async def test_load_and_a_snapshot_taken_with_a_transaction_open_keep_its_producer_and_offsets(tmp_path: Path) -> None:
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    await runtime.load(0)
    await _commits(runtime, 0, 10)
    await runtime.write(0, "txn-commit-offset", txn_commit("g1", 100, producer_id=7))
    await runtime.write(0, "txn-commit-offset", txn_commit("g2", 200, producer_id=8, producer_epoch=2))
    await runtime.complete_transaction(0, 7, 0, True, 1)
    state = (dict(runtime.shard(0).offsets), dict(runtime.shard(0).pending))
    assert state == ({**{(f"g{i}", "t", 0): i for i in range(10)}, ("g1", "t", 0): 100},
                     {8: {("g2", "t", 0): (11, 2, 200)}})
    await logs.close_all()

    # The log alone: transactional batches replay with their producer, the marker as a marker.
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    await runtime.load(0)
    assert (runtime.shard(0).offsets, runtime.shard(0).pending) == state
    assert runtime.shard(0).markers == [(7, 0, True)]
    await runtime.snapshot_all()  # producer 8's transaction is still open
    await logs.close_all()
    snapshot = read_snapshot(tmp_path / "__consumer_offsets-0")
    assert snapshot is not None and snapshot.offset == 13 and snapshot.records == 11

    # From the snapshot: the pending record comes back with its producer, epoch and offset.
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    await runtime.load(0)
    shard = runtime.shard(0)
    assert shard.replayed == 11 and (shard.offsets, shard.pending) == state
    await runtime.complete_transaction(0, 8, 2, False, 1)
    assert shard.pending == {} and shard.offsets == state[0]  # aborted: nothing stored
    await logs.close_all()


async def test_a_hot_standby_replays_transactional_batches_and_markers(tmp_path: Path) -> None:
    leader_logs, leader, info = await _leader(tmp_path)
    await leader.write(0, "txn-commit-offset", txn_commit("g1", 100, producer_id=7))
    await leader.write(0, "txn-commit-offset", txn_commit("g2", 200, producer_id=8))
    await leader.complete_transaction(0, 8, 0, False, 1)
    await leader.complete_transaction(0, 7, 0, True, 1)
    logs, plog = await _follower(tmp_path, info)
    await _replicate(leader_logs, plog, 2)  # up to the two transactional records
    standby = CoordinatorRuntime(logs, COUNTERS)
    standby.standby(0)
    assert standby.state(0) is CoordinatorState.STANDBY
    await _until(lambda: _shard(standby).replayed == 2, "the transactional records replayed")
    assert _shard(standby).pending == {7: {("g1", "t", 0): (0, 0, 100)}, 8: {("g2", "t", 0): (1, 0, 200)}}
    plog.replication.set_follower_high_watermark(4)
    await _until(lambda: len(_shard(standby).markers) == 2, "the markers replayed")
    assert _shard(standby).pending == {} and _shard(standby).offsets == {("g1", "t", 0): 100}
    await logs.close_all()
    await leader_logs.close_all()
