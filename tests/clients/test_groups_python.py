"""Consumer groups of Python stock clients (``group_member.py`` processes): confluent-kafka
(range, roundrobin, cooperative-sticky, static membership), kafka-python 3.x and aiokafka 0.14.
Three members on a 12-partition topic consume every record once with commits; a SIGKILLed
member's partitions move to the others within its session timeout; after a server SIGKILL and
restart the members resume from the committed offsets."""

from __future__ import annotations

import pytest

from tests.clients.group_scenario import run_group_scenario
from tests.clients.group_static import run_static_scenario

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

FAST = {"group.initial.rebalance.delay.ms": "0"}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_groups_confluent_eager(server_factory, tmp_path, strategy) -> None:  # type: ignore[no-untyped-def]
    run_group_scenario(server_factory(FAST), tmp_path, ["confluent"] * 3, strategy)


def test_groups_confluent_cooperative_sticky(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_group_scenario(server_factory(FAST), tmp_path, ["confluent"] * 3, "cooperative-sticky", cooperative=True)


def test_groups_confluent_static_membership(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_static_scenario(server_factory(FAST), tmp_path, "confluent", "range")


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_groups_kafka_python(server_factory, tmp_path, strategy) -> None:  # type: ignore[no-untyped-def]
    run_group_scenario(server_factory(FAST), tmp_path, ["kafka-python"] * 3, strategy)


def test_groups_kafka_python_static_membership(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_static_scenario(server_factory(FAST), tmp_path, "kafka-python", "range")


def test_groups_aiokafka(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_group_scenario(server_factory(FAST), tmp_path, ["aiokafka"] * 3, "roundrobin")


def test_groups_kafka_python_cooperative_sticky(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_group_scenario(server_factory(FAST), tmp_path, ["kafka-python"] * 3, "cooperative-sticky", cooperative=True)
