"""The consumer's embedded protocol (``protocol_type`` "consumer"): what a group coordinator and
the offsets pipeline need to read of it: the topics of a ConsumerProtocolSubscription and, for the
online migration between classic and consumer groups (KIP-848), the whole subscription and
assignment.

Every version (0-3, KIP-429/KIP-792) starts with ``int16 version, int32 topic count, int16-length
topic names``; later fields follow: user data (nullable bytes), owned partitions (v1+), generation
(v2+), rack (v3+). The assignment is ``int16 version, [topic, [partition]], user data`` in every
version. Schemas: Kafka's clients/src/main/resources/common/message/ConsumerProtocolSubscription.json
and ConsumerProtocolAssignment.json (https://github.com/apache/kafka/tree/trunk/clients/src/main/resources/common/message).
A coordinator writes these bytes only when a consumer group answers a classic member's SyncGroup
or becomes a classic group again.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["CONSUMER_PROTOCOL_TYPE", "parse_subscribed_topics", "ConsumerProtocolSubscription",
           "ConsumerProtocolAssignment", "MalformedConsumerProtocol", "decode_subscription", "decode_assignment",
           "encode_assignment", "protocol_version", "CONSUMER_PROTOCOL_MAX_VERSION"]

#: The newest ConsumerProtocolSubscription / ConsumerProtocolAssignment version.
CONSUMER_PROTOCOL_MAX_VERSION = 3

#: The protocol type of Kafka consumers; only its subscriptions are parsed.
CONSUMER_PROTOCOL_TYPE = "consumer"


def parse_subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription, read from its version-independent prefix; None
    when the bytes do not parse."""
    try:
        pos = 2
        if len(subscription) < 6:
            return None
        (count,) = struct.unpack_from(">i", subscription, pos)
        pos += 4
        if count < 0:
            return None
        topics: set[str] = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", subscription, pos)
            pos += 2
            if length < 0 or pos + length > len(subscription):
                return None
            topics.add(bytes(subscription[pos:pos + length]).decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


class MalformedConsumerProtocol(ValueError):
    """Bytes that are not a ConsumerProtocolSubscription or ConsumerProtocolAssignment (Kafka's
    SchemaException)."""


#: topic name -> partitions, in the order the bytes hold them.
TopicPartitionList = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerProtocolSubscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitionList = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerProtocolAssignment:
    version: int
    assigned_partitions: TopicPartitionList = ()
    user_data: bytes | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _unpack(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise MalformedConsumerProtocol("not enough bytes")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def string(self) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        if self.pos + length > len(self.data):
            raise MalformedConsumerProtocol("not enough bytes for a string")
        raw = self.data[self.pos:self.pos + length]
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedConsumerProtocol(str(exc)) from None

    def bytes_(self) -> bytes | None:
        length = self.int32()
        if length < 0:
            return None
        if self.pos + length > len(self.data):
            raise MalformedConsumerProtocol("not enough bytes for user data")
        raw = self.data[self.pos:self.pos + length]
        self.pos += length
        return raw

    def count(self) -> int:
        n = self.int32()
        if n < 0:
            raise MalformedConsumerProtocol("null array")
        return n

    def topic_partitions(self) -> TopicPartitionList:
        out = []
        for _ in range(self.count()):
            topic = self.string()
            if topic is None:
                raise MalformedConsumerProtocol("null topic")
            out.append((topic, tuple(self.int32() for _ in range(self.count()))))
        return tuple(out)


def protocol_version(data: bytes) -> int:
    """The version a subscription or assignment was written with (Kafka ``deserializeVersion``)."""
    version = _Reader(data).int16()
    if version < 0:
        raise MalformedConsumerProtocol(f"unsupported version {version}")
    return version


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription:
    """Every field a version holds; a version above 3 is read as 3 (the fields only grow)."""
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise MalformedConsumerProtocol(f"unsupported subscription version {version}")
    topics = []
    for _ in range(reader.count()):
        topic = reader.string()
        if topic is None:
            raise MalformedConsumerProtocol("null topic")
        topics.append(topic)
    user_data = reader.bytes_()
    owned: TopicPartitionList = reader.topic_partitions() if version >= 1 else ()
    generation = reader.int32() if version >= 2 else -1
    rack = reader.string() if version >= 3 else None
    return ConsumerProtocolSubscription(version, tuple(topics), user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment:
    """An empty byte string is an empty assignment (a member the leader gave nothing)."""
    if not data:
        return ConsumerProtocolAssignment(0)
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise MalformedConsumerProtocol(f"unsupported assignment version {version}")
    return ConsumerProtocolAssignment(version, reader.topic_partitions(), reader.bytes_())


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def encode_assignment(assignment: ConsumerProtocolAssignment) -> bytes:
    """The assignment in its version, clamped to 0-3 as Kafka's ``serializeAssignment`` does."""
    version = min(max(assignment.version, 0), CONSUMER_PROTOCOL_MAX_VERSION)
    out = [struct.pack(">hi", version, len(assignment.assigned_partitions))]
    for topic, partitions in assignment.assigned_partitions:
        out.append(_string(topic))
        out.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
    user_data = assignment.user_data
    out.append(struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data)
    return b"".join(out)
