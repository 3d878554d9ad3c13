"""The group APIs' ACL checks (coordinator/group/service.py), one test per row of Kafka's table
(KafkaApis ``handle*``; coordinator/security/request_checks.py): each shows the answer allowed and denied, and that a
denied request changes nothing. The handlers run in process on the real runtime and shard, with a
the real ACL authorizer over the bindings each test grants (``Rules``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.producer import TxnOffsetCommitRequest

from coordinator.context import RequestContext
from coordinator.group.config import GroupConfig
from coordinator.group.coordinator_type import group_coordinator_type
from coordinator.group.service import GroupService
from coordinator.group.topics_image import StaticTopicsImage
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.security.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from coordinator.security.acl_bindings import AccessControlEntry, ResourcePattern
from coordinator.security.acl_cache import AclCache
from coordinator.security.authorizer import AclAuthorizer
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from protocol.errors import ErrorCode as E
from tests.coordinator.runtime.test_runtime import ManualLog, OneLog
from tests.coordinator.stepping_clock import SteppingClock

O, R = AclOperation, ResourceType
ALICE = "User:alice"
#: A super user (``super.users``): the tests read state through it.
ADMIN = "User:admin"


class Rules:
    """Kafka's ACL authorizer (coordinator/security/authorizer.py) over ALLOW bindings a test
    adds and removes as (principal, operation, resource type, LITERAL name; ``*`` for any)."""

    enabled = True

    def __init__(self, *rules: tuple[str, AclOperation, ResourceType, str]) -> None:
        self.cache = AclCache()
        self.acl = AclAuthorizer(self.cache, frozenset({ADMIN}))
        self.allow(*rules)

    def _change(self, rules: tuple[tuple[str, AclOperation, ResourceType, str], ...], add: bool) -> None:
        for principal, operation, resource_type, name in rules:
            pattern = ResourcePattern(resource_type, name, PatternType.LITERAL)
            entry = AccessControlEntry.of(principal, "*", operation, AclPermissionType.ALLOW)
            entries = self.cache.acls().get(pattern, frozenset())
            self.cache.update({pattern: entries | {entry} if add else entries - {entry}})

    def allow(self, *rules: tuple[str, AclOperation, ResourceType, str]) -> None:
        self._change(rules, True)

    def revoke(self, *rules: tuple[str, AclOperation, ResourceType, str]) -> None:
        self._change(rules, False)

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        return self.acl.authorize(principal, host, operation, resource_type, name)

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        return self.acl.authorize_by_resource_type(principal, host, operation, resource_type)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        return self.acl.authorized_operations(principal, host, resource_type, name)


def ctx(version: int, principal: str = ALICE, api_key: int = 0) -> RequestContext:
    return RequestContext(api_key=api_key, api_version=version, correlation_id=1, client_id="cli",
                          peer="10.0.0.7:5555", principal=principal, client_host="10.0.0.7")


class DurableLog(ManualLog):
    """Appends become durable on the next turn of the loop."""

    def append_batch(self, batch: bytearray, header: Any) -> Any:
        answer = super().append_batch(batch, header)
        asyncio.get_running_loop().call_soon(self.make_durable)
        return answer


async def answer(result: Any) -> Any:
    while asyncio.isfuture(result) or asyncio.iscoroutine(result):
        result = await result
    return result


async def group_service(rules: Rules, topics: Iterable[str] = ("t1", "t2")) -> tuple[GroupService, StaticTopicsImage]:
    image = StaticTopicsImage()
    for name in topics:
        image.create(name, 2, topic_id=uuid.uuid4())
    clock = SteppingClock()
    runtime = CoordinatorRuntime(OneLog(DurableLog()),  # type: ignore[arg-type]
                                 group_coordinator_type(GroupConfig(), topics=image), clock=clock, timers=clock.timers)
    await runtime.load(0)
    service = GroupService(runtime, lambda: 1, authorizer=rules)
    service.clock = clock  # type: ignore[attr-defined]  # the tests step it
    return service, image


def commit(group: str = "g", topics: Iterable[str] = ("t1", "t2"), offset: int = 10) -> Any:
    T = OffsetCommitRequest[8].OffsetCommitRequestTopic
    return OffsetCommitRequest[8](group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, topics=[
                                      T(name=t, partitions=[T.OffsetCommitRequestPartition(
                                          partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                          committed_metadata="")]) for t in topics])


async def committed(service: GroupService, group: str = "g") -> dict[str, int]:
    """The group's offsets, read past the authorizer."""
    request = OffsetFetchRequest[7](group_id=group, topics=None, require_stable=False)
    got = await answer(service.offset_fetch_unchecked(ctx(7), request))
    return {t.name: p.committed_offset for t in got.topics for p in t.partitions}


