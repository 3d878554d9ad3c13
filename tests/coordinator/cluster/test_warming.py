"""Warming marks on a real ZooKeeper (cluster/warming.py): what a node publishes about its
replicas still catching up reaches every node's view, goes when the replica is warm, and goes
with the node's session when it dies — so a dead node never holds a preference against itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coordinator.cluster.view import ClusterView
from coordinator.cluster.warming import WarmingMarks
from coordinator.cluster.zk_watcher import ZkWatcher
from coordinator.cluster.znodes import WARMING_REPLICAS
from coordinator.cluster.zookeeper import ZooKeeper
from tests.coordinator.cluster.conftest import chroot_for

pytestmark = pytest.mark.asyncio


async def _until(condition: Any, what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.02)


async def test_marks_reach_the_view_leave_when_warm_and_die_with_the_session(zookeeper, zk_client,  # type: ignore[no-untyped-def]
                                                                             request: pytest.FixtureRequest) -> None:
    connect = zookeeper.connect + chroot_for(request)
    watching = ZooKeeper(connect, session_timeout_ms=2000, connection_timeout_ms=10000)
    marking = ZooKeeper(connect, session_timeout_ms=2000, connection_timeout_ms=10000)
    await asyncio.to_thread(watching.start)
    await asyncio.to_thread(marking.start)
    view = ClusterView()
    watcher = ZkWatcher(watching, view, asyncio.get_running_loop())
    await asyncio.to_thread(watcher.start)
    try:
        marks = WarmingMarks(marking, 2)
        marks.set("__consumer_offsets", 7, True)
        marks.set("__consumer_offsets", 9, True)
        marks.set("__consumer_offsets", 9, True)  # idempotent
        await _until(lambda: view.warming == {(2, "__consumer_offsets", 7), (2, "__consumer_offsets", 9)},
                     "both marks in the view")
        marks.set("__consumer_offsets", 7, False)
        await _until(lambda: view.warming == {(2, "__consumer_offsets", 9)}, "the warm one gone")
        # A foreign child is ignored, not fatal.
        zk_client.create(f"{chroot_for(request)}{WARMING_REPLICAS}/not-ours", b"")
        marks.set("t", 0, True)
        await _until(lambda: (2, "t", 0) in view.warming, "a third mark")
        assert len(view.warming) == 2
        # The node dies: its marks are ephemeral and go with its session.
        await asyncio.to_thread(marking.close)
        await _until(lambda: view.warming == frozenset(), "the dead node's marks gone")
    finally:
        watcher.stop()
        await asyncio.to_thread(watching.close)
