"""KIP-848 groups' config overrides in cluster mode: IncrementalAlterConfigs on any node writes
``/config/groups/<group>`` (the group id percent-encoded), and every node sees the change through
its watch, so DescribeConfigs on another node answers it at once."""

from __future__ import annotations

import json
from pathlib import Path

from kafka.protocol.admin import DescribeConfigsRequest

from tests.coordinator.admin.test_config_apis import DELETE, SET, _alter, _describe
from tests.coordinator.cluster.conftest import running_cluster, wait_for
from tests.coordinator.cluster.test_replication import _zk
from tests.wire_client import WireClient

R = DescribeConfigsRequest.DescribeConfigsResource
GROUP = 32
SESSION = "consumer.session.timeout.ms"


def _session_on(host: str, port: int, group: str) -> tuple[str, int]:
    with WireClient(host, port) as c:
        (result,) = _describe(c, 4, R(resource_type=GROUP, resource_name=group, configuration_keys=[SESSION]))
        (entry,) = result.configs
        return entry.value, entry.config_source


def test_an_override_written_on_one_node_is_in_force_on_every_node(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster") as cluster:
        host, (first, second, third) = cluster.host, cluster.ports
        group = "orders/eu.v2"  # a '/' must not make a path
        with WireClient(host, first) as c:
            assert _alter(c, 1, [(GROUP, group, [(SESSION, SET, "50000")])]) == [(0, None)]
        zk = _zk(cluster)
        try:
            data, _ = zk.get("/config/groups/orders%2Feu.v2")
            assert json.loads(data) == {"version": 1, "config": {SESSION: "50000"}}
            changes = zk.get_children("/config/changes")
            assert any(json.loads(zk.get(f"/config/changes/{n}")[0])["entity_path"] == "groups/orders%2Feu.v2"
                       for n in changes)
        finally:
            zk.stop()
            zk.close()
        for port in (first, second, third):
            wait_for(lambda p=port: _session_on(host, p, group) == ("50000", 8), 10, f"the override on port {port}")
        with WireClient(host, third) as c:
            assert _alter(c, 0, [(GROUP, group, [(SESSION, DELETE, None)])]) == [(0, None)]
        for port in (first, second, third):
            wait_for(lambda p=port: _session_on(host, p, group) == ("45000", 5), 10, f"the deletion on port {port}")
