"""Keys and values of the KIP-848 consumer-group records in ``__consumer_offsets``.

The framing is that of the classic records (``protocol/consumer_offsets.py``, whose reader, writer
and errors this module uses): a key is ``int16 version`` + key struct, the key version being the
record type; a value is ``int16 version`` + value struct; a null value is a tombstone. Schemas:
https://github.com/apache/kafka/tree/trunk/group-coordinator/src/main/resources/common/message
(``ConsumerGroup*Key.json`` / ``ConsumerGroup*Value.json``), KIP-848:
https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol

=========  ==========================================  =========================================
key ver.   key                                         value (version 0, flexible)
=========  ==========================================  =========================================
3          ConsumerGroupMetadataKey                    ConsumerGroupMetadataValue (group epoch)
4          ConsumerGroupPartitionMetadataKey           ConsumerGroupPartitionMetadataValue
5          ConsumerGroupMemberMetadataKey              ConsumerGroupMemberMetadataValue
6          ConsumerGroupTargetAssignmentMetadataKey    ConsumerGroupTargetAssignmentMetadataValue
7          ConsumerGroupTargetAssignmentMemberKey      ConsumerGroupTargetAssignmentMemberValue
8          ConsumerGroupCurrentMemberAssignmentKey     ConsumerGroupCurrentMemberAssignmentValue
16         ConsumerGroupRegularExpressionKey           ConsumerGroupRegularExpressionValue
=========  ==========================================  =========================================

Keys are not flexible (int16-length strings). Values are flexible from version 0 (KIP-482): compact
strings, bytes and arrays (unsigned varint length + 1), a tagged-field section after every struct,
and topic ids as 16 raw bytes (the ``uuid`` type). Tagged fields defined: tag 0 of
ConsumerGroupMemberMetadataValue, ``ClassicMemberMetadata`` (a nullable struct, written only when
not null, its data prefixed by an unsigned varint 1 as Kafka's generated code does for a tagged
nullable struct); tags 0 ``MetadataHash`` and 1 ``CreationTimeMs`` (int64) of
ConsumerGroupMetadataValue; tag 0 ``AssignmentEpochs`` (nullable []int32) of TopicPartitions. Each
is written only when it differs from its default. Other tags are skipped on read, as a reader of
an older schema would.

The group shard replays these records (``coordinator/group/consumer/replay.py``); the classic
decoder ``consumer_offsets.decode_key`` still raises UnknownRecordVersion for them.
:func:`decode_any_key` and :func:`deserialize_any` decode both families, for tools such as
``dump-log``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from .consumer_offsets import (
    MalformedRecordError,
    RecordKey,
    RecordReader,
    RecordValue,
    RecordWriter,
    UnknownRecordVersion,
)
from .consumer_offsets import decode_key as decode_classic_key
from .consumer_offsets import decode_value as decode_classic_value

__all__ = [
    "CONSUMER_GROUP_METADATA",
    "CONSUMER_GROUP_PARTITION_METADATA",
    "CONSUMER_GROUP_MEMBER_METADATA",
    "CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA",
    "CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER",
    "CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT",
    "CONSUMER_GROUP_REGULAR_EXPRESSION",
    "RECORD_TYPES",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupRegularExpressionKey",
    "ConsumerGroupMetadataValue",
    "PartitionMetadata",
    "TopicMetadata",
    "ConsumerGroupPartitionMetadataValue",
    "ClassicProtocol",
    "ClassicMemberMetadata",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "TopicPartitions",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupRegularExpressionValue",
    "ConsumerGroupRecordKey",
    "ConsumerGroupRecordValue",
    "encode_key",
    "decode_key",
    "encode_value",
    "decode_value",
    "decode_any_key",
    "deserialize_any",
]

# Record types (key versions), from each key's "validVersions".
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})

#: The only value version of every record here ("validVersions": "0").
_VALUE_VERSION = 0
_CLASSIC_MEMBER_METADATA_TAG = 0
_METADATA_HASH_TAG = 0
_CREATION_TIME_TAG = 1
_ASSIGNMENT_EPOCHS_TAG = 0


# ---------------------------------------------------------------------------------------------
# Keys


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str


# ---------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    """The group epoch, bumped whenever membership, subscriptions or subscribed topics change.

    ``metadata_hash`` (tag 0, Kafka 4.1, KIP-1101) hashes the subscribed topics' metadata, so a
    reloaded group knows whether its topics changed while it was away; ``creation_time_ms``
    (tag 1, KIP-1282) is when the group was created, -1 unknown. Both are written only when not
    their default, as Kafka's generated code does."""

    epoch: int
    metadata_hash: int = 0
    creation_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    racks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A subscribed topic as the group last saw it. ``partition_metadata`` (racks per partition)
    is deprecated and unused after Kafka 4.0, but still read and written."""

    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member using the classic protocol in a consumer group joined with."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    """A member's subscription. ``classic_member_metadata`` is None for consumer-protocol members."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """Partitions of one topic. ``assignment_epochs`` (tag 0, nullable, KIP-1251) is aligned with
    ``partitions``: the member epoch at which each partition was assigned, which OffsetCommit
    checks; None (the default, not written) when unknown."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...] = ()
    assignment_epochs: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    """A member's reconciled assignment. ``state`` is Kafka's MemberState code (0 STABLE,
    1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS, 127 UNKNOWN), an int8."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    """The topics a subscribed regular expression resolved to, at metadata ``version`` and
    ``timestamp`` (ms)."""

    topics: tuple[str, ...] = ()
    version: int = 0
    timestamp: int = 0


ConsumerGroupRecordKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerGroupRecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)


# ---------------------------------------------------------------------------------------------
# Primitives the classic records do not use: int8, uuid, compact arrays and tagged fields.


class _Reader(RecordReader):
    __slots__ = ()

    def int8(self) -> int:
        return int.from_bytes(self._take(1), "big", signed=True)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def count(self, min_size: int) -> int:
        """An array length, refused when its elements (each ``min_size`` bytes or more) cannot
        fit in what is left: garbage must not look like a huge array."""
        n = self.array_length()
        if n * min_size > len(self.data) - self.pos:
            raise MalformedRecordError(f"array of {n} cannot fit in {len(self.data) - self.pos} bytes")
        return n

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.count(1)))

    def int32s(self) -> tuple[int, ...]:
        return tuple(self.int32() for _ in range(self.count(4)))

    def tags(self) -> dict[int, bytes]:
        """A tagged-field section as ``{tag: data}``."""
        tags: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            tags[tag] = self._take(self.uvarint())
        return tags

    def end(self) -> None:
        """A tagged field's data must be read to its last byte: its size says where it ends."""
        if self.pos != len(self.data):
            raise MalformedRecordError(f"{len(self.data) - self.pos} bytes after the value")


