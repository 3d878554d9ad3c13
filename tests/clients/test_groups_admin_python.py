"""Group admin APIs through the Python stock clients against a live group of three
confluent-kafka members (range): kafka-python 3 ``KafkaAdminClient`` (ListGroups, DescribeGroups
with decoded subscriptions/assignments) and confluent-kafka
``AdminClient`` (list_consumer_groups, describe_consumer_groups, list/alter_consumer_group_offsets,
delete_consumer_groups)."""

from __future__ import annotations

import pytest

from tests.clients.group_scenario import P, ctx, run_group_scenario, wait_until

pytestmark = [pytest.mark.clients, pytest.mark.timeout(150)]


def test_groups_python_admin_clients(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    server = server_factory({"group.initial.rebalance.delay.ms": "0"})
    bs = server.bootstrap
    out = run_group_scenario(server, tmp_path, ["confluent"] * 3, "range", kill_member=False,
                             restart_server=False, n1=1200, stop_at_end=False)
    group, topic, members = out.group, out.topic, out.members
    try:
        own = {frozenset(m.assignment() or ()) for m in members}

        kp = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000)
        try:
            listed = kp.list_groups()
            ids = [g["group_id"] if isinstance(g, dict) else g[0] for g in listed]
            assert group in ids, f"kafka-python list_groups: {listed}"
            d = kp.describe_groups([group])[group]
            assert d["error"] is None and d["group_state"] == "Stable", d
            assert d["protocol_type"] == "consumer" and d["protocol_data"] == "range", d
            assert len(d["members"]) == 3, d
            got = set()
            for m in d["members"]:
                assert m["client_id"] == "rdkafka" and m["client_host"].endswith("127.0.0.1"), m
                assert m["member_metadata"]["topics"] == [topic], m
                parts = [p for a in m["member_assignment"]["assigned_partitions"] if a["topic"] == topic
                         for p in a["partitions"]]
                got.add(frozenset(parts))
            assert got == own, f"DescribeGroups assignments {got} vs the members' own {own}"
        finally:
            kp.close()

        ca = AdminClient({"bootstrap.servers": bs})
        res = ca.list_consumer_groups(request_timeout=15).result()
        assert any(g.group_id == group and g.state == ConsumerGroupState.STABLE for g in res.valid), res.valid
        assert not res.errors, res.errors
        desc = ca.describe_consumer_groups([group], request_timeout=15)[group].result()
        assert desc.state == ConsumerGroupState.STABLE and desc.partition_assignor == "range", desc
        assert len(desc.members) == 3 and not desc.is_simple_consumer_group, desc
        assert {frozenset(tp.partition for tp in m.assignment.topic_partitions) for m in desc.members} == own
        offs = ca.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
        assert {tp.partition: tp.offset for tp in offs.topic_partitions} == {p: 100 for p in range(P)}, offs

        for m in members:
            m.request_stop()
        for m in members:
            assert m.bg.wait(30) is not None, ctx(members, server)
        assert wait_until(lambda: ca.describe_consumer_groups([group])[group].result().state
                          == ConsumerGroupState.EMPTY, 10, 0.5)
        ca.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 3, 42)])])[group].result()
        offs = ca.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
        assert {tp.partition: tp.offset for tp in offs.topic_partitions}[3] == 42, offs
        ca.delete_consumer_groups([group], request_timeout=15)[group].result()
        res = ca.list_consumer_groups(request_timeout=15).result()
        assert not [g for g in res.valid if g.group_id == group], res.valid
    finally:
        for m in members:
            m.bg.stop()
