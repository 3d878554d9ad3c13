"""The KIP-1101 metadata hash, byte for byte Kafka's (``Utils.computeTopicHash`` and
``Utils.computeGroupHash`` in apache/kafka's group-coordinator, Kafka 4.1 and later).

Two kinds of check: known values, and the layout replayed call by call as Kafka's UtilsTest
builds its expected hash (hash4j's ``putByte``/``putLong``/``putInt``/``putString``, transcribed in
:class:`Hash4jStream` from hash4j's AbstractHashStream), so a wrong byte order or a missing length
fails here. Then the properties the group epoch relies on.
"""

from __future__ import annotations

import struct
import uuid

import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.group.consumer.metadata_hash import topic_hash, topics_hash
from coordinator.group.topics_image import StaticTopic, StaticTopicsImage

#: The topic id 0123456789abcdef-fedcba9876543210 (most, least significant bits).
ID = uuid.UUID("01234567-89ab-cdef-fedc-ba9876543210")
OTHER_ID = uuid.UUID(bytes=b"\x11" * 8 + b"\x22" * 8)


class Hash4jStream:
    """What hash4j's ``Hashing.xxh3_64().hashStream()`` hashes: the bytes of each put, in order
    (ints and longs little-endian; a String as UTF-16LE code units then their count as an int);
    hash4j checks its XXH3-64 against the reference xxHash, which the ``xxhash`` package wraps."""

    def __init__(self) -> None:
        self.data = bytearray()

    def put_byte(self, value: int) -> Hash4jStream:
        self.data += struct.pack("<b", value)
        return self

    def put_int(self, value: int) -> Hash4jStream:
        self.data += struct.pack("<i", value)
        return self

    def put_long(self, value: int) -> Hash4jStream:
        self.data += struct.pack("<q", value)
        return self

    def put_string(self, value: str) -> Hash4jStream:
        units = value.encode("utf-16-le", "surrogatepass")
        self.data += units
        return self.put_int(len(units) // 2)

    def get_as_long(self) -> int:
        return struct.unpack("<q", struct.pack("<Q", xxhash.xxh3_64_intdigest(bytes(self.data))))[0]


def java_long(value: int) -> int:
    """An unsigned 64-bit field read as Java's signed long."""
    return struct.unpack("<q", struct.pack("<Q", value))[0]


def image(*topics: StaticTopic) -> StaticTopicsImage:
    return StaticTopicsImage(topics)


def one_topic_hash(name: str, topic_id: uuid.UUID, racks: tuple[tuple[str, ...], ...]) -> int:
    topics = image(StaticTopic(name, topic_id, len(racks), racks))
    topic = topics.get(name)
    assert topic is not None
    return topic_hash(topic, topics)


def test_the_layout_of_kafkas_utils_test() -> None:
    # UtilsTest.testComputeTopicHash: topic foo, two partitions on racks rack0+rack1 and rack1+rack2.
    topics = image(StaticTopic("foo", ID, 2, (("rack0", "rack1"), ("rack1", "rack2"))))
    expected = (Hash4jStream()
                .put_byte(0)
                .put_long(java_long(ID.int >> 64))
                .put_long(java_long(ID.int & (1 << 64) - 1))
                .put_string("foo")
                .put_int(2)
                .put_int(0).put_int(5).put_string("rack0").put_int(5).put_string("rack1")
                .put_int(1).put_int(5).put_string("rack1").put_int(5).put_string("rack2")
                .get_as_long())
    foo = topics.get("foo")
    assert foo is not None
    assert topic_hash(foo, topics) == expected
    # UtilsTest.testComputeGroupHash: the topic hashes as longs, in topic name order.
    bar = image(StaticTopic("bar", OTHER_ID, 1))
    both = image(StaticTopic("foo", ID, 2, (("rack0", "rack1"), ("rack1", "rack2"))), StaticTopic("bar", OTHER_ID, 1))
    bar_topic = bar.get("bar")
    assert bar_topic is not None
    group = Hash4jStream().put_long(topic_hash(bar_topic, bar)).put_long(expected).get_as_long()
    assert topics_hash(["foo", "bar"], both) == group


# Known values. They agree with the outputs another Kafka-compatible implementation reports from
# running Kafka's two methods against the hash4j 0.22.0 jar (the hash4j Kafka pins); each also
# follows from the layout above.
TOPIC_VECTORS = [
    # (name, topic id, racks per partition, Kafka's topic hash)
    ("foo", ID, (("rack1", "rack0"), ("rack2", "rack1")), 4_231_092_367_357_902_416),
    ("bar", OTHER_ID, ((),), 8_733_119_781_167_439_863),
    ("empty", uuid.UUID(int=0), (), 728_769_691_835_767_132),
    # Two replicas on one rack: Kafka lists the rack once per replica.
    ("foo", ID, (("r", "r"),), 2_883_780_561_648_472_600),
    # Java orders strings by UTF-16 code unit: U+1F600 (surrogates D83D DE00) before U+E000.
    ("foo", ID, (("\ue000", "\U0001f600"),), 4_767_223_826_197_171_634),
    ("t\u00e9", ID, (("\u00e9",),), 480_043_309_326_700_168),
]


def test_known_topic_hashes() -> None:
    for name, topic_id, racks, kafka in TOPIC_VECTORS:
        assert one_topic_hash(name, topic_id, racks) == kafka, (name, racks)


def test_known_group_hashes() -> None:
    foo = StaticTopic("foo", ID, 2, (("rack1", "rack0"), ("rack2", "rack1")))
    bar = StaticTopic("bar", OTHER_ID, 1, ((),))
    assert topics_hash(["foo"], image(foo, bar)) == -3_651_539_661_068_893_492
    assert topics_hash(["foo", "bar"], image(foo, bar)) == -556_879_919_459_959_918
    assert topics_hash(["bar", "foo"], image(bar, foo)) == -556_879_919_459_959_918


def test_no_existing_topic_hashes_to_zero() -> None:
    topics = image(StaticTopic("foo", ID, 2))
    assert topics_hash([], topics) == 0
    assert topics_hash(["missing"], topics) == 0


def test_missing_and_repeated_names_do_not_count() -> None:
    topics = image(StaticTopic("foo", ID, 2), StaticTopic("bar", OTHER_ID, 3))
    assert topics_hash(["foo", "missing", "bar", "foo"], topics) == topics_hash(["bar", "foo"], topics)


@settings(max_examples=50, deadline=None)
@given(st.permutations(["a", "b", "c", "orders", "payments"]))
def test_independent_of_the_order_of_the_names(names: list[str]) -> None:
    topics = image(*(StaticTopic(name, uuid.UUID(int=i + 1), i + 1) for i, name in enumerate(sorted(names))))
    assert topics_hash(names, topics) == topics_hash(sorted(names), topics)


@settings(max_examples=50, deadline=None)
@given(st.permutations(["r1", "r2", "r3", "r10"]))
def test_independent_of_the_order_of_a_partitions_racks(racks: list[str]) -> None:
    # Kafka sorts each partition's racks before hashing them.
    assert one_topic_hash("foo", ID, (tuple(racks),)) == one_topic_hash("foo", ID, (("r1", "r10", "r2", "r3"),))


def test_a_rack_change_changes_the_hash() -> None:
    before = one_topic_hash("foo", ID, (("a", "b"), ("b", "c")))
    assert one_topic_hash("foo", ID, (("a", "b"), ("b", "d"))) != before  # a replica moved rack
    assert one_topic_hash("foo", ID, (("a", "b"), ("b",))) != before  # a replica's rack went
    assert one_topic_hash("foo", ID, (("b", "c"), ("a", "b"))) != before  # racks of another partition
    # The length before each rack keeps "a" "bc" apart from "ab" "c".
    assert one_topic_hash("foo", ID, (("a", "bc"),)) != one_topic_hash("foo", ID, (("ab", "c"),))


def test_a_partition_count_change_changes_the_hash() -> None:
    assert one_topic_hash("foo", ID, ((), ())) != one_topic_hash("foo", ID, ((), (), ()))
    topics = image(StaticTopic("foo", ID, 2))
    before = topics_hash(["foo"], topics)
    topics.put(StaticTopic("foo", ID, 3))
    assert topics_hash(["foo"], topics) != before


def test_a_recreated_topic_or_a_renamed_one_changes_the_hash() -> None:
    assert one_topic_hash("foo", ID, ((),)) != one_topic_hash("foo", OTHER_ID, ((),))
    assert one_topic_hash("foo", ID, ((),)) != one_topic_hash("fop", ID, ((),))
    topics = image(StaticTopic("foo", ID, 1))
    before = topics_hash(["foo", "bar"], topics)
    topics.put(StaticTopic("bar", OTHER_ID, 1))
    assert topics_hash(["foo", "bar"], topics) != before  # a subscribed topic was created


def test_the_hash_is_a_signed_int64() -> None:
    # ConsumerGroupMetadataValue.MetadataHash is an int64: both signs occur.
    values = [topics_hash(["t"], image(StaticTopic("t", uuid.UUID(int=i), 1))) for i in range(64)]
    assert all(-(1 << 63) <= v < 1 << 63 for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)