def codes(response: Any) -> dict[str, list[int]]:
    return {t.name: [p.error_code for p in t.partitions] for t in response.topics}


@pytest.mark.asyncio
async def test_join_sync_heartbeat_leave_need_read_on_the_group() -> None:
    rules = Rules()
    service, _ = await group_service(rules)
    join = JoinGroupRequest[5](group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                               group_instance_id=None, protocol_type="consumer",
                               protocols=[JoinGroupRequest[5].JoinGroupRequestProtocol(name="range", metadata=b"")])
    sync = SyncGroupRequest[3](group_id="g", generation_id=1, member_id="m", group_instance_id=None, assignments=[])
    beat = HeartbeatRequest[3](group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    leave = LeaveGroupRequest[3](group_id="g", members=[LeaveGroupRequest[3].MemberIdentity(
        member_id="m", group_instance_id=None)])
    denied = E.GROUP_AUTHORIZATION_FAILED
    assert (await answer(service.join_group(ctx(5), join))).error_code == denied
    assert (await answer(service.sync_group(ctx(3), sync))).error_code == denied
    assert (await answer(service.heartbeat(ctx(3), beat))).error_code == denied
    assert (await answer(service.leave_group(ctx(3), leave))).error_code == denied
    # DESCRIBE is not enough; nothing was created.
    rules.allow((ALICE, O.DESCRIBE, R.GROUP, "g"))
    assert (await answer(service.join_group(ctx(5), join))).error_code == denied
    listed = await service.list_groups(ctx(3), ListGroupsRequest[3]())
    assert listed.groups == []
    rules.allow((ALICE, O.READ, R.GROUP, "g"))
    assert (await answer(service.join_group(ctx(5), join))).error_code == E.MEMBER_ID_REQUIRED
    assert (await answer(service.sync_group(ctx(3), sync))).error_code == E.UNKNOWN_MEMBER_ID
    assert (await answer(service.heartbeat(ctx(3), beat))).error_code == E.UNKNOWN_MEMBER_ID
    assert (await answer(service.leave_group(ctx(3), leave))).error_code == E.NONE  # per member below
    # Another principal is still refused.
    assert (await answer(service.heartbeat(ctx(3, "User:bob"), beat))).error_code == denied


@pytest.mark.asyncio
async def test_offset_commit_needs_read_on_the_group_then_read_on_each_topic() -> None:
    rules = Rules((ALICE, O.DESCRIBE, R.GROUP, "g"), (ALICE, O.DESCRIBE, R.TOPIC, "*"))
    service, _ = await group_service(rules)
    response = await answer(service.offset_commit(ctx(8), commit()))
    assert codes(response) == {"t1": [E.GROUP_AUTHORIZATION_FAILED], "t2": [E.GROUP_AUTHORIZATION_FAILED]}
    assert await committed(service) == {}
    rules.allow((ALICE, O.READ, R.GROUP, "g"), (ALICE, O.READ, R.TOPIC, "t1"))
    response = await answer(service.offset_commit(ctx(8), commit()))
    assert codes(response) == {"t1": [E.NONE], "t2": [E.TOPIC_AUTHORIZATION_FAILED]}
    assert await committed(service) == {"t1": 10}
    # Denied names come before existence: a missing topic denied says 29, not that it is missing.
    response = await answer(service.offset_commit(ctx(8), commit(topics=["nope"], offset=20)))
    assert codes(response) == {"nope": [E.TOPIC_AUTHORIZATION_FAILED]}
    rules.allow((ALICE, O.READ, R.TOPIC, "t2"))
    response = await answer(service.offset_commit(ctx(8), commit(offset=11)))
    assert codes(response) == {"t1": [E.NONE], "t2": [E.NONE]}
    assert await committed(service) == {"t1": 11, "t2": 11}


@pytest.mark.asyncio
async def test_offset_fetch_needs_describe_not_read_and_hides_denied_topics() -> None:
    rules = Rules((ALICE, O.READ, R.GROUP, "g"), (ALICE, O.READ, R.TOPIC, "*"))
    service, _ = await group_service(rules)
    await answer(service.offset_commit(ctx(8), commit()))
    reader = "User:reader"
    T = OffsetFetchRequest[7].OffsetFetchRequestTopic
    named = OffsetFetchRequest[7](group_id="g", topics=[T(name="t1", partition_indexes=[0]),
                                                         T(name="t2", partition_indexes=[0])], require_stable=False)
    everything = OffsetFetchRequest[7](group_id="g", topics=None, require_stable=False)
    got = await answer(service.offset_fetch(ctx(7, reader), named))
    assert (got.error_code, got.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])
    v1 = OffsetFetchRequest[1](group_id="g", topics=[T(name="t1", partition_indexes=[0])])
    got = await answer(service.offset_fetch(ctx(1, reader), v1))  # v1: no group-level error field
    assert [(p.committed_offset, p.error_code) for t in got.topics for p in t.partitions] == [
        (-1, E.GROUP_AUTHORIZATION_FAILED)]
    # DESCRIBE on the group is what OffsetFetch needs (READ implies it too).
    rules.allow((reader, O.DESCRIBE, R.GROUP, "g"), (reader, O.DESCRIBE, R.TOPIC, "t1"))
    got = await answer(service.offset_fetch(ctx(7, reader), named))
    assert got.error_code == E.NONE
    assert [(t.name, p.committed_offset, p.error_code) for t in got.topics for p in t.partitions] == [
        ("t1", 10, E.NONE), ("t2", -1, E.TOPIC_AUTHORIZATION_FAILED)]
    got = await answer(service.offset_fetch(ctx(7, reader), everything))
    assert [t.name for t in got.topics] == ["t1"]  # the all-topics form drops denied topics
    # v8+: per group.
    G = OffsetFetchRequest[8].OffsetFetchRequestGroup
    many = OffsetFetchRequest[8](groups=[G(group_id="g", topics=None), G(group_id="other", topics=None)],
                                 require_stable=False)
    got = await answer(service.offset_fetch(ctx(8, reader), many))
    assert [(g.group_id, g.error_code, [t.name for t in g.topics]) for g in got.groups] == [
        ("g", E.NONE, ["t1"]), ("other", E.GROUP_AUTHORIZATION_FAILED, [])]


