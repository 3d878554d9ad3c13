"""Lag in offsets: kafka-consumer-groups' LAG column against kafka-lag-exporter's gauge."""

from __future__ import annotations

import pytest

from coordinator.lag.offsets import exporter_lag, tool_lag


@pytest.mark.parametrize(("committed", "log_end", "tool", "exporter"), [
    (5, 9, 4, 4),
    (9, 9, 0, 0),
    (12, 9, -3, 0),        # committed past the log end: the tool shows it, the exporter floors it
    (None, 9, None, None),  # no commit: '-' in the tool, NaN in the exporter
    (-1, 9, None, None),    # OffsetFetch's -1 is no commit as well
    (5, None, None, None),  # log end unknown (no leader)
    (0, 0, 0, 0),
])
def test_tool_and_exporter_lag(committed: int | None, log_end: int | None, tool: int | None,
                               exporter: int | None) -> None:
    assert tool_lag(committed, log_end) == tool
    assert exporter_lag(committed, log_end) == exporter
