"""Consumer groups of kafkajs 2.2.4 members (``js/group_consumer.js``, RoundRobinAssigner) and of
``kcat -G`` processes (librdkafka, auto-commit), and a mixed group of Java, confluent-kafka,
kafka-python and aiokafka members all configured with round-robin: it converges on one protocol
and consumes everything once."""

from __future__ import annotations

import pytest

from tests.clients.group_scenario import run_group_scenario

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

FAST = {"group.initial.rebalance.delay.ms": "0"}


def test_groups_kafkajs(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_group_scenario(server_factory(FAST), tmp_path, ["kafkajs"] * 3, "roundrobin")


def test_groups_kcat(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """kcat -G (-E: survive the server being down; -u: unbuffered) commits with librdkafka's
    auto-commit (every 200 ms and on revoke) and prints no commits, so after the SIGKILL any
    duplicate involving the killed member is allowed; everything else is checked as for the others."""
    run_group_scenario(server_factory(FAST), tmp_path, ["kcat"] * 3, "roundrobin")


def test_groups_mixed_roundrobin(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = run_group_scenario(server_factory(FAST), tmp_path, ["java", "confluent", "kafka-python", "aiokafka"],
                             "roundrobin", kill_member=True, restart_server=True)
    assert out.takeover_s is not None