@pytest.mark.asyncio
async def test_describe_groups_needs_describe_and_reports_the_authorized_operations() -> None:
    rules = Rules((ALICE, O.READ, R.GROUP, "g"), (ALICE, O.READ, R.TOPIC, "*"))
    service, _ = await group_service(rules)
    await answer(service.offset_commit(ctx(8), commit()))
    request = DescribeGroupsRequest[5](groups=["g", "h"], include_authorized_operations=True)
    got = await service.describe_groups(ctx(5), request)
    assert [(g.group_id, g.error_code) for g in got.groups] == [("g", E.NONE), ("h", E.GROUP_AUTHORIZATION_FAILED)]
    assert got.groups[0].authorized_operations == {int(O.READ), int(O.DESCRIBE)}
    assert got.groups[1].authorized_operations is None


@pytest.mark.asyncio
async def test_list_groups_lists_all_with_describe_cluster_else_only_describable_groups() -> None:
    rules = Rules((ALICE, O.READ, R.GROUP, "*"), (ALICE, O.READ, R.TOPIC, "*"))
    service, _ = await group_service(rules)
    for g in ("a", "b"):
        await answer(service.offset_commit(ctx(8), commit(group=g)))
    viewer = "User:viewer"
    assert (await service.list_groups(ctx(3, viewer), ListGroupsRequest[3]())).groups == []
    rules.allow((viewer, O.DESCRIBE, R.GROUP, "b"))
    got = await service.list_groups(ctx(3, viewer), ListGroupsRequest[3]())
    assert (got.error_code, [g.group_id for g in got.groups]) == (E.NONE, ["b"])
    rules.allow((viewer, O.DESCRIBE, R.CLUSTER, CLUSTER_NAME))
    got = await service.list_groups(ctx(3, viewer), ListGroupsRequest[3]())
    assert sorted(g.group_id for g in got.groups) == ["a", "b"]


