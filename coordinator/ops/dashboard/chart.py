"""The lag-over-time chart: an SVG drawn here from ``LagMonitor.history`` (no chart library, no
script), so the page works offline and the chart is in the HTML a test reads."""

from __future__ import annotations

import time
from collections.abc import Sequence

from .markup import Markup, el, join

__all__ = ["lag_chart"]

WIDTH, HEIGHT = 720, 220
#: Room for the axis labels: left (lag values), bottom (times), top and right margins.
LEFT, BOTTOM, TOP, RIGHT = 64, 28, 12, 12


def _nice_ceiling(value: float) -> int:
    """The smallest of 1, 2, 5 × 10ⁿ at or above ``value`` (the y axis' top), at least 1."""
    if value <= 1:
        return 1
    step = 1
    while True:
        for m in (1, 2, 5):
            if m * step >= value:
                return m * step
        step *= 10


def _clock(time_ms: int) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(time_ms / 1000))


def lag_chart(points: Sequence[tuple[int, int]], *, width: int = WIDTH, height: int = HEIGHT) -> Markup:
    """Total lag (offsets) of a group against time (UTC); ``points`` are (time_ms, total_lag)."""
    points = sorted(points)
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM
    frame = [el("rect", x=LEFT, y=TOP, width=plot_w, height=plot_h, class_="chart-frame")]
    if not points:
        frame.append(el("text", "no samples yet", x=LEFT + plot_w // 2, y=TOP + plot_h // 2,
                        text_anchor="middle", class_="chart-empty"))
        return _svg(frame, width, height, "Lag over time: no samples yet")
    t0, t1 = points[0][0], points[-1][0]
    top = _nice_ceiling(max(lag for _, lag in points))
    span = max(t1 - t0, 1)

    def x(t: int) -> float:
        return LEFT + (t - t0) / span * plot_w if t1 > t0 else LEFT + plot_w / 2

    def y(lag: int) -> float:
        return TOP + plot_h - lag / top * plot_h

    parts = frame
    for i in range(5):  # horizontal grid lines with their lag values
        value = top * i / 4
        gy = TOP + plot_h - i / 4 * plot_h
        parts.append(el("line", x1=LEFT, x2=LEFT + plot_w, y1=f"{gy:.1f}", y2=f"{gy:.1f}", class_="chart-grid"))
        label = f"{value:g}"
        parts.append(el("text", label, x=LEFT - 6, y=f"{gy + 4:.1f}", text_anchor="end", class_="chart-label"))
    parts.append(el("text", _clock(t0) + " UTC", x=LEFT, y=height - 8, class_="chart-label"))
    if t1 > t0:
        parts.append(el("text", _clock(t1), x=LEFT + plot_w, y=height - 8, text_anchor="end", class_="chart-label"))
    coords = " ".join(f"{x(t):.1f},{y(lag):.1f}" for t, lag in points)
    parts.append(el("polyline", points=coords, class_="chart-line"))
    for t, lag in points:
        parts.append(el("circle", el("title", f"{_clock(t)} UTC: lag {lag}"), cx=f"{x(t):.1f}", cy=f"{y(lag):.1f}",
                        r=2.5, class_="chart-point"))
    last_t, last_lag = points[-1]
    return _svg(parts, width, height, f"Lag over time: {len(points)} samples, latest {last_lag} at {_clock(last_t)} UTC")


def _svg(parts: list[Markup], width: int, height: int, label: str) -> Markup:
    return el("svg", el("title", label), join(parts), xmlns="http://www.w3.org/2000/svg", viewBox=f"0 0 {width} {height}",
              width=width, height=height, role="img", aria_label=label, class_="lag-chart")
