"""Lag in time.

``LookupTable`` is kafka-lag-exporter's per-partition table of (latest offset, poll time) points
(https://github.com/seglo/kafka-lag-exporter, ``LookupTable.scala``): it estimates when the
committed offset was the log end, and the lag in seconds is how long ago that was.

Insertion (``add``), against the newest point:

* a time not after the newest point's is ``OutOfOrder`` and dropped;
* an offset below the newest point's is ``NonMonotonic`` and dropped (the log end went back: a
  truncated or recreated partition);
* when the two newest points already share the offset, the newest one is replaced (``Updated``): a
  flat run keeps only its first and last point, so an idle partition does not push the history
  out of the window;
* otherwise the point is appended (``Inserted``), the oldest one dropped beyond ``size``.

Lookup (``lag_seconds``) of a committed offset: 0 when it is the newest point's offset
(``LagIsZero``); unknown (None, the exporter's NaN) with fewer than two points (``TooFewPoints``);
otherwise linear interpolation between the newest pair of adjacent points that brackets it, or
extrapolation along the line through the oldest and newest points when none does.

``lag_seconds_from_record`` is the other common definition: the age of the first record the group
has not consumed yet (the record at the committed offset), read from the log by the caller.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Literal

__all__ = ["LookupTable", "AddResult", "lag_seconds_from_record"]

AddResult = Literal["Inserted", "Updated", "OutOfOrder", "NonMonotonic"]


class LookupTable:
    """kafka-lag-exporter's sliding window of (offset, time_ms) points for one partition
    (``lookup-table.memory.size``, default 60)."""

    __slots__ = ("size", "_points")

    def __init__(self, size: int = 60) -> None:
        if size < 1:
            raise ValueError(f"lookup table size must be at least 1, got {size}")
        self.size = size
        self._points: deque[tuple[int, int]] = deque()

    @property
    def points(self) -> tuple[tuple[int, int], ...]:
        """(offset, time_ms), oldest first."""
        return tuple(self._points)

    def __len__(self) -> int:
        return len(self._points)

    def add(self, offset: int, time_ms: int) -> AddResult:
        points = self._points
        if points:
            newest_offset, newest_time = points[-1]
            if time_ms <= newest_time:
                return "OutOfOrder"
            if offset < newest_offset:
                return "NonMonotonic"
            if offset == newest_offset and len(points) > 1 and points[-2][0] == offset:
                points[-1] = (offset, time_ms)
                return "Updated"
        if len(points) == self.size:
            points.popleft()
        points.append((offset, time_ms))
        return "Inserted"

    def predict_time_ms(self, committed: int) -> float | None:
        """When the log end was at ``committed``, estimated; None when the table cannot tell
        (fewer than two points, or every point at one offset other than ``committed``, where the
        exporter's division by zero gives an infinite or NaN time)."""
        points = self._points
        if len(points) < 2:
            return None
        left, right = points[0], points[-1]  # extrapolation unless a pair brackets the offset
        for i in range(len(points) - 1, 0, -1):
            lo, hi = points[i - 1], points[i]
            if lo[0] <= committed <= hi[0]:
                left, right = lo, hi
                break
        d_offset = right[0] - left[0]
        if d_offset == 0:
            return None
        d_time = right[1] - left[1]
        try:
            return right[1] - (right[0] - committed) * d_time / d_offset
        except OverflowError:  # beyond a float: offsets far outside Kafka's int64
            return None

    def lag_seconds(self, committed: int, now_ms: int) -> float | None:
        """Seconds since the log end was at ``committed``; 0.0 when it is the newest point's offset,
        None when unknown. Negative when ``committed`` is past the newest point (extrapolated into
        the future), as the exporter reports it."""
        points = self._points
        if points and committed == points[-1][0]:
            return 0.0
        predicted = self.predict_time_ms(committed)
        if predicted is None:
            return None
        lag = (now_ms - predicted) / 1000
        return lag if math.isfinite(lag) else None


def lag_seconds_from_record(first_unconsumed_ts_ms: int | None, now_ms: int) -> float | None:
    """Age in seconds of the first record the group has not consumed (its timestamp on disk).

    None when there is no such timestamp (no record at the committed offset, or -1, Kafka's
    ``RecordBatch.NO_TIMESTAMP`` of the v0 message format); a caught-up group has lag 0 and the
    caller says so without asking. A record stamped in the future (a producer's clock ahead of
    ours, CreateTime) counts as no lag, not negative lag."""
    if first_unconsumed_ts_ms is None or first_unconsumed_ts_ms < 0:
        return None
    return max(now_ms - first_unconsumed_ts_ms, 0) / 1000