@pytest.mark.asyncio
async def test_delete_groups_needs_delete_on_each_group() -> None:
    rules = Rules((ALICE, O.READ, R.GROUP, "*"), (ALICE, O.READ, R.TOPIC, "*"))
    service, _ = await group_service(rules)
    for g in ("a", "b"):
        await answer(service.offset_commit(ctx(8), commit(group=g)))
    rules.allow((ALICE, O.DELETE, R.GROUP, "b"))
    got = await service.delete_groups(ctx(2), DeleteGroupsRequest[2](groups_names=["a", "b"]))
    assert [(r.group_id, r.error_code) for r in got.results] == [("a", E.GROUP_AUTHORIZATION_FAILED),
                                                                  ("b", E.NONE)]
    assert await committed(service, "a") == {"t1": 10, "t2": 10}
    assert await committed(service, "b") == {}


@pytest.mark.asyncio
async def test_offset_delete_needs_delete_on_the_group_then_read_on_each_topic() -> None:
    rules = Rules((ALICE, O.READ, R.GROUP, "g"), (ALICE, O.READ, R.TOPIC, "t1"), (ALICE, O.DESCRIBE, R.TOPIC, "t2"))
    service, _ = await group_service(rules)
    rules.allow((ALICE, O.READ, R.TOPIC, "t2"))
    await answer(service.offset_commit(ctx(8), commit()))
    rules.revoke((ALICE, O.READ, R.TOPIC, "t2"))
    T = OffsetDeleteRequest[0].OffsetDeleteRequestTopic
    request = OffsetDeleteRequest[0](group_id="g", topics=[
        T(name=t, partitions=[T.OffsetDeleteRequestPartition(partition_index=0)]) for t in ("t1", "t2")])
    got = await service.offset_delete(ctx(0), request)
    assert (got.error_code, got.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])
    assert await committed(service) == {"t1": 10, "t2": 10}
    rules.allow((ALICE, O.DELETE, R.GROUP, "g"))
    got = await service.offset_delete(ctx(0), request)
    assert got.error_code == E.NONE
    assert codes(got) == {"t1": [E.NONE], "t2": [E.TOPIC_AUTHORIZATION_FAILED]}
    assert await committed(service) == {"t2": 10}


