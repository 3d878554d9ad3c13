"""The human report: ``report.html`` (one self-contained file, charts drawn as inline SVG) and
``report.md`` (the same summary as Markdown, for a terminal, a ticket or a diff).

Built from small aggregates the job collects (per group, per generation, per commit of the
groups shown); no plotting library, so the report needs nothing the pipeline does not already
have and opens anywhere, offline. Everything here is plain Python, tested without Spark.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ReportData", "GroupRow", "write_report", "group_lag_series", "render_html", "render_markdown"]

_COLORS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"]
_STATUS_COLORS = {"OK": "#16a34a", "WARN": "#d97706", "STOP": "#dc2626", "STALL": "#dc2626", "REWIND": "#7c3aed",
                  "ERR": "#dc2626"}
#: Groups drawn per line chart; the tables list every group.
MAX_SERIES = 8


#: (group, status, Burrow group status, partitions, total lag, max lag): a row of ``group_status``.
GroupRow = tuple[str, str, str, int, int | None, int | None]


@dataclass
class ReportData:
    data_dir: str
    #: The evaluation time (``--now``), epoch ms.
    generated_at_ms: int
    #: records, offset_commit, group_metadata, tombstones, corrupt, groups, offsets, total_lag,
    #: generations, expired
    totals: dict[str, int]
    #: (group, status, Burrow group status, partitions, total lag, max lag), worst first
    groups: list[GroupRow] = field(default_factory=list)
    #: group -> [(time ms, lag summed over its partitions at that time)]; the job ends each series
    #: with the group's lag at the evaluation time
    lag_series: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: group -> [(window start ms, commits)]
    rate_series: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: (group, generations, joins, leaves), most generations first
    churn: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: (group, topic, partition, status, lag) of every partition that is not OK
    bad_partitions: list[tuple[str, str, int, str, int | None]] = field(default_factory=list)
    #: (group, kind, offsets) of removed or overdue offsets
    expired: list[tuple[str, str, int]] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)


def group_lag_series(points: Iterable[tuple[str, str, int, int, int]]) -> dict[str, list[tuple[int, int]]]:
    """A group's lag over time from its partitions' lag at each commit ``(group, topic,
    partition, time ms, lag)``: at every commit time, the sum over the group's partitions of
    each one's latest known lag (a partition counts from its first commit on)."""
    by_group: dict[str, list[tuple[int, str, int, int]]] = {}
    for group, topic, partition, ts, lag in points:
        by_group.setdefault(group, []).append((ts, topic, partition, lag))
    series: dict[str, list[tuple[int, int]]] = {}
    for group, rows in by_group.items():
        current: dict[tuple[str, int], int] = {}
        out: list[tuple[int, int]] = []
        for ts, topic, partition, lag in sorted(rows):
            current[(topic, partition)] = lag
            total = sum(current.values())
            if out and out[-1][0] == ts:
                out[-1] = (ts, total)
            else:
                out.append((ts, total))
        series[group] = out
    return series


def _time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _short_time(ms: int, span_ms: int) -> str:
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return t.strftime("%H:%M:%S" if span_ms < 86_400_000 else "%m-%d %H:%M")


