"""The report on hand-made inputs: plain Python, no Spark session."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline import report as R


def _data() -> R.ReportData:
    return R.ReportData(
        data_dir="/data",
        generated_at_ms=1_700_000_060_000,
        totals={"records": 40, "offset_commit": 30, "group_metadata": 10, "tombstones": 4, "corrupt": 0,
                "groups": 2, "offsets": 5, "total_lag": 1234, "generations": 6, "expired": 3},
        groups=[("orders<&>", "STOP", "ERR", 2, 1200, 1000), ("billing", "OK", "OK", 3, 34, 20)],
        lag_series={"orders<&>": [(1_700_000_000_000, 0), (1_700_000_060_000, 1200)],
                    "billing": [(1_700_000_000_000, 34)]},
        rate_series={"billing": [(1_700_000_000_000, 6)], "orders<&>": [(1_700_000_000_000, 2)]},
        churn=[("billing", 4, 3, 2), ("orders<&>", 2, 1, 0)],
        bad_partitions=[("orders<&>", "t", 0, "STOP", 1000), ("orders<&>", "t", 1, "STOP", 200)],
        expired=[("gone", "removed with group", 3)],
    )


def test_group_lag_series_carries_each_partitions_last_lag() -> None:
    points = [("g", "t", 0, 100, 5), ("g", "t", 1, 100, 7), ("g", "t", 0, 200, 1), ("g", "t", 1, 300, 0),
              ("h", "t", 0, 50, 9)]
    assert R.group_lag_series(points) == {"g": [(100, 12), (200, 8), (300, 1)], "h": [(50, 9)]}


def test_nice_axis_tops() -> None:
    assert [R._nice_max(v) for v in (0, 1, 3, 10, 11, 1234, 5000)] == [1, 1, 5, 10, 20, 2000, 5000]
    assert R._ticks(2) == [0, 1, 2]
    assert R._ticks(20) == [0, 5, 10, 15, 20]
    assert R._ticks(5000) == [0, 1000, 2000, 3000, 4000, 5000]
    assert R._ticks(100) == [0, 20, 40, 60, 80, 100]


def test_markdown_summary() -> None:
    md = R.render_markdown(_data())
    assert md.startswith("# Consumer groups report\n\nData directory `/data`, evaluated at 2023-11-14 22:14:20 UTC.\n")
    assert "- Total lag: 1,234 records; groups not OK: 1\n" in md
    assert "| orders<&> | STOP | ERR | 2 | 1,200 | 1,000 |\n| billing | OK | OK | 3 | 34 | 20 |\n" in md
    assert "## Partitions not OK" in md and "| orders<&> | t | 1 | STOP | 200 |" in md
    assert "| billing | 4 | 3 | 2 |\n| orders<&> | 2 | 1 | 0 |" in md
    assert "| gone | removed with group | 3 |" in md
    assert "Corrupt" not in md


def test_html_is_self_contained_escaped_and_charted() -> None:
    page = R.render_html(_data())
    assert page.count("<svg") == 3
    assert not re.search(r"(src|href)=|https?://|<script", page)  # nothing to fetch, nothing to run
    assert "orders<&>" not in page and "orders&lt;&amp;&gt;" in page
    # Lag chart: plot area x 64..760, y 16..240, axis top 2,000 (1,200 rounded up). The orders
    # series is drawn as steps: (t0, 0) -> (t1, 0) -> (t1, 1200).
    assert "points='64.0,240.0 760.0,240.0 760.0,105.6'" in page
    assert ">2,000</text>" in page
    assert page.index("Lag over time") < page.index("Commit rate") < page.index("Generation churn")
    assert "4 gen, +3 / -2" in page
    # Commit rate: one sparkline per group, busiest first, each to its own peak.
    rate = page[page.index("Commit rate"):page.index("Generation churn")]
    assert rate.index(">billing</text>") < rate.index(">orders&lt;&amp;&gt;</text>")
    assert "peak 6 / window, 6 in all" in rate and "peak 2 / window, 2 in all" in rate
    assert "background:#dc2626'>STOP</span>" in page


def test_empty_report_still_renders(tmp_path: Path) -> None:
    data = R.ReportData("/d", 0, {})
    html_path, md_path = R.write_report(data, tmp_path / "new")
    page = html_path.read_text()
    assert page.count("No data.") == 2 and "No group generations recorded." in page and "<svg" not in page
    assert "- Groups with committed offsets: 0; committed partitions: 0\n" in md_path.read_text()
