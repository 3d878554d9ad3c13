"""``TimeIndex``: the sparse timestamp -> offset map of one segment (Kafka's ``.timeindex``).

File format: a flat array of 12-byte big-endian entries ``(int64 timestamp, int32
relative_offset)``. An entry ``(t, o)`` means "the largest timestamp in this segment up to and
including offset ``o`` is ``t``, first reached at ``o``". Like the offset index it has no header and
no checksum and is rebuilt from the log when in doubt.

Theory of operation: the segment adds an entry at the same cadence as offset-index entries, but
only when the running maximum timestamp has grown, and a final one when the segment stops being
active, so the last entry always carries the segment's largest timestamp (retention by time reads
it from there). ``offset_for_timestamp`` bisects to the last entry with timestamp strictly below
the target; every batch before that entry's offset is older than the target, so the forward
scan may start there.

Rules:
  1. Timestamps and offsets strictly increase from entry to entry.
  2. ``load`` rejects a file that breaks rule 1 or points outside the segment; the caller rebuilds.
  3. Same trust rule as the offset index: only segments below the recovery point keep their file
     after an unclean shutdown.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

from .files import atomic_write

__all__ = ["TimeIndex", "TIME_ENTRY_SIZE"]

TIME_ENTRY_SIZE = 12
_ENTRY = struct.Struct(">qi")


class TimeIndex:
    """Sparse time index of one segment. Not thread-safe: owned by its ``LogSegment``."""

    __slots__ = ("path", "base_offset", "_timestamps", "_offsets")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._timestamps: list[int] = []
        self._offsets: list[int] = []  # absolute offsets

    def __len__(self) -> int:
        return len(self._timestamps)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._timestamps, self._offsets, strict=True))

    def clear(self) -> None:
        self._timestamps.clear()
        self._offsets.clear()

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add ``(timestamp, offset)`` if both move forward (rule 1)."""
        if self._timestamps and (timestamp <= self._timestamps[-1] or offset <= self._offsets[-1]):
            return
        self._timestamps.append(timestamp)
        self._offsets.append(offset)

    def last_entry(self) -> tuple[int, int] | None:
        if not self._timestamps:
            return None
        return self._timestamps[-1], self._offsets[-1]

    def lookup_before(self, timestamp: int) -> int:
        """An offset such that every batch before it is older than ``timestamp``."""
        i = bisect.bisect_left(self._timestamps, timestamp) - 1
        return self.base_offset if i < 0 else self._offsets[i]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries at or beyond ``offset``."""
        i = bisect.bisect_left(self._offsets, offset)
        del self._timestamps[i:]
        del self._offsets[i:]

    def load(self, next_offset_bound: int | None = None) -> bool:
        self.clear()
        try:
            data = self.path.read_bytes()
        except OSError:
            return False
        if len(data) % TIME_ENTRY_SIZE:
            return False
        base = self.base_offset
        ts: list[int] = []
        offs: list[int] = []
        for t, rel in _ENTRY.iter_unpack(data):
            o = base + rel
            if rel < 0 or (ts and (t <= ts[-1] or o <= offs[-1])):
                return False
            ts.append(t)
            offs.append(o)
        if offs and next_offset_bound is not None and offs[-1] >= next_offset_bound:
            return False
        self._timestamps, self._offsets = ts, offs
        return True

    def to_bytes(self) -> bytes:
        base = self.base_offset
        return b"".join(_ENTRY.pack(t, o - base) for t, o in zip(self._timestamps, self._offsets, strict=True))

    def write(self, *, sync: bool) -> None:
        atomic_write(self.path, self.to_bytes(), sync=sync)

    def delete_file(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
