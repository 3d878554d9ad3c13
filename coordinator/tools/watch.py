"""``--describe --watch [SECONDS]``: a live table of each group's partitions, lag in offsets and in
time, state and Burrow status, redrawn every SECONDS until Ctrl-C (rich's Live display;
https://rich.readthedocs.io/en/stable/live.html).

The Burrow status (``coordinator/lag/burrow.py``, LinkedIn Burrow's rules) is evaluated over the
refreshes: each refresh feeds every committed partition's window with the log end offset and, when
the committed offset moved (or on the first refresh), a commit stamped with the refresh time. Over
the wire the tool sees committed offsets, not commits, so a consumer that re-commits the same
offset looks like one that stopped committing (STOP rather than STALL), and a window needs several
refreshes before WARN or REWIND can show.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ..lag.burrow import GroupStatus, PartitionStatus, PartitionWindow, group_status
from .describe_views import MISSING, GroupOffsets

__all__ = ["BurrowWindows", "render", "watch"]

RowKey = tuple[str, str, int]  # (group, topic, partition)


class BurrowWindows:
    """One Burrow window per (group, topic, partition) seen, fed once per refresh."""

    def __init__(self, intervals: int = 10) -> None:
        self.intervals = intervals
        self._windows: dict[RowKey, PartitionWindow] = {}

    def update(self, groups: Sequence[GroupOffsets], now_ms: int
               ) -> tuple[dict[RowKey, PartitionStatus], dict[str, GroupStatus]]:
        parts: dict[RowKey, PartitionStatus] = {}
        statuses: dict[str, GroupStatus] = {}
        seen: set[RowKey] = set()
        for g in groups:
            per_group: dict[tuple[str, int], PartitionStatus] = {}
            for r in g.rows:
                if r.current_offset is None or r.log_end_offset is None:
                    continue
                key = (g.group, r.topic, r.partition)
                seen.add(key)
                window = self._windows.get(key)
                if window is None:
                    window = self._windows[key] = PartitionWindow(self.intervals)
                window.add_broker_offset(r.log_end_offset)
                entries = window.entries
                if not entries or entries[-1].offset != r.current_offset:
                    window.add_commit(r.current_offset, now_ms, now_ms, r.log_end_offset)
                parts[key] = per_group[(r.topic, r.partition)] = window.evaluate(now_ms)
            if per_group:
                statuses[g.group] = group_status(per_group)
        for key in [k for k in self._windows if k not in seen]:
            del self._windows[key]  # offsets deleted or the group gone: start over if it comes back
        return parts, statuses


def _cell(value: object) -> str:
    return MISSING if value is None else str(value)


def _seconds(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1f}"


COLUMNS = ("GROUP", "STATE", "GROUP-STATUS", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
           "LAG-SECONDS", "STATUS", "CONSUMER-ID", "CLIENT-ID")
_RIGHT = ("PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LAG-SECONDS")


def render(groups: Sequence[GroupOffsets], refreshed_at: float,
           lag_seconds: Mapping[RowKey, float | None] | None = None,
           parts: Mapping[RowKey, PartitionStatus] | None = None,
           statuses: Mapping[str, GroupStatus] | None = None) -> Table:
    lag_seconds, parts, statuses = lag_seconds or {}, parts or {}, statuses or {}
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(refreshed_at))
    total = sum(r.lag or 0 for g in groups for r in g.rows)
    table = Table(title=f"consumer group lag at {stamp} (total lag {total})", title_justify="left")
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in _RIGHT else "left")
    for g in groups:
        state = "does not exist" if g.state == "Dead" else g.state
        group_cell = statuses[g.group].status.name if g.group in statuses else MISSING
        if not g.rows:
            table.add_row(g.group, state, group_cell, *[MISSING] * (len(COLUMNS) - 3))
        for r in g.rows:
            key = (g.group, r.topic, r.partition)
            part = parts.get(key)
            table.add_row(g.group, state, group_cell, r.topic, str(r.partition), _cell(r.current_offset),
                          _cell(r.log_end_offset), _cell(r.lag), _seconds(lag_seconds.get(key)),
                          MISSING if part is None else part.status.name, r.consumer_id, r.client_id)
    return table


Collect = Callable[[], tuple[Sequence[GroupOffsets], Mapping[RowKey, float | None]]]


def watch(collect: Callable[[], Sequence[GroupOffsets]] | Collect, interval_s: float, console: Console,
          refreshes: int | None = None, sleep: Callable[[float], None] = time.sleep,
          windows: BurrowWindows | None = None) -> int:
    """Collect and redraw every ``interval_s`` until Ctrl-C, or ``refreshes`` times (tests). ``collect``
    returns the groups, or (groups, lag seconds by row). Returns how many tables were drawn."""
    windows = BurrowWindows() if windows is None else windows

    def table() -> Table:
        got = collect()
        groups, seconds = got if isinstance(got, tuple) else (got, {})
        now = time.time()
        parts, statuses = windows.update(groups, int(now * 1000))
        return render(groups, now, seconds, parts, statuses)

    drawn = 0
    try:
        with Live(table(), console=console, auto_refresh=False) as live:
            drawn = 1
            while refreshes is None or drawn < refreshes:
                sleep(interval_s)
                live.update(table(), refresh=True)
                drawn += 1
    except KeyboardInterrupt:
        pass
    return drawn
