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
    assert record.exc_info is not None and type(record.exc_info[1]).__name__ == "MalformedRecordError"
    # The error names the record that failed: its value type and key (group id).
    assert str(record.exc_info[1]) == "ConsumerGroupMetadataValue of ConsumerGroupMetadataKey(group_id='g'): " \
        "truncated at byte 2"
