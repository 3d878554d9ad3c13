"""``groups --describe --watch``: LAG-SECONDS and Burrow's status per partition and per group, evaluated
over the refreshes (coordinator/tools/watch.py's BurrowWindows), against a real server holding records
with known timestamps (tests/coordinator/tools/time_lag_records.py) and with windows fed by hand."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import pytest

from coordinator.groups_cli import run
from coordinator.lag.burrow import Status
from coordinator.tools.describe_views import GroupOffsets, OffsetRow
from coordinator.tools.watch import COLUMNS, BurrowWindows
from tests.conftest import ServerProcess
from tests.coordinator.tools.time_lag_records import TIMESTAMPS, stamped_server

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with stamped_server(tmp_path_factory.mktemp("watch-burrow") / "data") as s:
        yield s


def _tables(text: str) -> list[dict[tuple[str, str], list[str]]]:
    """Each drawn table's rows as cells by (group, partition)."""
    tables = []
    for chunk in text.split("consumer group lag at ")[1:]:
        rows: dict[tuple[str, str], list[str]] = {}
        for line in chunk.splitlines():
            cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
            if len(cells) == len(COLUMNS) and cells[0].startswith("lag-"):
                rows[(cells[0], cells[COLUMNS.index("PARTITION")])] = cells
        tables.append(rows)
    return tables


def _watch(server: ServerProcess, refreshes: int) -> dict[tuple[str, str], list[str]]:
    """The table drawn last (to a non-terminal, rich's Live prints only that one)."""
    out, err = io.StringIO(), io.StringIO()
    assert run(["--bootstrap-server", server.bootstrap, "--describe", "--group", "lag-a", "--watch", "0.05"],
               out, err, watch_refreshes=refreshes) == 0, (out.getvalue(), err.getvalue())
    (table,) = _tables(out.getvalue())
    return table


def test_watch_shows_lag_seconds_and_burrow_status_after_refreshes(server: ServerProcess) -> None:
    col = COLUMNS.index
    before = time.time()
    first = _watch(server, 1)
    after = time.time()
    seconds = float(first[("lag-a", "0")][col("LAG-SECONDS")])
    # One decimal shown: within 0.05 s of the record's true age at some moment of the run.
    assert before - TIMESTAMPS[0][2] / 1000 - 0.05 <= seconds <= after - TIMESTAMPS[0][2] / 1000 + 0.05
    assert first[("lag-a", "1")][col("LAG-SECONDS")] == "0.0"
    # After one refresh the window holds one commit with lag, not moving: STALL (the group: ERR).
    assert first[("lag-a", "0")][col("STATUS")] == "STALL"
    assert first[("lag-a", "1")][col("STATUS")] == "OK"  # caught up
    assert {r[col("GROUP-STATUS")] for r in first.values()} == {"ERR"}
    # Later refreshes: the committed offset has not moved since the first, so the consumer looks
    # stopped (STOP); the caught-up partition stays OK.
    last = _watch(server, 3)
    assert last[("lag-a", "0")][col("STATUS")] == "STOP"
    assert last[("lag-a", "2")][col("STATUS")] == "STOP"
    assert last[("lag-a", "1")][col("STATUS")] == "OK"
    assert {r[col("GROUP-STATUS")] for r in last.values()} == {"ERR"}


def _refresh(windows: BurrowWindows, committed: int, log_end: int, now_ms: int) -> tuple[Status, Status]:
    row = OffsetRow("g", "t", 0, None, committed, log_end, log_end - committed, "m", "/h", "c")
    parts, groups = windows.update([GroupOffsets("g", "Stable", None, [row])], now_ms)
    return parts[("g", "t", 0)].status, groups["g"].status


def test_windows_warn_on_growing_lag_and_forgive_a_caught_up_commit() -> None:
    windows = BurrowWindows(intervals=4)
    # The consumer moves on every refresh but the lag keeps growing: WARN once two commits are in.
    assert _refresh(windows, 10, 20, 1000) == (Status.STALL, Status.ERR)
    assert _refresh(windows, 12, 25, 2000) == (Status.WARN, Status.WARN)
    assert _refresh(windows, 14, 30, 3000) == (Status.WARN, Status.WARN)
    # It catches up: OK, and a commit in the window with no lag keeps it OK afterwards.
    assert _refresh(windows, 30, 30, 4000) == (Status.OK, Status.OK)
    assert _refresh(windows, 31, 35, 5000) == (Status.OK, Status.OK)


def test_windows_rewind_and_forget_partitions_gone() -> None:
    windows = BurrowWindows()
    _refresh(windows, 50, 60, 1000)
    _refresh(windows, 55, 60, 2000)
    assert _refresh(windows, 40, 60, 3000) == (Status.REWIND, Status.ERR)
    # A refresh without the partition (offsets deleted) drops its window: it starts over.
    assert windows.update([GroupOffsets("g", "Empty", None, [])], 4000) == ({}, {})
    assert _refresh(windows, 40, 40, 5000) == (Status.OK, Status.OK)
