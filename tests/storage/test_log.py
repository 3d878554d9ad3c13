"""Log: offsets, validation, read limits, rolling, lookups, truncation, retention, flush policies,
group commit and exclusive operations under load."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from pathlib import Path

import pytest

from protocol.records import iter_batch_positions
from storage import InvalidBatchError, Log, LogOptions, OffsetOutOfRangeError, RecordTooLargeError
from storage.files import INDEX_SUFFIX

from .helpers import all_records, batch, kv

SMALL = LogOptions(segment_bytes=1000, index_interval_bytes=100, flush_policy="none")


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.mark.asyncio
async def test_append_assigns_offsets_and_reads_back(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, SMALL)
    r1 = await log.append(batch((b"a", b"1"), (b"b", b"2")))
    r2 = await log.append([kv(3), kv(4)])
    assert (r1.base_offset, r1.last_offset) == (0, 1)
    assert (r2.base_offset, r2.last_offset) == (2, 3)
    assert log.log_end_offset == 4
    assert [o for o, _k, _v in all_records(log)] == [0, 1, 2, 3]
    assert log.read(4, 1000) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 1000)
    await log.close()


@pytest.mark.asyncio
async def test_invalid_input_appends_nothing(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, SMALL.with_(max_batch_bytes=200))
    good = kv(1)
    bad_crc = bytearray(kv(2))
    bad_crc[-1] ^= 0xFF
    bad_magic = bytearray(kv(3))
    bad_magic[16] = 1
    for payload in (good + bytes(bad_crc), [good, bytes(bad_magic)], good + b"\x00\x01", good[:-1], b""):
        with pytest.raises(InvalidBatchError):
            await log.append(payload)
    with pytest.raises(RecordTooLargeError):
        await log.append(batch((b"k", b"x" * 300)))
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    await log.close()


@pytest.mark.asyncio
async def test_read_byte_limits_return_whole_batches(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, LogOptions(index_interval_bytes=100, flush_policy="none"))
    for i in range(20):
        await log.append(kv(i))
    size = len(kv(0))
    assert len(log.read(0, size * 3)) == size * 3
    assert len(log.read(0, size * 3 + size - 1)) == size * 3
    assert len(log.read(0, 1)) == size  # at least one batch
    data = log.read(7, size * 2)
    assert [h.base_offset for _p, h in iter_batch_positions(data)] == [7, 8]
    s = log.slice(7, size * 2)
    assert s is not None and s.length == 2 * size and s.first_offset == 7
    big = batch(*[(b"k", b"x" * 50)] * 10)
    await log.append(big)
    assert len(log.read(20, 10)) == len(big)
    await log.close()


@pytest.mark.asyncio
async def test_concurrent_appends_are_ordered_and_group_committed(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, LogOptions(flush_policy="fsync"))
    results = await asyncio.gather(*[log.append(kv(i)) for i in range(200)])
    assert [r.base_offset for r in results] == list(range(200))
    recs = all_records(log)
    assert [(o, v) for o, _k, v in recs] == [(i, b"v%d" % i) for i in range(200)]
    assert log.recovery_point == 200
    await log.close()


@pytest.mark.asyncio
async def test_roll_by_size_and_lookup_across_segments(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, SMALL)
    for i in range(100):
        await log.append(kv(i))
    segs = log.segments
    assert len(segs) > 5
    assert all(s.size <= 1000 for s in segs)
    for a, b in pairwise(segs):
        assert a.next_offset == b.base_offset
    for off in (0, 13, 57, 99):
        data = log.read(off, 1)
        assert next(iter_batch_positions(data))[1].base_offset == off
    names = sorted(p.name for p in log.directory.iterdir() if p.suffix == ".log")
    assert names[0] == "00000000000000000000.log"
    assert all(len(n) == 24 for n in names)
    await log.close()


@pytest.mark.asyncio
async def test_roll_by_time(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, LogOptions(segment_ms=1000, flush_policy="none"))
    await log.append(kv(0, ts=10_000))
    await log.append(kv(1, ts=10_500))
    assert len(log.segments) == 1
    await log.append(kv(2, ts=11_001))
    assert len(log.segments) == 2 and log.active_segment.base_offset == 2
    await log.close()


@pytest.mark.asyncio
async def test_explicit_roll_and_offset_for_timestamp(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, SMALL)
    for i in range(30):
        await log.append(batch((b"a", b"x"), (b"b", b"y"), ts=1000 + 10 * i))
        if i % 7 == 6:
            await log.roll()
    # records of batch i have timestamp 1000+10i and offsets 2i, 2i+1
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(1000) == 0
    assert log.offset_for_timestamp(1001) == 2
    assert log.offset_for_timestamp(1150) == 30
    assert log.offset_for_timestamp(1290) == 58
    assert log.offset_for_timestamp(1291) is None
    await log.close()


@pytest.mark.asyncio
async def test_truncate_to(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, SMALL)
    for _ in range(50):
        await log.append(batch((b"a", b"x"), (b"b", b"y")))  # offsets 2i, 2i+1
    assert await log.truncate_to(61) == 60  # the batch 60-61 holds 61: removed whole
    assert log.log_end_offset == 60
    assert all(s.base_offset < 60 for s in log.segments)
    r = await log.append(kv(0))
    assert r.base_offset == 60
    assert [o for o, _k, _v in all_records(log)][-3:] == [58, 59, 60]
    await log.close()
    log = Log.open(tmp_path, "t", 0, SMALL)
    assert log.log_end_offset == 61
    await log.close()


@pytest.mark.asyncio
async def test_retention_by_bytes_and_time_advances_log_start(tmp_path: Path) -> None:
    clock = Clock(100_000)
    opts = SMALL.with_(retention_bytes=3000, retention_ms=50_000)
    log = Log.open(tmp_path, "t", 0, opts, clock=clock)
    for i in range(100):
        await log.append(kv(i, ts=60_000 + i))
    before = len(log.segments)
    deleted = await log.apply_retention()
    assert deleted > 0 and len(log.segments) == before - deleted
    assert sum(s.size for s in log.segments) <= 3000 + 1000
    assert log.log_start_offset == log.segments[0].base_offset
    start = log.log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(start - 1, 100)
    clock.now = 60_099 + 50_001
    await log.apply_retention()
    assert len(log.segments) == 1  # everything sealed is too old; the active segment stays
    start = log.log_start_offset
    assert start == log.active_segment.base_offset
    await log.close()
    log = Log.open(tmp_path, "t", 0, opts, clock=clock)
    assert log.log_start_offset == start
    await log.close()


@pytest.mark.asyncio
async def test_advance_log_start_persists(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, SMALL)
    for i in range(100):
        await log.append(kv(i))
    await log.advance_log_start_offset(42)
    assert log.log_start_offset == 42
    assert all_records(log)[0][0] == 42
    log.abort()
    log = Log.open(tmp_path, "t", 0, SMALL)
    assert log.log_start_offset == 42
    await log.close()


@pytest.mark.asyncio
async def test_clean_reopen_trusts_indexes_and_unclean_rebuilds(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, SMALL)
    for i in range(100):
        await log.append(kv(i))
    entries = [s.index.entries() for s in log.segments]
    await log.close()
    log = Log.open(tmp_path, "t", 0, SMALL)
    assert log.load_result.clean_shutdown
    assert [s.index.entries() for s in log.segments] == entries
    assert log.log_end_offset == 100
    await log.append(kv(100))
    log.abort()
    for p in tmp_path.glob("t-0/*" + INDEX_SUFFIX):
        p.unlink()
    log = Log.open(tmp_path, "t", 0, SMALL)
    assert not log.load_result.clean_shutdown
    assert [s.index.entries() for s in log.segments][:-1] == entries[:-1]
    assert log.log_end_offset == 101
    assert [o for o, _k, _v in all_records(log)] == list(range(101))
    await log.close()


@pytest.mark.asyncio
async def test_interval_policy_flushes_in_the_background(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, LogOptions(flush_policy="interval", flush_interval_ms=50))
    await log.append(kv(0))  # first round: the interval since open has not passed
    await log.append(kv(1))
    assert log.recovery_point < 2
    await asyncio.sleep(0.2)
    assert log.recovery_point == 2
    await log.close()


@pytest.mark.asyncio
async def test_exclusive_operations_are_not_starved_by_a_stream_of_appends(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, SMALL)
    stop = False

    async def writer(n: int) -> None:
        i = 0
        while not stop:
            await log.append(kv(n * 1_000_000 + i))
            i += 1

    tasks = [asyncio.create_task(writer(n)) for n in range(8)]
    await asyncio.sleep(0.05)
    for _ in range(5):
        await asyncio.wait_for(log.roll(), 5)
        await asyncio.wait_for(log.flush(), 5)
    stop = True
    await asyncio.gather(*tasks)
    offsets = [o for o, _k, _v in all_records(log)]
    assert offsets == list(range(log.log_end_offset))
    await log.close()


@pytest.mark.asyncio
async def test_appends_and_reads_proceed_during_compaction(tmp_path: Path) -> None:
    opts = LogOptions(segment_bytes=20_000, flush_policy="none", cleanup_policy="compact")
    log = Log.open(tmp_path, "t", 0, opts)
    for i in range(3000):
        await log.append(kv(i % 50))
    await log.roll()
    clean = asyncio.create_task(log.clean(force=True))
    appended = 0
    while not clean.done():
        await log.append(kv(7))
        log.read(log.log_start_offset, 1000)
        appended += 1
    result = await clean
    assert result is not None and appended > 0
    recs = all_records(log)
    assert len({k for _o, k, _v in recs}) == 50
    await log.close()


@pytest.mark.asyncio
async def test_slice_works_with_sendfile_and_survives_segment_deletion(tmp_path: Path) -> None:
    import os
    import socket

    log = Log.open(tmp_path, "t", 0, SMALL.with_(retention_bytes=0, file_delete_delay_ms=60_000))
    for i in range(40):
        await log.append(kv(i))
    s = log.slice(0, 300)
    assert s is not None
    expected = log.read(0, 300)
    await log.apply_retention()  # deletes the segment the slice points into
    assert log.log_start_offset > 0
    a, b = socket.socketpair()
    try:
        sent = os.sendfile(a.fileno(), s.fd, s.position, s.length)
        assert sent == s.length
        assert b.recv(65536) == expected
    finally:
        a.close()
        b.close()
    assert await log.read_async(log.log_start_offset, 100)
    await log.delete()
    assert not log.directory.exists()


@pytest.mark.asyncio
async def test_append_validated_queues_in_call_order(tmp_path: Path) -> None:
    from protocol.records import build_batch, read_batch_header
    from storage.log import Log

    log = Log.open(tmp_path, "t", 0)
    batches = [bytearray(build_batch([(None, b"%d" % i)] * (i + 1), timestamp_ms=1)) for i in range(20)]
    futures = [log.append_validated(b, read_batch_header(b, 0)) for b in batches]
    results = await asyncio.gather(*futures)
    expected, base = [], 0
    for i in range(20):
        expected.append((base, base + i))
        base += i + 1
    assert [(r.base_offset, r.last_offset) for r in results] == expected
    await log.close()
