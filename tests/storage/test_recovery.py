"""Crash shapes a partition directory can be left in, and what opening it must make of them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from storage import Log, LogOptions
from storage.files import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_FILE,
    LOG_SUFFIX,
    RECOVERY_POINT_FILE,
    read_checkpoint,
    segment_path,
    write_checkpoint,
)

from .helpers import all_records, kv

OPTS = LogOptions(segment_bytes=1000, index_interval_bytes=100, flush_policy="none")


async def _filled(tmp_path: Path, n: int = 45, opts: LogOptions = OPTS) -> tuple[Log, list[int]]:
    log = Log.open(tmp_path, "t", 0, opts)
    for i in range(n):
        await log.append(kv(i))
    return log, [s.base_offset for s in log.segments]


def _active_file(tmp_path: Path) -> Path:
    return sorted((tmp_path / "t-0").glob("*.log"))[-1]


@pytest.mark.asyncio
async def test_truncation_mid_batch_is_cut_back_to_the_last_whole_batch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log, _ = await _filled(tmp_path)
    end = log.log_end_offset
    log.abort()
    f = _active_file(tmp_path)
    size = f.stat().st_size
    batch_size = len(kv(39))  # every batch in the active segment has this size
    with open(f, "r+b") as fh:
        fh.truncate(size - batch_size // 2)
    with caplog.at_level(logging.WARNING, logger="groupcoord.storage"):
        log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.log_end_offset == end - 1
    assert [o for o, _k, _v in all_records(log)] == list(range(end - 1))
    assert any(f.name in r.message and "truncated" in r.message for r in caplog.records)
    assert f.stat().st_size == size - batch_size
    await log.close()


@pytest.mark.asyncio
async def test_crc_flip_drops_the_batch_and_everything_after(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log, bases = await _filled(tmp_path)
    log.abort()
    f = _active_file(tmp_path)
    batch_size = len(kv(39))  # every batch in the active segment has this size
    data = bytearray(f.read_bytes())
    data[2 * batch_size + 40] ^= 0x01  # inside the third batch of the active segment
    f.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="groupcoord.storage"):
        log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.log_end_offset == bases[-1] + 2
    msg = " ".join(r.message for r in caplog.records)
    assert f.name in msg and f"byte {2 * batch_size}" in msg and "CRC" in msg
    await log.close()


@pytest.mark.asyncio
async def test_corruption_in_an_earlier_unflushed_segment_removes_later_segments(tmp_path: Path) -> None:
    log, bases = await _filled(tmp_path, 60)
    log.abort()
    write_checkpoint(tmp_path / "t-0" / RECOVERY_POINT_FILE, bases[1])  # pretend only seg 0 is flushed
    f = tmp_path / "t-0" / f"{bases[2]:020d}.log"
    data = bytearray(f.read_bytes())
    data[30] ^= 0xFF
    f.write_bytes(bytes(data))
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.log_end_offset == bases[2]
    assert [s.base_offset for s in log.segments] == bases[:3]
    await log.append(kv(0))
    await log.close()


@pytest.mark.asyncio
async def test_flipped_base_offset_in_tail_is_caught(tmp_path: Path) -> None:
    """The base offset is outside the CRC; recovery's offset checks must catch a damaged one."""
    log, bases = await _filled(tmp_path)
    log.abort()
    f = _active_file(tmp_path)
    batch_size = len(kv(39))  # every batch in the active segment has this size
    data = bytearray(f.read_bytes())
    data[batch_size + 6] ^= 0x10  # base offset of the second batch, now larger
    f.write_bytes(bytes(data))
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.log_end_offset == bases[-1] + 1
    assert [o for o, _k, _v in all_records(log)] == list(range(bases[-1] + 1))
    await log.close()


@pytest.mark.asyncio
async def test_garbage_after_the_log_and_bad_index_are_repaired(tmp_path: Path) -> None:
    log, bases = await _filled(tmp_path)
    end = log.log_end_offset
    await log.close()
    (tmp_path / "t-0" / f"{bases[0]:020d}.index").write_bytes(b"\xff" * 16)  # nonsense entries
    # a clean marker is present, yet the bad index must be noticed and rebuilt
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.segments[0].index.entries() and log.log_end_offset == end
    log.abort()
    with open(_active_file(tmp_path), "ab") as fh:
        fh.write(b"\x00" * 100)
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.log_end_offset == end and [o for o, _k, _v in all_records(log)] == list(range(end))
    assert not (tmp_path / "t-0" / CLEAN_SHUTDOWN_FILE).exists()
    await log.close()
    assert (tmp_path / "t-0" / CLEAN_SHUTDOWN_FILE).exists()


@pytest.mark.asyncio
async def test_recovery_point_limits_the_rescan(tmp_path: Path) -> None:
    log, bases = await _filled(tmp_path, 100)
    log.abort()
    log = Log.open(tmp_path, "t", 0, OPTS)
    # only the active segment (the recovery point is the last roll) was scanned
    assert log.load_result.scanned_bytes == log.segments[-1].size
    await log.close()


