"""``group_timeline`` over a large coordinator partition log (a real ``storage.Log``): it yields to
the event loop while it reads, so the node's Kafka connections keep being served, and its
entries are those the records written say, across read steps, compressed batches and other
groups' records in between."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.ops import timeline as timeline_module
from coordinator.ops.timeline import TimelineEntry, group_timeline
from coordinator.topics.registry import CONSUMER_OFFSETS
from protocol import consumer_group_records as cgr
from protocol.compression import Compression
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    serialize,
)
from protocol.records import Record, build_batch, encode_batch
from storage import Log, LogOptions

T0 = 1_700_000_000_000
GROUP = "big-g"
#: Batches in the log: about 3 MB, so several 1 MB reads and many steps of batches.
BATCHES = 30_000
OPTS = LogOptions(flush_policy="none")


def member(i: int) -> MemberMetadata:
    return MemberMetadata(f"m-{i}", "client", "/10.0.0.1", 30_000, 10_000, b"sub", b"assign")


def commit(group: str, i: int) -> tuple[bytes, bytes | None]:
    return serialize(OffsetCommitKey(group, "orders", i % 8), OffsetCommitValue(i, "", T0 + i))


def build_log() -> tuple[list[bytes], list[TimelineEntry]]:
    """The coordinator partition's batches, one offset each, and the timeline they tell for
    ``GROUP``: mostly other groups' commits, the group's own commits, a rebalance every 100
    offsets (every 700th gzip-compressed), a group whose id starts with ``GROUP``, and from
    offset 25,000 on the group as a KIP-848 consumer group (members, then epochs), deleted last."""
    batches: list[bytes] = []
    expected: list[TimelineEntry] = []
    members: set[str] = set()
    for i in range(BATCHES):
        ts = T0 + i
        entry = None
        if i == BATCHES - 1:
            item = serialize(GroupMetadataKey(GROUP), None)
            entry = TimelineEntry(ts, i, "GroupMetadata tombstone", -1, "", 0)
        elif i >= 25_000 and i % 100 == 50:
            member_id = f"c-{i // 100 % 4}"
            item = (cgr.encode_key(cgr.ConsumerGroupMemberMetadataKey(GROUP, member_id)),
                    cgr.encode_value(cgr.ConsumerGroupMemberMetadataValue(None, None, "client", "/10.0.0.2")))
            members.add(member_id)
        elif i >= 25_000 and i % 100 == 0:
            item = (cgr.encode_key(cgr.ConsumerGroupMetadataKey(GROUP)),
                    cgr.encode_value(cgr.ConsumerGroupMetadataValue(i // 100)))
            entry = TimelineEntry(ts, i, "ConsumerGroupMetadata", i // 100, "", len(members))
        elif i % 100 == 0:
            generation, n = i // 100, i // 100 % 3
            protocol = "range" if n else None
            item = serialize(GroupMetadataKey(GROUP), GroupMetadataValue(
                "consumer", generation, protocol, "m-0" if n else None, ts, tuple(member(j) for j in range(n))))
            entry = TimelineEntry(ts, i, "GroupMetadata", generation, protocol or "Empty", n)
        elif i % 100 == 37:
            item = serialize(GroupMetadataKey(GROUP + "2"), GroupMetadataValue("consumer", i, "range", None))
        elif i % 3 == 0:
            item = commit(GROUP, i)
        else:
            item = commit("other-g", i)
        if i % 700 == 0:
            batches.append(encode_batch([Record(0, 0, item[0], item[1])], base_offset=i, base_timestamp=ts,
                                        compression=Compression.GZIP))
        else:
            batches.append(build_batch([item], timestamp_ms=ts, base_offset=i))
        if entry is not None:
            expected.append(entry)
    return batches, expected


async def open_view(tmp_path: Path, batches: list[bytes]) -> tuple[Any, Log]:
    """A stand-in for StateView with the one thing ``group_timeline`` reads: the partition's log."""
    log = Log.open(tmp_path, CONSUMER_OFFSETS, 0, OPTS)
    await log.append_replicated(batches)
    plog = SimpleNamespace(log=log, high_watermark=log.log_end_offset, log_start_offset=log.log_start_offset)
    logs = SimpleNamespace(registry={CONSUMER_OFFSETS: SimpleNamespace(num_partitions=1)},
                           get=lambda topic, partition: plog if (topic, partition) == (CONSUMER_OFFSETS, 0) else None)
    return SimpleNamespace(logs=logs), log


@pytest.mark.asyncio
async def test_the_loop_keeps_serving_while_a_large_log_is_read(tmp_path: Path) -> None:
    batches, expected = build_log()
    view, log = await open_view(tmp_path, batches)
    assert log.size_bytes > 2 * timeline_module._READ_BYTES
    ticks = 0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0)
    start = ticks
    try:
        entries = await group_timeline(view, GROUP, limit=10_000)
    finally:
        done.set()
        await ticker
        await log.close()
    # The read yields at least once per step of batches: the other task ran that often meanwhile
    # (a read in one go lets it run not once).
    assert ticks - start >= BATCHES // timeline_module._STEP_BATCHES
    assert entries == expected


@pytest.mark.asyncio
async def test_entries_are_the_newest_limit_of_what_the_records_say(tmp_path: Path) -> None:
    batches, expected = build_log()
    view, log = await open_view(tmp_path, batches)
    try:
        newest = await group_timeline(view, GROUP)
        assert len(expected) > 200 and newest == expected[-200:]
        assert newest[-1].kind == "GroupMetadata tombstone"
        assert [e.members for e in newest if e.kind == "ConsumerGroupMetadata"][:4] == [0, 1, 2, 3]
        assert {e.kind for e in newest} == {"GroupMetadata", "ConsumerGroupMetadata", "GroupMetadata tombstone"}
        assert await group_timeline(view, "absent-g") == []
    finally:
        await log.close()
