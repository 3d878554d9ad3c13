"""Stock admin clients describe a mixed consumer group (issue 31, item 6): a classic Java 3.9.1
member (range) upgraded online by a confluent-kafka (librdkafka 2.16) member with
``group.protocol=consumer``. As in Kafka 4, DescribeGroups describes classic groups only, so it
answers this group as Dead with no members; the Java
``describeConsumerGroups`` and confluent-kafka's ``describe_consumer_groups`` ask
ConsumerGroupDescribe first and describe it in full, both members included. A group of
consumer-protocol members only is described by both clients in
test_groups_consumer_protocol_scenarios.py."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import DescribeGroupsRequest

from protocol.apis import ApiKey
from tests.clients.group_consumer_protocol import CONSUMER_PROTOCOL_SERVER
from tests.clients.group_consumer_scenarios import Described, describe_confluent, describe_java
from tests.clients.group_scenario import P, ctx, produce, start_member, uid, wait_stable, wait_until
from tests.clients.records_io import create_topic
from tests.wire_client import WireClient

pytestmark = [pytest.mark.clients, pytest.mark.timeout(150)]


def test_admin_clients_describe_a_mixed_group(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(CONSUMER_PROTOCOL_SERVER)
    bs = server.bootstrap
    topic, group = uid("mixed-describe-t"), uid("mixed-describe-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, 4 * P)
    classic = start_member("java", "classic", bs, topic, group, "range", tmp_path)
    members = [classic]
    try:
        assert wait_stable(members, 45), f"the classic member never got its partitions\n{ctx(members, server)}"
        members.append(start_member("confluent", "consumer", bs, topic, group, "consumer", tmp_path))
        assert wait_stable(members, 45) and all(m.assignment() for m in members), \
            f"the mixed group never settled: {[(m.name, m.assignment()) for m in members]}\n{ctx(members, server)}"
        own = sorted(sorted(m.assignment() or ()) for m in members)

        # DescribeGroups as a client sees it (v5, the highest served): Kafka 4 does not describe
        # a consumer group there (the v6 answer is in the unit tests, test_admin_and_offsets.py).
        host, port = bs.rsplit(":", 1)
        with WireClient(host, int(port), timeout=10) as client:
            (g,) = client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
                version=5, groups=[group], include_authorized_operations=False)).groups
        assert (g.error_code, g.group_state, g.protocol_type, g.members) == (0, "Dead", "", []), \
            f"DescribeGroups v5 of a consumer group: {g}"

        for who, describe in (("java", describe_java), ("confluent", describe_confluent)):
            seen: list[Described] = []

            def described_stable() -> bool:
                seen.append(describe(bs, group))  # noqa: B023 -- called within this iteration only
                return seen[-1].state.upper() == "STABLE"  # noqa: B023
            assert wait_until(described_stable, 30, 1), f"{who} describe: {seen[-1:]}\n{ctx(members, server)}"
            d = seen[-1]
            assert (d.type.upper(), d.assignor) == ("CONSUMER", "uniform"), f"{who} describe: {d}"
            got = sorted(sorted(a) for a, _ in d.members.values())
            assert len(d.members) == 2 and got == own, \
                f"{who} describe: assignments {got}, the members have {own}\n{d}\n{ctx(members, server)}"
    finally:
        for m in members:
            m.bg.stop()