def _nice_max(value: int) -> int:
    """The axis top: 1, 2 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 1
    step = 1
    while True:
        for m in (1, 2, 5):
            if m * step >= value:
                return m * step
        step *= 10


def _ticks(top: int) -> list[float]:
    """Round tick values from 0 to ``top`` (a ``_nice_max`` value): whole numbers for small
    counts, otherwise steps of 0.2, 0.5 or 1 times the power of ten."""
    if top <= 5:
        return [float(v) for v in range(top + 1)]
    lead = int(str(top)[0])
    intervals = {1: 5, 2: 4, 5: 5}[lead]
    return [top * i / intervals for i in range(intervals + 1)]


def _esc(value: object) -> str:
    return html.escape(str(value))


def _line_chart(title: str, series: dict[str, list[tuple[int, int]]], y_label: str, step: bool = False) -> str:
    w, h = 960, 280
    left, right, top, bottom = 64, 200, 16, 40
    pw, ph = w - left - right, h - top - bottom
    points = [p for s in series.values() for p in s]
    if not points:
        return f"<h2>{_esc(title)}</h2><p class='empty'>No data.</p>"
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    span = max(x1 - x0, 1)
    y_top = _nice_max(max(p[1] for p in points))

    def sx(x: int) -> float:
        return left + (x - x0) / span * pw if x1 > x0 else left + pw / 2

    def sy(y: float) -> float:
        return top + ph - y / y_top * ph

    parts = [f"<h2>{_esc(title)}</h2>",
             f"<svg class='chart' viewBox='0 0 {w} {h}' width='{w}' height='{h}' role='img' aria-label='{_esc(title)}'>"]
    for v in _ticks(y_top):  # horizontal grid and y ticks
        y = sy(v)
        parts.append(f"<line x1='{left}' y1='{y:.1f}' x2='{left + pw}' y2='{y:.1f}' stroke='#e5e7eb'/>")
        label = f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"
        parts.append(f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end' class='tick'>{label}</text>")
    ticks = 5 if x1 > x0 else 1
    for i in range(ticks):  # x ticks
        x = x0 + span * i / max(ticks - 1, 1) if x1 > x0 else x0
        anchor = "start" if i == 0 and ticks > 1 else "end" if i == ticks - 1 and ticks > 1 else "middle"
        parts.append(f"<line x1='{sx(int(x)):.1f}' y1='{top + ph}' x2='{sx(int(x)):.1f}' y2='{top + ph + 4}' stroke='#6b7280'/>")
        parts.append(f"<text x='{sx(int(x)):.1f}' y='{top + ph + 18}' text-anchor='{anchor}' class='tick'>"
                     f"{_short_time(int(x), span)}</text>")
    parts.append(f"<line x1='{left}' y1='{top + ph}' x2='{left + pw}' y2='{top + ph}' stroke='#6b7280'/>")
    parts.append(f"<line x1='{left}' y1='{top}' x2='{left}' y2='{top + ph}' stroke='#6b7280'/>")
    parts.append(f"<text x='14' y='{top + ph / 2:.0f}' class='axis' text-anchor='middle' "
                 f"transform='rotate(-90 14 {top + ph / 2:.0f})'>{_esc(y_label)}</text>")
    parts.append(f"<text x='{left + pw}' y='{h - 4}' class='axis' text-anchor='end'>time (UTC)</text>")
    for i, (name, pts) in enumerate(sorted(series.items())):
        color = _COLORS[i % len(_COLORS)]
        pts = sorted(pts)
        coords: list[str] = []
        for j, (x, y) in enumerate(pts):
            if step and j:
                coords.append(f"{sx(x):.1f},{sy(pts[j - 1][1]):.1f}")
            coords.append(f"{sx(x):.1f},{sy(y):.1f}")
        parts.append(f"<polyline fill='none' stroke='{color}' stroke-width='2' points='{' '.join(coords)}'/>")
        if len(pts) <= 40:
            parts += [f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='2.5' fill='{color}'/>" for x, y in pts]
        ly = top + 14 + 18 * i
        parts.append(f"<rect x='{left + pw + 16}' y='{ly - 9}' width='12' height='12' fill='{color}'/>")
        parts.append(f"<text x='{left + pw + 34}' y='{ly + 1}' class='legend'>{_esc(name)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _churn_chart(title: str, churn: list[tuple[str, int, int, int]]) -> str:
    if not churn:
        return f"<h2>{_esc(title)}</h2><p class='empty'>No group generations recorded.</p>"
    w, row, label_w = 960, 26, 200
    h = row * len(churn) + 34
    top_value = max(max(max(n, j, lv) for _, n, j, lv in churn), 1)
    bar_w = w - label_w - 140
    parts = [f"<h2>{_esc(title)}</h2>",
             f"<svg class='chart' viewBox='0 0 {w} {h}' width='{w}' height='{h}' role='img' aria-label='{_esc(title)}'>"]
    for i, (name, gens, joins, leaves) in enumerate(churn):
        y = 8 + i * row
        parts.append(f"<text x='{label_w - 8}' y='{y + 14}' text-anchor='end' class='legend'>{_esc(name)}</text>")
        for k, (value, color) in enumerate(((gens, "#2563eb"), (joins, "#16a34a"), (leaves, "#dc2626"))):
            bw = value / top_value * bar_w
            parts.append(f"<rect x='{label_w}' y='{y + k * 6}' width='{bw:.1f}' height='6' fill='{color}'/>")
        parts.append(f"<text x='{label_w + max(gens, joins, leaves) / top_value * bar_w + 6:.1f}' y='{y + 12}' class='tick'>"
                     f"{gens} gen, +{joins} / -{leaves}</text>")
    ly = h - 8
    for k, (label, color) in enumerate((("generations", "#2563eb"), ("joins", "#16a34a"), ("leaves", "#dc2626"))):
        parts.append(f"<rect x='{label_w + k * 120}' y='{ly - 9}' width='12' height='12' fill='{color}'/>")
        parts.append(f"<text x='{label_w + 18 + k * 120}' y='{ly + 1}' class='legend'>{label}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _sparklines(title: str, series: dict[str, list[tuple[int, int]]], unit: str) -> str:
    """Small multiples: one row per group on a shared time axis, each scaled to its own peak,
    so equal rates do not hide each other as lines on one chart would."""
    points = [p for s in series.values() for p in s]
    if not points:
        return f"<h2>{_esc(title)}</h2><p class='empty'>No data.</p>"
    w, row, label_w, stats_w = 960, 34, 200, 170
    pw = w - label_w - stats_w
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    span = max(x1 - x0, 1)
    h = row * len(series) + 26
    parts = [f"<h2>{_esc(title)}</h2>",
             f"<svg class='chart' viewBox='0 0 {w} {h}' width='{w}' height='{h}' role='img' aria-label='{_esc(title)}'>"]
    for i, (name, pts) in enumerate(sorted(series.items(), key=lambda kv: (-sum(c for _, c in kv[1]), kv[0]))):
        color = _COLORS[i % len(_COLORS)]
        top = 6 + i * row
        base = top + row - 10
        mid = (top + base) / 2 + 4
        peak = max(max(c for _, c in pts), 1)

        def sx(x: int) -> float:
            return label_w + (x - x0) / span * pw if x1 > x0 else label_w + pw / 2

        xy = [(sx(x), base - c / peak * (base - top)) for x, c in sorted(pts)]
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
        parts.append(f"<rect x='{label_w}' y='{top}' width='{pw}' height='{base - top}' fill='#f9fafb'/>")
        parts.append(f"<polygon fill='{color}' fill-opacity='0.18' stroke='none' "
                     f"points='{xy[0][0]:.1f},{base} {coords} {xy[-1][0]:.1f},{base}'/>")
        parts.append(f"<polyline fill='none' stroke='{color}' stroke-width='1.5' points='{coords}'/>")
        if len(pts) == 1:
            parts.append(f"<circle cx='{xy[0][0]:.1f}' cy='{xy[0][1]:.1f}' r='2.5' fill='{color}'/>")
        parts.append(f"<text x='{label_w - 8}' y='{mid:.1f}' text-anchor='end' class='legend'>{_esc(name)}</text>")
        total = sum(c for _, c in pts)
        parts.append(f"<text x='{label_w + pw + 10}' y='{mid:.1f}' class='tick'>peak {peak:,} {unit}, "
                     f"{total:,} in all</text>")
    parts.append(f"<text x='{label_w}' y='{h - 4}' class='tick'>{_time(x0)}</text>")
    parts.append(f"<text x='{label_w + pw}' y='{h - 4}' text-anchor='end' class='tick'>{_time(x1)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _num(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _selected_lag_series(data: ReportData) -> dict[str, list[tuple[int, int]]]:
    top = sorted(data.groups, key=lambda g: (-(g[4] or 0), str(g[0])))
    names = [g[0] for g in top if g[0] in data.lag_series][:MAX_SERIES]
    return {g: data.lag_series[g] for g in names}


def _selected_rate_series(data: ReportData) -> dict[str, list[tuple[int, int]]]:
    names = sorted(data.rate_series, key=lambda g: (-sum(c for _, c in data.rate_series[g]), g))[:MAX_SERIES]
    return {g: data.rate_series[g] for g in names}


def render_markdown(data: ReportData) -> str:
    t = data.totals
    not_ok = [g for g in data.groups if g[1] != "OK"]
    lines = [
        "# Consumer groups report",
        "",
        f"Data directory `{data.data_dir}`, evaluated at {_time(data.generated_at_ms)}.",
        "",
        f"- Records read: {t.get('records', 0):,} ({t.get('offset_commit', 0):,} offset commits, "
        f"{t.get('group_metadata', 0):,} group metadata, {t.get('consumer_group', 0):,} consumer-group (KIP-848), "
        f"{t.get('tombstones', 0):,} tombstones, "
        f"{t.get('corrupt', 0):,} corrupt batches)",
        f"- Groups with committed offsets: {t.get('groups', 0):,}; committed partitions: {t.get('offsets', 0):,}",
        f"- Total lag: {t.get('total_lag', 0):,} records; groups not OK: {len(not_ok)}",
        f"- Generations recorded: {t.get('generations', 0):,}; consumer group epochs (KIP-848): "
        f"{t.get('group_epochs', 0):,}; expired or deleted offsets: {t.get('expired', 0):,}",
        "",
        "## Groups, worst first",
        "",
        "| group | status | Burrow group status | partitions | total lag | max lag |",
        "|---|---|---|---:|---:|---:|",
    ]
    lines += [f"| {g} | {s} | {b} | {p} | {_num(tl)} | {_num(ml)} |" for g, s, b, p, tl, ml in data.groups]
    if data.bad_partitions:
        lines += ["", "## Partitions not OK", "", "| group | topic | partition | status | lag |", "|---|---|---:|---|---:|"]
        lines += [f"| {g} | {tp} | {p} | {s} | {_num(lag)} |" for g, tp, p, s, lag in data.bad_partitions]
    lines += ["", "## Generation churn", "", "| group | generations | joins | leaves |", "|---|---:|---:|---:|"]
    lines += [f"| {g} | {n} | {j} | {lv} |" for g, n, j, lv in data.churn]
    if data.expired:
        lines += ["", "## Expired and deleted offsets", "", "| group | kind | offsets |", "|---|---|---:|"]
        lines += [f"| {g} | {k} | {n:,} |" for g, k, n in data.expired]
    if data.corrupt:
        lines += ["", "## Corrupt batches", ""] + [f"- {c}" for c in data.corrupt]
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;color:#111827;max-width:1000px;padding:0 16px}
h1{margin-bottom:4px}h2{font-size:18px;margin:28px 0 6px}.sub{color:#4b5563;margin-top:0}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}.card{border:1px solid #e5e7eb;border-radius:8px;padding:10px 16px;min-width:120px}
.card.bad{border-color:#fca5a5;background:#fef2f2}.num{font-size:26px;font-weight:600}.label{color:#4b5563;font-size:13px}
table{border-collapse:collapse;margin-top:6px;font-size:14px}td,th{border-bottom:1px solid #e5e7eb;padding:4px 12px;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f9fafb}
.badge{color:white;border-radius:4px;padding:1px 7px;font-size:12px;font-weight:600}.empty{color:#6b7280}
svg.chart text{font-family:inherit}svg .tick{font-size:11px;fill:#4b5563}svg .axis{font-size:12px;fill:#374151}svg .legend{font-size:12px;fill:#111827}
.corrupt{color:#b91c1c}"""


