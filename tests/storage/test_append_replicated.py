"""``Log.append_replicated``: a follower copies its leader's batches byte for byte (KIP-101):
offsets, gaps and leader epochs kept, overlaps refused, and the copy survives a crash."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from protocol.records import Record, encode_batch, iter_batch_positions
from storage import InvalidBatchError, Log, LogOptions

from .helpers import all_batches, all_records, kv

OPTS = LogOptions(segment_bytes=1000, index_interval_bytes=100, flush_policy="none")


def rbatch(base: int, n: int = 1, *, epoch: int = 0, span: int | None = None, tag: bytes = b"") -> bytes:
    """A leader's batch at ``base``: ``n`` records; with ``span`` the batch covers ``span``
    offsets but holds only its first ``n`` (as compaction leaves them)."""
    records = [Record(j, 0, b"k%d" % (base + j), b"v%d%s" % (base + j, tag)) for j in range(n)]
    return encode_batch(records, base_offset=base, base_timestamp=1000, partition_leader_epoch=epoch,
                        last_offset_delta=None if span is None else span - 1)


def log_bytes(log: Log) -> bytes:
    return b"".join(s.read_bytes(0, s.size) for s in log.segments)


@pytest.mark.asyncio
async def test_follower_copy_is_byte_identical(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "leader", "t", 0, OPTS)
    for i in range(30):
        await leader.assign_leader_epoch(i // 10)
        await leader.append(kv(i))
    follower = Log.open(tmp_path / "follower", "t", 0, OPTS)
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 300)
        r = await follower.append_replicated(data)
        assert r.base_offset == offset
        offset = r.last_offset + 1
    assert follower.log_end_offset == leader.log_end_offset == 30
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert all_batches(follower) == all_batches(leader)
    await leader.close()
    await follower.close()


@pytest.mark.asyncio
async def test_offsets_and_gaps_are_kept(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    batches = [rbatch(0, 2), rbatch(5), rbatch(6, 1, span=4), rbatch(20, 3)]
    r = await log.append_replicated(b"".join(batches[:2]))
    assert (r.base_offset, r.last_offset) == (0, 5)
    r = await log.append_replicated(b"".join(batches[2:]))
    assert (r.base_offset, r.last_offset) == (6, 22)
    assert log.log_end_offset == 23  # last offset + 1
    assert [o for o, _k, _v in all_records(log)] == [0, 1, 5, 6, 20, 21, 22]
    assert log.read(0, 1 << 20) == b"".join(batches)  # readback: identical bytes
    assert log.read(2, 1) == batches[1]  # an offset in a gap reads the next batch
    assert log.read(8, 1) == batches[2]  # an offset the compacted batch spans
    assert log.read(10, 1) == batches[3]
    assert log.active_segment.next_offset == 23
    # a leader-style append continues at the log end
    r = await log.append(kv(0))
    assert r.base_offset == 23
    await log.close()


@pytest.mark.asyncio
async def test_overlaps_and_disorder_are_refused_and_append_nothing(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await log.append_replicated(rbatch(10, 2))
    size = log.active_segment.size
    with pytest.raises(InvalidBatchError, match="overlaps the log, which ends at 12"):
        await log.append_replicated(rbatch(11))
    with pytest.raises(InvalidBatchError, match="not above the previous batch's last offset 13"):
        await log.append_replicated(rbatch(12, 2) + rbatch(13))
    with pytest.raises(InvalidBatchError, match="negative base offset"):
        await log.append_replicated(rbatch(-4))
    bad_crc = bytearray(rbatch(12))
    bad_crc[-1] ^= 0xFF
    with pytest.raises(InvalidBatchError, match="CRC"):
        await log.append_replicated(bytes(bad_crc))
    with pytest.raises(InvalidBatchError):
        await log.append_replicated(rbatch(12)[:-1])
    assert log.log_end_offset == 12 and log.active_segment.size == size
    await log.close()


@pytest.mark.asyncio
async def test_overlap_with_queued_appends_fails_only_that_append(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    first = log.append_replicated(rbatch(0, 5))
    clash = log.append_replicated(rbatch(3))  # fine against the log end (0), not against the queue
    after = log.append_replicated(rbatch(5))
    results = await asyncio.gather(first, clash, after, return_exceptions=True)
    assert results[0] == (0, 4) and results[2] == (5, 5)
    assert isinstance(results[1], InvalidBatchError) and "overlaps" in str(results[1])
    assert log.read(0, 1 << 20) == rbatch(0, 5) + rbatch(5)
    await log.close()


@pytest.mark.asyncio
async def test_replicated_epochs_fill_the_cache(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await log.append_replicated(rbatch(0, 2, epoch=1) + rbatch(2, epoch=1) + rbatch(7, epoch=3))
    await log.append_replicated(rbatch(8, epoch=2))  # older than the latest: no entry
    await log.append_replicated(rbatch(9, epoch=6))
    assert list(log.leader_epochs.entries) == [(1, 0), (3, 7), (6, 9)]
    assert log.leader_epochs.end_offset_for(2, log.log_end_offset) == (1, 7)
    await log.close()
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert list(log.leader_epochs.entries) == [(1, 0), (3, 7), (6, 9)]
    await log.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("policy", ["none", "fsync"])
async def test_gaps_survive_a_crash_and_reopen(tmp_path: Path, policy: str) -> None:
    """Recovery requires contiguous offsets above the recovery point; a replicated gap moves
    the recovery point past itself, so the crash-recovered log keeps every acknowledged batch."""
    opts = OPTS.with_(flush_policy=policy)
    log = Log.open(tmp_path, "t", 0, opts)
    sent = []
    base = 3  # even the first batch sits above the empty segment's base
    for i in range(40):
        n, span = 1 + i % 3, 1 + i % 3 + i % 4
        b = rbatch(base, n, epoch=i // 8, span=span, tag=b"x" * 20)
        sent.append(b)
        await log.append_replicated(b)
        base += span + (7 if i % 5 == 0 else 0)
    tail = rbatch(base + 9, 2, epoch=9)  # a gap inside the active segment, above the last roll
    sent.append(tail)
    await log.append_replicated(tail)
    end = log.log_end_offset
    assert len(log.segments) > 2 and log.active_segment.base_offset < base
    entries = list(log.leader_epochs.entries)
    log.abort()  # no clean shutdown, no final checkpoints
    log = Log.open(tmp_path, "t", 0, opts)
    assert log.load_result.truncated_bytes == 0, log.load_result.repairs
    assert log.log_end_offset == end
    assert b"".join(data for _h, data in all_batches(log)) == b"".join(sent)
    assert list(log.leader_epochs.entries) == entries
    r = await log.append_replicated(rbatch(end + 100))
    assert r.base_offset == end + 100
    await log.close()


@pytest.mark.asyncio
async def test_a_gap_too_wide_for_the_empty_segment_rolls(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    far = 5_000_000_000  # relative offsets are int32: cannot live in the segment based at 0
    r = await log.append_replicated(rbatch(far, 2))
    assert r == (far, far + 1) and log.log_end_offset == far + 2
    assert log.active_segment.base_offset == far
    assert log.read(far, 1 << 20) == rbatch(far, 2)
    log.abort()
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.log_end_offset == far + 2
    assert [h.base_offset for h, _d in all_batches(log)] == [far]
    await log.close()


@pytest.mark.asyncio
async def test_replicated_read_positions_match_batches(tmp_path: Path) -> None:
    """Indexes are built from the kept offsets: lookups land on the right batch everywhere."""
    log = Log.open(tmp_path, "t", 0, OPTS)
    bases = []
    base = 0
    for i in range(60):
        bases.append(base)
        await log.append_replicated(rbatch(base, 1, span=3))
        base += 3 + (i % 2)
    for b in bases:
        for off in (b, b + 2):
            data = log.read(off, 1)
            (_pos, h), *_ = list(iter_batch_positions(data))
            assert h.base_offset == b, (off, h.base_offset)
    await log.close()
