"""KIP-848 consumer groups (``group.protocol=consumer``) with the Java consumer (kafka-clients
3.9.1) and confluent-kafka (librdkafka 2.16), beyond test_groups_consumer_protocol.py: a group
scaled 1 -> 4 -> 1 with no partition consumed by two members at once and every record consumed,
described (type, state, members, assignments) and listed by type through both admin clients, its
committed offsets read back after a server restart by both admin clients and by a new member; and
a regular-expression subscription that picks up a topic created after it. On one node, and the
confluent-kafka scale scenario on a 3-node cluster. Scenarios: group_consumer_scenarios.py."""

from __future__ import annotations

import pytest

from tests.clients.group_consumer_protocol import CONSUMER_PROTOCOL_SERVER
from tests.clients.group_consumer_scenarios import run_regex_scenario, run_scale_to_four_scenario

pytestmark = [pytest.mark.clients, pytest.mark.timeout(300)]


def _restarted(server):  # type: ignore[no-untyped-def]
    def restart() -> None:
        server.kill()
        server.start()
    return restart


@pytest.mark.parametrize("kind", ["java", "confluent"])
def test_consumer_protocol_scale_to_four_and_back(server_factory, tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(CONSUMER_PROTOCOL_SERVER)
    run_scale_to_four_scenario(server, tmp_path, kind, restart=_restarted(server))


@pytest.mark.parametrize("kind", ["java", "confluent"])
def test_consumer_protocol_regex_subscription_picks_up_a_new_topic(server_factory, tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    took = run_regex_scenario(server_factory(CONSUMER_PROTOCOL_SERVER), tmp_path, kind)
    print(f"{kind}: the new topic was assigned {took:.1f} s after its creation")
