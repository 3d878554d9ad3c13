"""Readiness of a real node in this process: not ready while a coordinator partition loads (the
load held at a gate the test opens), ready once loaded; in cluster mode, not ready while the
ZooKeeper session is down, ready again once it is back."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.ops.readiness import Readiness
from coordinator.ops.state_view import StateView
from protocol.apis import ApiKey
from tests.coordinator.ops.test_state_view import start_node, stop_node, view_of, wait_for
from tests.wire_client import WireClient


def find_coordinator(port: int) -> None:
    """A client's first FindCoordinator: it creates __consumer_offsets."""
    with WireClient("127.0.0.1", port) as c:
        c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key="g", key_type=0))


@pytest.mark.asyncio
async def test_not_ready_while_a_coordinator_partition_loads(tmp_path: Path) -> None:
    app, port, running = await start_node(tmp_path)
    try:
        await asyncio.to_thread(find_coordinator, port)
        await wait_for(lambda: Readiness(view_of(app)).ready()[0])
    finally:
        await stop_node(app, running)

    # Restarted, its loads wait at a gate: __consumer_offsets is there to load this time.
    gate = asyncio.Event()
    app, port, running = await start_node(tmp_path, hold_loads=gate)
    try:
        readiness = Readiness(view_of(app))
        assert readiness.live()
        ready, reasons = readiness.ready()
        assert not ready
        assert "coordinator partition __consumer_offsets-0 loading" in reasons, reasons
        gate.set()
        await wait_for(lambda: readiness.ready() == (True, []))
    finally:
        gate.set()
        await stop_node(app, running)


@pytest.mark.asyncio
async def test_in_cluster_mode_not_ready_without_the_zookeeper_session(tmp_path: Path,
                                                                     zookeeper: LocalZooKeeper) -> None:
    chroot = f"/readiness-{uuid.uuid4().hex[:8]}"
    app, port, running = await start_node(tmp_path, settings=(
        f"zookeeper.connect={zookeeper.connect}{chroot}", "offsets.topic.replication.factor=1",
        "zookeeper.session.timeout.ms=4000"))
    try:
        assert app.zookeeper is not None and app.view is not None
        view = StateView(runtime=app.runtime, txn_runtime=app.txn_runtime, logs=app.logs, cluster=app.view,
                         node_id=app.data_dir.node_id)
        readiness = Readiness(view, app.zookeeper)
        await asyncio.to_thread(find_coordinator, port)
        await wait_for(lambda: any(c.state == "active" for c in view.coordinator_partitions()), timeout=30)
        await wait_for(lambda: readiness.ready() == (True, []), timeout=30)
        me = app.data_dir.node_id
        assert [n.node_id for n in view.nodes()] == [me]
        await wait_for(lambda: view.controller_id() == me)
        # The offsets topic's partitions as the replica manager holds them: led here, ISR of one.
        offsets = {tp: p for tp, p in view.partitions().items() if tp[0] == "__consumer_offsets"}
        assert offsets and all((p.leader, p.isr, p.replicas, p.local) == (me, (me,), (me,), True)
                               for p in offsets.values()), offsets
        await asyncio.to_thread(zookeeper.stop)
        try:
            reasons: Any = await wait_for(lambda: (r := readiness.ready())[0] is False and r[1], timeout=30)
            assert any(r.startswith("zookeeper session not connected") for r in reasons), reasons
        finally:
            await asyncio.to_thread(zookeeper.start)
        await wait_for(lambda: readiness.ready()[0], timeout=30)
    finally:
        await stop_node(app, running)
