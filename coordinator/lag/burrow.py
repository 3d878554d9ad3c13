"""Burrow's consumer status: the per-partition window of commits and the rules over it.

Sources (LinkedIn's Burrow, master):
https://github.com/linkedin/Burrow/blob/master/core/internal/evaluator/caching.go (the rules, the
group status) and https://github.com/linkedin/Burrow/blob/master/core/internal/storage/inmemory.go
(the window). Status names and numbers are Burrow's (``core/protocol/evaluator.go``).

The window (``PartitionWindow``) keeps the last ``intervals`` commits of a group partition, each
with the lag at the time it was stored (the newest broker end offset minus the commit, 0 if the
broker looked behind). A commit less than ``min_distance_ms`` after the stored newest one replaces
it but keeps the older timestamp, so a group committing more often than that still moves forward
through the window. The broker end offsets sampled for the partition sit in a ring of the same
size; they only tell whether the consumer caught up recently (STOP's guard).

The rules (``evaluate_partition``), in Burrow's order, first match wins:

0. current lag <= ``allowed_lag``: OK, nothing else is looked at;
1. STOP: the time since the newest commit exceeds the time the window spans (newest minus oldest
   commit timestamp), unless some sampled broker end offset is <= the newest commit (the consumer
   was caught up recently). With a single commit the window spans nothing, so STOP fires as soon
   as any time has passed;
2. REWIND: an offset lower than the one before it, unless a later one gets back to that one;
3. OK when some commit in the window had lag <= ``allowed_lag``;
4. STALL: every commit in the window has the same offset;
5. WARN: the lag never decreases from one commit to the next;
6. OK.

A partition whose window is less than ``minimum_complete`` full is reported OK unevaluated.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import pairwise

__all__ = [
    "Status", "OffsetEntry", "PartitionStatus", "GroupStatus", "PartitionWindow",
    "evaluate_partition", "partition_status", "group_status",
]


class Status(IntEnum):
    """Burrow's ``StatusConstant``; ``name`` is the string its HTTP API and metrics use. ERR is
    for groups only; STOP, STALL and REWIND for partitions only."""

    NOTFOUND = 0
    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6


@dataclass(frozen=True)
class OffsetEntry:
    """One stored commit: Burrow's ``ConsumerOffset`` (``offset``, ``timestamp``, ``observedAt``,
    ``lag``)."""

    offset: int
    timestamp_ms: int
    observed_at_ms: int
    lag: int


@dataclass(frozen=True)
class PartitionStatus:
    status: Status
    current_lag: int
    complete: float
    start: OffsetEntry | None
    end: OffsetEntry | None


@dataclass(frozen=True)
class GroupStatus:
    """``maxlag`` is the (topic, partition) with the highest current lag (the first one seen on a
    tie), ``totallag`` the sum of the current lags, ``complete`` the fraction of partitions whose
    window is full."""

    status: Status
    complete: float
    maxlag: tuple[str, int] | None
    totallag: int


class PartitionWindow:
    """Burrow's storage for one group partition: the commit ring and the broker-offset ring."""

    __slots__ = ("intervals", "min_distance_ms", "_entries", "_broker_offsets")

    def __init__(self, intervals: int = 10, min_distance_ms: int = 0) -> None:
        if intervals < 1:
            raise ValueError(f"intervals must be at least 1, got {intervals}")
        self.intervals = intervals
        self.min_distance_ms = min_distance_ms
        self._entries: deque[OffsetEntry] = deque(maxlen=intervals)
        self._broker_offsets: deque[int] = deque(maxlen=intervals)

    @property
    def entries(self) -> tuple[OffsetEntry, ...]:
        """The stored commits, oldest first."""
        return tuple(self._entries)

    @property
    def broker_offsets(self) -> tuple[int, ...]:
        """The sampled broker end offsets, oldest first."""
        return tuple(self._broker_offsets)

    def add_broker_offset(self, offset: int) -> None:
        self._broker_offsets.append(offset)

    def add_commit(self, offset: int, timestamp_ms: int, observed_at_ms: int,
                   broker_offset: int | None = None) -> bool:
        """Store a commit (calls come in commit order). Its lag is taken against ``broker_offset``,
        or when None against the newest sampled one; with neither the commit is dropped and False
        returned, as Burrow drops commits for partitions it has no broker offset for yet.
        ``broker_offset`` is not added to the broker-offset ring (``add_broker_offset`` does)."""
        if broker_offset is None:
            if not self._broker_offsets:
                return False
            broker_offset = self._broker_offsets[-1]
        lag = max(broker_offset - offset, 0)
        entries = self._entries
        # Burrow's mergeFrequentCommitIntoPrevious: the difference is signed, so with the default
        # min-distance of 0 a commit stamped before the stored newest one also replaces it.
        if entries and timestamp_ms - entries[-1].timestamp_ms < self.min_distance_ms:
            entries[-1] = OffsetEntry(offset, entries[-1].timestamp_ms, observed_at_ms, lag)
        else:
            entries.append(OffsetEntry(offset, timestamp_ms, observed_at_ms, lag))
        return True

    @property
    def current_lag(self) -> int:
        """Newest broker end offset minus the newest commit, 0 if negative or either is unknown."""
        if not self._entries or not self._broker_offsets:
            return 0
        return max(self._broker_offsets[-1] - self._entries[-1].offset, 0)

    def evaluate(self, now_ms: int, allowed_lag: int = 0, minimum_complete: float = 0.0) -> PartitionStatus:
        return partition_status(self._entries, self._broker_offsets, self.current_lag, now_ms,
                                allowed_lag, self.intervals, minimum_complete)


