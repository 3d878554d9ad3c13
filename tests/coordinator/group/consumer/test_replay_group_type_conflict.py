"""A hand-made ``__consumer_offsets`` log in which a group id is a classic group (its GroupMetadata
record, never tombstoned) and then gets consumer-group records: Kafka's replay refuses them ("Group
<id> is not a consumer group", ``GroupMetadataManager.getOrMaybeCreatePersistedConsumerGroup``)
and the load fails; so does ours, with a RecordReplayError naming the group. The orders our
conversions write (the classic tombstone before the consumer records; a classic record with no
protocol type and no members, which Kafka calls a simple group) still load; a classic record
after a consumer group's records takes the id, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from coordinator.group.config import GroupConfig
from coordinator.group.consumer.replay import NotAConsumerGroupError
from coordinator.group.coordinator_type import group_coordinator_type
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.runtime.runtime import CoordinatorRuntime, CoordinatorState
from protocol import consumer_group_records as cgr
from protocol.consumer_offsets import GroupMetadataKey, GroupMetadataValue, MemberMetadata, serialize
from protocol.records import build_batch, read_batch_header
from tests.coordinator.group.group_test_context import GroupTestContext
from tests.coordinator.runtime.test_runtime import _open_logs

GROUP = "orders-app"


def classic_record(protocol_type: str = "consumer", members: int = 1) -> tuple[bytes, bytes | None]:
    value = GroupMetadataValue(protocol_type=protocol_type, generation=3, protocol="range" if members else None,
                               leader="m-0" if members else None, current_state_timestamp=0, members=tuple(
                                   MemberMetadata(f"m-{i}", "client", "/127.0.0.1", 30000, 10000, b"", b"")
                                   for i in range(members)))
    return serialize(GroupMetadataKey(GROUP), value)


def classic_tombstone() -> tuple[bytes, bytes | None]:
    return serialize(GroupMetadataKey(GROUP), None)


def consumer_epoch(epoch: int = 1) -> tuple[bytes, bytes | None]:
    key = cgr.ConsumerGroupMetadataKey(GROUP)
    return cgr.encode_key(key), cgr.encode_value(cgr.ConsumerGroupMetadataValue(epoch))


def consumer_member_tombstone() -> tuple[bytes, bytes | None]:
    return cgr.encode_key(cgr.ConsumerGroupMemberMetadataKey(GROUP, "m-9")), None


def shard() -> GroupCoordinatorShard:
    return GroupTestContext().shard


@pytest.mark.parametrize("conflicting, record", [(consumer_epoch, "ConsumerGroupMetadata"),
                                                 (consumer_member_tombstone, "ConsumerGroupMemberMetadata tombstone")])
def test_a_consumer_record_after_a_live_classic_record_is_refused(conflicting: Any, record: str) -> None:
    s = shard()
    s.replay(*classic_record())
    with pytest.raises(NotAConsumerGroupError) as refused:
        s.replay(*conflicting())
    assert str(refused.value) == (
        f"Group {GROUP} is not a consumer group: a {record} record follows its classic group's GroupMetadata "
        "record (protocol type 'consumer', generation 3, 1 members) with no tombstone of it in between")
    assert GROUP not in s.consumer_manager.groups


def test_the_upgrade_order_loads() -> None:
    """Kafka's convertToConsumerGroup (and ours): the classic tombstone first."""
    s = shard()
    for record in (classic_record(), classic_tombstone(), consumer_epoch()):
        s.replay(*record)
    assert s.consumer_manager.groups[GROUP].group_epoch == 1


def test_the_downgrade_order_loads() -> None:
    """The consumer group's tombstones, then the classic record; then a consumer group again."""
    s = shard()
    s.replay(*consumer_epoch())
    s.replay(cgr.encode_key(cgr.ConsumerGroupMetadataKey(GROUP)), None)
    s.replay(*classic_record())
    assert GROUP not in s.consumer_manager.groups
    s.replay(*classic_tombstone())
    s.replay(*consumer_epoch(5))
    assert s.consumer_manager.groups[GROUP].group_epoch == 5


def test_a_simple_classic_record_gives_way() -> None:
    """No protocol type and no members: a group of offsets only, which Kafka replaces."""
    s = shard()
    s.replay(*classic_record(protocol_type="", members=0))
    s.replay(*consumer_epoch())
    assert s.consumer_manager.groups[GROUP].group_epoch == 1


def test_a_classic_record_after_a_consumer_groups_records_takes_the_id() -> None:
    """The other way round Kafka's replay puts the classic group in the id's place: the load goes
    on, the id is a classic group, and its later consumer-group records fail the load."""
    s = shard()
    s.replay(*consumer_epoch())
    s.replay(*classic_record())
    assert GROUP not in s.consumer_manager.groups
    s.on_loaded()
    assert s.group_manager.groups[GROUP].generation_id == 3
    again = shard()
    for key, value in s.snapshot_records():
        again.replay(key, value)
    assert GROUP not in again.consumer_manager.groups and GROUP in again.group_manager.group_records
    with pytest.raises(NotAConsumerGroupError):
        s.replay(*consumer_epoch(2))


@pytest.mark.asyncio
async def test_the_load_of_such_a_log_fails_naming_the_group(tmp_path: Path, caplog: Any) -> None:
    groups = group_coordinator_type(GroupConfig())
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, groups)
    await runtime.load(0)
    plog = runtime._partitions[0].plog
    batch = bytearray(build_batch([classic_record(), consumer_epoch()], timestamp_ms=0))  # type: ignore[list-item]
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
    assert failures[0].exc_info is not None
    error = failures[0].exc_info[1]
    assert type(error).__name__ == "RecordReplayError" and isinstance(error.__cause__, NotAConsumerGroupError)
    segment = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    assert str(error).startswith(f"replaying the record of __consumer_offsets-0 at offset 1 ({segment}) failed: "
                                 f"Group {GROUP} is not a consumer group: a ConsumerGroupMetadata record follows")
