"""Consumer lag, sampled in the background: in offsets, in time, and Burrow's status.

Every ``lag.sample.interval.ms`` an asyncio task reads the node's view (``state_view.py``) and
feeds, per hosted partition, its high watermark into a kafka-lag-exporter lookup table
(``coordinator/lag/time_lag.py``), and per group partition its commit into a Burrow window
(``coordinator/lag/burrow.py``). What /metrics and the dashboard read is the result of the last
sample: no request computes lag, and the request hot path is untouched.

Lag in time prefers the first unconsumed record's own timestamp, read from the local log (the
age of the oldest message the group has not read); when the partition is not hosted here or the
record has no timestamp, the lookup table interpolates when the log end was at the committed
offset (kafka-lag-exporter's method, https://github.com/seglo/kafka-lag-exporter#estimate-consumer-group-time-lag).

A sample of many groups yields to the event loop between chunks of groups, so a 10,000-group
node keeps answering while it samples; the results are swapped in whole at the end.

A sample costs in proportion to what changed (issue 34: 10,000 groups of 10 partitions every
10 s). A partition whose inputs — its committed value, its high watermark, its owner — are those
of the last sample, and whose result cannot move with time alone, keeps last sample's
``PartitionLag`` object; a group all of whose partitions kept theirs keeps its ``GroupStatus``
object, so the exposition (``metrics_lag.py``) reuses the text it rendered for it. What can move
with time alone is re-evaluated every sample: a partition with lag (its lag in seconds grows, and
Burrow's STOP rule compares the age of the newest commit with the window's span) and the "expires
within a day" flag (compared on every sample, a subtraction). A caught-up partition (lag 0, Burrow's
current lag within ``allowed_lag``) is OK by Burrow's first rule whatever the time, and its lag in
seconds is 0: that is the result kept. Burrow's broker-offset ring still takes the high watermark
of every partition at every sample, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..lag.burrow import GroupStatus, PartitionStatus, PartitionWindow, Status, group_status
from ..lag.offsets import tool_lag
from ..lag.time_lag import LookupTable, lag_seconds_from_record
from .state_view import CommittedView, StateView

__all__ = ["LagMonitor", "PartitionLag", "EXPIRING_WITHIN_MS", "HISTORY_POINTS"]

log = logging.getLogger("groupcoord.ops")

#: "Expiring soon": within a day (the dashboard's warning, KIP-211's retention is 7 days).
EXPIRING_WITHIN_MS = 24 * 3600 * 1000
#: Points of each group's total-lag history kept for the chart (an hour at the default 10 s).
HISTORY_POINTS = 360
_NO_OWNER: tuple[None, None, None] = (None, None, None)
#: Groups sampled between two yields to the event loop (~1,000 partitions: a few ms).
_CHUNK = 100


@dataclass(slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    #: None: assigned but never committed.
    committed: int | None
    #: The high watermark; None: the partition is not hosted here.
    log_end: int | None
    #: kafka-consumer-groups' LAG (None when either side is unknown).
    lag: int | None
    lag_seconds: float | None
    #: Burrow's evaluation of the partition's commit window.
    status: Status
    member_id: str | None
    client_id: str | None
    host: str | None
    expires_at_ms: int | None
    expiring_within_day: bool


class _Tracked:
    """A group partition's Burrow window, the commit last fed to it (offset, timestamp), and the
    last result with the inputs it came from: ``result`` is reused while the committed view,
    the high watermark and the owner are the same and ``stable`` (module docstring)."""

    __slots__ = ("window", "offset", "timestamp_ms", "committed", "log_end", "owner", "stable", "status", "result")

    def __init__(self, window: PartitionWindow) -> None:
        self.window = window
        self.offset = -1
        self.timestamp_ms = -1
        # The inputs, in slots rather than a tuple: one object fewer per partition for the
        # cyclic GC to walk.
        self.committed: CommittedView | None = None
        self.log_end: int | None = None
        self.owner: tuple[str | None, str | None, str | None] = _NO_OWNER
        self.stable = False
        #: Set when stable: the shared status standing for it in its group's (``_kept_status``).
        self.status: PartitionStatus | None = None
        self.result: PartitionLag | None = None


_NONE_TRACKED: dict[tuple[str, int], _Tracked] = {}
_NONE_UNASSIGNED: dict[tuple[str, int], PartitionLag] = {}


class LagMonitor:
    """``clock()``: now in ms (injected: tests step it). The other settings are the ``lag.*``
    keys of docs/configuration.md."""

    #: False: every partition is evaluated afresh at every sample (tests compare the two).
    reuse_results = True

    def __init__(self, view: StateView, clock: Callable[[], int], *, interval_ms: int = 10_000,
                 table_size: int = 60, intervals: int = 10, min_distance_ms: int = 0, allowed_lag: int = 0) -> None:
        self.view = view
        self.clock = clock
        self.interval_ms = interval_ms
        self.table_size = table_size
        self.intervals = intervals
        self.min_distance_ms = min_distance_ms
        self.allowed_lag = allowed_lag
        self._tables: dict[tuple[str, int], LookupTable] = {}
        #: group -> (topic, partition) -> its Burrow window and the last commit fed to it.
        self._windows: dict[str, dict[tuple[str, int], _Tracked]] = {}
        self._history: dict[str, deque[tuple[int, int]]] = {}
        self._lags: list[PartitionLag] = []
        self._statuses: dict[str, GroupStatus] = {}
        #: Last sample's rows of assigned, uncommitted partitions; rows and total lag per group.
        self._unassigned: dict[str, dict[tuple[str, int], PartitionLag]] = {}
        self._counts: dict[str, int] = {}
        #: (status, current lag, completeness) -> the PartitionStatus kept partitions share.
        self._kept: dict[tuple[Status, int, float], PartitionStatus] = {}
        self._totals: dict[str, int] = {}
        #: When the last sample was taken (None: none yet).
        self.sampled_at_ms: int | None = None
        #: How long the last sample took, ms, chunks and yields included (kafka-lag-exporter's
        #: ``kafka_consumergroup_poll_time_ms``); None: none yet.
        self.poll_time_ms: float | None = None
        self._task: asyncio.Task[None] | None = None

    # --- results ------------------------------------------------------------------------------

    def lags(self) -> list[PartitionLag]:
        return self._lags

    def group_statuses(self) -> dict[str, GroupStatus]:
        return self._statuses

    def history(self, group: str) -> list[tuple[int, int]]:
        """``(time_ms, total_lag)`` of the group at each sample, oldest first."""
        points = self._history.get(group)
        return list(points) if points is not None else []

    # --- sampling -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="lag-monitor")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            try:
                started = time.monotonic()
                for _ in self._steps(self.clock()):
                    await asyncio.sleep(0)
                self.poll_time_ms = (time.monotonic() - started) * 1000.0
            except Exception:
                log.exception("lag sample failed")
            await asyncio.sleep(self.interval_ms / 1000)

    def sample(self, now_ms: int) -> None:
        """Take one sample at ``now_ms`` (all at once; the task yields between chunks)."""
        started = time.monotonic()
        for _ in self._steps(now_ms):
            pass
        self.poll_time_ms = (time.monotonic() - started) * 1000.0

    def _steps(self, now_ms: int) -> Iterator[None]:
        view = self.view
        partitions = view.partitions()
        ends: dict[tuple[str, int], int] = {}
        tables = self._tables
        for tp, part in partitions.items():
            # Partitions led elsewhere have a log end too once their leader answered (remote_offsets.py).
            if part.log_end is not None:
                ends[tp] = part.log_end
                table = tables.get(tp)
                if table is None:
                    table = tables[tp] = LookupTable(self.table_size)
                table.add(part.log_end, now_ms)
        for tp in [tp for tp in tables if tp not in ends]:
            del tables[tp]
        yield
        groups = view.groups()
        old_windows = self._windows
        old_unassigned = self._unassigned
        old_counts = self._counts
        old_statuses = self._statuses
        old_totals = self._totals
        allowed_lag = self.allowed_lag
        # Rebuilt each sample: a group or partition gone from the view leaves with it.
        windows: dict[str, dict[tuple[str, int], _Tracked]] = {}
        unassigned: dict[str, dict[tuple[str, int], PartitionLag]] = {}
        counts: dict[str, int] = {}
        lags: list[PartitionLag] = []
        statuses: dict[str, GroupStatus] = {}
        totals: dict[str, int] = {}
        for n, group in enumerate(groups, 1):
            group_id = group.group_id
            owners: dict[tuple[str, int], tuple[str | None, str | None, str | None]] = {}
            for member in group.members:
                for tp in member.assignment:
                    owners[tp] = (member.member_id, member.client_id, member.host)
            parts: dict[tuple[str, int], PartitionStatus] = {}
            total = 0
            was = old_windows.get(group_id, _NONE_TRACKED)
            was_unassigned = old_unassigned.get(group_id, _NONE_UNASSIGNED)
            tracked_now = windows[group_id] = {}
            first = len(lags)
            # Rows built afresh for the group (a kept row is last sample's object).
            fresh = 0
            offsets = group.offsets
            tps = offsets.keys() if not owners else [*offsets, *(tp for tp in owners if tp not in offsets)]
            for tp in tps:
                committed_view = offsets.get(tp)
                log_end = ends.get(tp)
                owner = owners.get(tp, _NO_OWNER)
                if committed_view is None:
                    row = was_unassigned.get(tp)
                    if row is None or row.log_end != log_end or (row.member_id, row.client_id, row.host) != owner:
                        member_id, client_id, host = owner
                        row = PartitionLag(group_id, tp[0], tp[1], None, log_end, None, None,
                                           Status.NOTFOUND, member_id, client_id, host, None, False)
                        fresh += 1
                    unassigned.setdefault(group_id, {})[tp] = row
                    lags.append(row)
                    continue
                tracked = was.get(tp)
                if tracked is None:
                    tracked = _Tracked(PartitionWindow(self.intervals, self.min_distance_ms))
                tracked_now[tp] = tracked
                window = tracked.window
                if log_end is not None:
                    window.add_broker_offset(log_end)
                row = tracked.result
                if tracked.stable and row is not None and self.reuse_results and tracked.log_end == log_end \
                        and tracked.committed == committed_view and tracked.owner == owner:
                    expires = committed_view.expires_at_ms
                    if row.expiring_within_day or expires is None or expires - now_ms > EXPIRING_WITHIN_MS:
                        status = tracked.status
                        assert status is not None
                        parts[tp] = status
                        # Stable: a lag of 0 or less, nothing to add to the total.
                        lags.append(row)
                        continue
                committed = committed_view.offset
                commit_ts = committed_view.commit_timestamp_ms
                if (tracked.offset != committed or tracked.timestamp_ms != commit_ts) \
                        and (log_end is not None or window.broker_offsets):
                    window.add_commit(committed, commit_ts, now_ms, log_end)
                    tracked.offset, tracked.timestamp_ms = committed, commit_ts
                status = window.evaluate(now_ms, allowed_lag)
                parts[tp] = status
                lag = tool_lag(committed, log_end)
                if lag is not None:
                    total += max(lag, 0)
                topic, partition = tp
                lag_s = self._lag_seconds(topic, partition, committed, lag, now_ms)
                expires = committed_view.expires_at_ms
                row = PartitionLag(
                    group_id, topic, partition, committed, log_end, lag, lag_s, status.status,
                    owner[0], owner[1], owner[2], expires,
                    expires is not None and expires - now_ms <= EXPIRING_WITHIN_MS)
                # Kept while the inputs stay: caught up, Burrow's first rule (OK) holds whatever
                # the time, and the lag in seconds is 0 (module docstring).
                stable = tracked.stable = lag is not None and lag <= 0 and status.current_lag <= allowed_lag
                tracked.committed, tracked.log_end, tracked.owner = committed_view, log_end, owner
                # What a kept partition adds to its group's status is its status, current lag and
                # completeness: one shared object per such triple rather than one per partition
                # kept alive (each one more for the cyclic GC to walk at every full collection).
                tracked.status = self._kept_status(status) if stable else None
                tracked.result = row
                fresh += 1
                lags.append(row)
            count = counts[group_id] = len(lags) - first
            old_status = old_statuses.get(group_id)
            if not fresh and old_status is not None and old_counts.get(group_id) == count:
                # Every row kept, none gone (as many as last time): nothing in the group changed.
                # The same status object tells the exposition so.
                statuses[group_id] = old_status
                totals[group_id] = old_totals[group_id]
            else:
                statuses[group_id] = group_status(parts)
                totals[group_id] = total
            if n % _CHUNK == 0:
                yield
        self._windows, self._unassigned, self._counts, self._totals = windows, unassigned, counts, totals
        history = self._history
        for group_id, total in totals.items():
            points = history.get(group_id)
            if points is None:
                points = history[group_id] = deque(maxlen=HISTORY_POINTS)
            points.append((now_ms, total))
        for group_id in [g for g in history if g not in totals]:
            del history[group_id]
        self._lags, self._statuses, self.sampled_at_ms = lags, statuses, now_ms

    def _kept_status(self, status: PartitionStatus) -> PartitionStatus:
        key = (status.status, status.current_lag, status.complete)
        found = self._kept.get(key)
        if found is None:
            found = self._kept[key] = PartitionStatus(status.status, status.current_lag, status.complete, None, None)
        return found

    def _lag_seconds(self, topic: str, partition: int, committed: int, lag: int | None, now_ms: int) -> float | None:
        if lag is not None and lag <= 0:
            return 0.0
        seconds = lag_seconds_from_record(self.view.first_unconsumed_timestamp(topic, partition, committed), now_ms)
        if seconds is not None:
            return seconds
        table = self._tables.get((topic, partition))
        return None if table is None else table.lag_seconds(committed, now_ms)
