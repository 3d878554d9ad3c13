"""Consumer groups of Java consumers (kafka-clients 3.9.1, ``java/GroupConsumer.java``): three
members on a 12-partition topic consume every record once with commits; a SIGKILLed member's
partitions move to the others within its session timeout; after a server SIGKILL and restart
the members resume from the committed offsets. Range, round-robin, cooperative-sticky
(incremental: kept partitions are never revoked), and static membership (a member restarted
within its session timeout triggers no rebalance)."""

from __future__ import annotations

import pytest

from tests.clients.group_scenario import run_group_scenario
from tests.clients.group_static import run_static_scenario

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

FAST = {"group.initial.rebalance.delay.ms": "0"}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_groups_java_eager(server_factory, tmp_path, strategy) -> None:  # type: ignore[no-untyped-def]
    run_group_scenario(server_factory(FAST), tmp_path, ["java"] * 3, strategy)


def test_groups_java_cooperative_sticky(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_group_scenario(server_factory(FAST), tmp_path, ["java"] * 3, "cooperative-sticky", cooperative=True)


def test_groups_java_static_membership(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_static_scenario(server_factory(FAST), tmp_path, "java", "range")
