"""``LeaderEpochCache``: which leader epoch wrote which part of a log (KIP-101, KIP-279).

Why: a follower that truncates to its high watermark after a leader change can lose acknowledged
data or diverge from the new leader (KIP-101). Instead it asks the leader "where does my latest
epoch end on your log?" (OffsetsForLeaderEpoch) and truncates exactly there; KIP-279 repeats the
question for older epochs until both logs agree. Answering needs, per log, the first offset of
every leader epoch: that is this cache.

Theory of operation: entries ``(epoch, start_offset)`` are kept sorted; both fields strictly
increase. They come from the data (every v2 batch carries its ``partition_leader_epoch``; the log
assigns an entry when a batch with a newer epoch is appended) and from a new leader, which
assigns ``(its epoch, log end)`` when elected. The entries persist in the partition directory as
Kafka's ``leader-epoch-checkpoint`` text file::

    0               <- format version
    2               <- number of entries
    0 0             <- "<epoch> <start offset>", one line per entry
    3 1284

Rules:
  1. Epochs and start offsets both strictly increase; an ``assign`` that would break that first
     removes the entries it conflicts with (they described data that is gone or was replaced).
  2. The file is replaced atomically (``files.atomic_write``: temp, fsync, rename, fsync dir).
     Writers are serialised and each writes the newest state, so an older snapshot never lands
     after a newer one, even when ``flush`` runs in several threads.
  3. A file that is not exactly in the format above raises ``CorruptCheckpointError`` naming the
     file; it is never half-trusted (the log rebuilds the cache from its batches instead).
  4. Mutations are cheap and in memory; ``flush`` (blocking) persists. Methods take
     ``flush=True`` by default; the ``Log`` passes ``flush=False`` and flushes off the event loop.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from .errors import CorruptCheckpointError
from .files import atomic_write

__all__ = ["EpochEntry", "LeaderEpochCache", "read_epoch_checkpoint", "UNDEFINED_EPOCH", "UNDEFINED_OFFSET"]

logger = logging.getLogger("groupcoord.storage")

#: Kafka's ``UNDEFINED_EPOCH`` / ``UNDEFINED_EPOCH_OFFSET`` (the answer "I don't know that epoch").
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
_VERSION = 0
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
#: Digits of the largest int64; no number in the file may have more.
_MAX_DIGITS = len(str(_INT64_MAX))


class EpochEntry(NamedTuple):
    """Leader epoch ``epoch`` wrote the log from ``start_offset`` on (until the next entry)."""

    epoch: int
    start_offset: int


def _format(entries: Iterable[EpochEntry]) -> bytes:
    entries = list(entries)
    lines = [str(_VERSION), str(len(entries))] + [f"{e} {s}" for e, s in entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def read_epoch_checkpoint(path: Path) -> list[EpochEntry] | None:
    """The entries in ``path``; None if the file does not exist (rule 3 for anything else)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptCheckpointError(path, f"unreadable ({exc})") from exc
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise CorruptCheckpointError(path, "not ASCII text") from None
    if not text.endswith("\n"):
        raise CorruptCheckpointError(path, "missing final newline (torn or foreign file)")
    lines = text[:-1].split("\n")

    def number(line_no: int, what: str, value: str) -> int:
        # int() would accept " 7", "+7" and "7_0"; the format is plain digits (an optional minus
        # only so the message below can say "negative"). More digits than an int64 has is garbage,
        # and must be refused before int(), which raises a bare ValueError past 4300 digits.
        digits = value[1:] if value.startswith("-") else value
        if not digits.isdigit() or not digits.isascii() or len(digits) > _MAX_DIGITS:
            raise CorruptCheckpointError(path, f"line {line_no}: expected {what}, got {value[:40]!r}")
        return int(value)

    if number(1, "the version", lines[0]) != _VERSION:
        raise CorruptCheckpointError(path, f"line 1: unsupported version {lines[0]!r} (expected {_VERSION})")
    if len(lines) < 2:
        raise CorruptCheckpointError(path, "line 2: missing entry count")
    count = number(2, "the entry count", lines[1])
    if count < 0 or len(lines) - 2 != count:
        raise CorruptCheckpointError(path, f"line 2: says {count} entries, the file has {len(lines) - 2}")
    entries: list[EpochEntry] = []
    for i, line in enumerate(lines[2:], start=3):
        fields = line.split(" ")
        if len(fields) != 2:
            raise CorruptCheckpointError(path, f"line {i}: expected '<epoch> <start offset>', got {line[:80]!r}")
        entry = EpochEntry(number(i, "an epoch", fields[0]), number(i, "a start offset", fields[1]))
        if entry.epoch < 0 or entry.start_offset < 0:
            raise CorruptCheckpointError(path, f"line {i}: negative value in {line!r}")
        # Every entry is answered to followers in OffsetsForLeaderEpoch (int32 epoch, int64
        # offset): a value that does not fit was never written by us and would fail that answer.
        if entry.epoch > _INT32_MAX or entry.start_offset > _INT64_MAX:
            raise CorruptCheckpointError(path, f"line {i}: {line!r} does not fit an int32 epoch and int64 offset")
        if entries and (entry.epoch <= entries[-1].epoch or entry.start_offset <= entries[-1].start_offset):
            raise CorruptCheckpointError(path, f"line {i}: {line!r} does not follow {entries[-1]} (rule 1)")
        entries.append(entry)
    return entries


