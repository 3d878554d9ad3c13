"""KIP-848 consumer groups (``group.protocol=consumer``) with stock clients: the Java consumer
(kafka-clients 3.9.1) and confluent-kafka (librdkafka 2.16). The server computes the assignment:
members subscribe, consume what a producer wrote and commit; a second member joins and the
partitions split with no record consumed twice; one leaves and the other takes everything; a
member SIGKILLed is fenced after ``group.consumer.session.timeout.ms`` and its partitions go to
the survivor; a static member (``group.instance.id``) that closes and comes back within the
session keeps its partitions. Scenarios: group_consumer_protocol.py."""

from __future__ import annotations

import pytest

from tests.clients.group_consumer_protocol import (
    CONSUMER_PROTOCOL_SERVER,
    run_scale_scenario,
    run_static_restart_scenario,
)

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

STATIC_SESSION_MS = 15000


@pytest.mark.parametrize("strategy", ["consumer", "consumer-range"])
def test_java_consumer_protocol_scale_leave_and_kill(server_factory, tmp_path, strategy) -> None:  # type: ignore[no-untyped-def]
    run_scale_scenario(server_factory(CONSUMER_PROTOCOL_SERVER), tmp_path, "java", strategy,
                       kill_phase=strategy == "consumer")


def test_java_consumer_protocol_static_member_restart(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory({**CONSUMER_PROTOCOL_SERVER, "group.consumer.session.timeout.ms": str(STATIC_SESSION_MS)})
    run_static_restart_scenario(server, tmp_path, "java", STATIC_SESSION_MS)


def test_confluent_consumer_protocol_scale_and_leave(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_scale_scenario(server_factory(CONSUMER_PROTOCOL_SERVER), tmp_path, "confluent", kill_phase=False)


class _ClusterServer:
    """What the scenario reads of a server, for a three-node cluster."""

    def __init__(self, cluster) -> None:  # type: ignore[no-untyped-def]
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    def log_text(self) -> str:
        return "\n".join(f"[node {b}] {line}" for b in (1, 2, 3)
                         for line in self.cluster.log_path(b).read_text(errors="replace").splitlines()[-20:])


def test_confluent_consumer_protocol_on_a_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same handlers serve a cluster: the group's coordinator is the leader of its offsets
    partition, which may be any node."""
    from tests.coordinator.cluster.conftest import running_cluster

    settings = [f"{k}={v}" for k, v in CONSUMER_PROTOCOL_SERVER.items()]
    with running_cluster(tmp_path / "cluster", "offsets.topic.num.partitions=3", *settings) as cluster:
        run_scale_scenario(_ClusterServer(cluster), tmp_path, "confluent", kill_phase=False)