@pytest.mark.asyncio
async def test_missing_checkpoints_rescan_everything(tmp_path: Path) -> None:
    log, _ = await _filled(tmp_path, 100)
    end = log.log_end_offset
    log.abort()
    (tmp_path / "t-0" / RECOVERY_POINT_FILE).write_text("garbage")
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.load_result.scanned_bytes == log.size_bytes
    assert log.log_end_offset == end
    await log.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("checkpoint", [0, 2, None])
async def test_an_interrupted_roll_after_a_lost_tail_leaves_no_hole(tmp_path: Path, checkpoint: int | None) -> None:
    # Found by fuzzing (tests/fuzz/fuzz_log_recovery.py). A roll creates the new segment's file,
    # then fsyncs the old one; a crash in between can keep the empty file and lose the old
    # segment's unflushed tail (cut at a batch boundary: the file size of an earlier write).
    opts = LogOptions(segment_bytes=1 << 20, index_interval_bytes=100, flush_policy="none")
    log = Log.open(tmp_path, "t", 0, opts)
    sizes = [len(kv(i)) for i in range(5)]
    for i in range(5):
        await log.append(kv(i))
    log.abort()
    d = tmp_path / "t-0"
    with open(segment_path(d, 0, LOG_SUFFIX), "r+b") as f:
        f.truncate(sum(sizes[:3]))  # offsets 3 and 4 lost
    segment_path(d, 5, LOG_SUFFIX).write_bytes(b"")  # the roll's new, empty segment
    if checkpoint is None:
        (d / RECOVERY_POINT_FILE).unlink()
    else:
        write_checkpoint(d / RECOVERY_POINT_FILE, checkpoint)
    log = Log.open(tmp_path, "t", 0, opts)
    if checkpoint is None:
        # No recovery point: the hole may be compaction's, so the empty segment (and the end
        # past the hole) stays, as in Kafka.
        assert log.log_end_offset == 5 and len(log.segments) == 2
    else:
        assert log.log_end_offset == 3 and len(log.segments) == 1
        assert not segment_path(d, 5, LOG_SUFFIX).exists()
        assert any("roll that did not complete" in r for r in log.load_result.repairs)
        assert (await log.append(kv(9))).base_offset == 3  # the next offset follows the data
    assert [o for o, _k, _v in all_records(log)][:3] == [0, 1, 2]
    await log.close()


@pytest.mark.parametrize("content", ["0\n9223372036854775808\n", "0\n" + "5" * 60 + "\n", "0\n" + "5" * 5000 + "\n"])
def test_a_checkpoint_that_is_no_int64_offset_is_unreadable(tmp_path: Path, content: str) -> None:
    # Found by fuzzing (tests/fuzz/fuzz_checkpoints.py): read back as an offset no writer wrote.
    path = tmp_path / RECOVERY_POINT_FILE
    path.write_text(content)
    assert read_checkpoint(path) is None
    write_checkpoint(path, 2**63 - 1)
    assert read_checkpoint(path) == 2**63 - 1


@pytest.mark.asyncio
async def test_a_log_start_checkpoint_past_int64_does_not_hide_the_log(tmp_path: Path) -> None:
    log, _ = await _filled(tmp_path, 10)
    await log.close()
    (tmp_path / "t-0" / LOG_START_OFFSET_FILE).write_text("0\n" + "9" * 30 + "\n")
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.log_start_offset == 0 and len(all_records(log)) == 10
    await log.close()


@pytest.mark.asyncio
async def test_open_survives_garbage_in_every_file(tmp_path: Path) -> None:
    import random

    rng = random.Random(7)
    log, _ = await _filled(tmp_path, 60)
    await log.close()
    d = tmp_path / "t-0"
    pristine = {p.name: p.read_bytes() for p in d.iterdir()}
    for _ in range(30):
        for name, data in pristine.items():
            (d / name).write_bytes(data)
        victims = rng.sample(sorted(pristine), k=rng.randint(1, 4))
        for name in victims:
            data = bytearray(pristine[name])
            action = rng.choice(["flip", "cut", "garbage"])
            if action == "flip" and data:
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
            elif action == "cut":
                del data[rng.randrange(len(data) + 1):]
            else:
                data = bytearray(rng.randbytes(rng.randrange(200)))
            (d / name).write_bytes(bytes(data))
        full_scan = rng.random() < 0.5
        if full_scan:  # nothing left to trust: every byte is validated, so every read must work
            (d / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
            (d / RECOVERY_POINT_FILE).unlink(missing_ok=True)
        log = Log.open(tmp_path, "t", 0, OPTS)  # must never raise
        if full_scan:
            offsets = [o for o, _k, _v in all_records(log)]
            assert offsets == sorted(set(offsets))
        end = log.log_end_offset
        assert (await log.append(kv(0))).base_offset == end
        await log.close()
