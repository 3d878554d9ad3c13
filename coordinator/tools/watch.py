"""``--describe --watch [SECONDS]``: a live table of each group's partitions, lag and state, redrawn every
SECONDS until Ctrl-C (rich's Live display; https://rich.readthedocs.io/en/stable/live.html)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.live import Live
from rich.table import Table

from .describe_views import MISSING, GroupOffsets

__all__ = ["render", "watch"]


def _cell(value: object) -> str:
    return MISSING if value is None else str(value)


def render(groups: Sequence[GroupOffsets], refreshed_at: float) -> Table:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(refreshed_at))
    total = sum(r.lag or 0 for g in groups for r in g.rows)
    table = Table(title=f"consumer group lag at {stamp} (total lag {total})", title_justify="left")
    for name in ("GROUP", "STATE", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                 "CLIENT-ID"):
        table.add_column(name, justify="right" if name in ("PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
                         else "left")
    for g in groups:
        state = "does not exist" if g.state == "Dead" else g.state
        if not g.rows:
            table.add_row(g.group, state, *[MISSING] * 7)
        for r in g.rows:
            table.add_row(g.group, state, r.topic, str(r.partition), _cell(r.current_offset),
                          _cell(r.log_end_offset), _cell(r.lag), r.consumer_id, r.client_id)
    return table


def watch(collect: Callable[[], Sequence[GroupOffsets]], interval_s: float, console: Console,
          refreshes: int | None = None, sleep: Callable[[float], None] = time.sleep) -> int:
    """Collect and redraw every ``interval_s`` until Ctrl-C, or ``refreshes`` times (tests). Returns how
    many tables were drawn."""
    drawn = 0
    try:
        with Live(render(collect(), time.time()), console=console, auto_refresh=False) as live:
            drawn = 1
            while refreshes is None or drawn < refreshes:
                sleep(interval_s)
                live.update(render(collect(), time.time()), refresh=True)
                drawn += 1
    except KeyboardInterrupt:
        pass
    return drawn