class _Writer(RecordWriter):
    __slots__ = ()

    def int8(self, v: int) -> None:
        self.out += v.to_bytes(1, "big", signed=True)

    def uuid(self, v: uuid.UUID) -> None:
        self.out += v.bytes

    def count(self, n: int) -> None:
        self._length(n, wide=True)

    def strings(self, values: tuple[str, ...]) -> None:
        self.count(len(values))
        for s in values:
            self.string(s)

    def int32s(self, values: tuple[int, ...]) -> None:
        self.count(len(values))
        for v in values:
            self.int32(v)


def _key_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes does not fit an int16 length")
    return len(raw).to_bytes(2, "big") + raw


# ---------------------------------------------------------------------------------------------
# Keys


def encode_key(key: ConsumerGroupRecordKey) -> bytes:
    strings: tuple[str, ...]
    match key:
        case ConsumerGroupMetadataKey(group):
            version, strings = CONSUMER_GROUP_METADATA, (group,)
        case ConsumerGroupPartitionMetadataKey(group):
            version, strings = CONSUMER_GROUP_PARTITION_METADATA, (group,)
        case ConsumerGroupMemberMetadataKey(group, member):
            version, strings = CONSUMER_GROUP_MEMBER_METADATA, (group, member)
        case ConsumerGroupTargetAssignmentMetadataKey(group):
            version, strings = CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, (group,)
        case ConsumerGroupTargetAssignmentMemberKey(group, member):
            version, strings = CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, (group, member)
        case ConsumerGroupCurrentMemberAssignmentKey(group, member):
            version, strings = CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, (group, member)
        case ConsumerGroupRegularExpressionKey(group, regex):
            version, strings = CONSUMER_GROUP_REGULAR_EXPRESSION, (group, regex)
        case _:
            raise TypeError(f"not a consumer-group record key: {key!r}")
    return version.to_bytes(2, "big") + b"".join(_key_string(s) for s in strings)