def partition_status(entries: Sequence[OffsetEntry], broker_offsets: Sequence[int], current_lag: int,
                     now_ms: int, allowed_lag: int = 0, intervals: int = 10,
                     minimum_complete: float = 0.0) -> PartitionStatus:
    """Burrow's ``evaluatePartitionStatus``: completeness, start and end, and the status. ``entries``
    oldest first; only the last ``intervals`` count."""
    window = list(entries)[-intervals:] if intervals > 0 else []
    if not window:
        return PartitionStatus(Status.OK, current_lag, 0.0, None, None)
    complete = 1.0 if len(window) >= intervals else len(window) / intervals
    status = Status.OK
    if complete >= minimum_complete:
        status = _rules(window, broker_offsets, current_lag, now_ms, allowed_lag)
    return PartitionStatus(status, current_lag, complete, window[0], window[-1])


def evaluate_partition(entries: Sequence[OffsetEntry], broker_offsets: Sequence[int], current_lag: int,
                       now_ms: int, allowed_lag: int = 0, intervals: int = 10,
                       minimum_complete: float = 0.0) -> Status:
    """The status alone (see ``partition_status``)."""
    return partition_status(entries, broker_offsets, current_lag, now_ms, allowed_lag, intervals,
                            minimum_complete).status


def _rules(window: Sequence[OffsetEntry], broker_offsets: Sequence[int], current_lag: int, now_ms: int,
           allowed_lag: int) -> Status:
    if current_lag <= allowed_lag:
        return Status.OK
    first, last = window[0], window[-1]
    stopped = now_ms - last.timestamp_ms > last.timestamp_ms - first.timestamp_ms
    # The broker ring covers the last few sample intervals, so a consumer that was caught up then
    # is not called stopped yet, however old its last commit.
    if stopped and not any(b <= last.offset for b in broker_offsets):
        return Status.STOP
    offsets = [e.offset for e in window]
    rewind = next((i for i in range(1, len(offsets)) if offsets[i] < offsets[i - 1]), None)
    # A rewind that gets back to where it was (a rebalance re-committing older work) is forgiven.
    if rewind is not None and not any(o >= offsets[rewind - 1] for o in offsets[rewind:]):
        return Status.REWIND
    if any(e.lag <= allowed_lag for e in window):
        return Status.OK
    if all(o == offsets[0] for o in offsets):
        return Status.STALL
    if all(b.lag >= a.lag for a, b in pairwise(window)):
        return Status.WARN
    return Status.OK


def group_status(parts: Mapping[tuple[str, int], PartitionStatus]) -> GroupStatus:
    """Burrow's group status: the worst partition status, STOP/STALL/REWIND reported as ERR."""
    status = Status.OK
    maxlag: tuple[str, int] | None = None
    highest = 0
    total = 0
    complete = 0
    for tp, part in parts.items():
        if part.status > status:
            status = Status.ERR if part.status > Status.ERR else part.status
        if maxlag is None or part.current_lag > highest:
            maxlag, highest = tp, part.current_lag
        total += part.current_lag
        if part.complete == 1.0:
            complete += 1
    return GroupStatus(status, complete / len(parts) if parts else 0.0, maxlag, total)
