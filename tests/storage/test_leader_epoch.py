"""Leader-epoch cache (KIP-101/KIP-279): its rules, its file, and how ``Log`` keeps it in step
with the data through appends, truncation, log-start moves, crashes and reopening."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from protocol.records import build_batch
from storage import Log, LogOptions
from storage.errors import CorruptCheckpointError
from storage.files import LEADER_EPOCH_FILE
from storage.leader_epoch import EpochEntry, LeaderEpochCache, read_epoch_checkpoint

from .helpers import kv

OPTS = LogOptions(segment_bytes=1000, index_interval_bytes=100, flush_policy="none")


def ebatch(i: int, epoch: int, n: int = 1) -> bytes:
    """A batch of ``n`` records stamped with leader epoch ``epoch``."""
    return build_batch([(b"k%d" % i, b"v%d-%d" % (i, j)) for j in range(n)], timestamp_ms=1000,
                       partition_leader_epoch=epoch)


def cache_of(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(tmp_path / LEADER_EPOCH_FILE, entries)


# -- the cache's rules --------------------------------------------------------------------------
def test_assign_appends_newer_epochs_and_ignores_repeats(tmp_path: Path) -> None:
    c = cache_of(tmp_path)
    assert c.latest_epoch == -1 and c.entries == () and c.latest_entry is None
    assert c.assign(0, 0, flush=False)
    assert c.assign(3, 100, flush=False)
    assert c.entries == (EpochEntry(0, 0), EpochEntry(3, 100)) and c.latest_epoch == 3
    assert not c.assign(3, 100, flush=False)  # the same entry
    assert not c.assign(3, 150, flush=False)  # the latest epoch did not start later
    assert not c.assign(0, 0, flush=False)  # an existing older entry, exactly
    assert c.entries == ((0, 0), (3, 100))


def test_assign_same_epoch_earlier_start_replaces_it(tmp_path: Path) -> None:
    c = cache_of(tmp_path, (0, 0), (3, 100))
    assert c.assign(3, 80, flush=False)
    assert c.entries == ((0, 0), (3, 80))


def test_assign_removes_conflicting_entries(tmp_path: Path) -> None:
    # a newer epoch starting below the latest start: the entries at or after that start go
    c = cache_of(tmp_path, (0, 0), (2, 50), (3, 100))
    assert c.assign(5, 60, flush=False)
    assert c.entries == ((0, 0), (2, 50), (5, 60))
    # an older epoch (not an existing entry): every entry with an epoch >= it goes
    c = cache_of(tmp_path, (0, 0), (2, 50), (3, 100))
    assert c.assign(1, 120, flush=False)
    assert c.entries == ((0, 0), (1, 120))
    # both fields conflict with everything
    c = cache_of(tmp_path, (1, 10), (2, 50))
    assert c.assign(0, 0, flush=False)
    assert c.entries == ((0, 0),)


def test_assign_rejects_negative_values(tmp_path: Path) -> None:
    c = cache_of(tmp_path)
    with pytest.raises(ValueError):
        c.assign(-1, 0)
    with pytest.raises(ValueError):
        c.assign(0, -5)
    assert c.entries == ()


@pytest.mark.parametrize(("requested", "expected"), [
    (-1, (-1, -1)),  # undefined epoch
    (4, (4, 500)),  # the latest epoch ends at the log end
    (7, (-1, -1)),  # newer than anything known
    (1, (1, 300)),  # an exact older epoch ends where the next starts
    (2, (1, 300)),  # unknown, between two: answered for the largest epoch below it
    (3, (3, 400)),
    (0, (0, 100)),  # older than every entry: the requested epoch, ending at the first start
])
def test_end_offset_for(tmp_path: Path, requested: int, expected: tuple[int, int]) -> None:
    c = cache_of(tmp_path, (1, 100), (3, 300), (4, 400))
    assert c.end_offset_for(requested, 500) == expected


def test_end_offset_for_empty_cache(tmp_path: Path) -> None:
    c = cache_of(tmp_path)
    assert c.end_offset_for(0, 10) == (-1, -1)
    assert c.end_offset_for(-1, 10) == (-1, -1)


def test_truncate_from_end(tmp_path: Path) -> None:
    c = cache_of(tmp_path, (0, 0), (2, 50), (3, 100))
    assert not c.truncate_from_end(101, flush=False)
    assert c.truncate_from_end(100, flush=False)  # an entry starting at the new end goes
    assert c.entries == ((0, 0), (2, 50))
    assert c.truncate_from_end(10, flush=False)
    assert c.entries == ((0, 0),)
    assert c.truncate_from_end(0, flush=False)
    assert c.entries == ()
    assert not c.truncate_from_end(0, flush=False)


def test_truncate_from_start(tmp_path: Path) -> None:
    c = cache_of(tmp_path, (0, 0), (2, 50), (3, 100))
    assert not c.truncate_from_start(0, flush=False)
    assert c.truncate_from_start(70, flush=False)  # (0, 0) wholly before; epoch 2 covers 70
    assert c.entries == ((2, 70), (3, 100))
    assert c.truncate_from_start(100, flush=False)  # exactly at an entry's start
    assert c.entries == ((3, 100),)
    assert not c.truncate_from_start(100, flush=False)
    assert not c.truncate_from_start(20, flush=False)  # backwards: nothing to do
    assert c.truncate_from_start(1000, flush=False)  # past every start: the last epoch covers it
    assert c.entries == ((3, 1000),)


# -- the file -----------------------------------------------------------------------------------
def test_checkpoint_file_is_kafkas_format(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_FILE
    c = LeaderEpochCache(path)
    assert c.dirty
    c.flush()
    assert path.read_bytes() == b"0\n0\n" and not c.dirty
    assert c.assign(0, 0)  # flush=True: written at once
    assert c.assign(3, 1284)
    assert path.read_bytes() == b"0\n2\n0 0\n3 1284\n"
    assert not (tmp_path / (LEADER_EPOCH_FILE + ".tmp")).exists()
    assert LeaderEpochCache.load(path).entries == ((0, 0), (3, 1284))
    assert c.truncate_from_end(1000)
    assert path.read_bytes() == b"0\n1\n0 0\n"


def test_missing_file_loads_empty_and_dirty(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_FILE
    assert read_epoch_checkpoint(path) is None
    c = LeaderEpochCache.load(path)
    assert c.entries == () and c.dirty


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "final newline"),
    (b"0\n1\n0 0", "final newline"),
    (b"1\n0\n", "unsupported version"),
    (b"0\n", "missing entry count"),
    (b"0\n2\n0 0\n", "says 2 entries"),
    (b"0\n1\n0 0\n1 5\n", "says 1 entries"),
    (b"0\nx\n", "entry count"),
    (b"0\n1\n0\t0\n", "line 3"),
    (b"0\n1\n0 0 0\n", "line 3"),
    (b"0\n1\n0 -3\n", "negative"),
    (b"0\n2\n3 10\n2 20\n", "does not follow"),
    (b"0\n2\n1 10\n2 10\n", "does not follow"),
    (b"\xff\xfe\n", "ASCII"),
    (b"0\n1\n+1 5\n", "expected an epoch"),
    # Found by fuzzing (tests/fuzz/fuzz_epoch_checkpoint.py): values no writer produces, which an
    # OffsetsForLeaderEpoch answer could not carry, and numbers so long int() raised a bare
    # ValueError (past 4300 digits) that escaped Log.open.
    (b"0\n1\n2147483648 5\n", "does not fit"),
    (b"0\n1\n1 9223372036854775808\n", "does not fit"),
    (b"0\n1\n1 " + b"9" * 20 + b"\n", "expected a start offset"),
    (b"0\n1\n" + b"9" * 5000 + b" 1\n", "expected an epoch"),
    (b"0\n" + b"1" * 5000 + b"\n", "expected the entry count"),
])
def test_corrupt_file_is_refused_naming_it(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / LEADER_EPOCH_FILE
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError) as info:
        LeaderEpochCache.load(path)
    assert str(path) in str(info.value) and reason in str(info.value)
    assert isinstance(info.value, ValueError)


# -- the log keeps it -----------------------------------------------------------------------------
def file_entries(tmp_path: Path) -> list[EpochEntry] | None:
    return read_epoch_checkpoint(tmp_path / "t-0" / LEADER_EPOCH_FILE)


@pytest.mark.asyncio
async def test_appends_assign_epochs_and_persist_them(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert file_entries(tmp_path) == []  # written on open
    await log.append(kv(0))  # no epoch (-1): nothing to record
    assert log.leader_epochs.entries == ()
    r1 = await log.append(ebatch(1, 0, n=2))
    await log.append(ebatch(2, 0))
    r3 = await log.append([ebatch(3, 2), ebatch(4, 2), ebatch(5, 5)])
    # a batch with an older epoch than the latest changes nothing
    await log.append(ebatch(6, 1))
    expected = [(0, r1.base_offset), (2, r3.base_offset), (5, r3.last_offset)]
    assert list(log.leader_epochs.entries) == expected
    assert file_entries(tmp_path) == expected  # persisted before the append returned
    assert log.leader_epochs.end_offset_for(2, log.log_end_offset) == (2, r3.last_offset)
    await log.close()
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert list(log.leader_epochs.entries) == expected
    await log.close()


@pytest.mark.asyncio
async def test_concurrent_appends_across_rolls_record_each_epoch_once(tmp_path: Path) -> None:
    import asyncio

    log = Log.open(tmp_path, "t", 0, OPTS)
    results = await asyncio.gather(*(log.append(ebatch(i, i // 10)) for i in range(60)))
    assert len(log.segments) > 3
    expected = [(e, results[e * 10].base_offset) for e in range(6)]
    assert list(log.leader_epochs.entries) == expected == file_entries(tmp_path)
    await log.close()


@pytest.mark.asyncio
async def test_missing_file_is_rebuilt_from_batch_headers(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    for i in range(40):
        await log.append(ebatch(i, (i // 7) * 2 if i % 5 else -1))  # gaps in epochs, some unstamped
    expected = list(log.leader_epochs.entries)
    assert len(expected) == 6 and len(log.segments) > 1
    await log.close()
    (tmp_path / "t-0" / LEADER_EPOCH_FILE).unlink()  # a log written before epochs were kept
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert list(log.leader_epochs.entries) == expected
    assert file_entries(tmp_path) == expected  # and written back
    await log.close()


@pytest.mark.asyncio
async def test_corrupt_file_on_open_is_rebuilt_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await log.append(ebatch(0, 3))
    await log.append(ebatch(1, 4))
    expected = list(log.leader_epochs.entries)
    await log.close()
    path = tmp_path / "t-0" / LEADER_EPOCH_FILE
    path.write_bytes(b"garbage\n")
    with caplog.at_level(logging.WARNING, logger="groupcoord.storage"):
        log = Log.open(tmp_path, "t", 0, OPTS)
    assert list(log.leader_epochs.entries) == expected == file_entries(tmp_path)
    assert any(str(path) in r and "rebuilt" in r for r in log.load_result.repairs)
    assert str(path) in caplog.text
    await log.close()


@pytest.mark.asyncio
async def test_a_file_with_a_huge_number_is_rebuilt_on_open(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await log.append(ebatch(0, 3))
    expected = list(log.leader_epochs.entries)
    await log.close()
    (tmp_path / "t-0" / LEADER_EPOCH_FILE).write_bytes(b"0\n1\n" + b"7" * 5000 + b" 0\n")
    log = Log.open(tmp_path, "t", 0, OPTS)  # rule 1 of recovery: file contents never stop an open
    assert list(log.leader_epochs.entries) == expected == file_entries(tmp_path)
    await log.close()


@pytest.mark.asyncio
async def test_crash_before_the_file_caught_up_is_repaired_from_the_rescan(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await log.append(ebatch(0, 1))
    r = await log.append(ebatch(1, 2))
    log.abort()
    # As if the crash came between the batch's write and the cache's.
    (tmp_path / "t-0" / LEADER_EPOCH_FILE).write_bytes(b"0\n1\n1 0\n")
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert list(log.leader_epochs.entries) == [(1, 0), (2, r.base_offset)] == file_entries(tmp_path)
    await log.close()


@pytest.mark.asyncio
async def test_torn_tail_cuts_the_cache_on_open(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await log.append(ebatch(0, 1))
    r = await log.append(ebatch(1, 2))
    log.abort()
    seg = tmp_path / "t-0" / f"{0:020d}.log"
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 5)  # the epoch-2 batch is torn
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.log_end_offset == r.base_offset
    assert list(log.leader_epochs.entries) == [(1, 0)] == file_entries(tmp_path)
    await log.close()


@pytest.mark.asyncio
async def test_truncate_to_cuts_the_cache(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    for i in range(30):
        await log.append(ebatch(i, i // 10))
    assert [e for e, _s in log.leader_epochs.entries] == [0, 1, 2]
    await log.truncate_to(15)
    assert list(log.leader_epochs.entries) == [(0, 0), (1, 10)] == file_entries(tmp_path)
    await log.truncate_to(10)
    assert list(log.leader_epochs.entries) == [(0, 0)] == file_entries(tmp_path)
    r = await log.append(ebatch(99, 7))  # the log goes on from there
    assert list(log.leader_epochs.entries) == [(0, 0), (7, r.base_offset)]
    await log.close()


@pytest.mark.asyncio
async def test_log_start_moves_cut_the_cache_from_the_start(tmp_path: Path) -> None:
    clock_now = [10_000_000]
    log = Log.open(tmp_path, "t", 0, OPTS.with_(retention_ms=1000), clock=lambda: clock_now[0])
    for i in range(40):
        await log.append(ebatch(i, i // 10))
    await log.advance_log_start_offset(15)
    assert list(log.leader_epochs.entries) == [(1, 15), (2, 20), (3, 30)] == file_entries(tmp_path)
    clock_now[0] += 10_000_000  # every sealed segment (record time 1000) is past retention
    deleted = await log.apply_retention()
    assert deleted and log.log_start_offset == log.active_segment.base_offset
    start = log.log_start_offset
    assert log.leader_epochs.entries[0] == (start // 10, start)
    assert file_entries(tmp_path) == list(log.leader_epochs.entries)
    await log.close()
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.leader_epochs.entries[0] == (start // 10, start)
    await log.close()


@pytest.mark.asyncio
async def test_assign_leader_epoch_at_the_log_end(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await log.append(kv(0))
    await log.append(kv(1))
    assert await log.assign_leader_epoch(4)
    assert not await log.assign_leader_epoch(4)  # re-election bookkeeping: no change
    assert list(log.leader_epochs.entries) == [(4, 2)] == file_entries(tmp_path)
    await log.append(ebatch(2, 4))  # the leader's own batches carry its epoch: nothing new
    assert list(log.leader_epochs.entries) == [(4, 2)]
    assert log.leader_epochs.end_offset_for(3, log.log_end_offset) == (3, 2)
    await log.close()


@pytest.mark.asyncio
async def test_truncating_at_the_log_end_drops_an_epoch_that_wrote_nothing(tmp_path: Path) -> None:
    """A replica elected leader records its epoch at its log end; deposed before it appended
    anything, it copies the new leader's batches from that offset, of an older epoch. Its
    truncation at the log end (nothing to cut) must drop that entry, or the cache would claim the
    offset for an epoch none of its batches has — found by the group fault schedule: followers
    then truncated good records and consumers validating their position rewound (KIP-320)."""
    log = Log.open(tmp_path, "t", 0, OPTS)
    for i in range(4):
        await log.append(ebatch(i, 2))
    await log.assign_leader_epoch(3)  # elected at the log end (4), then deposed at once
    assert list(log.leader_epochs.entries) == [(2, 0), (3, 4)]
    assert await log.truncate_to(4) == 4  # the follower's truncation point: the log end
    assert list(log.leader_epochs.entries) == [(2, 0)] == file_entries(tmp_path)
    await log.close()
