"""The KIP-848 wire messages: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), v0-v1.

Most tests reach the request decoder directly (``body_decoder``, what ServerConnection compiles for
a served API); one feeds a connection, now that both are served (coordinator/group/service.py). Golden frames are written out byte by byte from Kafka's message
definitions (https://github.com/apache/kafka/tree/trunk/clients/src/main/resources/common/message)
and the flexible encoding of KIP-482: compact strings and arrays carry length + 1 as an unsigned
varint (0 is null), every struct ends with a tagged-field section.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.apis import SUPPORTED_VERSIONS, ApiKey, is_flexible, request_class, response_class
from protocol.connection import ServerConnection, encode_response
from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.events import RequestReceived
from protocol.nullability import NullInNonNullableField, null_checker
from protocol.request_codec import MalformedRequest, body_decoder
from tests.protocol.test_connection import frame, request_frame, request_header
from tests.protocol.test_roundtrip import message_strategy, reencode, representative

KEYS = (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)
TARGETS = [(key, version) for key in KEYS for version in (0, 1)]
IDS = [f"{key.name}-v{version}" for key, version in TARGETS]

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def compact(text: str | None) -> bytes:
    """A compact (nullable) string: uvarint(length + 1), 0 for null, then UTF-8."""
    if text is None:
        return b"\x00"
    raw = text.encode("utf-8")
    assert len(raw) < 127
    return bytes([len(raw) + 1]) + raw


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def split_request(data: bytes) -> tuple[int, int, int, str | None, bytes]:
    """Size, header v2 (api key, version, correlation id, client id, empty tags), then the body."""
    (size,) = struct.unpack_from(">i", data, 0)
    assert size == len(data) - 4
    api_key, version, correlation_id, client_len = struct.unpack_from(">hhih", data, 4)
    pos = 14 + max(client_len, 0)
    client_id = None if client_len == -1 else data[14:pos].decode()
    assert data[pos] == 0, "header v2 ends with an empty tagged-field section"
    return api_key, version, correlation_id, client_id, data[pos + 1:]


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------


def test_known_and_advertised() -> None:
    """The codec knows both APIs and ApiVersions offers v0-v1 of each."""
    assert (int(ApiKey.CONSUMER_GROUP_HEARTBEAT), int(ApiKey.CONSUMER_GROUP_DESCRIBE)) == (68, 69)
    assert request_class(68) is ConsumerGroupHeartbeatRequest
    assert response_class(68) is ConsumerGroupHeartbeatResponse
    assert request_class(69) is ConsumerGroupDescribeRequest
    assert response_class(69) is ConsumerGroupDescribeResponse
    for key in KEYS:
        assert SUPPORTED_VERSIONS[key] == (0, 1)
        assert request_class(key).API_KEY == response_class(key).API_KEY == key
        assert (request_class(key).min_version, request_class(key).max_version) == (0, 1)
        assert (response_class(key).min_version, response_class(key).max_version) == (0, 1)
        assert is_flexible(key, 0) and is_flexible(key, 1)


def test_a_connection_decodes_them() -> None:
    request = ConsumerGroupHeartbeatRequest[1](group_id="g", member_id="m", member_epoch=0)
    conn = ServerConnection()
    conn.receive_data(request_frame(request, 1, 7))
    event = conn.next_event()
    assert isinstance(event, RequestReceived), event
    assert (event.api_key, event.api_version, event.correlation_id) == (68, 1, 7)
    assert (event.request.group_id, event.request.member_id) == ("g", "m")


def test_field_names_per_version() -> None:
    """v1 adds SubscribedTopicRegex to the heartbeat request and MemberType to described members."""
    def names(struct_field: Any, version: int) -> list[str]:
        return [f.name for f in struct_field._fields if f.for_version_q(version)]

    heartbeat_v0 = ["group_id", "member_id", "member_epoch", "instance_id", "rack_id", "rebalance_timeout_ms",
                    "subscribed_topic_names", "server_assignor", "topic_partitions"]
    assert names(ConsumerGroupHeartbeatRequest._struct, 0) == heartbeat_v0
    assert names(ConsumerGroupHeartbeatRequest._struct, 1) == [
        *heartbeat_v0[:7], "subscribed_topic_regex", *heartbeat_v0[7:]]
    for version in (0, 1):
        assert names(ConsumerGroupHeartbeatResponse._struct, version) == [
            "throttle_time_ms", "error_code", "error_message", "member_id", "member_epoch",
            "heartbeat_interval_ms", "assignment"]
        assert names(ConsumerGroupDescribeRequest._struct, version) == ["group_ids", "include_authorized_operations"]
    member = ConsumerGroupDescribeResponse.DescribedGroup.Member._struct
    member_v0 = ["member_id", "instance_id", "rack_id", "member_epoch", "client_id", "client_host",
                 "subscribed_topic_names", "subscribed_topic_regex", "assignment", "target_assignment"]
    assert names(member, 0) == member_v0
    assert names(member, 1) == [*member_v0, "member_type"]


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("api_key", "version"), TARGETS, ids=IDS)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_request_round_trip(api_key: ApiKey, version: int, nulls: bool) -> None:
    cls = request_class(api_key)
    request = representative(cls, version, nulls=nulls)
    encoded = bytes(request.encode(version=version))
    decoded = body_decoder(cls, version)(encoded)
    null_checker(cls, version)(decoded)
    assert decoded == request
    assert reencode(decoded, version) == encoded


@pytest.mark.parametrize(("api_key", "version"), TARGETS, ids=IDS)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_response_round_trip(api_key: ApiKey, version: int, nulls: bool) -> None:
    cls = response_class(api_key)
    response = representative(cls, version, nulls=nulls)
    data = encode_response(api_key, version, 99, response)
    assert data[4:9] == i32(99) + b"\x00", "response header v1"
    assert cls.decode(data[9:], version=version) == response
    assert cls.decode(data, version=version, header=True, framed=True) == response


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), target=st.sampled_from(TARGETS))
def test_request_round_trip_fuzzed_values(data: st.DataObject, target: tuple[ApiKey, int]) -> None:
    api_key, version = target
    cls = request_class(api_key)
    request = data.draw(message_strategy(cls, version))
    encoded = bytes(request.encode(version=version))
    assert body_decoder(cls, version)(encoded) == request


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), target=st.sampled_from(TARGETS), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_response_round_trip_fuzzed_values(
    data: st.DataObject, target: tuple[ApiKey, int], correlation_id: int
) -> None:
    api_key, version = target
    cls = response_class(api_key)
    response = data.draw(message_strategy(cls, version))
    encoded = encode_response(api_key, version, correlation_id, response)
    assert cls.decode(encoded, version=version, header=True, framed=True) == response


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_nulls_round_trip_as_null(version: int) -> None:
    """Every "unchanged since the last heartbeat" field may be null, and stays null."""
    values: dict[str, Any] = dict(group_id="g", member_id="m", member_epoch=5, instance_id=None, rack_id=None,
                                  subscribed_topic_names=None, server_assignor=None, topic_partitions=None)
    if version == 1:
        values["subscribed_topic_regex"] = None
    request = ConsumerGroupHeartbeatRequest[version](**values)
    encoded = bytes(request.encode(version=version))
    decoded = body_decoder(ConsumerGroupHeartbeatRequest, version)(encoded)
    null_checker(ConsumerGroupHeartbeatRequest, version)(decoded)
    for name, value in values.items():
        assert getattr(decoded, name) == value
    assert decoded.rebalance_timeout_ms == -1, "the schema default"
    # and an empty list is not a null
    request.subscribed_topic_names = []
    request.topic_partitions = []
    decoded = body_decoder(ConsumerGroupHeartbeatRequest, version)(bytes(request.encode(version=version)))
    assert (decoded.subscribed_topic_names, decoded.topic_partitions) == ([], [])


def test_group_id_is_not_nullable() -> None:
    body = b"\x00" + compact("m") + i32(0) + b"\x00\x00" + i32(-1) + b"\x00\x00\x00\x00\x00"
    decoded = body_decoder(ConsumerGroupHeartbeatRequest, 1)(body)
    assert decoded.group_id is None
    with pytest.raises(NullInNonNullableField, match="group_id"):
        null_checker(ConsumerGroupHeartbeatRequest, 1)(decoded)


# --------------------------------------------------------------------------------------------
# Golden frames, written out by hand
# --------------------------------------------------------------------------------------------

HEARTBEAT_V1_BODY = b"".join([
    compact("grp"),                          # GroupId
    compact("member-1"),                     # MemberId
    i32(0),                                  # MemberEpoch: 0 joins
    compact(None),                           # InstanceId: null
    compact("rack-a"),                       # RackId
    i32(300_000),                            # RebalanceTimeoutMs
    b"\x03" + compact("t1") + compact("t2"), # SubscribedTopicNames: 2 elements
    compact("^t.*"),                         # SubscribedTopicRegex (v1 only)
    compact("uniform"),                      # ServerAssignor
    b"\x02",                                 # TopicPartitions: 1 element
    TOPIC_ID.bytes,                          #   TopicId
    b"\x03" + i32(0) + i32(7),               #   Partitions [0, 7]
    b"\x00",                                 #   its tagged fields
    b"\x00",                                 # tagged fields
])
HEARTBEAT_V1_FRAME = frame(
    struct.pack(">hhih", 68, 1, 0x01020304, 2) + b"kp" + b"\x00" + HEARTBEAT_V1_BODY)


def test_golden_heartbeat_request_v1() -> None:
    api_key, version, correlation_id, client_id, body = split_request(HEARTBEAT_V1_FRAME)
    assert (api_key, version, correlation_id, client_id) == (68, 1, 0x01020304, "kp")
    assert request_header(68, 1, 0x01020304, "kp", flexible=True) == HEARTBEAT_V1_FRAME[4:17]
    request = body_decoder(request_class(api_key), version)(body)
    assert (request.group_id, request.member_id, request.member_epoch) == ("grp", "member-1", 0)
    assert (request.instance_id, request.rack_id, request.rebalance_timeout_ms) == (None, "rack-a", 300_000)
    assert request.subscribed_topic_names == ["t1", "t2"]
    assert request.subscribed_topic_regex == "^t.*"
    assert request.server_assignor == "uniform"
    assert [(tp.topic_id, tp.partitions) for tp in request.topic_partitions] == [(TOPIC_ID, [0, 7])]
    # kafka-python's client framing of the same values writes the same bytes
    request.with_header(correlation_id=0x01020304, client_id="kp")
    assert bytes(request.encode(version=1, header=True, framed=True)) == HEARTBEAT_V1_FRAME


def test_golden_heartbeat_request_v0_has_no_regex() -> None:
    """The v0 body is the v1 body without SubscribedTopicRegex."""
    regex_at = HEARTBEAT_V1_BODY.index(compact("^t.*"))
    v0_body = HEARTBEAT_V1_BODY[:regex_at] + HEARTBEAT_V1_BODY[regex_at + len(compact("^t.*")):]
    request = body_decoder(ConsumerGroupHeartbeatRequest, 0)(v0_body)
    assert request.subscribed_topic_names == ["t1", "t2"]
    assert request.server_assignor == "uniform"
    assert [(tp.topic_id, tp.partitions) for tp in request.topic_partitions] == [(TOPIC_ID, [0, 7])]
    assert bytes(reencode(request, 0)) == v0_body
    # read as v1, the same bytes are misaligned: the v0 body is not a v1 body
    with pytest.raises(MalformedRequest):
        body_decoder(ConsumerGroupHeartbeatRequest, 1)(v0_body)


HEARTBEAT_RESPONSE_V1_BODY = b"".join([
    i32(0),                                  # ThrottleTimeMs
    struct.pack(">h", 0),                    # ErrorCode
    compact(None),                           # ErrorMessage
    compact("member-1"),                     # MemberId
    i32(1),                                  # MemberEpoch
    i32(5000),                               # HeartbeatIntervalMs
    b"\x01",                                 # Assignment: present (a nullable struct's marker)
    b"\x02" + TOPIC_ID.bytes + b"\x02" + i32(3) + b"\x00",  # TopicPartitions [(id, [3])]
    b"\x00",                                 # Assignment's tagged fields
    b"\x00",                                 # tagged fields
])


def test_golden_heartbeat_response_v1() -> None:
    cls = ConsumerGroupHeartbeatResponse
    response = cls[1](throttle_time_ms=0, error_code=0, error_message=None, member_id="member-1", member_epoch=1,
                      heartbeat_interval_ms=5000, assignment=cls.Assignment(topic_partitions=[
                          cls.Assignment.TopicPartitions(topic_id=TOPIC_ID, partitions=[3])]))
    expected = frame(i32(42) + b"\x00" + HEARTBEAT_RESPONSE_V1_BODY)
    assert encode_response(68, 1, 42, response) == expected
    decoded = cls.decode(HEARTBEAT_RESPONSE_V1_BODY, version=1)
    assert decoded == response
    # a null assignment is the single byte 0xff (-1 as a signed int8)
    response.assignment = None
    no_assignment = HEARTBEAT_RESPONSE_V1_BODY[:-(2 + 1 + 16 + 1 + 4 + 1 + 1)]
    assert cls.decode(no_assignment + b"\xff\x00", version=1).assignment is None
    assert bytes(response.encode(version=1)) == no_assignment + b"\xff\x00"


DESCRIBE_V1_BODY = b"\x03" + compact("g1") + compact("g2") + b"\x01" + b"\x00"  # GroupIds, true, tags


@pytest.mark.parametrize("version", [0, 1])
def test_golden_describe_request(version: int) -> None:
    """Both versions share the body: v1 changed only the response."""
    data = frame(struct.pack(">hhih", 69, version, 9, -1) + b"\x00" + DESCRIBE_V1_BODY)
    api_key, got_version, correlation_id, client_id, body = split_request(data)
    assert (api_key, got_version, correlation_id, client_id) == (69, version, 9, None)
    assert body == DESCRIBE_V1_BODY
    request = body_decoder(request_class(api_key), version)(body)
    assert request.group_ids == ["g1", "g2"]
    assert request.include_authorized_operations is True
    assert bytes(reencode(request, version)) == DESCRIBE_V1_BODY
    assert request_header(69, version, 9, None, flexible=True) == data[4:15]
    request.with_header(correlation_id=9, client_id=None)
    assert bytes(request.encode(version=version, header=True, framed=True)) == data


def _assignment(topic: str, partitions: list[int]) -> bytes:
    return b"\x02" + TOPIC_ID.bytes + compact(topic) + bytes([len(partitions) + 1]) + b"".join(
        i32(p) for p in partitions) + b"\x00" + b"\x00"


def _describe_response_body(member_type: bytes) -> bytes:
    return b"".join([
        i32(0),                              # ThrottleTimeMs
        b"\x02",                             # Groups: 1
        struct.pack(">h", 0),                #   ErrorCode
        compact(None),                       #   ErrorMessage
        compact("g1"),                       #   GroupId
        compact("Stable"),                   #   GroupState
        i32(4),                              #   GroupEpoch
        i32(4),                              #   AssignmentEpoch
        compact("uniform"),                  #   AssignorName
        b"\x02",                             #   Members: 1
        compact("m1"),                       #     MemberId
        compact(None),                       #     InstanceId
        compact(None),                       #     RackId
        i32(4),                              #     MemberEpoch
        compact("c1"),                       #     ClientId
        compact("/10.0.0.1"),                #     ClientHost
        b"\x02" + compact("t1"),             #     SubscribedTopicNames
        compact(None),                       #     SubscribedTopicRegex
        _assignment("t1", [0, 1]),           #     Assignment
        _assignment("t1", [0]),              #     TargetAssignment
        member_type,                         #     MemberType (v1 only)
        b"\x00",                             #     member's tagged fields
        i32(-(2**31)),                       #   AuthorizedOperations: not asked for
        b"\x00",                             #   group's tagged fields
        b"\x00",                             # tagged fields
    ])


@pytest.mark.parametrize(("version", "member_type"), [(0, b""), (1, b"\x01")])
def test_golden_describe_response(version: int, member_type: bytes) -> None:
    cls = ConsumerGroupDescribeResponse
    body = _describe_response_body(member_type)
    decoded = cls.decode(body, version=version)
    (group,) = decoded.groups
    assert (group.group_id, group.group_state, group.group_epoch, group.assignor_name) == ("g1", "Stable", 4, "uniform")
    assert group.authorized_operations == -(2**31)
    (member,) = group.members
    assert (member.member_id, member.instance_id, member.rack_id, member.subscribed_topic_regex) == (
        "m1", None, None, None)
    assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [("t1", [0, 1])]
    assert [(tp.topic_name, tp.partitions) for tp in member.target_assignment.topic_partitions] == [("t1", [0])]
    if version == 1:
        assert member.member_type == 1
    decoded._header = None  # unset on decoded messages (see test_roundtrip.reencode)
    assert encode_response(69, version, 3, decoded) == frame(i32(3) + b"\x00" + body)


def test_member_type_defaults_to_unknown() -> None:
    member = ConsumerGroupDescribeResponse.DescribedGroup.Member()
    assert member.member_type == -1
