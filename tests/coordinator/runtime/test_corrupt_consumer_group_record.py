"""A KIP-848 consumer-group record that does not decode, in a CRC-valid batch of a
``__consumer_offsets`` partition's log: the load fails with a clear error, and nothing crashes.

The batch's CRC is right (a buggy writer, not a disk, wrote the record), so the loader does not
skip the batch as corrupt; ``GroupCoordinatorShard.replay`` raises MalformedRecordError and the
partition is FAILED, as Kafka fails a coordinator load on a record it cannot read (issue 31, "Bad
input"; the fuzz harness ``tests/fuzz/fuzz_consumer_group_records.py`` checks that replay raises
nothing else).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from coordinator.group.config import GroupConfig
from coordinator.group.coordinator_type import group_coordinator_type
from coordinator.runtime.runtime import CoordinatorRuntime, CoordinatorState
from coordinator.runtime.snapshot import SNAPSHOT_FILE, encode_snapshot
from coordinator.runtime.timers import SystemClock
from protocol import consumer_group_records as cgr
from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, serialize
from protocol.records import build_batch, read_batch_header
from tests.coordinator.runtime.test_runtime import _open_logs


@pytest.mark.asyncio
async def test_a_malformed_consumer_group_record_fails_the_load_clearly(tmp_path: Path, caplog: Any) -> None:
    groups = group_coordinator_type(GroupConfig())
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, groups)
    await runtime.load(0)
    plog = runtime._partitions[0].plog
    good_key, good_value = serialize(OffsetCommitKey("g", "t", 0), OffsetCommitValue(42))
    # A ConsumerGroupMetadata value cut after its version: no group epoch.
    bad = (cgr.encode_key(cgr.ConsumerGroupMetadataKey("g")), b"\x00\x00\x00")
    batch = bytearray(build_batch([(good_key, good_value), bad], timestamp_ms=0))
    _base, durable = plog.append_batch(batch, read_batch_header(batch, 0))
    await durable
    await logs.close_all()

    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, groups)
    with caplog.at_level(logging.ERROR):
        await runtime.load(0)
        await asyncio.sleep(0)
    await logs.close_all()
    assert runtime.state(0) is CoordinatorState.FAILED
    failures = [r for r in caplog.records if r.getMessage() == "loading failed"]
    assert len(failures) == 1, caplog.text
    record = failures[0]
    assert getattr(record, "partition", None) == "__consumer_offsets-0"
    assert record.exc_info is not None
    error = record.exc_info[1]
    # The error names where the record is (partition, offset, segment file: Kafka's loader wraps
    # the shard's error the same way) and, through the shard's own error, what it is: its value
    # type and key (group id).
    assert type(error).__name__ == "RecordReplayError" and type(error.__cause__).__name__ == "MalformedRecordError"
    assert str(error.__cause__) == "ConsumerGroupMetadataValue of ConsumerGroupMetadataKey(group_id='g'): " \
        "truncated at byte 2"
    segment = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    assert str(error) == f"replaying the record of __consumer_offsets-0 at offset 1 ({segment}) failed: " \
        f"{error.__cause__}"
    assert (getattr(record, "offset", None), getattr(record, "file", None)) == (1, str(segment))


# --- Formerly known gaps, fixed in coordinator/runtime/loader.py -------------------------------


@pytest.mark.asyncio
async def test_known_gap_the_load_error_names_the_offset(tmp_path: Path, caplog: Any) -> None:
    """The house rule: a corrupt record at load is a clear error naming where it is: the
    partition and the record's offset (Kafka: "Replaying record ... from __consumer_offsets-N at
    offset X ... failed"). ``replay_steps`` raises RecordReplayError with them, and the load's
    error line carries ``offset`` in its extra."""
    groups = group_coordinator_type(GroupConfig())
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, groups)
    await runtime.load(0)
    plog = runtime._partitions[0].plog
    good = serialize(OffsetCommitKey("g", "t", 0), OffsetCommitValue(42))
    bad = (cgr.encode_key(cgr.ConsumerGroupMetadataKey("g")), b"\x00\x00\x00")
    batch = bytearray(build_batch([good, bad], timestamp_ms=0))  # type: ignore[list-item]
    _base, durable = plog.append_batch(batch, read_batch_header(batch, 0))
    await durable
    await logs.close_all()
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, groups)
    with caplog.at_level(logging.ERROR):
        await runtime.load(0)
    await logs.close_all()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(getattr(r, "partition", None) == "__consumer_offsets-0" and getattr(r, "offset", None) == 1
               for r in errors), [r.__dict__ for r in errors]


@pytest.mark.asyncio
async def test_known_gap_a_snapshot_record_that_does_not_decode_drops_the_snapshot(tmp_path: Path, caplog: Any) -> None:
    """A snapshot is a cache of the log: one that cannot be read is dropped and the log replayed
    (``Loader.replay_snapshot``, "ignoring the snapshot"). One that reads (CRCs right) but holds a
    record that does not replay is dropped the same way, and the log replayed into a fresh
    shard, since the failed one holds part of the snapshot."""
    groups = group_coordinator_type(GroupConfig())
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, groups)
    await runtime.load(0)
    plog = runtime._partitions[0].plog
    good = serialize(OffsetCommitKey("g", "t", 0), OffsetCommitValue(42))
    batch = bytearray(build_batch([good], timestamp_ms=0))  # type: ignore[list-item]
    _base, durable = plog.append_batch(batch, read_batch_header(batch, 0))
    await durable
    end = plog.log_end_offset
    await logs.close_all()
    bad = (cgr.encode_key(cgr.ConsumerGroupMetadataKey("g")), b"\x00\x00\x00")
    snapshot = encode_snapshot(end, SystemClock().now_ms(), [bad])
    (tmp_path / "__consumer_offsets-0" / SNAPSHOT_FILE).write_bytes(snapshot)
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, groups)
    await runtime.load(0)
    await logs.close_all()
    assert runtime.state(0) is CoordinatorState.ACTIVE
    assert runtime.shard(0).offset_manager.committed("g")[("t", 0)].offset == 42
    assert "ignoring the snapshot" in caplog.text


@pytest.mark.asyncio
async def test_a_dropped_snapshot_is_named_removed_and_leaves_nothing_in_the_shard(tmp_path: Path, caplog: Any) -> None:
    """The snapshot's good records replayed before the bad one are not kept: the log is
    replayed into a new shard. The warning names the snapshot file and the record's error."""
    groups = group_coordinator_type(GroupConfig())
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, groups)
    await runtime.load(0)
    plog = runtime._partitions[0].plog
    batch = bytearray(build_batch([serialize(OffsetCommitKey("g", "t", 0), OffsetCommitValue(42))], timestamp_ms=0))
    _base, durable = plog.append_batch(batch, read_batch_header(batch, 0))
    await durable
    end = plog.log_end_offset
    await logs.close_all()
    stale = serialize(OffsetCommitKey("only-in-snapshot", "t", 0), OffsetCommitValue(7))
    bad = (cgr.encode_key(cgr.ConsumerGroupMetadataKey("g")), b"\x00\x00\x00")
    path = tmp_path / "__consumer_offsets-0" / SNAPSHOT_FILE
    path.write_bytes(encode_snapshot(end, SystemClock().now_ms(), [stale, bad]))  # type: ignore[list-item]
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, groups)
    with caplog.at_level(logging.WARNING):
        await runtime.load(0)
    await logs.close_all()
    assert runtime.state(0) is CoordinatorState.ACTIVE
    offsets = runtime.shard(0).offset_manager
    assert offsets.committed("only-in-snapshot") == {}
    assert offsets.committed("g")[("t", 0)].offset == 42
    assert not path.exists()
    (warning,) = [r for r in caplog.records if r.getMessage().startswith("ignoring the snapshot")]
    reason = getattr(warning, "reason", "")
    assert str(path) in reason and "at offset 1" in reason and "truncated at byte 2" in reason, reason
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