def decode_key(data: bytes | bytearray | memoryview) -> ConsumerGroupRecordKey:
    """Decode a consumer-group record key. Raises UnknownRecordVersion for other record types
    (the classic ones included), MalformedRecordError for bytes that do not parse."""
    data = bytes(data)
    r = _Reader(data, 0)
    version = r.int16()
    key: ConsumerGroupRecordKey
    if version == CONSUMER_GROUP_METADATA:
        key = ConsumerGroupMetadataKey(r.string())
    elif version == CONSUMER_GROUP_PARTITION_METADATA:
        key = ConsumerGroupPartitionMetadataKey(r.string())
    elif version == CONSUMER_GROUP_MEMBER_METADATA:
        key = ConsumerGroupMemberMetadataKey(r.string(), r.string())
    elif version == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        key = ConsumerGroupTargetAssignmentMetadataKey(r.string())
    elif version == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        key = ConsumerGroupTargetAssignmentMemberKey(r.string(), r.string())
    elif version == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        key = ConsumerGroupCurrentMemberAssignmentKey(r.string(), r.string())
    elif version == CONSUMER_GROUP_REGULAR_EXPRESSION:
        key = ConsumerGroupRegularExpressionKey(r.string(), r.string())
    else:
        raise UnknownRecordVersion("record key", version)
    return key


# ---------------------------------------------------------------------------------------------
# Values


def _write_topic_partitions(w: _Writer, values: tuple[TopicPartitions, ...]) -> None:
    w.count(len(values))
    for tp in values:
        w.uuid(tp.topic_id)
        w.int32s(tp.partitions)
        if tp.assignment_epochs is None:
            w.tagged_fields()
        else:
            epochs = _Writer(0, flexible=True)
            del epochs.out[:]  # a field's data: no version prefix
            epochs.int32s(tp.assignment_epochs)
            w.uvarint(1)  # one tagged field
            _write_tag(w, _ASSIGNMENT_EPOCHS_TAG, bytes(epochs.out))


def _read_topic_partitions(r: _Reader) -> tuple[TopicPartitions, ...]:
    out = []
    for _ in range(r.count(18)):  # uuid + empty array + empty tag section
        topic_id = r.uuid()
        partitions = r.int32s()
        tagged = r.tags().get(_ASSIGNMENT_EPOCHS_TAG)
        epochs = None
        if tagged is not None:
            tr = _Reader(tagged, 0, flexible=True)
            n = tr.uvarint() - 1
            if n >= 0:
                if n * 4 > len(tagged) - tr.pos:
                    raise MalformedRecordError(f"array of {n} cannot fit in {len(tagged) - tr.pos} bytes")
                epochs = tuple(tr.int32() for _ in range(n))
            tr.end()
        out.append(TopicPartitions(topic_id, partitions, epochs))
    return tuple(out)


def _write_tag(w: _Writer, tag: int, data: bytes) -> None:
    w.uvarint(tag)
    w.uvarint(len(data))
    w.out += data


