"""OffsetCommit v0 / OffsetFetch v0 on a cluster node whose ZooKeeper stops under it: each answers an error
within the node's ZooKeeper session timeout (Kafka 1.1–2.x waited without bound, see
coordinator/cluster/zk_consumers.py), the connection stays usable, the node keeps running, and v0 works again
once ZooKeeper is back. The ZooKeeper is this module's own: the test stops it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.conftest import ServerProcess
from tests.coordinator.cluster.conftest import wait_for
from tests.coordinator.cluster.test_zk_offsets_v0 import _commit, _fetch
from tests.wire_client import WireClient

pytestmark = pytest.mark.timeout(120)

SESSION_MS = 2000


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[LocalZooKeeper]:
    server = LocalZooKeeper(tmp_path / "zookeeper", tick_time_ms=500)
    server.start()
    yield server
    server.stop()


def test_zookeeper_down_during_v0_requests(own_zookeeper: LocalZooKeeper, tmp_path: Path) -> None:
    node = ServerProcess(tmp_path / "node", {"zookeeper.connect": own_zookeeper.connect, "broker.id": "1",
                                             "zookeeper.session.timeout.ms": str(SESSION_MS),
                                             "offsets.topic.replication.factor": "1",
                                             "offsets.topic.num.partitions": "1"})
    node.start()
    try:
        # The client waits longer than the node's bound, as a stock client's request.timeout.ms (30 s) does.
        with WireClient(node.host, node.port, timeout=30) as client:
            created = client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(
                version=5, timeout_ms=15000, validate_only=False, topics=[CreateTopicsRequest.CreatableTopic(
                    name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[])])).topics[0]
            assert created.error_code == ErrorCode.NONE, created
            wait_for(lambda: _commit(client, "old", [("t", 0, 5, "")]) == {("t", 0): ErrorCode.NONE}, 20,
                     "the topic in the node's view")

            own_zookeeper.stop()
            started = time.monotonic()
            assert _commit(client, "old", [("t", 0, 6, "")]) == {("t", 0): ErrorCode.UNKNOWN_SERVER_ERROR}
            assert _fetch(client, "old", {"t": [0]}) == {("t", 0): (-1, "", ErrorCode.UNKNOWN_SERVER_ERROR)}
            # Each answered after about one session timeout, not when ZooKeeper comes back.
            assert time.monotonic() - started < 4 * SESSION_MS / 1000 + 5
            # The same connection still serves other requests, and the node runs on.
            versions = client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest(version=0))
            assert versions.error_code == ErrorCode.NONE
            assert node.alive()

            own_zookeeper.start()
            wait_for(lambda: _commit(client, "old", [("t", 0, 8, "")]) == {("t", 0): ErrorCode.NONE}, 60,
                     "a v0 commit once ZooKeeper is back")
            assert _fetch(client, "old", {"t": [0]}) == {("t", 0): (8, "", ErrorCode.NONE)}
    finally:
        node.stop()
