"""A group's history as its coordinator partition's log tells it, for the dashboard.

Each GroupMetadata record (a classic group after a rebalance, KIP-211's state timestamp) and each
ConsumerGroupMetadata record (a KIP-848 group's epoch bump) of the group, with the timestamp of
the batch that carried it: generation or epoch, protocol, member count. Records are the source,
not the live state: the timeline shows what was written, and what compaction left of it.

Bounded: only the last ``SCAN_RECORDS`` offsets of the partition are read, and the newest
``limit`` entries returned (newest last).

Cooperative: the read runs on the node's event loop, which also serves every Kafka connection of
the node, so it goes in steps — one read of at most ``_READ_BYTES``, and at most ``_STEP_BATCHES``
batches looked at — and yields to the loop between steps. A large offsets log then makes the
dashboard's group page slower, not the node's commits and heartbeats.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from protocol import consumer_group_records as cgr
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MalformedRecordError,
    UnknownRecordVersion,
    decode_key,
    decode_value,
)
from protocol.hashing import partition_for
from protocol.records import CorruptBatchError, decode_records, read_batch_header
from storage.errors import StorageError

from ..topics.registry import CONSUMER_OFFSETS
from .state_view import StateView

__all__ = ["group_timeline", "TimelineEntry", "SCAN_RECORDS"]

#: How far back a timeline reads, in offsets of the coordinator partition.
SCAN_RECORDS = 200_000
#: Bytes read per step.
_READ_BYTES = 1 << 20
#: Batches looked at per step (a step decodes at most these, whatever their size).
_STEP_BATCHES = 256
_GROUP_METADATA = 2
_CONSUMER_GROUP_METADATA = 3
_CONSUMER_GROUP_MEMBER_METADATA = 5


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    #: The batch's timestamp (its max timestamp: when the coordinator wrote it).
    timestamp_ms: int
    offset: int
    #: "GroupMetadata", "ConsumerGroupMetadata", or either with " tombstone" (the group deleted).
    kind: str
    #: The generation (classic) or group epoch (consumer); -1 for a tombstone.
    epoch: int
    #: A classic group's protocol, or "Empty" when it has no members; "" for a consumer group.
    state_or_protocol: str
    #: Members: a classic group's record lists them; a consumer group's are counted from its
    #: member records read so far (the scan's start may miss earlier ones).
    members: int


async def group_timeline(view: StateView, group_id: str, limit: int = 200) -> list[TimelineEntry]:
    info = view.logs.registry.get(CONSUMER_OFFSETS)
    if info is None:
        return []
    plog = view.logs.get(CONSUMER_OFFSETS, partition_for(group_id, info.num_partitions))
    if plog is None:
        return []
    end = plog.high_watermark
    offset = max(plog.log_start_offset, end - SCAN_RECORDS)
    needle = group_id.encode()
    out: deque[TimelineEntry] = deque(maxlen=limit)
    members: set[str] = set()
    batches = 0
    while offset < end:
        if batches:
            await asyncio.sleep(0)  # a step done (see the module's docstring)
            batches = 0
        try:
            data = plog.log.read(offset, _READ_BYTES)
        except (StorageError, OSError):  # retention or a truncation moved the log meanwhile
            break
        if not data:
            break
        pos = 0
        moved = False
        while pos + 61 <= len(data):
            if batches == _STEP_BATCHES:
                await asyncio.sleep(0)
                batches = 0
            batches += 1
            try:
                header = read_batch_header(data, pos)
            except CorruptBatchError:
                return list(out)
            if pos + header.size > len(data):
                break
            moved = True
            # The group id appears in the bytes of every record key of it, unless compressed.
            if header.last_offset >= offset and not header.is_control and header.base_offset < end \
                    and (header.compression != 0 or needle in data[pos:pos + header.size]):
                try:
                    records = decode_records(data, pos, header, check_crc=False)
                except CorruptBatchError:
                    records = []
                for record in records:
                    entry = _entry(record.key, record.value, group_id, members, header.max_timestamp,
                                   header.base_offset + record.offset_delta)
                    if entry is not None:
                        out.append(entry)
            offset = max(offset, header.last_offset + 1)
            pos += header.size
        if not moved:
            break
    return list(out)


def _entry(key: bytes | None, value: bytes | None, group_id: str, members: set[str], timestamp_ms: int,
           offset: int) -> TimelineEntry | None:
    if key is None or len(key) < 2:
        return None
    kind = int.from_bytes(key[:2], "big", signed=True)
    try:
        if kind == _GROUP_METADATA:
            typed = decode_key(key)
            if not isinstance(typed, GroupMetadataKey) or typed.group != group_id:
                return None
            if value is None:
                return TimelineEntry(timestamp_ms, offset, "GroupMetadata tombstone", -1, "", 0)
            meta = decode_value(typed, value)
            assert isinstance(meta, GroupMetadataValue)
            return TimelineEntry(timestamp_ms, offset, "GroupMetadata", meta.generation,
                                 meta.protocol or ("Empty" if not meta.members else ""), len(meta.members))
        if kind == _CONSUMER_GROUP_MEMBER_METADATA:
            member_key = cgr.decode_key(key)
            if isinstance(member_key, cgr.ConsumerGroupMemberMetadataKey) and member_key.group_id == group_id:
                if value is None:
                    members.discard(member_key.member_id)
                else:
                    members.add(member_key.member_id)
            return None
        if kind == _CONSUMER_GROUP_METADATA:
            group_key = cgr.decode_key(key)
            if not isinstance(group_key, cgr.ConsumerGroupMetadataKey) or group_key.group_id != group_id:
                return None
            if value is None:
                members.clear()
                return TimelineEntry(timestamp_ms, offset, "ConsumerGroupMetadata tombstone", -1, "", 0)
            epoch_value = cgr.decode_value(group_key, value)
            assert isinstance(epoch_value, cgr.ConsumerGroupMetadataValue)
            return TimelineEntry(timestamp_ms, offset, "ConsumerGroupMetadata", epoch_value.epoch, "", len(members))
    except (UnknownRecordVersion, MalformedRecordError, ValueError):
        return None
    return None
