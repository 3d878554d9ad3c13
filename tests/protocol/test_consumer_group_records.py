"""KIP-848 consumer-group records: hand-built golden bytes from Kafka's schemas, round trips of
every type, tombstones, and bad bytes raising only the module's record errors."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import consumer_offsets
from protocol.consumer_group_records import (
    RECORD_TYPES,
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupRecordValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
    decode_any_key,
    decode_key,
    decode_value,
    deserialize_any,
    encode_key,
    encode_value,
)
from protocol.consumer_offsets import MalformedRecordError, UnknownRecordVersion

T1 = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
T2 = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")


def h(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts))


def s16(text: str) -> str:
    """A key string as hex: int16 length + UTF-8."""
    raw = text.encode()
    return f"{len(raw):04x}" + raw.hex()


def c(text: str | None) -> str:
    """A compact (nullable) string as hex: unsigned varint length + 1, 0 = null (short strings)."""
    if text is None:
        return "00"
    raw = text.encode()
    return "%02x" % (len(raw) + 1) + raw.hex()


# ---------------------------------------------------------------------------------------------
# Golden keys: int16 record type, then int16-length strings.

GOLDEN_KEYS: list[tuple[ConsumerGroupRecordKey, bytes]] = [
    (ConsumerGroupMetadataKey("g1"), h("0003", s16("g1"))),
    (ConsumerGroupPartitionMetadataKey("g1"), h("0004", s16("g1"))),
    (ConsumerGroupMemberMetadataKey("g1", "m-1"), h("0005", s16("g1"), s16("m-1"))),
    (ConsumerGroupTargetAssignmentMetadataKey("g1"), h("0006", s16("g1"))),
    (ConsumerGroupTargetAssignmentMemberKey("g1", "m-1"), h("0007", s16("g1"), s16("m-1"))),
    (ConsumerGroupCurrentMemberAssignmentKey("g1", "m-1"), h("0008", s16("g1"), s16("m-1"))),
    (ConsumerGroupRegularExpressionKey("g1", "foo.*"), h("0010", s16("g1"), s16("foo.*"))),
]


@pytest.mark.parametrize(("key", "data"), GOLDEN_KEYS, ids=lambda x: type(x).__name__)
def test_key_golden(key: ConsumerGroupRecordKey, data: bytes) -> None:
    assert encode_key(key) == data
    assert decode_key(data) == key
    assert decode_any_key(data) == key


def test_golden_keys_cover_every_record_type() -> None:
    assert {int.from_bytes(d[:2], "big") for _, d in GOLDEN_KEYS} == RECORD_TYPES == {3, 4, 5, 6, 7, 8, 16}


# ---------------------------------------------------------------------------------------------
# Golden values: int16 version 0, flexible struct, "00" = an empty tagged-field section.

GOLDEN_VALUES: list[tuple[ConsumerGroupRecordKey, ConsumerGroupRecordValue, bytes]] = [
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7), h("0000", "00000007", "00")),
    (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(-1),
     h("0000", "ffffffff", "00")),
    (
        ConsumerGroupPartitionMetadataKey("g"),
        ConsumerGroupPartitionMetadataValue(
            (TopicMetadata(T1, "orders", 2, (PartitionMetadata(0, ("r1", "r2")), PartitionMetadata(1))),)
        ),
        h(
            "0000",
            "02",  # one topic
            T1.hex, c("orders"), "00000002",
            "03",  # two partition metadata
            "00000000", "03", c("r1"), c("r2"), "00",
            "00000001", "01", "00",
            "00",  # topic's tags
            "00",  # value's tags
        ),
    ),
    (
        ConsumerGroupMemberMetadataKey("g", "m"),
        ConsumerGroupMemberMetadataValue(
            instance_id=None, rack_id=None, client_id="cli", client_host="/10.0.0.1",
            subscribed_topic_names=("a", "b"), subscribed_topic_regex=None, rebalance_timeout_ms=30000,
            server_assignor="uniform",
        ),
        h("0000", "00", "00", c("cli"), c("/10.0.0.1"), "03", c("a"), c("b"), "00", "00007530", c("uniform"), "00"),
    ),
    (
        ConsumerGroupMemberMetadataKey("g", "m"),
        ConsumerGroupMemberMetadataValue(
            instance_id="i-1", rack_id="rack-a", client_id="cli", client_host="h",
            subscribed_topic_names=(), subscribed_topic_regex="t.*", rebalance_timeout_ms=-1, server_assignor=None,
        ),
        h("0000", c("i-1"), c("rack-a"), c("cli"), c("h"), "01", c("t.*"), "ffffffff", "00", "00"),
    ),
    (
        # A classic-protocol member: tag 0, size = struct + 1, then the presence marker 1.
        ConsumerGroupMemberMetadataKey("g", "m"),
        ConsumerGroupMemberMetadataValue(
            None, None, "c", "h", ("t",), None, 5000, None,
            ClassicMemberMetadata(45000, (ClassicProtocol("range", b"\x01\x02"),)),
        ),
        h(
            "0000", "00", "00", c("c"), c("h"), "02", c("t"), "00", "00001388", "00",
            "01",  # one tagged field
            "00",  # tag 0
            "11",  # size 17: marker 1 + timeout 4 + count 1 + name 6 + metadata 3 + two tag sections 2
            "01",  # present
            "0000afc8", "02", c("range"), "03" "0102", "00",
            "00",
        ),
    ),
    (
        ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(T1, (0, 2)), TopicPartitions(T2, (1,)))),
        h("0000", "03", T1.hex, "03", "00000000", "00000002", "00", T2.hex, "02", "00000001", "00", "00"),
    ),
    (
        ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        ConsumerGroupCurrentMemberAssignmentValue(
            5, 4, 1, (TopicPartitions(T1, (0,)), TopicPartitions(T2, ())), (TopicPartitions(T2, (3,)),)
        ),
        h(
            "0000", "00000005", "00000004", "01",
            "03", T1.hex, "02", "00000000", "00", T2.hex, "01", "00",
            "02", T2.hex, "02", "00000003", "00",
            "00",
        ),
    ),
    (
        ConsumerGroupRegularExpressionKey("g", "t.*"),
        ConsumerGroupRegularExpressionValue(("t1", "t2"), 42, 1700000000000),
        h("0000", "03", c("t1"), c("t2"), "000000000000002a", "0000018bcfe56800", "00"),
    ),
]


# Tagged fields, written only when not their default (tags in ascending order; each: uvarint
# tag, uvarint size, data).
GOLDEN_VALUES += [
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7, metadata_hash=0x0102030405060708,
                                                               creation_time_ms=1700000000000),
     h("0000", "00000007", "02", "00", "08", "0102030405060708", "01", "08", "0000018bcfe56800")),
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7, creation_time_ms=0),
     h("0000", "00000007", "01", "01", "08", "0000000000000000")),
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7, metadata_hash=-1),
     h("0000", "00000007", "01", "00", "08", "ffffffffffffffff")),
    (
        # KIP-1251: the epochs of the partitions, aligned with them; an empty list is not null.
        ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        ConsumerGroupCurrentMemberAssignmentValue(
            5, 4, 0, (TopicPartitions(T1, (0, 2), (3, 5)), TopicPartitions(T2, (), ())), ()
        ),
        h(
            "0000", "00000005", "00000004", "00",
            "03",
            T1.hex, "03", "00000000", "00000002", "01", "00", "09", "03", "00000003", "00000005",
            T2.hex, "01", "01", "00", "01", "01",
            "01",
            "00",
        ),
    ),
]


@pytest.mark.parametrize(("key", "value", "data"), GOLDEN_VALUES, ids=lambda x: type(x).__name__)
def test_value_golden(key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue, data: bytes) -> None:
    assert encode_value(value) == data
    assert decode_value(key, data) == value


def test_tombstones_stay_none() -> None:
    for key, _ in GOLDEN_KEYS:
        assert decode_value(key, None) is None
        assert deserialize_any(encode_key(key), None) == (key, None)


def test_unknown_tagged_fields_are_skipped() -> None:
    # Epoch 7 with a tag 3 of 2 bytes that this schema does not define.
    data = h("0000", "00000007", "01", "03", "02", "abcd")
    assert decode_value(ConsumerGroupMetadataKey("g"), data) == ConsumerGroupMetadataValue(7)


def test_classic_member_metadata_tag_marked_null() -> None:
    data = h("0000", "00", "00", c("c"), c("h"), "01", "00", "ffffffff", "00", "01", "00", "01", "00")
    value = decode_value(ConsumerGroupMemberMetadataKey("g", "m"), data)
    assert isinstance(value, ConsumerGroupMemberMetadataValue)
    assert value.classic_member_metadata is None


# ---------------------------------------------------------------------------------------------
# Both families, and what the shard sees


def test_classic_records_go_through_decode_any_key() -> None:
    key = consumer_offsets.OffsetCommitKey("g", "t", 1)
    value = consumer_offsets.OffsetCommitValue(5, "m", 1000, 2)
    k, v = consumer_offsets.serialize(key, value)
    assert deserialize_any(k, v) == (key, value)
    gk = consumer_offsets.GroupMetadataKey("g")
    assert decode_any_key(consumer_offsets.encode_key(gk)) == gk


def test_classic_decoder_still_refuses_consumer_group_records() -> None:
    """The shard's loader decodes with ``consumer_offsets`` and skips what it calls unknown."""
    for _, data in GOLDEN_KEYS:
        with pytest.raises(UnknownRecordVersion) as info:
            consumer_offsets.decode_key(data)
        assert info.value.version == int.from_bytes(data[:2], "big")


