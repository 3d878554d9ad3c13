"""``TransactionIndex``: a segment's ``.txnindex``, the aborted transactions whose ABORT marker it holds.

A ``read_committed`` consumer (KIP-98) gets, with the batches it fetches, the list of aborted
transactions overlapping them (producer id and first offset); it skips the transactional data of
those producers until their ABORT marker. The partition finds that list in these files, one per
segment, in Kafka's format (``TransactionIndex.java``, ``AbortedTxn.java``): entries of 34 bytes,
big-endian ``int16 version (0), int64 producerId, int64 firstOffset, int64 lastOffset (the
marker), int64 lastStableOffset``, appended in marker order. ``lastStableOffset`` is the last
stable offset when the transaction was aborted: the first offset of the earliest other open
transaction, else the marker's offset + 1; it lets a scan stop early (``collect``).

Rules:
  1. An entry goes to the segment holding its ABORT marker, and only for an abort that closed a
     transaction open in the partition (a marker for a producer that wrote nothing here changes
     nothing). The file is created with the first entry (Kafka creates it lazily too).
  2. The file follows its segment: renamed, deleted and truncated with it (``Log._retire``,
     ``LogSegment.truncate_to``), fsynced when the segment is (``LogSegment.flush``), and rebuilt
     from the batches when recovery scans the segment (``rebuild``), since an entry written after
     the last fsync of the data may be lost or ahead of it.
  3. A file that is not whole entries of version 0 is not trusted: it is rebuilt (Kafka refuses
     to read a higher version).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from protocol.records import CONTROL_MASK, BatchHeader

from .producer_state import CompletedTxn, ProducerStateManager, replay_segments

__all__ = ["AbortedTxn", "TransactionIndex", "TxnIndexCorrupt", "collect_aborted", "rebuild", "ENTRY_SIZE"]

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0
#: Above every offset: a high watermark past every marker (the log end's meaning).
_ABOVE_ALL = 2**63


class TxnIndexCorrupt(ValueError):
    """A ``.txnindex`` file that is not whole version-0 entries (rule 3)."""


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    #: The offset of the ABORT marker.
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Entries of a whole file; TxnIndexCorrupt if it is not whole version-0 entries."""
    if len(data) % ENTRY_SIZE:
        raise TxnIndexCorrupt(f"{len(data)} bytes is not a whole number of {ENTRY_SIZE}-byte entries")
    out = []
    for pos in range(0, len(data), ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != _VERSION:
            raise TxnIndexCorrupt(f"entry at byte {pos} has version {version}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    """The entries of one segment's ``.txnindex``, in memory and in the file (loaded on open)."""

    __slots__ = ("path", "entries", "_unsynced", "corrupt")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._unsynced = False
        #: Why the file on disk was not trusted (rule 3), None if it was.
        self.corrupt: str | None = None
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        try:
            self.entries = decode_entries(data)
        except TxnIndexCorrupt as exc:
            self.corrupt = str(exc)

    def append(self, entries: Sequence[AbortedTxn]) -> None:
        """Add entries (in marker order) to the file and to memory. Blocking, but rare: aborts only."""
        self.write(entries)
        self.entries.extend(entries)

    def write(self, entries: Sequence[AbortedTxn]) -> None:
        """Append entries to the file only: the group-commit writer writes them with the batches
        (I/O thread) and adds them to ``entries`` when the round commits, so readers see an
        entry exactly when they see its marker."""
        with open(self.path, "ab") as f:
            f.write(b"".join(e.encode() for e in entries))
        self._unsynced = True

    def flush(self) -> None:
        """fsync the file if entries were appended since the last flush."""
        if self._unsynced:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:  # its segment was deleted meanwhile (truncation)
                self._unsynced = False
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._unsynced = False

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """Rewrite the file with exactly ``entries`` (none: no file). Not fsynced; ``flush`` does."""
        self.entries = list(entries)
        self.corrupt = None
        if not self.entries:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self._unsynced = False
            return
        with open(self.path, "wb") as f:
            f.write(b"".join(e.encode() for e in self.entries))
        self._unsynced = True

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above ``offset`` (the segment was cut there)."""
        if self.entries and self.entries[-1].last_offset >= offset:
            self.replace(e for e in self.entries if e.last_offset < offset)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound)``, and whether the search is complete:
        an entry whose last stable offset reaches ``upper_bound`` proves that no transaction
        aborted in a later segment started below the bound (Kafka's ``collectAbortedTxns``)."""
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                found.append(e)
            if e.last_stable_offset >= upper_bound:
                return found, True
        return found, False


class _Segment(Protocol):
    base_offset: int
    txn_index: TransactionIndex

    def batches(self, start: int = 0, end: int | None = None, *,
                with_bytes: bool = True) -> Iterable[tuple[int, BatchHeader, bytes, int]]: ...

    def read_bytes(self, position: int, length: int) -> bytes: ...


def collect_aborted(segments: Sequence[_Segment], fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
    """``(producer_id, first_offset)`` of the aborted transactions a read of ``[fetch_offset,
    upper_bound)`` overlaps, ordered by first offset (Kafka's ``LocalLog.collectAbortedTransactions``):
    from the segment holding ``fetch_offset`` on, until one segment's search is complete.
    ``segments`` are in offset order."""
    found: list[AbortedTxn] = []
    start = 0
    for i, seg in enumerate(segments):
        if seg.base_offset <= fetch_offset:
            start = i
        else:
            break
    for seg in segments[start:]:
        entries, complete = seg.txn_index.collect(fetch_offset, upper_bound)
        found.extend(entries)
        if complete:
            break
    found.sort(key=lambda e: e.first_offset)
    return [(e.producer_id, e.first_offset) for e in found]


def rebuild(segments: Sequence[_Segment], rebuild_from: int,
            high_watermark: int | None = None) -> tuple[int, ProducerStateManager | None]:
    """Rewrite the ``.txnindex`` of every segment based at or above ``rebuild_from`` (and of any
    whose file was corrupt) from its batches (rule 2). Transactions open at such a segment's
    start are found by replaying the earlier ones, so every segment's batches are scanned —
    unless no segment to rebuild holds a control batch (no topic without transactions has one):
    then none gets an entry, which one scan of them shows.

    The whole-log replay is the producer state's (``producer_state.replay_segments``), so it is
    returned too (completed transactions below ``high_watermark`` dropped; None: the log end):
    the partition takes it instead of reading every header a second time. None when there was
    no replay. Blocking; returns the number of entries written and that state."""
    targets = [s for s in segments if s.base_offset >= rebuild_from or s.txn_index.corrupt is not None]
    if not targets:
        return 0, None
    if not any(h.attributes & CONTROL_MASK for s in targets for _p, h, _b, _o in s.batches(with_bytes=False)):
        for seg in targets:
            seg.txn_index.replace(())
        return 0, None
    redo = [seg.base_offset >= rebuild_from or seg.txn_index.corrupt is not None for seg in segments]
    entries: list[list[AbortedTxn]] = [[] for _ in segments]

    def on_abort(i: int, txn: CompletedTxn, last_stable_offset: int) -> None:
        if redo[i]:
            entries[i].append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, last_stable_offset))

    state = replay_segments(segments, _ABOVE_ALL if high_watermark is None else high_watermark, on_abort)
    written = 0
    for seg, again, found in zip(segments, redo, entries, strict=True):
        if again:
            seg.txn_index.replace(found)
            seg.txn_index.flush()
            written += len(found)
    return written, state
