"""A real ``groupcoord serve`` process against bad ConsumerGroupHeartbeat and ConsumerGroupDescribe
requests (issue 31, "Bad input").

Every case is answered with Kafka's error code and message (or, for a request Kafka's own decoder
refuses, the connection is closed as for any malformed frame: ``test_bad_input.py``), leaves the
group exactly as ConsumerGroupDescribe showed it before, and the server goes on serving the
group's members on their own connection. Codes and messages: Kafka's ``GroupMetadataManager``
(https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java)
and ConsumerGroupHeartbeatRequest.json; the regex rules: ``coordinator/group/topic_regex.py``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from protocol.apis import ApiKey
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from protocol.errors import ErrorCode as E
from tests.conftest import ServerProcess
from tests.wire_client import WireClient

Q = ConsumerGroupHeartbeatRequest[1]
TP = Q.TopicPartitions
GROUP = "bad-input"
TOPIC = "orders"
#: Errors a heartbeat may get while the offsets partition loads or its leader settles.
_RETRIABLE = (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR)


@dataclass
class Member:
    member_id: str
    epoch: int
    instance_id: str | None = None


@dataclass
class Setup:
    server: ServerProcess
    topic_id: uuid.UUID
    #: A dynamic member and a static one (instance ``inst-1``), both live.
    dynamic: Member
    static: Member


def heartbeat(c: WireClient, **fields: Any) -> Any:
    request = dict(group_id=GROUP, member_id=None, member_epoch=0, instance_id=None, rack_id=None,
                   rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                   server_assignor=None, topic_partitions=None)
    request.update(fields)
    deadline = time.monotonic() + 20
    while True:
        response = c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, Q(**request))
        if response.error_code not in _RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def join(c: WireClient, instance_id: str | None = None) -> Member:
    member_id = str(uuid.uuid4())
    r = heartbeat(c, member_id=member_id, instance_id=instance_id, rebalance_timeout_ms=30_000,
                  subscribed_topic_names=[TOPIC], topic_partitions=[])
    assert (r.error_code, r.member_id) == (0, member_id), r
    return Member(member_id, r.member_epoch, instance_id)


def describe(c: WireClient, group_ids: list[str] | None = None) -> Any:
    return c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest[1](
        group_ids=group_ids or [GROUP], include_authorized_operations=False))


def group_view(c: WireClient) -> tuple[object, ...]:
    """What ConsumerGroupDescribe shows of the group: its epochs and every member's epoch,
    subscription and current and target assignment."""
    (g,) = describe(c).groups
    assert g.error_code == 0, g
    members = sorted((m.member_id, m.instance_id, m.member_epoch, tuple(m.subscribed_topic_names),
                      m.subscribed_topic_regex,
                      sorted((str(tp.topic_id), tuple(tp.partitions)) for tp in m.assignment.topic_partitions),
                      sorted((str(tp.topic_id), tuple(tp.partitions)) for tp in m.target_assignment.topic_partitions))
                     for m in g.members)
    return g.group_state, g.group_epoch, g.assignment_epoch, tuple(members)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    data: Path = tmp_path_factory.mktemp("cg-bad-input") / "data"
    # The longest session Kafka allows by default (no member expires while the cases run, each
    # of which heartbeats them), and a target assignment on every heartbeat that needs one.
    server = ServerProcess(data, {"offsets.topic.num.partitions": "1", "group.consumer.session.timeout.ms": "60000",
                                  "group.consumer.assignment.interval.ms": "0"})
    server.start()
    try:
        with WireClient(server.host, server.port) as c:
            CT = CreateTopicsRequest.CreatableTopic
            created = c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=5000, topics=[CT(
                name=TOPIC, num_partitions=3, replication_factor=1, assignments=[], configs=[])]))
            assert created.topics[0].error_code == 0, created
            metadata = c.request(ApiKey.METADATA, 12, MetadataRequest(version=12, topics=[
                MetadataRequest.MetadataRequestTopic(topic_id=None, name=TOPIC)], allow_auto_topic_creation=False,
                include_topic_authorized_operations=False))
            c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key=GROUP, key_type=0))
            dynamic = join(c)
            static = join(c, "inst-1")
            # Both settle: the dynamic member revokes what the static one is now assigned.
            for _ in range(20):
                for m in (dynamic, static):
                    r = heartbeat(c, member_id=m.member_id, member_epoch=m.epoch, instance_id=m.instance_id,
                                  topic_partitions=[TP(topic_id=metadata.topics[0].topic_id, partitions=p) for p in
                                                    [current_partitions(c, m.member_id)]])
                    assert r.error_code == 0, r
                    m.epoch = r.member_epoch
                if group_view(c)[0] == "Stable":
                    break
                time.sleep(0.2)
            assert group_view(c)[0] == "Stable", group_view(c)
        yield Setup(server, metadata.topics[0].topic_id, dynamic, static)
    finally:
        if server.alive():
            server.stop()


def current_partitions(c: WireClient, member_id: str) -> list[int]:
    (g,) = describe(c).groups
    for m in g.members:
        if m.member_id == member_id:
            return sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
    raise AssertionError(f"{member_id} is not in {g}")


def owned(setup: Setup, c: WireClient, member: Member) -> list[Any]:
    return [TP(topic_id=setup.topic_id, partitions=current_partitions(c, member.member_id))]


def still_served(setup: Setup) -> None:
    """The group's members heartbeat on a connection of their own, unaffected."""
    with WireClient(setup.server.host, setup.server.port) as c:
        for m in (setup.dynamic, setup.static):
            r = heartbeat(c, member_id=m.member_id, member_epoch=m.epoch, instance_id=m.instance_id)
            assert (r.error_code, r.member_epoch) == (0, m.epoch), r
    assert setup.server.alive()


