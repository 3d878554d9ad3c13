"""KIP-848 consumer groups (``group.protocol=consumer``) with the Java consumer (kafka-clients
3.9.1) and confluent-kafka (librdkafka 2.16), beyond test_groups_consumer_protocol.py: a group
scaled 1 -> 4 -> 1 with no partition consumed by two members at once and every record consumed,
described (type, state, members, assignments) and listed by type through both admin clients, its
committed offsets read back after a server restart by both admin clients and by a new member; and
a regular-expression subscription that picks up a topic created after it. On one node, and both
on a 3-node cluster too (there the restart is that of the group coordinator's node). Scenarios:
group_consumer_scenarios.py."""

from __future__ import annotations

import pytest

from protocol.apis import ApiKey
from tests.clients.group_consumer_protocol import CONSUMER_PROTOCOL_SERVER
from tests.clients.group_consumer_scenarios import run_regex_scenario, run_scale_to_four_scenario
from tests.clients.wire_tap import WireTap

pytestmark = [pytest.mark.clients, pytest.mark.timeout(300)]


def _restarted(server):  # type: ignore[no-untyped-def]
    def restart(group: str) -> None:
        server.kill()
        server.start()
    return restart


@pytest.mark.parametrize("kind", ["java", "confluent"])
def test_consumer_protocol_scale_to_four_and_back(server_factory, tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(CONSUMER_PROTOCOL_SERVER)
    run_scale_to_four_scenario(server, tmp_path, kind, restart=_restarted(server))


class _Tapped:
    """A server the clients reach through a wire tap (the address it advertises)."""

    def __init__(self, server, tap: WireTap) -> None:  # type: ignore[no-untyped-def]
        self.server = server
        self.bootstrap = tap.address

    def log_text(self) -> str:
        return self.server.log_text()  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["java", "confluent"])
def test_consumer_protocol_regex_subscription_picks_up_a_new_topic(server_factory, tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    """Through a wire tap, to see what the client's heartbeats carry: confluent-kafka the regex,
    kafka-clients 3.9.1 (no SubscriptionPattern before 4.0) the topic names it resolved."""
    server = server_factory(CONSUMER_PROTOCOL_SERVER, start=False)
    tap = WireTap((server.host, server.port), [ApiKey.CONSUMER_GROUP_HEARTBEAT])
    try:
        server.settings["advertised.listeners"] = tap.address
        server.start()
        took = run_regex_scenario(_Tapped(server, tap), tmp_path, kind, tap=tap)
        print(f"{kind}: the new topic was assigned {took:.1f} s after its creation")
    finally:
        tap.close()


class _ClusterServer:
    """What the scenarios read of a server, for a three-node cluster."""

    def __init__(self, cluster) -> None:  # type: ignore[no-untyped-def]
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    def log_text(self) -> str:
        return "\n".join(f"[node {b}] {line}" for b in (1, 2, 3)
                         for line in self.cluster.log_path(b).read_text(errors="replace").splitlines()[-20:])


def _coordinator_of(bootstrap: str, group: str) -> int:
    from kafka.protocol.metadata import FindCoordinatorRequest

    from protocol.apis import ApiKey
    from tests.wire_client import WireClient

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with WireClient(host, int(port)) as c:
        found = c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key=group, key_type=0))
    assert found.error_code == 0, found
    return int(found.node_id)


@pytest.mark.parametrize("kind", ["java", "confluent"])
def test_consumer_protocol_scale_to_four_on_a_cluster(tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    """On a cluster the restart is the group coordinator's node, SIGKILLed and started again: the
    committed offsets are read back from the node that took the group over (or the same node)."""
    from tests.coordinator.cluster.conftest import running_cluster

    settings = [f"{k}={v}" for k, v in CONSUMER_PROTOCOL_SERVER.items()]
    with running_cluster(tmp_path / "cluster", "offsets.topic.num.partitions=3", *settings) as cluster:
        server = _ClusterServer(cluster)

        def restart_coordinator(group: str) -> None:
            node = _coordinator_of(cluster.bootstrap, group)
            cluster.procs[node].kill()
            cluster.procs[node].wait()
            cluster.restart(node)

        run_scale_to_four_scenario(server, tmp_path, kind, restart=restart_coordinator)


@pytest.mark.parametrize("kind", ["java", "confluent"])
def test_consumer_protocol_regex_subscription_on_a_cluster(tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    """Without the tap (each node would need one): what the coordinator holds is checked."""
    from tests.coordinator.cluster.conftest import running_cluster

    settings = [f"{k}={v}" for k, v in CONSUMER_PROTOCOL_SERVER.items()]
    with running_cluster(tmp_path / "cluster", "offsets.topic.num.partitions=3", *settings) as cluster:
        run_regex_scenario(_ClusterServer(cluster), tmp_path, kind)
