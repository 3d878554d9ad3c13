"""The server's Burrow window (``PartitionWindow`` fed commit by commit) and the pipeline's
(``pipeline.transforms.evaluate_window`` over the last commits read from the log) give one status
for the same history. The Spark side of the pipeline is checked in tests/pipeline/test_transforms.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.lag.burrow import PartitionWindow
from pipeline import transforms as T

#: A commit: (ms since the previous one, offset, the log end then).
COMMITS = st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 60), st.integers(0, 80)), min_size=1, max_size=14)


@given(COMMITS, st.integers(-5, 100), st.integers(0, 80_000), st.integers(1, 10))
def test_server_window_and_pipeline_agree(commits: list[tuple[int, int, int]], log_end_now: int, later: int,
                                          intervals: int) -> None:
    window = PartitionWindow(intervals=intervals)
    rows, ts = [], 0
    for gap, offset, end_then in commits:
        ts += gap
        window.add_commit(offset, ts, ts, broker_offset=end_then)
        rows.append({"ts": ts, "offset": offset, "lag": max(end_then - offset, 0)})
    window.add_broker_offset(log_end_now)
    now = ts + later
    lag_now = log_end_now - commits[-1][1]  # consumer_lag: may be negative, the pipeline floors it
    assert window.evaluate(now).status.name == T.evaluate_window(rows[-intervals:], lag_now, now, intervals)