def _int64_bytes(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def _classic_member_metadata(m: ClassicMemberMetadata) -> bytes:
    w = _Writer(0, flexible=True)
    del w.out[:]  # a nested struct: no version prefix
    w.int32(m.session_timeout_ms)
    w.count(len(m.supported_protocols))
    for p in m.supported_protocols:
        w.string(p.name)
        w.bytes_(p.metadata)
        w.tagged_fields()
    w.tagged_fields()
    return bytes(w.out)


def _read_classic_member_metadata(data: bytes) -> ClassicMemberMetadata | None:
    r = _Reader(data, 0, flexible=True)
    if r.uvarint() == 0:  # a tagged nullable struct's presence marker
        return None
    session_timeout = r.int32()
    protocols = []
    for _ in range(r.count(3)):
        name = r.string()
        metadata = r.bytes_()
        r.tags()
        protocols.append(ClassicProtocol(name, metadata))
    r.tags()
    r.end()
    return ClassicMemberMetadata(session_timeout, tuple(protocols))


def encode_value(value: ConsumerGroupRecordValue) -> bytes:
    """Version 0 of the value, the only one Kafka defines."""
    w = _Writer(_VALUE_VERSION, flexible=True)
    match value:
        case ConsumerGroupMetadataValue(epoch, metadata_hash, creation_time_ms):
            w.int32(epoch)
            tags = []
            if metadata_hash != 0:
                tags.append((_METADATA_HASH_TAG, _int64_bytes(metadata_hash)))
            if creation_time_ms != -1:
                tags.append((_CREATION_TIME_TAG, _int64_bytes(creation_time_ms)))
            w.uvarint(len(tags))
            for tag, data in tags:
                _write_tag(w, tag, data)
            return bytes(w.out)
        case ConsumerGroupPartitionMetadataValue(topics):
            w.count(len(topics))
            for t in topics:
                w.uuid(t.topic_id)
                w.string(t.topic_name)
                w.int32(t.num_partitions)
                w.count(len(t.partition_metadata))
                for p in t.partition_metadata:
                    w.int32(p.partition)
                    w.strings(p.racks)
                    w.tagged_fields()
                w.tagged_fields()
        case ConsumerGroupMemberMetadataValue():
            w.string(value.instance_id)
            w.string(value.rack_id)
            w.string(value.client_id)
            w.string(value.client_host)
            w.strings(value.subscribed_topic_names)
            w.string(value.subscribed_topic_regex)
            w.int32(value.rebalance_timeout_ms)
            w.string(value.server_assignor)
            if value.classic_member_metadata is None:
                w.tagged_fields()
            else:
                struct_bytes = _classic_member_metadata(value.classic_member_metadata)
                w.uvarint(1)  # one tagged field
                w.uvarint(_CLASSIC_MEMBER_METADATA_TAG)
                w.uvarint(len(struct_bytes) + 1)
                w.uvarint(1)  # present (not null)
                w.out += struct_bytes
            return bytes(w.out)
        case ConsumerGroupTargetAssignmentMetadataValue(epoch):
            w.int32(epoch)
        case ConsumerGroupTargetAssignmentMemberValue(topic_partitions):
            _write_topic_partitions(w, topic_partitions)
        case ConsumerGroupCurrentMemberAssignmentValue():
            w.int32(value.member_epoch)
            w.int32(value.previous_member_epoch)
            w.int8(value.state)
            _write_topic_partitions(w, value.assigned_partitions)
            _write_topic_partitions(w, value.partitions_pending_revocation)
        case ConsumerGroupRegularExpressionValue(topics, version, timestamp):
            w.strings(topics)
            w.int64(version)
            w.int64(timestamp)
        case _:
            raise TypeError(f"not a consumer-group record value: {value!r}")
    w.tagged_fields()
    return bytes(w.out)


def _decode_value_struct(key: ConsumerGroupRecordKey, r: _Reader) -> ConsumerGroupRecordValue:
    value: ConsumerGroupRecordValue
    if isinstance(key, ConsumerGroupMetadataKey):
        epoch = r.int32()
        tags = r.tags()
        return ConsumerGroupMetadataValue(epoch, _tagged_int64(tags, _METADATA_HASH_TAG, 0),
                                          _tagged_int64(tags, _CREATION_TIME_TAG, -1))
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        topics = []
        for _ in range(r.count(23)):  # uuid 16, name 1, count 4, partitions 1, tags 1
            topic_id = r.uuid()
            name = r.string()
            num_partitions = r.int32()
            partitions = []
            for _ in range(r.count(6)):
                partition = r.int32()
                racks = r.strings()
                r.tags()
                partitions.append(PartitionMetadata(partition, racks))
            r.tags()
            topics.append(TopicMetadata(topic_id, name, num_partitions, tuple(partitions)))
        value = ConsumerGroupPartitionMetadataValue(tuple(topics))
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        instance_id = r.nullable_string()
        rack_id = r.nullable_string()
        client_id = r.string()
        client_host = r.string()
        names = r.strings()
        regex = r.nullable_string()
        rebalance_timeout = r.int32()
        assignor = r.nullable_string()
        tagged = r.tags().get(_CLASSIC_MEMBER_METADATA_TAG)
        classic = None if tagged is None else _read_classic_member_metadata(tagged)
        return ConsumerGroupMemberMetadataValue(
            instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout, assignor, classic
        )
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        value = ConsumerGroupTargetAssignmentMetadataValue(r.int32())
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        value = ConsumerGroupTargetAssignmentMemberValue(_read_topic_partitions(r))
    elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        member_epoch = r.int32()
        previous = r.int32()
        state = r.int8()
        assigned = _read_topic_partitions(r)
        pending = _read_topic_partitions(r)
        value = ConsumerGroupCurrentMemberAssignmentValue(member_epoch, previous, state, assigned, pending)
    else:
        value = ConsumerGroupRegularExpressionValue(r.strings(), r.int64(), r.int64())
    r.tags()
    return value


def _tagged_int64(tags: dict[int, bytes], tag: int, default: int) -> int:
    data = tags.get(tag)
    if data is None:
        return default
    if len(data) != 8:
        raise MalformedRecordError(f"tagged int64 of {len(data)} bytes")
    return int.from_bytes(data, "big", signed=True)


def decode_value(
    key: ConsumerGroupRecordKey, data: bytes | bytearray | memoryview | None
) -> ConsumerGroupRecordValue | None:
    """Decode the value that goes with ``key``; ``None`` (a tombstone) stays ``None``.

    Raises UnknownRecordVersion for a value version other than 0, MalformedRecordError for bytes
    that do not parse. Bytes after the value are ignored, as in ``consumer_offsets`` and Kafka's
    generated readers."""
    if data is None:
        return None
    data = bytes(data)
    r = _Reader(data, 0, flexible=True)
    version = r.int16()
    if version != _VALUE_VERSION:
        raise UnknownRecordVersion(type(key).__name__.replace("Key", "Value"), version)
    try:
        return _decode_value_struct(key, r)
    except MalformedRecordError as exc:
        # Name the record: a load that fails on it says which group's which record it was.
        raise MalformedRecordError(f"{type(key).__name__.replace('Key', 'Value')} of {key}: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Both families


def decode_any_key(data: bytes | bytearray | memoryview) -> RecordKey | ConsumerGroupRecordKey:
    """A key of either family: the classic two (``consumer_offsets``) or the consumer-group
    records. Other record types (KIP-932 share groups, ...) raise UnknownRecordVersion."""
    data = bytes(data)
    if len(data) >= 2 and int.from_bytes(data[:2], "big", signed=True) in RECORD_TYPES:
        return decode_key(data)
    return decode_classic_key(data)


def deserialize_any(
    key: bytes | bytearray | memoryview, value: bytes | bytearray | memoryview | None
) -> tuple[RecordKey | ConsumerGroupRecordKey, RecordValue | ConsumerGroupRecordValue | None]:
    """Key and value bytes of any record this package knows to typed values."""
    typed_key = decode_any_key(key)
    if isinstance(typed_key, RecordKey):
        return typed_key, decode_classic_value(typed_key, value)
    return typed_key, decode_value(typed_key, value)
