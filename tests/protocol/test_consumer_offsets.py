"""``__consumer_offsets`` key/value codecs: hand-written golden bytes, every version, tombstones."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MalformedRecordError,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordVersion,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_key,
    decode_offset_commit_value,
    deserialize,
    encode_key,
    encode_value,
    key_version,
    offset_commit_fields,
    serialize,
)


def h(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts))


def s16(text: str) -> str:
    """A non-flexible string as hex: int16 length + UTF-8."""
    raw = text.encode()
    return f"{len(raw):04x}" + raw.hex()


def compact(text: str) -> str:
    """A flexible (compact) string as hex: unsigned varint length+1 (all test strings < 127 bytes)."""
    raw = text.encode()
    return "%02x" % (len(raw) + 1) + raw.hex()


# ---------------------------------------------------------------------------------------------
# Keys


def test_offset_commit_key_golden() -> None:
    key = OffsetCommitKey("group-1", "topic", 3)
    data = encode_key(key)
    assert data == h("0001", s16("group-1"), s16("topic"), "00000003")
    assert len(data) == 2 + (2 + 7) + (2 + 5) + 4
    assert decode_key(data) == key


def test_offset_commit_key_version_0_reads_the_same() -> None:
    assert decode_key(h("0000", s16("g"), s16("t"), "7fffffff")) == OffsetCommitKey("g", "t", 2**31 - 1)


def test_group_metadata_key_golden() -> None:
    data = encode_key(GroupMetadataKey("été"))
    assert data == h("0002", "0005", "c3a974c3a9")
    assert decode_key(data) == GroupMetadataKey("été")


@pytest.mark.parametrize("version", [3, 5, 8, 15, 16, 99, -1])
def test_unknown_key_versions_are_reported(version: int) -> None:
    with pytest.raises(UnknownRecordVersion) as info:
        decode_key(h("%04x" % (version & 0xFFFF), s16("g")))
    assert info.value.version == version


# ---------------------------------------------------------------------------------------------
# OffsetCommitValue, one golden per version

OFFSET_FIELDS = {"offset": "0000000000000064", "epoch": "00000005", "commit": "00000000000003e8", "expire": "00000000000007d0"}
OFFSET_GOLDEN = {
    0: ("0000", OFFSET_FIELDS["offset"], s16("md"), OFFSET_FIELDS["commit"]),
    1: ("0001", OFFSET_FIELDS["offset"], s16("md"), OFFSET_FIELDS["commit"], OFFSET_FIELDS["expire"]),
    2: ("0002", OFFSET_FIELDS["offset"], s16("md"), OFFSET_FIELDS["commit"]),
    3: ("0003", OFFSET_FIELDS["offset"], OFFSET_FIELDS["epoch"], s16("md"), OFFSET_FIELDS["commit"]),
    4: ("0004", OFFSET_FIELDS["offset"], OFFSET_FIELDS["epoch"], compact("md"), OFFSET_FIELDS["commit"], "00"),
}
OFFSET_VALUES = {
    0: OffsetCommitValue(100, "md", 1000),
    1: OffsetCommitValue(100, "md", 1000, expire_timestamp=2000),
    2: OffsetCommitValue(100, "md", 1000),
    3: OffsetCommitValue(100, "md", 1000, leader_epoch=5),
    4: OffsetCommitValue(100, "md", 1000, leader_epoch=5),
}


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_value_golden(version: int) -> None:
    data = h(*OFFSET_GOLDEN[version])
    assert encode_value(OFFSET_VALUES[version], version) == data
    assert decode_offset_commit_value(data) == OFFSET_VALUES[version]


def test_offset_commit_value_default_version_is_3_and_sized_as_kafka() -> None:
    data = encode_value(OffsetCommitValue(7, "meta", 99, leader_epoch=2))
    assert data[:2] == b"\x00\x03"
    assert len(data) == 24 + len("meta")


def test_offset_commit_value_with_expiry_is_written_as_version_1() -> None:
    data = encode_value(OffsetCommitValue(7, "", 99, expire_timestamp=1234))
    assert data[:2] == b"\x00\x01"
    assert decode_offset_commit_value(data).expire_timestamp == 1234


def test_flexible_value_skips_unknown_tagged_fields() -> None:
    # v4 with one tagged field (tag 5, 3 bytes) a newer broker might add (KIP-915).
    data = h("0004", OFFSET_FIELDS["offset"], OFFSET_FIELDS["epoch"], compact("md"), OFFSET_FIELDS["commit"], "01", "05", "03", "aabbcc")
    assert decode_offset_commit_value(data) == OFFSET_VALUES[4]


# ---------------------------------------------------------------------------------------------
# GroupMetadataValue, one golden per version

MEMBER = MemberMetadata("m1", "cli", "/10.0.0.1", 300000, 10000, b"\x01\x02", b"\x03", group_instance_id="inst")


def _group_golden(version: int) -> bytes:
    flexible = version >= 4
    st_ = compact if flexible else s16

    def byt(b: str) -> str:  # bytes field
        n = len(b) // 2
        return (f"{n + 1:02x}" if flexible else f"{n:08x}") + b

    member = [st_("m1")]
    if version >= 3:
        member.append(st_("inst"))
    member += [st_("cli"), st_("/10.0.0.1")]
    if version >= 1:
        member.append("000493e0")  # rebalance timeout 300000
    member += ["00002710", byt("0102"), byt("03")]  # session timeout 10000
    if flexible:
        member.append("00")
    parts = [f"{version:04x}", st_("consumer"), "00000007", st_("range"), st_("m1")]
    if version >= 2:
        parts.append("0000018bcfe56800")  # currentStateTimestamp 1700000000000
    parts.append("02" if flexible else "00000001")  # one member
    parts += member
    if flexible:
        parts.append("00")
    return h(*parts)


def _group_value(version: int) -> GroupMetadataValue:
    member = MEMBER
    if version < 3:
        member = MemberMetadata(*[getattr(MEMBER, f) for f in MemberMetadata.__slots__[:-1]])  # type: ignore[arg-type]
    if version < 1:  # no rebalance timeout on the wire: the session timeout stands in
        member = MemberMetadata("m1", "cli", "/10.0.0.1", 10000, 10000, b"\x01\x02", b"\x03")
    ts = 1_700_000_000_000 if version >= 2 else -1
    return GroupMetadataValue("consumer", 7, "range", "m1", ts, (member,))


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_value_golden(version: int) -> None:
    data = _group_golden(version)
    assert decode_group_metadata_value(data) == _group_value(version)
    assert encode_value(_group_value(version), version) == data


def test_group_metadata_default_version_is_3() -> None:
    assert encode_value(_group_value(3)) == _group_golden(3)


def test_empty_group_record() -> None:
    # Written when a rebalance ends with no members: no protocol, no leader, no members.
    value = GroupMetadataValue("", 4, None, None, 123, ())
    data = encode_value(value)
    assert data == h("0003", "0000", "00000004", "ffff", "ffff", "000000000000007b", "00000000")
    assert decode_group_metadata_value(data) == value
    flexible = encode_value(value, 4)
    assert flexible == h("0004", "01", "00000004", "00", "00", "000000000000007b", "01", "00")
    assert decode_group_metadata_value(flexible) == value


# ---------------------------------------------------------------------------------------------
# Tombstones, serialize/deserialize


def test_tombstones() -> None:
    key = OffsetCommitKey("g", "t", 0)
    assert serialize(key, None) == (encode_key(key), None)
    assert deserialize(encode_key(key), None) == (key, None)
    gkey = GroupMetadataKey("g")
    assert deserialize(*serialize(gkey, None)) == (gkey, None)


def test_serialize_pairs_key_and_value() -> None:
    key, value = OffsetCommitKey("g", "t", 1), OffsetCommitValue(5, "", 10)
    assert deserialize(*serialize(key, value)) == (key, value)
    gkey, gvalue = GroupMetadataKey("g"), _group_value(3)
    assert deserialize(*serialize(gkey, gvalue)) == (gkey, gvalue)


@pytest.mark.parametrize("version", [5, 100, -1])
def test_unknown_value_versions(version: int) -> None:
    raw = h("%04x" % (version & 0xFFFF), "00" * 40)
    with pytest.raises(UnknownRecordVersion):
        decode_offset_commit_value(raw)
    with pytest.raises(UnknownRecordVersion):
        decode_group_metadata_value(raw)


def test_null_in_non_nullable_fields_is_malformed() -> None:
    with pytest.raises(MalformedRecordError):
        decode_key(h("0001", "ffff", s16("t"), "00000000"))
    with pytest.raises(MalformedRecordError):
        decode_offset_commit_value(h("0000", OFFSET_FIELDS["offset"], "ffff", OFFSET_FIELDS["commit"]))


# ---------------------------------------------------------------------------------------------
# Hypothesis: every version round trips; garbage raises only our two exceptions

text = st.text(max_size=20)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def offset_values(draw: st.DrawFn, version: int) -> OffsetCommitValue:
    return OffsetCommitValue(
        draw(i64),
        draw(text),
        draw(i64),
        draw(i32) if version >= 3 else -1,
        draw(i64) if version == 1 else None,
    )


@st.composite
def group_values(draw: st.DrawFn, version: int) -> GroupMetadataValue:
    members = []
    for _ in range(draw(st.integers(0, 3))):
        session = draw(i32)
        members.append(
            MemberMetadata(
                draw(text),
                draw(text),
                draw(text),
                draw(i32) if version >= 1 else session,
                session,
                draw(st.binary(max_size=40)),
                draw(st.binary(max_size=40)),
                draw(st.none() | text) if version >= 3 else None,
            )
        )
    return GroupMetadataValue(
        draw(text),
        draw(i32),
        draw(st.none() | text),
        draw(st.none() | text),
        draw(i64) if version >= 2 else -1,
        tuple(members),
    )


@settings(max_examples=60, deadline=None)
@given(data=st.data(), version=st.integers(0, 4))
def test_offset_commit_value_round_trip(data: st.DataObject, version: int) -> None:
    value = data.draw(offset_values(version))
    raw = encode_value(value, version)
    assert int.from_bytes(raw[:2], "big") == version
    assert decode_offset_commit_value(raw) == value
    if version != 4:
        meta = len(value.metadata.encode())
        assert len(raw) == {0: 20, 1: 28, 2: 20, 3: 24}[version] + meta


@settings(max_examples=60, deadline=None)
@given(data=st.data(), version=st.integers(0, 4))
def test_group_metadata_value_round_trip(data: st.DataObject, version: int) -> None:
    value = data.draw(group_values(version))
    assert decode_group_metadata_value(encode_value(value, version)) == value


@settings(max_examples=60, deadline=None)
@given(group=text, topic=text, partition=i32)
def test_key_round_trip(group: str, topic: str, partition: int) -> None:
    key = OffsetCommitKey(group, topic, partition)
    raw = encode_key(key)
    assert len(raw) == 2 + (2 + len(group.encode())) + (2 + len(topic.encode())) + 4
    assert decode_key(raw) == key
    assert decode_key(encode_key(GroupMetadataKey(group))) == GroupMetadataKey(group)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=80), version=st.integers(0, 4), kind=st.sampled_from(["key", "offset", "group"]))
def test_garbage_raises_only_record_errors(raw: bytes, version: int, kind: str) -> None:
    data = version.to_bytes(2, "big") + raw
    decoder = {"key": decode_key, "offset": decode_offset_commit_value, "group": decode_group_metadata_value}[kind]
    try:
        decoder(data)
    except (MalformedRecordError, UnknownRecordVersion):
        pass


@settings(max_examples=100, deadline=None)
@given(data=st.data(), version=st.integers(0, 4), cut=st.integers(0, 10**4))
def test_truncated_values_are_malformed(data: st.DataObject, version: int, cut: int) -> None:
    raw = encode_value(data.draw(group_values(version)), version)
    short = raw[: cut % len(raw)]
    with pytest.raises(MalformedRecordError):
        decode_group_metadata_value(short)


# ---------------------------------------------------------------------------------------------
# Hot paths: they must agree with the general reader on every version, and on garbage raise
# exactly what it raises.


@settings(max_examples=100, deadline=None)
@given(data=st.data(), version=st.integers(0, 4))
def test_offset_commit_fields_agree_with_the_general_reader(data: st.DataObject, version: int) -> None:
    raw = encode_value(data.draw(offset_values(version)), version)
    value = decode_offset_commit_value(raw)
    assert offset_commit_fields(raw) == (value.offset, value.leader_epoch, value.metadata,
                                         value.commit_timestamp, value.expire_timestamp)


@settings(max_examples=100, deadline=None)
@given(group=text, topic=text, partition=i32, version=st.integers(0, 1))
def test_offset_commit_key_fast_decoder_agrees(group: str, topic: str, partition: int, version: int) -> None:
    raw = version.to_bytes(2, "big") + encode_key(OffsetCommitKey(group, topic, partition))[2:]
    assert key_version(raw) == version
    assert decode_offset_commit_key(raw) == (group, topic, partition)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=60), version=st.integers(-1, 4))
@example(raw=b"\x00\x00", version=2)  # a valid group metadata key: the offset-key reader must refuse it
def test_hot_paths_refuse_garbage_like_the_general_reader(raw: bytes, version: int) -> None:
    data = version.to_bytes(2, "big", signed=True) + raw
    for fast, general in ((decode_offset_commit_key, decode_key), (offset_commit_fields, decode_offset_commit_value)):
        try:
            expected = general(data)
        except (MalformedRecordError, UnknownRecordVersion) as exc:
            with pytest.raises(type(exc)):
                fast(data)
            continue
        if isinstance(expected, OffsetCommitKey):
            assert fast(data) == (expected.group, expected.topic, expected.partition)
        elif isinstance(expected, OffsetCommitValue):
            assert fast(data) == (expected.offset, expected.leader_epoch, expected.metadata,
                                  expected.commit_timestamp, expected.expire_timestamp)
        else:
            with pytest.raises(MalformedRecordError):  # a group metadata key is not an offset key
                fast(data)
