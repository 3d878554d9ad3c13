"""Closing-connection lines are rate-limited per client host (issue 22): a client that opens
connection after connection with bad frames gets a few lines a second and one summary."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from coordinator.server.close_log import LINES_PER_WINDOW, CloseLog, host_of


def test_host_of_ignores_the_port() -> None:
    assert host_of("10.0.0.1:5555") == "10.0.0.1"
    assert host_of("[::1]:5555") == "::1"


@pytest.mark.asyncio
async def test_a_few_lines_per_host_then_one_summary(caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="t")
    now = [100.0]
    close_log = CloseLog(logging.getLogger("t"), clock=lambda: now[0])
    for port in range(1000):
        close_log.closing(f"10.0.0.1:{port}", "malformed request")
    close_log.closing("10.0.0.2:1", "malformed request")  # another host has its own budget
    lines = [r for r in caplog.records if r.getMessage() == "closing connection"]
    assert len(lines) == LINES_PER_WINDOW + 1
    now[0] += 1.5
    close_log.closing("10.0.0.1:2000", "malformed request")  # a new window: the summary first
    summary = [r for r in caplog.records if r.getMessage().startswith("more connections closed")]
    assert len(summary) == 1 and summary[0].closed == 1000 - LINES_PER_WINDOW
    assert summary[0].host == "10.0.0.1"


@pytest.mark.asyncio
async def test_the_summary_comes_even_if_the_host_goes_quiet(caplog: Any, monkeypatch: Any) -> None:
    import coordinator.server.close_log as module

    monkeypatch.setattr(module, "WINDOW_S", 0.05)
    caplog.set_level(logging.WARNING, logger="t")
    close_log = CloseLog(logging.getLogger("t"))
    for port in range(20):
        close_log.closing(f"10.0.0.9:{port}", "bad")
    await asyncio.sleep(0.15)
    summary = [r for r in caplog.records if r.getMessage().startswith("more connections closed")]
    assert len(summary) == 1 and summary[0].closed == 20 - LINES_PER_WINDOW