class LeaderEpochCache:
    """Epoch -> start offset of one log, persisted at ``path``. Load with ``LeaderEpochCache.load``.

    Mutated from the event loop; ``flush`` may run in any thread (rule 2).
    """

    def __init__(self, path: Path, entries: Iterable[tuple[int, int]] = (), *, persisted: bool = False) -> None:
        self.path = path
        self._entries: list[EpochEntry] = [EpochEntry(*e) for e in entries]
        #: Short lock for the entries and versions; ``_write_lock`` serialises file writes.
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        #: Bumped by every change; ``flush`` writes when the file is behind it.
        self._version = 0
        self._persisted_version = 0 if persisted else -1

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache:
        """The cache stored at ``path`` (empty, not yet written, if the file does not exist).

        Raises ``CorruptCheckpointError`` for a file not in the format (rule 3)."""
        entries = read_epoch_checkpoint(path)
        return cls(path, entries or (), persisted=entries is not None)

    # -- reading ----------------------------------------------------------------------------
    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, ``UNDEFINED_EPOCH`` (-1) when empty."""
        entries = self._entries
        return entries[-1].epoch if entries else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[-1] if entries else None

    @property
    def dirty(self) -> bool:
        """True while the file does not hold the current entries."""
        return self._persisted_version != self._version

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.path}, {self._entries})"

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` answering OffsetsForLeaderEpoch for ``requested_epoch``.

        The end offset of an epoch is where the next known epoch starts (the log end for the
        latest epoch). If ``requested_epoch`` is unknown, the answer is about the largest known
        epoch below it, so the follower truncates to where the logs still agree (KIP-279). An
        undefined (negative) or newer-than-latest epoch, or an empty cache, gives (-1, -1); an
        epoch older than every entry gives (requested epoch, first start offset).
        """
        entries = self._entries
        if requested_epoch < 0 or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        latest = entries[-1]
        if requested_epoch == latest.epoch:
            return latest.epoch, log_end_offset
        if requested_epoch > latest.epoch:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        # First entry with a larger epoch; one exists, since requested < latest.
        i = bisect.bisect_right(entries, requested_epoch, key=lambda e: e.epoch)
        if i == 0:
            return requested_epoch, entries[0].start_offset
        return entries[i - 1].epoch, entries[i].start_offset

    # -- changing ---------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether anything changed.

        No change when the latest entry already has ``epoch`` at or below ``start_offset`` (the
        epoch did not start later), or when exactly this entry already exists. Otherwise
        entries with an epoch >= ``epoch`` or a start offset >= ``start_offset`` are removed
        first (rule 1) and the entry is appended: the log was rewritten from there.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch entry ({epoch}, {start_offset}) has a negative field")
        entry = EpochEntry(epoch, start_offset)
        with self._lock:
            entries = self._entries
            if entries:
                latest = entries[-1]
                if epoch == latest.epoch and start_offset >= latest.start_offset:
                    return False
                if epoch < latest.epoch and entry in entries:
                    return False
            removed = []
            while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset):
                removed.append(entries.pop())
            entries.append(entry)
            self._version += 1
        if removed and not (len(removed) == 1 and removed[0].epoch == epoch):
            logger.warning("%s: assigning %s removed conflicting entries %s", self.path, entry, removed[::-1])
        if flush:
            self.flush()
        return True

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> bool:
        """The log was truncated to ``end_offset``: drop entries starting at or after it."""
        with self._lock:
            entries = self._entries
            if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
                return False
            while entries and entries[-1].start_offset >= end_offset:
                entries.pop()
            self._version += 1
        if flush:
            self.flush()
        return True

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> bool:
        """The log start moved up to ``start_offset``: drop entries wholly below it; the entry
        covering it (the last one starting at or before it) now starts there."""
        with self._lock:
            entries = self._entries
            n = bisect.bisect_right(entries, start_offset, key=lambda e: e.start_offset)
            if n == 0:
                return False
            covering = EpochEntry(entries[n - 1].epoch, start_offset)
            if n == 1 and entries[0] == covering:
                return False
            entries[:n] = [covering]
            self._version += 1
        if flush:
            self.flush()
        return True

    def flush(self) -> None:
        """Write the entries to ``path`` if it is behind (blocking; any thread; rule 2)."""
        with self._write_lock:
            with self._lock:
                version = self._version
                if version == self._persisted_version:
                    return
                data = _format(self._entries)
            atomic_write(self.path, data)
            with self._lock:
                self._persisted_version = max(self._persisted_version, version)
