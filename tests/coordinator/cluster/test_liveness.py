"""The leadership lease (cluster/liveness.py): a stall of the event loop longer than half the
ZooKeeper session suspends it at once — even before any timer runs after the stall — and a
round trip through the session gives it back. A real ZooKeeper; the stall is a real blocked loop."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from coordinator.cluster.liveness import StallGuard
from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.cluster.zookeeper import ZooKeeper


@pytest.mark.asyncio
async def test_a_stall_longer_than_half_the_session_suspends_the_lease_until_zookeeper_answers(
        zookeeper: LocalZooKeeper, caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="groupcoord")
    zk = ZooKeeper(zookeeper.connect, session_timeout_ms=2000, connection_timeout_ms=10000)
    await asyncio.to_thread(zk.start)
    guard = StallGuard(zk, session_timeout_ms=2000)
    guard.start()
    try:
        await asyncio.sleep(0.3)
        assert guard.fresh()
        time.sleep(0.6)  # shorter than half the session: harmless
        assert guard.fresh()
        await asyncio.sleep(0.3)
        time.sleep(1.2)  # a stop longer than half the session (the loop is blocked, as under SIGSTOP)
        assert not guard.fresh()  # at once: no tick has run since
        await asyncio.sleep(0)
        assert not guard.fresh()
        for _ in range(100):
            if guard.fresh():
                break
            await asyncio.sleep(0.05)
        assert guard.fresh(), "the lease did not come back after ZooKeeper answered"
        messages = [r.getMessage() for r in caplog.records]
        assert "event loop stalled; leadership suspended until ZooKeeper confirms the session" in messages
        assert "session confirmed after the stall; leadership resumed" in messages
    finally:
        await guard.stop()
        zk.close()