@pytest.mark.parametrize("record_type", [0, 1, 2, 9, 15, 17, -1])
def test_other_record_types_are_unknown_here(record_type: int) -> None:
    data = record_type.to_bytes(2, "big", signed=True) + h(s16("g"), s16("t"), "00000001")
    with pytest.raises(UnknownRecordVersion):
        decode_key(data)


def test_unknown_value_version() -> None:
    with pytest.raises(UnknownRecordVersion) as info:
        decode_value(ConsumerGroupMetadataKey("g"), h("0001", "00000007", "00"))
    assert info.value.version == 1
    assert info.value.what == "ConsumerGroupMetadataValue"


# ---------------------------------------------------------------------------------------------
# Round trips

names = st.text(max_size=12)
ids = st.uuids()
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
topic_partitions = st.builds(TopicPartitions, ids, st.lists(int32, max_size=5).map(tuple),
                             st.none() | st.lists(int32, max_size=5).map(tuple))
tp_lists = st.lists(topic_partitions, max_size=4).map(tuple)

keys = st.one_of(
    st.builds(ConsumerGroupMetadataKey, names),
    st.builds(ConsumerGroupPartitionMetadataKey, names),
    st.builds(ConsumerGroupMemberMetadataKey, names, names),
    st.builds(ConsumerGroupTargetAssignmentMetadataKey, names),
    st.builds(ConsumerGroupTargetAssignmentMemberKey, names, names),
    st.builds(ConsumerGroupCurrentMemberAssignmentKey, names, names),
    st.builds(ConsumerGroupRegularExpressionKey, names, names),
)

