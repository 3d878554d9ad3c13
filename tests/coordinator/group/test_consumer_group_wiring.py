"""The node's wiring of KIP-848 groups, over the wire: the shard sees the topic registry (a
joining member is assigned the partitions of the topic it subscribes to, by the topic's id) and
the group's config overrides (the heartbeat interval and the assignment interval it is given
are the group's, set with IncrementalAlterConfigs on the GROUP resource)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from protocol.apis import ApiKey
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from tests.coordinator.admin.test_config_apis import SET, _alter
from tests.wire_client import WireClient

LOADING = 14


def _heartbeat(c: WireClient, request: Any) -> Any:
    deadline = time.monotonic() + 20
    while True:
        response = c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request)
        if response.error_code not in (LOADING, 15, 16) or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def test_a_member_is_assigned_the_registrys_topic_with_the_groups_intervals(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory({"offsets.topic.num.partitions": "1"})
    with WireClient(server.host, server.port) as c:
        CT = CreateTopicsRequest.CreatableTopic
        c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=5000, topics=[CT(
            name="orders", num_partitions=3, replication_factor=1, assignments=[], configs=[])]))
        metadata = c.request(ApiKey.METADATA, 12, MetadataRequest(version=12, topics=[
            MetadataRequest.MetadataRequestTopic(topic_id=None, name="orders")], allow_auto_topic_creation=False,
            include_topic_authorized_operations=False))
        topic_id = metadata.topics[0].topic_id
        # The first FindCoordinator creates __consumer_offsets, as a client's would.
        c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key="g", key_type=0))
        assert _alter(c, 1, [(32, "g", [("consumer.heartbeat.interval.ms", SET, "6000"),
                                        ("consumer.assignment.interval.ms", SET, "0")])]) == [(0, None)]
        member_id = str(uuid.uuid4())
        joined = _heartbeat(c, ConsumerGroupHeartbeatRequest[1](
            group_id="g", member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30000, subscribed_topic_names=["orders"], subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[]))
        assert (joined.error_code, joined.member_id, joined.heartbeat_interval_ms) == (0, member_id, 6000), joined
        assert joined.member_epoch >= 1 and joined.assignment is not None, joined
        assigned = {(str(tp.topic_id), p) for tp in joined.assignment.topic_partitions for p in tp.partitions}
        assert assigned == {(str(topic_id), p) for p in range(3)}
        described = c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest[1](
            group_ids=["g", "nope"], include_authorized_operations=False))
        group, missing = described.groups
        assert (group.group_id, group.error_code, [m.member_id for m in group.members]) == ("g", 0, [member_id])
        assert (missing.group_id, missing.error_code) == ("nope", 69)  # GROUP_ID_NOT_FOUND
