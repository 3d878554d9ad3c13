"""The hash of a group's subscribed topics (KIP-1101,
https://cwiki.apache.org/confluence/display/KAFKA/KIP-1101%3A+Trigger+rebalance+on+rack+topology+changes):
it changes when a subscribed topic is created, deleted, recreated under a new id, grows
partitions, or when the racks of its replicas change, and the group epoch moves with it.

Kafka stores the hash in ConsumerGroupMetadataValue (tag 0), so a coordinator that loads a group
compares it with the hash of the topics it sees now. This is Kafka's value to the bit (Kafka 4.1 and
later: ``computeTopicHash`` and ``computeGroupHash`` in group-coordinator's
org/apache/kafka/coordinator/group/Utils.java, https://github.com/apache/kafka/pull/19523), so a
Kafka broker reading our ``__consumer_offsets``, or we reading its, does not see a changed hash and
bump the epoch of every group once.

Kafka streams the fields into hash4j's XXH3-64 with seed 0 (``Hashing.xxh3_64().hashStream()``),
which hashes the same as XXH3_64bits of the reference xxHash over the concatenated bytes (hash4j
checks itself against it: reference-implementations/xxhash in https://github.com/dynatrace-oss/hash4j).
hash4j writes an int or a long little-endian, and a ``String`` as its UTF-16 code units
(little-endian) followed by its length in code units as an int. A topic's bytes:

    0x00 (the layout's version), topic id most then least significant 64 bits, name,
    partition count, then for each partition p from 0: p, and for each rack of its replicas,
    sorted: the rack's length as an int, then the rack.

A group's bytes are the 64-bit hashes of its subscribed topics that exist, in topic name order;
a group with no such topic hashes to 0, as does Kafka's.

Kafka lists one rack per replica (two replicas in one rack give the rack twice), and so does
``partition_racks`` of a :class:`~coordinator.group.topics_image.TopicsImage`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import xxhash

from ..topics_image import TopicDescription, TopicsImage

__all__ = ["topics_hash", "topic_hash"]

#: Kafka's ``TOPIC_HASH_MAGIC_BYTE``: the version of the topic hash layout.
TOPIC_HASH_MAGIC_BYTE = b"\x00"

# hash4j's putInt and putLong: little-endian.
_INT = struct.Struct("<i").pack
_LONG = struct.Struct("<q").pack


def topics_hash(names: Iterable[str], image: TopicsImage) -> int:
    """Kafka's group metadata hash of the topics ``names`` (a signed int64, as stored)."""
    found = []
    for name in set(names):
        topic = image.get(name)
        if topic is not None:
            found.append((_java_order(name), topic))
    if not found:
        return 0
    found.sort(key=lambda entry: entry[0])
    data = b"".join(_LONG(topic_hash(topic, image)) for _, topic in found)
    return _signed(xxhash.xxh3_64_intdigest(data))


def topic_hash(topic: TopicDescription, image: TopicsImage) -> int:
    """Kafka's hash of one existing topic (a signed int64)."""
    # uuid.UUID.bytes is big-endian: the most significant long, then the least; each reversed is
    # the long little-endian.
    topic_id = topic.topic_id.bytes
    out = bytearray(TOPIC_HASH_MAGIC_BYTE)
    out += topic_id[7::-1]
    out += topic_id[:7:-1]
    out += _java_string(topic.name)
    count = topic.num_partitions
    out += _INT(count)
    racks_of = image.partition_racks
    # Partitions share a few rack sets: each set is sorted and encoded once.
    encoded: dict[tuple[str, ...], bytes] = {}
    for partition in range(count):
        out += _INT(partition)
        racks = racks_of(topic.topic_id, partition)
        if racks:
            section = encoded.get(racks)
            if section is None:
                section = encoded[racks] = _racks(racks)
            out += section
    return _signed(xxhash.xxh3_64_intdigest(out))


def _racks(racks: tuple[str, ...]) -> bytes:
    """A partition's racks in Java's order, each as its length (written by Kafka) then the rack
    (hash4j's putString, which writes the length again)."""
    return b"".join(_INT(_java_length(rack)) + _java_string(rack) for rack in sorted(racks, key=_java_order))


def _java_string(text: str) -> bytes:
    """hash4j's ``putString``: the UTF-16LE code units, then their count as a little-endian int."""
    units = text.encode("utf-16-le", "surrogatepass")
    return units + _INT(len(units) // 2)


def _java_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units (a character beyond U+FFFF counts two)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _java_order(text: str) -> bytes:
    """A sort key ordering strings as Java's ``String.compareTo`` (by UTF-16 code unit); Python's
    order (by code point) differs only for characters beyond U+FFFF."""
    return text.encode("utf-16-be", "surrogatepass")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value
