"""OffsetIndex and TimeIndex: lookups, file round trips, and refusal of damaged files."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from storage import Log, LogOptions
from storage.files import INDEX_SUFFIX, TIME_INDEX_SUFFIX, segment_path
from storage.offset_index import OffsetIndex
from storage.time_index import TimeIndex

from .helpers import all_records, kv


def test_offset_index_lookup_and_roundtrip(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 100)
    for i in range(1, 6):
        idx.append(100 + 10 * i, 1000 * i)
    idx.append(140, 9999)  # not forward: ignored
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(110) == (110, 1000)
    assert idx.lookup(129) == (120, 2000)
    assert idx.lookup(10**9) == (150, 5000)
    idx.write(sync=False)
    assert (tmp_path / "x.index").stat().st_size == 5 * 8
    again = OffsetIndex(tmp_path / "x.index", 100)
    assert again.load(log_size=6000)
    assert again.entries() == idx.entries()
    assert not again.load(log_size=4000)  # points past the log
    idx.truncate_to_position(3000)
    assert idx.entries() == [(110, 1000), (120, 2000)]


def test_offset_index_rejects_garbage(tmp_path: Path) -> None:
    p = tmp_path / "y.index"
    p.write_bytes(b"\x00" * 7)
    assert not OffsetIndex(p, 0).load(100)
    p.write_bytes(bytes.fromhex("00000005 00000010 00000003 00000020".replace(" ", "")))
    assert not OffsetIndex(p, 0).load(100)  # offsets go backwards
    assert not OffsetIndex(tmp_path / "missing.index", 0).load(100)


def test_time_index(tmp_path: Path) -> None:
    t = TimeIndex(tmp_path / "x.timeindex", 10)
    t.maybe_append(1000, 12)
    t.maybe_append(1000, 13)  # same timestamp: ignored
    t.maybe_append(2000, 20)
    assert t.lookup_before(1000) == 10
    assert t.lookup_before(1500) == 12
    assert t.lookup_before(5000) == 20
    t.write(sync=False)
    again = TimeIndex(tmp_path / "x.timeindex", 10)
    assert again.load() and again.entries() == [(1000, 12), (2000, 20)]
    t.truncate_to_offset(20)
    assert t.entries() == [(1000, 12)]


# -- damaged index files of a trusted segment (found by tests/fuzz/fuzz_index.py) -----------------
# After a clean shutdown the log loads index files instead of scanning; they carry no checksum, so
# a damaged one must never change what a read returns (segment.py rule 5).

OPTS = LogOptions(index_interval_bytes=100, flush_policy="none")


async def _closed_log(tmp_path: Path, n: int = 40) -> list[tuple[int, bytes | None, bytes | None]]:
    log = Log.open(tmp_path, "t", 0, OPTS)
    for i in range(n):
        await log.append(kv(i, ts=1000 + i))
    records = all_records(log)
    await log.close()
    return records


def _rewrite_index_entry(tmp_path: Path, entry: int, position_delta: int) -> list[tuple[int, int]]:
    path = segment_path(tmp_path / "t-0", 0, INDEX_SUFFIX)
    data = bytearray(path.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, entry * 8)
    struct.pack_into(">ii", data, entry * 8, rel, pos + position_delta)
    path.write_bytes(bytes(data))
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def _read_each(log: Log) -> list[int]:
    """The base offset of the batch ``read`` returns for every offset."""
    return [struct.unpack_from(">q", log.read(o, 1))[0] for o in range(log.log_start_offset, log.log_end_offset)]


@pytest.mark.asyncio
async def test_a_last_index_entry_inside_a_batch_makes_open_rebuild_the_segment(tmp_path: Path) -> None:
    records = await _closed_log(tmp_path)
    entries = _rewrite_index_entry(tmp_path, -1, 5)
    assert len(entries) > 4
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.load_result.rescanned_from == 0  # not trusted: rebuilt from a scan
    assert all_records(log) == records and _read_each(log) == list(range(40))
    await log.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("delta", [5, -40, 1])
async def test_a_wrong_inner_index_entry_is_rebuilt_and_reads_stay_right(
        tmp_path: Path, delta: int, caplog: pytest.LogCaptureFixture) -> None:
    await _closed_log(tmp_path)
    path = segment_path(tmp_path / "t-0", 0, INDEX_SUFFIX)
    good = path.read_bytes()
    _rewrite_index_entry(tmp_path, 1, delta)  # inside a batch, or at an earlier batch's start
    with caplog.at_level(logging.WARNING, logger="groupcoord.storage"):
        log = Log.open(tmp_path, "t", 0, OPTS)
        assert log.load_result.rescanned_from is None  # the last entries hold: trusted
        assert _read_each(log) == list(range(40))  # before the fix: b"" or the wrong batch
    assert "rebuilt the index" in caplog.text
    assert path.read_bytes() == good  # written back as the log itself would write it
    await log.close()


@pytest.mark.asyncio
async def test_a_time_index_whose_last_entry_is_wrong_is_not_trusted(tmp_path: Path) -> None:
    await _closed_log(tmp_path)
    path = segment_path(tmp_path / "t-0", 0, TIME_INDEX_SUFFIX)
    data = bytearray(path.read_bytes())
    t, rel = struct.unpack_from(">qi", data, len(data) - 12)
    struct.pack_into(">qi", data, len(data) - 12, t + 10**9, rel)  # a max timestamp far in the future
    path.write_bytes(bytes(data))
    log = Log.open(tmp_path, "t", 0, OPTS)
    assert log.load_result.rescanned_from == 0
    assert log.segments[0].max_timestamp == 1039
    await log.close()


@pytest.mark.asyncio
async def test_a_right_index_entry_is_never_called_wrong(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``Log.slice`` looks up the batch it found with ``max_position`` just past its start: the
    index entry naming that very batch ends past the limit and is still right (a check that
    took it for a wrong one rebuilt the index on every fetch)."""
    await _closed_log(tmp_path)
    path = segment_path(tmp_path / "t-0", 0, INDEX_SUFFIX)
    good = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="groupcoord.storage"):
        log = Log.open(tmp_path, "t", 0, OPTS)
        for o in range(40):
            found = log.slice(o, 1)
            assert found is not None and found.length > 0
        assert _read_each(log) == list(range(40))
    assert "rebuilt the index" not in caplog.text
    assert path.read_bytes() == good
    await log.close()
