"""The log manager and one partition's log on real files: in cluster mode a partition opens with
its checkpointed high watermark (a damaged checkpoint is logged and ignored), and the partition
log counts the cuts of its tail for a reader that runs ahead of it (the hot standby)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from coordinator.config import load_config
from coordinator.topics.log_manager import LogManager
from coordinator.topics.partition_log import PartitionLog
from coordinator.topics.registry import TopicInfo, TopicRegistry
from protocol.records import build_batch
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
