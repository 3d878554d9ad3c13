"""The log manager and one partition's log on real files: in cluster mode a partition opens with
its checkpointed high watermark (a damaged checkpoint is logged and ignored), the partition
log counts the cuts of its tail for a reader that runs ahead of it (the hot standby), and idle
producers expire (``producer.id.expiration.ms``) unless a transaction of theirs is open."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from coordinator.config import load_config
from coordinator.topics.log_manager import LogManager
from coordinator.topics.partition_log import PartitionLog
from coordinator.topics.registry import TopicInfo, TopicRegistry
from protocol.errors import ErrorCode
from protocol.records import build_batch, read_batch_header
from storage.files import HW_CHECKPOINT_FILE, write_hw_checkpoint

pytestmark = pytest.mark.asyncio

TOPIC = "t"


def _records(base_offset: int, count: int) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d" % i) for i in range(count)], timestamp_ms=1000, base_offset=base_offset)


async def _replica(data_dir: Path, info: TopicInfo) -> tuple[LogManager, PartitionLog]:
    """A cluster-mode node (broker 2) holding partition 0 of ``info``."""
    registry = TopicRegistry(data_dir, persistent=False)
    registry.add(info)
    logs = LogManager(data_dir, registry, load_config(data_dir=str(data_dir)))
    logs.broker_id = 2
    plog = await logs.open_partition(info, 0)
    assert plog.replication is not None
    return logs, plog


async def _replica_with_records(tmp_path: Path, count: int) -> TopicInfo:
    """Partition 0 of a new topic, holding ``count`` records written as a follower copies them."""
    info = TopicRegistry(tmp_path, persistent=False).create(TOPIC, 1)
    logs, plog = await _replica(tmp_path, info)
    await plog.append_replicated(_records(0, count))
    assert plog.log_end_offset == count
    await logs.close_all()
    return info


async def test_a_replica_opens_with_its_checkpointed_high_watermark(tmp_path: Path) -> None:
    info = await _replica_with_records(tmp_path, 10)
    write_hw_checkpoint(tmp_path / HW_CHECKPOINT_FILE, {(TOPIC, 0): 7, ("other", 0): 3})
    logs, plog = await _replica(tmp_path, info)
    try:
        assert plog.high_watermark == 7
        # Written back at close: what the node last knew.
        assert plog.replication is not None
        plog.replication.high_watermark = 9
    finally:
        await logs.close_all()
    assert (tmp_path / HW_CHECKPOINT_FILE).read_text() == f"0\n1\n{TOPIC} 0 9\n"


async def test_a_damaged_checkpoint_is_logged_and_the_high_watermark_starts_at_the_log_start(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    info = await _replica_with_records(tmp_path, 10)
    path = tmp_path / HW_CHECKPOINT_FILE
    path.write_text(f"0\n2\n{TOPIC} 0 7\n")  # the count says 2 entries; there is one
    caplog.set_level(logging.WARNING, logger="groupcoord")
    logs, plog = await _replica(tmp_path, info)
    try:
        assert plog.high_watermark == plog.log_start_offset == 0
    finally:
        await logs.close_all()
    warned = [r for r in caplog.records if r.getMessage() == "high watermark checkpoint corrupt; ignored"]
    assert len(warned) == 1
    assert vars(warned[0])["file"] == str(path)


async def test_the_partition_log_records_each_cut_of_its_tail(tmp_path: Path) -> None:
    info = TopicRegistry(tmp_path, persistent=False).create(TOPIC, 1)
    logs, plog = await _replica(tmp_path, info)
    try:
        assert (plog.truncations, plog.truncation_offsets) == (0, [])
        for base in range(0, 10, 2):  # five batches of two records: cuts fall on batch edges
            await plog.append_replicated(_records(base, 2))
        await plog.truncate_to(10)  # at the log end: nothing is cut
        assert (plog.truncations, plog.truncation_offsets) == (0, [])
        await plog.truncate_to(8)
        await plog.truncate_to(4)
        assert (plog.truncations, plog.truncation_offsets) == (2, [8, 4])
        assert plog.log_end_offset == plog.next_offset == 4
    finally:
        await logs.close_all()


async def test_idle_producers_expire_but_never_with_an_open_transaction(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path, persistent=False)
    info = registry.create(TOPIC, 1)
    logs = LogManager(tmp_path, registry, load_config(data_dir=str(tmp_path), overrides=["producer.id.expiration.ms=1000"]))
    plog = await logs.open_partition(info, 0)
    now = [0]
    plog.log.clock = lambda: now[0]  # the log's injected clock: stepped, never slept on

    async def append(pid: int, seq: int, timestamp: int, *, txn: bool = False) -> None:
        batch = bytearray(build_batch([(b"k", b"v")], timestamp_ms=timestamp, producer_id=pid, producer_epoch=0,
                                      base_sequence=seq, transactional=txn))
        await plog.append_batch(batch, read_batch_header(batch, 0))[1]

    try:
        await append(1, 0, 1000)  # idempotent, last written at 1000
        await append(2, 0, 1000, txn=True)  # its transaction stays open
        await append(3, 0, 1500)
        now[0] = 1999
        assert logs.remove_expired_producers() == 0
        now[0] = 2000  # producer 1 idle for exactly producer.id.expiration.ms
        assert logs.remove_expired_producers() == 1
        assert {e.producer_id for e in plog.producer_entries()} == {2, 3}
        # Forgotten: any sequence of producer 1 is accepted again, as from an unknown producer.
        late = build_batch([(b"k", b"v")], timestamp_ms=2000, producer_id=1, producer_epoch=0, base_sequence=7)
        assert plog.producers.check(read_batch_header(late, 0)) == ErrorCode.NONE
        now[0] = 10_000
        assert logs.remove_expired_producers() == 1  # producer 3; 2 holds the LSO, kept
        assert plog.has_open_transaction(2) and plog.last_stable_offset == 1
        done = plog.append_marker(2, 0, True, 0, timestamp_ms=10_000)
        assert not isinstance(done, int)
        await done[1]
        now[0] = 10_999
        assert logs.remove_expired_producers() == 0
        now[0] = 11_000  # idle since its marker
        assert logs.remove_expired_producers() == 1 and plog.producer_entries() == []
    finally:
        await logs.close_all()


async def test_a_checkpoint_cancelled_mid_write_is_not_raced_by_the_next(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # close_all cancels the periodic checkpoint while its thread writes the file; the checkpoint
    # at close then wrote the same temporary file at the same time, and one rename found it gone
    # (a CI run's node log: FileNotFoundError ... replication-offset-checkpoint.tmp). The slow
    # write is the fault injected here: a thread held inside the write.
    import asyncio
    import threading

    import coordinator.topics.log_manager as log_manager

    info = TopicRegistry(tmp_path, persistent=False).create(TOPIC, 1)
    logs, _plog = await _replica(tmp_path, info)
    inside, release = threading.Event(), threading.Event()
    writes: list[str] = []

    def slow_write(path: Path, entries: dict[tuple[str, int], int]) -> None:
        writes.append("start")
        if len(writes) == 1:
            inside.set()
            release.wait(10)
        write_hw_checkpoint(path, entries)
        writes.append("end")

    monkeypatch.setattr(log_manager, "write_hw_checkpoint", slow_write)
    first = asyncio.ensure_future(logs.checkpoint_high_watermarks())
    assert await asyncio.get_running_loop().run_in_executor(None, inside.wait, 10)
    first.cancel()
    second = asyncio.ensure_future(logs.checkpoint_high_watermarks())
    await asyncio.sleep(0.2)
    assert writes == ["start"]  # the second waits for the first thread
    release.set()
    await second
    assert writes == ["start", "end", "start", "end"]
    assert first.cancelled()
    await logs.close_all()