def _badge(status: str) -> str:
    return f"<span class='badge' style='background:{_STATUS_COLORS.get(status, '#6b7280')}'>{_esc(status)}</span>"


def render_html(data: ReportData) -> str:
    t = data.totals
    not_ok = [g for g in data.groups if g[1] != "OK"]
    cards = "".join(
        f"<div class='card{' bad' if bad else ''}'><div class='num'>{v:,}</div><div class='label'>{_esc(k)}</div></div>"
        for k, v, bad in (("groups", t.get("groups", 0), False), ("committed partitions", t.get("offsets", 0), False),
                          ("total lag", t.get("total_lag", 0), False), ("groups not OK", len(not_ok), bool(not_ok)),
                          ("generations", t.get("generations", 0), False),
                          ("expired or deleted offsets", t.get("expired", 0), False),
                          ("records read", t.get("records", 0), False),
                          ("corrupt batches", t.get("corrupt", 0), bool(t.get("corrupt", 0)))))
    group_rows = "".join(
        f"<tr><td>{_esc(g)}</td><td>{_badge(s)}</td><td>{_badge(b)}</td><td class='n'>{p}</td>"
        f"<td class='n'>{_num(tl)}</td><td class='n'>{_num(ml)}</td></tr>" for g, s, b, p, tl, ml in data.groups)
    sections = [
        _line_chart("Lag over time (records behind, summed over each group's partitions)", _selected_lag_series(data),
                    "lag (records)", step=True),
        _sparklines("Commit rate (offset commit records per window, each group to its own scale)",
                    _selected_rate_series(data), "/ window"),
        _churn_chart("Generation churn (generations, joins and leaves per group)", data.churn[:20]),
        "<h2>Groups, worst first</h2><table><tr><th>group</th><th>status</th><th>Burrow</th><th class='n'>partitions</th>"
        f"<th class='n'>total lag</th><th class='n'>max lag</th></tr>{group_rows}</table>",
    ]
    if data.bad_partitions:
        rows = "".join(f"<tr><td>{_esc(g)}</td><td>{_esc(tp)}</td><td class='n'>{p}</td><td>{_badge(s)}</td>"
                       f"<td class='n'>{_num(lag)}</td></tr>" for g, tp, p, s, lag in data.bad_partitions)
        sections.append("<h2>Partitions not OK</h2><table><tr><th>group</th><th>topic</th><th class='n'>partition</th>"
                        f"<th>status</th><th class='n'>lag</th></tr>{rows}</table>")
    if data.expired:
        rows = "".join(f"<tr><td>{_esc(g)}</td><td>{_esc(k)}</td><td class='n'>{n:,}</td></tr>" for g, k, n in data.expired)
        sections.append("<h2>Expired and deleted offsets</h2><table><tr><th>group</th><th>kind</th>"
                        f"<th class='n'>offsets</th></tr>{rows}</table>")
    if data.corrupt:
        sections.append("<h2>Corrupt batches</h2>" + "".join(f"<p class='corrupt'>{_esc(c)}</p>" for c in data.corrupt))
    body = "\n".join(sections)
    return (f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'><title>Consumer groups report</title>"
            f"<style>{_CSS}</style></head><body>\n<h1>Consumer groups</h1>"
            f"<p class='sub'>Data directory <code>{_esc(data.data_dir)}</code>, evaluated at "
            f"{_time(data.generated_at_ms)}.</p>\n<div class='cards'>{cards}</div>\n{body}\n</body></html>\n")


def write_report(data: ReportData, out: Path) -> tuple[Path, Path]:
    """Write ``report.html`` and ``report.md`` into ``out`` (a local directory)."""
    out.mkdir(parents=True, exist_ok=True)
    md_path = out / "report.md"
    md_path.write_text(render_markdown(data))
    html_path = out / "report.html"
    html_path.write_text(render_html(data))
    return html_path, md_path
