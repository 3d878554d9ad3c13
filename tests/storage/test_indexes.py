"""OffsetIndex and TimeIndex: lookups, file round trips, and refusal of damaged files."""

from __future__ import annotations

from pathlib import Path

from storage.offset_index import OffsetIndex
from storage.time_index import TimeIndex


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