classic = st.builds(
    ClassicMemberMetadata,
    int32,
    st.lists(st.builds(ClassicProtocol, names, st.binary(max_size=300)), max_size=3).map(tuple),
)
# The key each value is decoded with (its record type).
pairs = st.one_of(
    st.builds(lambda v: (ConsumerGroupMetadataKey("g"), v), st.builds(ConsumerGroupMetadataValue, int32, int64, int64)),
    st.builds(
        lambda v: (ConsumerGroupPartitionMetadataKey("g"), v),
        st.builds(
            ConsumerGroupPartitionMetadataValue,
            st.lists(
                st.builds(
                    TopicMetadata, ids, names, int32,
                    st.lists(
                        st.builds(PartitionMetadata, int32, st.lists(names, max_size=3).map(tuple)), max_size=3
                    ).map(tuple),
                ),
                max_size=3,
            ).map(tuple),
        ),
    ),
    st.builds(
        lambda v: (ConsumerGroupMemberMetadataKey("g", "m"), v),
        st.builds(
            ConsumerGroupMemberMetadataValue,
            st.none() | names, st.none() | names, names, names, st.lists(names, max_size=200).map(tuple),
            st.none() | names, int32, st.none() | names, st.none() | classic,
        ),
    ),
    st.builds(
        lambda v: (ConsumerGroupTargetAssignmentMetadataKey("g"), v),
        st.builds(ConsumerGroupTargetAssignmentMetadataValue, int32),
    ),
    st.builds(
        lambda v: (ConsumerGroupTargetAssignmentMemberKey("g", "m"), v),
        st.builds(ConsumerGroupTargetAssignmentMemberValue, tp_lists),
    ),
    st.builds(
        lambda v: (ConsumerGroupCurrentMemberAssignmentKey("g", "m"), v),
        st.builds(ConsumerGroupCurrentMemberAssignmentValue, int32, int32, st.integers(-128, 127), tp_lists, tp_lists),
    ),
    st.builds(
        lambda v: (ConsumerGroupRegularExpressionKey("g", "r"), v),
        st.builds(ConsumerGroupRegularExpressionValue, st.lists(names, max_size=5).map(tuple), int64, int64),
    ),
)


