"""``OffsetIndex``: the sparse offset -> file position map of one segment (Kafka's ``.index``).

File format: a flat array of 8-byte big-endian entries ``(int32 relative_offset, int32
position)``, where ``relative_offset = offset - segment.base_offset`` and ``position`` is the byte
position in the ``.log`` file of the batch whose *last* offset is ``offset``. No header, no
checksum: the index is derived data, and a suspicious one is rebuilt from the log.

Theory of operation: entries are kept in memory (two ``array('i')``), added by the segment while
appending, once per ``index.interval.bytes`` of log. A lookup bisects to the last entry at or
below the target and the segment scans batch headers forward from that position, so the scan is
bounded by about one index interval. The file is written whole when the segment rolls, when the
log closes and after a rebuild; the active segment's index is in memory only, which is safe
because an unclean shutdown rebuilds the active segment's index anyway (rule 3).

Rules:
  1. Offsets and positions strictly increase from entry to entry; positions are < the log size.
  2. A missing entry is never wrong: lookups fall back to ``(base_offset, 0)``. A wrong entry is,
     so ``load`` rejects any file that breaks rule 1 and the caller rebuilds.
  3. Only segments entirely below the recovery point trust their index files after an unclean
     shutdown; the others are rebuilt by ``LogSegment.recover``.
"""

from __future__ import annotations

import bisect
import os
import sys
from array import array
from pathlib import Path

from .files import atomic_write

__all__ = ["OffsetIndex", "OFFSET_ENTRY_SIZE"]

OFFSET_ENTRY_SIZE = 8


class OffsetIndex:
    """Sparse index of one segment. Not thread-safe: owned by its ``LogSegment``."""

    __slots__ = ("path", "base_offset", "_offsets", "_positions")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        #: Relative offsets (int32), strictly increasing.
        self._offsets = array("i")
        #: File positions (int32), strictly increasing, parallel to ``_offsets``.
        self._positions = array("i")

    def __len__(self) -> int:
        return len(self._offsets)

    def entries(self) -> list[tuple[int, int]]:
        """All entries as ``(absolute_offset, position)``, for tests and tools."""
        b = self.base_offset
        return [(b + o, p) for o, p in zip(self._offsets, self._positions, strict=True)]

    def clear(self) -> None:
        del self._offsets[:]
        del self._positions[:]

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._offsets and (rel <= self._offsets[-1] or position <= self._positions[-1]):
            return  # rule 1: never add an entry that does not move forward
        self._offsets.append(rel)
        self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry with offset <= ``offset``, or ``(base_offset, 0)`` (rule 2)."""
        i = bisect.bisect_right(self._offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._offsets:
            return self.base_offset, 0
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or beyond ``position`` (the log is being cut there)."""
        i = bisect.bisect_left(self._positions, position)
        del self._offsets[i:]
        del self._positions[i:]

    def load(self, log_size: int) -> bool:
        """Read the file; False (and empty) if it is missing or breaks rule 1."""
        self.clear()
        try:
            data = self.path.read_bytes()
        except OSError:
            return False
        if len(data) % OFFSET_ENTRY_SIZE:
            return False
        pairs = array("i", data)
        if sys.byteorder == "little":
            pairs.byteswap()
        offsets, positions = pairs[0::2], pairs[1::2]
        for i in range(1, len(offsets)):
            if offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1]:
                return False
        if offsets and (offsets[0] < 0 or positions[0] < 0 or positions[-1] >= log_size):
            return False
        self._offsets, self._positions = offsets, positions
        return True

    def to_bytes(self) -> bytes:
        pairs = array("i", bytes(8 * len(self._offsets)))
        pairs[0::2] = self._offsets
        pairs[1::2] = self._positions
        if sys.byteorder == "little":
            pairs.byteswap()
        return pairs.tobytes()

    def write(self, *, sync: bool) -> None:
        atomic_write(self.path, self.to_bytes(), sync=sync)

    def delete_file(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
