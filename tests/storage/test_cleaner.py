"""Compaction: last value per key, tombstone horizons, control batches, dirty-ratio trigger,
background cleaning, and crash safety of the segment swap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.records import ControlRecordType, control_record, decode_records, encode_batch
from storage import Log, LogOptions, dirty_ratio
from storage.cleaner import _build_offset_map, _clean_segment, _Counts
from storage.files import (
    CLEANED_SUFFIX,
    CLEANER_OFFSET_FILE,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    read_checkpoint,
    segment_path,
    write_checkpoint,
)

from .helpers import all_batches, all_records, batch

DAY = 86_400_000
OPTS = LogOptions(segment_bytes=600, index_interval_bytes=100, flush_policy="none", cleanup_policy="compact")


class Clock:
    def __init__(self, now: int = 10 * DAY) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def last_values(appended: list[tuple[int, bytes, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for o, k, v in appended:
        out[k] = (o, v)
    return out


async def _fill(log: Log, n: int, keys: int, tombstone_every: int = 0) -> list[tuple[int, bytes, bytes | None]]:
    appended = []
    for i in range(n):
        k = b"key-%d" % (i % keys)
        v = None if tombstone_every and i % tombstone_every == 0 else b"value-%d" % i
        r = await log.append(batch((k, v)))
        appended.append((r.base_offset, k, v))
    return appended


@pytest.mark.asyncio
async def test_compaction_keeps_last_value_per_key_and_offsets(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    appended = await _fill(log, 200, 7)
    await log.roll()
    active_before = log.active_segment
    result = await log.clean()
    assert result is not None and result.records_removed > 0
    recs = all_records(log)
    survivors = {o for o, _k, _v in recs}
    expected = last_values(appended)
    assert {o for o, _v in expected.values()} <= survivors
    by_offset = {o: (k, v) for o, k, v in appended}
    for o, k, v in recs:
        assert by_offset[o] == (k, v)  # retained records keep their offsets
    assert len(recs) == 7
    assert log.active_segment is active_before
    assert dirty_ratio(log) == 0.0
    assert await log.clean() is None  # nothing dirty: below the ratio
    await log.close()
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert all_records(log) == recs
    r = await log.append(batch((b"key-1", b"new")))
    assert r.base_offset == 200
    await log.close()


@pytest.mark.asyncio
async def test_tombstones_survive_delete_retention_after_cleaning(tmp_path: Path) -> None:
    clock = Clock()
    log = Log.open(tmp_path, "t", 0, OPTS, clock=clock)
    await _fill(log, 30, 3)
    r = await log.append(batch((b"key-0", None)))
    await log.roll()
    await log.clean(force=True)
    recs = all_records(log)
    assert (r.base_offset, b"key-0", None) in recs
    horizon_batches = [h for h, _d in all_batches(log) if h.attributes & 0x40]
    assert horizon_batches and horizon_batches[0].base_timestamp == clock.now + DAY
    clock.now += DAY - 1
    await log.clean(force=True)
    assert (r.base_offset, b"key-0", None) in all_records(log)
    clock.now += 2
    await log.clean(force=True)
    recs = all_records(log)
    assert all(k != b"key-0" for _o, k, _v in recs)
    assert {k for _o, k, _v in recs} == {b"key-1", b"key-2"}
    await log.close()


@pytest.mark.asyncio
async def test_control_batches_and_producer_fields_are_kept(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await _fill(log, 20, 2)
    data = encode_batch(
        [r for r in decode_records(batch((b"key-0", b"tx")), 0)],
        base_timestamp=1000, producer_id=42, producer_epoch=3, base_sequence=7, transactional=True)
    r_tx = await log.append(data)
    marker = encode_batch([control_record(ControlRecordType.COMMIT, 0)], base_timestamp=1000, producer_id=42,
                          producer_epoch=3, transactional=True, control=True)
    r_marker = await log.append(marker)
    await _fill(log, 20, 2)
    await log.roll()
    await log.clean(force=True)
    batches = {h.base_offset: h for h, _d in all_batches(log)}
    assert r_marker.base_offset in batches and batches[r_marker.base_offset].is_control
    # the transactional batch lost its record (superseded) and so was dropped entirely
    assert r_tx.base_offset not in batches
    assert all(not h.is_control or h.producer_id == 42 for h in batches.values())
    await log.close()


@pytest.mark.asyncio
async def test_partially_superseded_batch_keeps_base_offset_and_last_offset_delta(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    r = await log.append(encode_batch(
        [r for r in decode_records(batch((b"a", b"1"), (b"b", b"1"), (b"c", b"1")), 0)],
        base_timestamp=1000, producer_id=9, producer_epoch=1, base_sequence=0))
    await log.append(batch((b"c", b"2")))
    await log.roll()
    await log.clean(force=True)
    h, d = all_batches(log)[0]
    assert (h.base_offset, h.last_offset_delta, h.producer_id, h.base_sequence) == (r.base_offset, 2, 9, 0)
    assert [(x.key, x.offset_delta) for x in decode_records(d, 0)] == [(b"a", 0), (b"b", 1)]
    await log.close()


@pytest.mark.asyncio
async def test_dirty_ratio_triggers_cleaning(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await _fill(log, 100, 3)
    await log.roll()
    assert dirty_ratio(log) == 1.0
    assert await log.clean() is not None
    await _fill(log, 3, 3)
    await log.roll()
    ratio = dirty_ratio(log)
    assert 0 < ratio < 0.5  # a little new data on a compact head: not worth a pass
    assert await log.clean() is None
    await _fill(log, 100, 3)
    await log.roll()
    assert dirty_ratio(log) >= 0.5
    assert await log.clean() is not None
    await log.close()


@pytest.mark.asyncio
async def test_cleaner_stays_below_the_checkpointed_recovery_point(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    await _fill(log, 50, 2)
    log._recovery_point_checkpointed = 0  # pretend nothing was checkpointed yet
    assert await log.clean(force=True) is None
    await log.close()


@pytest.mark.asyncio
async def test_a_cleaner_checkpoint_past_the_log_end_cleans_from_the_start(tmp_path: Path) -> None:
    # Kafka resets the first dirty offset to the log start when its checkpoint is past the log
    # end (a tail lost to recovery, a foreign file); trusting it would never clean below it.
    log = Log.open(tmp_path, "t", 0, OPTS)
    await _fill(log, 100, 3)
    await log.roll()
    write_checkpoint(tmp_path / "t-0" / CLEANER_OFFSET_FILE, 10**9)
    assert dirty_ratio(log) == 1.0
    result = await log.clean()
    assert result is not None and result.records_removed > 0 and len(all_records(log)) == 3
    assert read_checkpoint(tmp_path / "t-0" / CLEANER_OFFSET_FILE) == log.log_end_offset
    await log.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("stage", ["cleaned", "swap", "swap-no-index"])
async def test_interrupted_swap_recovers_a_complete_log(tmp_path: Path, stage: str) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS)
    appended = await _fill(log, 60, 4)
    await log.roll()
    before = all_records(log)
    old = log.segments[0]
    omap = _build_offset_map(list(log.segments[:-1]))
    new, _entries = _clean_segment(old, omap, log.clock(), DAY, _Counts(), dirty=True)
    new.close()
    cleaned = segment_path(log.directory, old.base_offset, LOG_SUFFIX + CLEANED_SUFFIX)
    swap = segment_path(log.directory, old.base_offset, LOG_SUFFIX + SWAP_SUFFIX)
    assert cleaned.exists()
    if stage != "cleaned":
        os.replace(cleaned, swap)
    if stage == "swap-no-index":
        old.index.delete_file()
    log.abort()
    log = Log.open(tmp_path, "t", 0, OPTS)
    after = all_records(log)
    assert not cleaned.exists() and not swap.exists()
    if stage == "cleaned":
        assert after == before
    else:
        assert len(after) < len(before)
        expected = last_values(appended)
        assert {o for o, _v in expected.values()} <= {o for o, _k, _v in after}
        assert set(after) <= set(before)
    await log.close()


@pytest.mark.asyncio
async def test_background_cleaner_compacts_and_stops_with_the_log(tmp_path: Path) -> None:
    import asyncio

    from storage import offsets_topic_options, run_cleaner

    assert offsets_topic_options().cleanup_policy == "compact"
    assert offsets_topic_options().segment_bytes == 100 * 1024 * 1024
    log = Log.open(tmp_path, "t", 0, OPTS)
    await _fill(log, 100, 3)
    await log.roll()
    task = asyncio.create_task(run_cleaner(log, interval_s=0.01))
    for _ in range(200):
        if dirty_ratio(log) == 0.0:
            break
        await asyncio.sleep(0.01)
    assert len(all_records(log)) == 3
    await log.close()
    await asyncio.wait_for(task, 1)


@pytest.mark.asyncio
async def test_a_full_key_map_cleans_in_several_passes(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "t", 0, OPTS.with_(cleaner_max_keys=5))
    appended = []
    for i in range(120):  # distinct keys, then overwrite them all
        k = b"key-%d" % (i % 60)
        r = await log.append(batch((k, b"v%d" % i)))
        appended.append((r.base_offset, k, b"v%d" % i))
    await log.roll()
    passes = 0
    while dirty_ratio(log) > 0:  # each pass maps 5 keys (one segment here), then stops
        assert await log.clean(force=True) is not None
        passes += 1
        assert passes < 100
    assert passes > 1
    expected = {(o, k, v) for k, (o, v) in last_values(appended).items()}
    assert set(all_records(log)) == expected
    await log.close()