@pytest.fixture
def client(setup: Setup) -> Iterator[WireClient]:
    with WireClient(setup.server.host, setup.server.port, timeout=60) as c:
        before = group_view(c)
        yield c
    with WireClient(setup.server.host, setup.server.port) as c:
        assert group_view(c) == before
    still_served(setup)


# ---------------------------------------------------------------------------------------------


#: Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid`` rules, in its order, each broken by
#: one field of an otherwise valid join of a new member (``tests/coordinator/group/consumer/
#: test_heartbeat.py`` checks them in the shard; here they cross the wire).
INVALID = [
    (dict(member_id=""), E.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(member_id="   "), E.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(group_id=" "), E.INVALID_REQUEST, "GroupId can't be empty."),
    (dict(instance_id=""), E.INVALID_REQUEST, "InstanceId can't be empty."),
    (dict(rack_id=" "), E.INVALID_REQUEST, "RackId can't be empty."),
    (dict(rebalance_timeout_ms=-1), E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."),
    (dict(topic_partitions=None), E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
    (dict(topic_partitions="owned"), E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
    (dict(subscribed_topic_names=None), E.INVALID_REQUEST,
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (dict(member_epoch=-2), E.INVALID_REQUEST, "InstanceId can't be null."),
    (dict(member_epoch=-3), E.INVALID_REQUEST, "MemberEpoch is invalid."),
    (dict(member_epoch=-2_147_483_648), E.INVALID_REQUEST, "MemberEpoch is invalid."),
    (dict(server_assignor="sticky"), E.UNSUPPORTED_ASSIGNOR,
     "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
]


@pytest.mark.parametrize(("fields", "code", "message"), INVALID, ids=[m for _, _, m in INVALID])
def test_each_validation_rule(setup: Setup, client: WireClient, fields: dict[str, Any], code: int,
                              message: str) -> None:
    request: dict[str, Any] = dict(member_id=str(uuid.uuid4()), rebalance_timeout_ms=30_000,
                                   subscribed_topic_names=[TOPIC], topic_partitions=[])
    request.update(fields)
    if request["topic_partitions"] == "owned":
        request["topic_partitions"] = owned(setup, client, setup.dynamic)
    r = heartbeat(client, **request)
    assert (r.error_code, r.error_message) == (code, message), r
    assert (r.member_epoch, r.assignment) == (0, None), r


def test_an_unknown_member_and_an_unknown_group(setup: Setup, client: WireClient) -> None:
    stranger = str(uuid.uuid4())
    r = heartbeat(client, member_id=stranger, member_epoch=3)
    assert (r.error_code, r.error_message) == (E.UNKNOWN_MEMBER_ID, f"Member {stranger} is not a member of group "
                                               f"{GROUP}."), r
    r = heartbeat(client, group_id="no-such-group", member_id=stranger, member_epoch=3)
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Consumer group no-such-group not found."), r
    (g,) = describe(client, ["no-such-group"]).groups
    assert g.error_code == E.GROUP_ID_NOT_FOUND, g


def test_an_epoch_from_the_future_is_fenced(setup: Setup, client: WireClient) -> None:
    m = setup.dynamic
    r = heartbeat(client, member_id=m.member_id, member_epoch=m.epoch + 1000, topic_partitions=owned(setup, client, m))
    assert r.error_code == E.FENCED_MEMBER_EPOCH, r
    assert r.error_message == (f"The consumer group member has a greater member epoch ({m.epoch + 1000}) than the one "
                               f"known by the group coordinator ({m.epoch}). The member must abandon all its "
                               "partitions and rejoin.")


def test_a_live_members_instance_id_is_not_released(setup: Setup, client: WireClient) -> None:
    newcomer = str(uuid.uuid4())
    r = heartbeat(client, member_id=newcomer, instance_id="inst-1", rebalance_timeout_ms=30_000,
                  subscribed_topic_names=[TOPIC], topic_partitions=[])
    assert r.error_code == E.UNRELEASED_INSTANCE_ID, r
    assert r.error_message == (f"Static member {newcomer} with instance id inst-1 cannot join the group because the "
                               f"instance id is owned by {setup.static.member_id} member.")


@pytest.mark.parametrize(("pattern", "description"), [
    ("(", "missing closing )"),
    ("orders-[", "missing closing ]"),
    ("a**", "invalid nested repetition operator"),
])
def test_an_invalid_regex(setup: Setup, client: WireClient, pattern: str, description: str) -> None:
    r = heartbeat(client, member_id=str(uuid.uuid4()), rebalance_timeout_ms=30_000, subscribed_topic_regex=pattern,
                  topic_partitions=[])
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION, r
    assert r.error_message.startswith(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: "), r
    assert description in r.error_message, r


def test_a_regex_too_large_to_compile(setup: Setup, client: WireClient) -> None:
    # 29,701 bytes (a Kafka string holds 32,767) whose program is beyond RE2's memory budget.
    pattern = "(" + "|".join(f"t{i:04d}.{{50}}" for i in range(2_700)) + ")"
    r = heartbeat(client, member_id=str(uuid.uuid4()), rebalance_timeout_ms=30_000, subscribed_topic_regex=pattern,
                  topic_partitions=[])
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION, r
    assert r.error_message == (f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: pattern too "
                               "large - compile failed."), r.error_message[-200:]


def test_a_regex_longer_than_a_kafka_string_closes_the_connection(setup: Setup, client: WireClient) -> None:
    """Kafka's generated readers refuse a string over 32,767 bytes ("string field ... had invalid
    length"), so the frame is malformed: the connection closes unanswered, as for any malformed
    frame (``test_bad_input.py``). Before the request decoder refused it, a 40,000-byte literal
    (which RE2 compiles) reached the ConsumerGroupRegularExpression key's encoder, whose int16
    length cannot hold it, and failed the heartbeat's handler."""
    with WireClient(setup.server.host, setup.server.port) as victim:
        victim.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, Q(
            group_id=GROUP, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30_000, subscribed_topic_names=None, subscribed_topic_regex="o" * 40_000,
            server_assignor=None, topic_partitions=[]))
        with pytest.raises((ConnectionError, OSError)):
            victim.read_frame()
    assert "string of 40000 bytes, more than the 32767 a request may hold" in setup.server.log_text()
    assert "handler failed" not in setup.server.log_text()


def test_a_regex_of_the_longest_kafka_string_is_served(setup: Setup, client: WireClient) -> None:
    """At 32,767 bytes the regex fits its record key: another group's member joins with it."""
    member_id = str(uuid.uuid4())
    r = heartbeat(client, group_id="long-regex", member_id=member_id, rebalance_timeout_ms=30_000,
                  subscribed_topic_regex="o" * 32_767, topic_partitions=[])
    assert (r.error_code, r.member_id) == (0, member_id), r
    (g,) = describe(client, ["long-regex"]).groups
    assert [m.subscribed_topic_regex for m in g.members] == ["o" * 32_767]
    r = heartbeat(client, group_id="long-regex", member_id=member_id, member_epoch=-1)
    assert r.error_code == 0, r


def test_unknown_topic_ids_in_owned_partitions(setup: Setup, client: WireClient) -> None:
    m = setup.dynamic
    unknown = [TP(topic_id=uuid.uuid4(), partitions=[0, 1, 2]), TP(topic_id=uuid.uuid4(), partitions=[7])]
    r = heartbeat(client, member_id=m.member_id, member_epoch=m.epoch, topic_partitions=owned(setup, client, m) + unknown)
    assert (r.error_code, r.member_epoch) == (0, m.epoch), r
    # A member one epoch behind must own a subset of its assignment: partitions of unknown
    # topics are not, so it is fenced rather than let back.
    r = heartbeat(client, member_id=m.member_id, member_epoch=m.epoch - 1, topic_partitions=unknown)
    assert r.error_code == E.FENCED_MEMBER_EPOCH, r
    assert r.error_message.startswith("The consumer group member has a smaller member epoch"), r


def test_a_million_owned_partitions(setup: Setup, client: WireClient) -> None:
    """At Kafka's decoder limit (1,000,000 array elements) the heartbeat is answered."""
    m = setup.dynamic
    started = time.monotonic()
    r = heartbeat(client, member_id=m.member_id, member_epoch=m.epoch,
                  topic_partitions=[TP(topic_id=setup.topic_id, partitions=list(range(1_000_000)))])
    assert (r.error_code, r.member_epoch) == (0, m.epoch), r
    assert time.monotonic() - started < 30


def test_over_a_million_owned_partitions_closes_the_connection(setup: Setup, client: WireClient) -> None:
    """Over the limit the frame is refused as Kafka's decoder refuses it: the connection closes,
    unanswered, and nothing else changes."""
    m = setup.dynamic
    with WireClient(setup.server.host, setup.server.port) as victim:
        victim.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, Q(
            group_id=GROUP, member_id=m.member_id, member_epoch=m.epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=[TP(topic_id=setup.topic_id, partitions=list(range(1_000_001)))]))
        with pytest.raises((ConnectionError, OSError)):
            victim.read_frame()


def test_describe_with_a_hundred_thousand_group_ids(setup: Setup, client: WireClient) -> None:
    ids = [f"nope-{i}" for i in range(100_000)]
    ids[50_000] = GROUP
    started = time.monotonic()
    response = describe(client, ids)
    assert time.monotonic() - started < 30
    assert [g.group_id for g in response.groups] == ids
    for i, g in enumerate(response.groups):
        if i == 50_000:
            assert (g.error_code, len(g.members)) == (0, 2), g
        else:
            assert (g.error_code, g.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group nope-{i} not found."), g


# --- Formerly a known gap, fixed in coordinator/runtime/writes.py ------------------------------


def test_known_gap_records_over_max_message_bytes_are_refused(setup: Setup, client: WireClient) -> None:
    """A join subscribing to 200,000 topic names makes a ConsumerGroupMemberMetadata record of
    about 2.6 MB, beyond the offsets topic's ``max.message.bytes`` (1 MiB). Kafka's runtime
    refuses the write (RecordTooLargeException) and the heartbeat is answered
    UNKNOWN_SERVER_ERROR (``GroupCoordinatorService.consumerGroupHeartbeat``), nothing written.
    ``WritePath._append`` refuses such an operation before replaying its records (RecordTooLarge)
    and the service answers UNKNOWN_SERVER_ERROR."""
    r = heartbeat(client, group_id="huge-subscription", member_id=str(uuid.uuid4()), rebalance_timeout_ms=30_000,
                  subscribed_topic_names=[f"topic-{i:06d}" for i in range(200_000)], topic_partitions=[])
    assert r.error_code == E.UNKNOWN_SERVER_ERROR, (r.error_code, r.error_message)
    (g,) = describe(client, ["huge-subscription"]).groups
    assert g.error_code == E.GROUP_ID_NOT_FOUND, g.error_code