@pytest.mark.asyncio
async def test_txn_offset_commit_needs_write_on_the_id_then_read_on_group_and_topics() -> None:
    rules = Rules()
    service, _ = await group_service(rules)
    T = TxnOffsetCommitRequest[3].TxnOffsetCommitRequestTopic
    request = TxnOffsetCommitRequest[3](
        transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None, topics=[T(name=t, partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")])
            for t in ("t1", "t2")])
    steps = [((ALICE, O.WRITE, R.TRANSACTIONAL_ID, "tx"), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
             ((ALICE, O.READ, R.GROUP, "g"), E.GROUP_AUTHORIZATION_FAILED),
             ((ALICE, O.READ, R.TOPIC, "t1"), E.TOPIC_AUTHORIZATION_FAILED)]
    for rule, error in steps:
        got = await service.txn_offset_commit(ctx(3), request)
        assert codes(got) == {"t1": [error], "t2": [error]}
        assert service.runtime.shard(0).offset_manager.pending == {}
        rules.allow(rule)
    got = await service.txn_offset_commit(ctx(3), request)
    assert codes(got) == {"t1": [E.NONE], "t2": [E.TOPIC_AUTHORIZATION_FAILED]}
    assert list(service.runtime.shard(0).offset_manager.pending) == [7]


def heartbeat(group: str = "cg", names: list[str] | None = None, regex: str | None = None) -> Any:
    return ConsumerGroupHeartbeatRequest[1](
        group_id=group, member_id="m-1", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=30000,
        subscribed_topic_names=names, subscribed_topic_regex=regex, server_assignor=None, topic_partitions=[])


@pytest.mark.asyncio
async def test_consumer_group_heartbeat_needs_read_on_the_group_and_describe_on_named_topics() -> None:
    rules = Rules()
    service, _ = await group_service(rules)
    got = await answer(service.consumer_group_heartbeat(ctx(1), heartbeat(names=["t1", "t2"])))
    assert (got.error_code, got.member_id) == (E.GROUP_AUTHORIZATION_FAILED, None)
    rules.allow((ALICE, O.READ, R.GROUP, "cg"), (ALICE, O.DESCRIBE, R.TOPIC, "t1"))
    got = await answer(service.consumer_group_heartbeat(ctx(1), heartbeat(names=["t1", "t2"])))
    assert (got.error_code, got.member_id) == (E.TOPIC_AUTHORIZATION_FAILED, None)
    assert "cg" not in service.runtime.shard(0).consumer_manager.groups
    got = await answer(service.consumer_group_heartbeat(ctx(1), heartbeat(names=["t1"])))
    assert (got.error_code, got.member_id) == (E.NONE, "m-1")


@pytest.mark.asyncio
async def test_a_regex_matches_only_the_topics_the_member_may_describe() -> None:
    rules = Rules((ALICE, O.READ, R.GROUP, "cg"), (ALICE, O.DESCRIBE, R.TOPIC, "t1"))
    service, _ = await group_service(rules)
    got = await answer(service.consumer_group_heartbeat(ctx(1), heartbeat(regex="t.*")))
    assert got.error_code == E.NONE
    manager = service.runtime.shard(0).consumer_manager
    for _ in range(20):  # the resolution runs as its own operation, just after
        service.clock.advance(1)  # type: ignore[attr-defined]
        await asyncio.sleep(0)
        if manager.groups["cg"].regexes:
            break
    assert manager.groups["cg"].regexes["t.*"].topics == ("t1",)


@pytest.mark.asyncio
async def test_consumer_group_describe_needs_describe_on_the_group_and_its_topics() -> None:
    rules = Rules((ALICE, O.READ, R.GROUP, "cg"), (ALICE, O.DESCRIBE, R.TOPIC, "t1"))
    service, _ = await group_service(rules)
    await answer(service.consumer_group_heartbeat(ctx(1), heartbeat(names=["t1"])))
    request = ConsumerGroupDescribeRequest[0](group_ids=["cg", "other"], include_authorized_operations=True)
    got = await service.consumer_group_describe(ctx(0), request)
    assert [(g.group_id, g.error_code) for g in got.groups] == [("cg", E.NONE),
                                                                ("other", E.GROUP_AUTHORIZATION_FAILED)]
    assert got.groups[0].authorized_operations == (1 << O.READ) | (1 << O.DESCRIBE)
    # A viewer who may describe the group but not its topic (Kafka 4.0): 29.
    viewer = "User:viewer"
    rules.allow((viewer, O.DESCRIBE, R.GROUP, "cg"))
    got = await service.consumer_group_describe(ctx(0, viewer), request)
    assert [(g.group_id, g.error_code, g.members) for g in got.groups][0] == ("cg", E.TOPIC_AUTHORIZATION_FAILED, [])