@given(keys)
def test_key_round_trip(key: ConsumerGroupRecordKey) -> None:
    assert decode_key(encode_key(key)) == key


@given(pairs)
@settings(max_examples=300)
def test_value_round_trip(pair: tuple[ConsumerGroupRecordKey, ConsumerGroupRecordValue]) -> None:
    key, value = pair
    assert decode_value(key, encode_value(value)) == value


# ---------------------------------------------------------------------------------------------
# Bad bytes


@pytest.mark.parametrize(("key", "data"), GOLDEN_KEYS, ids=lambda x: type(x).__name__)
def test_truncated_keys_are_malformed(key: ConsumerGroupRecordKey, data: bytes) -> None:
    for cut in range(len(data)):
        with pytest.raises(MalformedRecordError):
            decode_key(data[:cut])


# Tagged fields, written only when not their default (tags in ascending order; each: uvarint
# tag, uvarint size, data).
GOLDEN_VALUES += [
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7, metadata_hash=0x0102030405060708,
                                                               creation_time_ms=1700000000000),
     h("0000", "00000007", "02", "00", "08", "0102030405060708", "01", "08", "0000018bcfe56800")),
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7, creation_time_ms=0),
     h("0000", "00000007", "01", "01", "08", "0000000000000000")),
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7, metadata_hash=-1),
     h("0000", "00000007", "01", "00", "08", "ffffffffffffffff")),
    (
        # KIP-1251: the epochs of the partitions, aligned with them; an empty list is not null.
        ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        ConsumerGroupCurrentMemberAssignmentValue(
            5, 4, 0, (TopicPartitions(T1, (0, 2), (3, 5)), TopicPartitions(T2, (), ())), ()
        ),
        h(
            "0000", "00000005", "00000004", "00",
            "03",
            T1.hex, "03", "00000000", "00000002", "01", "00", "09", "03", "00000003", "00000005",
            T2.hex, "01", "01", "00", "01", "01",
            "01",
            "00",
        ),
    ),
]


@pytest.mark.parametrize(("key", "value", "data"), GOLDEN_VALUES, ids=lambda x: type(x).__name__)
def test_truncated_values_are_malformed(key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue, data: bytes) -> None:
    # Every golden value ends with its tag section, so any cut leaves a field unread.
    for cut in range(len(data)):
        with pytest.raises(MalformedRecordError):
            decode_value(key, data[:cut])


@pytest.mark.parametrize(
    "data",
    [
        h("0000", "ff", "ff", "ff", "ff", "0f"),  # an array count of 2**32 - 1
        h("0000", "05", "0102"),  # an array of 4 in 2 bytes
        h("0000", "80"),  # a varint that never ends
    ],
)
def test_impossible_counts_are_malformed(data: bytes) -> None:
    for key in (ConsumerGroupTargetAssignmentMemberKey("g", "m"), ConsumerGroupPartitionMetadataKey("g")):
        with pytest.raises(MalformedRecordError):
            decode_value(key, data)


def test_a_malformed_value_names_its_record() -> None:
    key = ConsumerGroupTargetAssignmentMemberKey("g", "m")
    with pytest.raises(MalformedRecordError) as raised:
        decode_value(key, h("0000", "05", "0102"))
    assert str(raised.value) == ("ConsumerGroupTargetAssignmentMemberValue of ConsumerGroupTargetAssignmentMemberKey("
                                 "group_id='g', member_id='m'): array of 4 cannot fit in 2 bytes")


def test_non_utf8_key_string_is_malformed() -> None:
    with pytest.raises(MalformedRecordError):
        decode_key(h("0003", "0002", "c328"))


@given(st.sampled_from([k for k, _ in GOLDEN_KEYS]), st.binary(max_size=64))
def test_garbage_values_raise_only_record_errors(key: ConsumerGroupRecordKey, tail: bytes) -> None:
    try:
        value = decode_value(key, b"\x00\x00" + tail)
    except (MalformedRecordError, UnknownRecordVersion):
        return
    # What parses must re-encode to a prefix-compatible value of the same type.
    assert value is not None
    assert decode_value(key, encode_value(value)) == value


@given(st.binary(max_size=40))
def test_garbage_keys_raise_only_record_errors(data: bytes) -> None:
    try:
        key = decode_any_key(data)
    except (MalformedRecordError, UnknownRecordVersion):
        return
    assert decode_any_key(data) == key
