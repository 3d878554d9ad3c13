"""protocol.request_codec: request bodies decoded as kafka-python does, with Kafka's bounds (issue 22)."""

from __future__ import annotations

import struct
import time

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from protocol.apis import ApiKey, request_class
from protocol.request_codec import MalformedRequest, body_decoder
from tests.fuzz import golden


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def test_valid_bodies_decode_as_kafka_python_decodes_them() -> None:
    known = set(ApiKey)
    checked = 0
    for frame in golden.frames():
        api_key, version, body = golden.split(frame)
        if api_key not in known:
            continue
        cls = request_class(api_key)
        assert repr(body_decoder(cls, version)(body)) == repr(cls.decode(body, version=version))
        checked += 1
    assert checked > 50


def test_string_running_past_the_body_is_refused() -> None:
    # kafka-python's decoder slices the 16 declared bytes short and accepts key="ab".
    body = struct.pack(">h", 16) + b"ab"
    assert FindCoordinatorRequest.decode(body, version=0).key == "ab"
    with pytest.raises(MalformedRequest, match="past the end"):
        body_decoder(FindCoordinatorRequest, 0)(body)


def test_unsigned_varint_longer_than_five_bytes_is_refused() -> None:
    # Metadata v12 starts with a compact array length.
    with pytest.raises(MalformedRequest, match="longer than 5 bytes"):
        body_decoder(MetadataRequest, 12)(b"\x80" * 5 + b"\x01" + b"\x00" * 4)
    # A huge varint used to slice with overflowed (found by fuzz_requests: OverflowError).
    with pytest.raises(MalformedRequest):
        body_decoder(MetadataRequest, 12)(b"\xce" * 100 + b"\x01\x00\x00\x00")


def _metadata_v12_topics_with_tags(count: int) -> bytes:
    # Each topic: zero uuid, null name, one unknown tagged field (tag 7, empty).
    item = bytes(16) + b"\x00" + b"\x01\x07\x00"
    return _uvarint(count + 1) + item * count + b"\x00\x00\x00\x00"


def test_unknown_tagged_fields_are_kept_and_must_fit() -> None:
    message = body_decoder(MetadataRequest, 12)(_metadata_v12_topics_with_tags(2))
    assert [t.unknown_tags for t in message.topics] == [{"_7": b""}, {"_7": b""}]
    body = _uvarint(2) + bytes(16) + b"\x00" + b"\x01\x07\x09ab"  # tag 7 declares 9 bytes, 2 left
    with pytest.raises(MalformedRequest, match="runs past the end"):
        body_decoder(MetadataRequest, 12)(body)


def test_tagged_fields_cost_linear_time() -> None:
    # kafka-python copied the rest of the body per tagged struct: ~19 s for these 4 MB on our
    # CI machine (quadratic); reading each field from its own bytes takes about 1 s. CPU time of
    # this process, not wall time: a loaded machine (parallel workers) stretched the wall clock past
    # the bound once while the decode itself stayed linear.
    body = _metadata_v12_topics_with_tags(200_000)
    start = time.process_time()
    assert len(body_decoder(MetadataRequest, 12)(body).topics) == 200_000
    assert time.process_time() - start < 8


def test_known_tagged_field_must_fill_its_declared_size() -> None:
    # Fetch v12: ClusterId is tagged field 0 of the request (a compact nullable string).
    decode = body_decoder(FetchRequest, 12)
    plain = FetchRequest(version=12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=0, isolation_level=0,
                         session_id=0, session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id="")
    raw = plain.encode(version=12)
    assert raw.endswith(b"\x00")  # empty top-level tagged fields
    good = raw[:-1] + b"\x01" + b"\x00" + b"\x04" + _uvarint(4) + b"abc"
    assert decode(good).cluster_id == "abc"
    padded = raw[:-1] + b"\x01" + b"\x00" + b"\x06" + _uvarint(4) + b"abc" + b"zz"
    with pytest.raises(MalformedRequest, match="declares 6 bytes"):
        decode(padded)


def test_array_lengths_below_minus_one_or_beyond_the_body_are_refused() -> None:
    # OffsetDelete v0: group_id string, topics array (int32 count).
    decode = body_decoder(request_class(ApiKey.OFFSET_DELETE), 0)
    group = struct.pack(">h", 1) + b"g"
    assert decode(group + struct.pack(">i", 0)).topics == []
    assert decode(group + struct.pack(">i", -1)).topics is None  # null: the null check refuses it
    # kafka-python's decoder reads -5 as an empty array; Kafka sees a null.
    assert request_class(ApiKey.OFFSET_DELETE).decode(group + struct.pack(">i", -5), version=0).topics == []
    for count in (-5, -(2**31), 3):
        with pytest.raises(MalformedRequest, match="items with"):
            decode(group + struct.pack(">i", count) + b"\x00\x00")
    with pytest.raises(MalformedRequest, match="more than the 1000000"):  # Kafka 4.4's limit first
        decode(group + struct.pack(">i", 2**31 - 1) + b"\x00\x00")


# --- Kafka 4.4's limits: 1,000,000 array elements, 10,000 tagged fields -----------------------


def list_groups_v4_body(count: int, elements: int | None = None) -> bytes:
    """ListGroups v4: StatesFilter, a compact array of compact strings, holding ``count`` empty
    strings (one byte each), or only ``elements`` of them after a count of ``count``."""
    present = count if elements is None else elements
    return _uvarint(count + 1) + b"\x01" * present + b"\x00"


def api_versions_v3_body(tags: int, fields: int | None = None) -> bytes:
    """ApiVersions v3 with a tagged-field section of ``tags`` unknown empty fields (tags 100...), or
    only ``fields`` of them after a count of ``tags``."""
    present = tags if fields is None else fields
    section = _uvarint(tags) + b"".join(_uvarint(100 + i) + b"\x00" for i in range(present))
    return b"\x05name\x021" + section


def test_array_of_more_than_a_million_elements_is_refused() -> None:
    decode = body_decoder(request_class(ApiKey.LIST_GROUPS), 4)
    with pytest.raises(MalformedRequest, match="array of 1000001 elements, more than the 1000000"):
        decode(list_groups_v4_body(1_000_001))
    # The count alone is refused before any element is read, bytes left or not.
    with pytest.raises(MalformedRequest, match="array of 1000001 elements, more than the 1000000"):
        decode(list_groups_v4_body(1_000_001, elements=0))
    with pytest.raises(MalformedRequest, match="more than the 1000000"):  # an int32 count too
        body_decoder(request_class(ApiKey.OFFSET_DELETE), 0)(b"\x00\x01g" + struct.pack(">i", 1_000_001))


def test_array_of_exactly_a_million_elements_is_read() -> None:
    decode = body_decoder(request_class(ApiKey.LIST_GROUPS), 4)
    assert decode(list_groups_v4_body(1_000_000)).states_filter == [""] * 1_000_000
    # Without its elements it is refused, for the bytes it lacks, not for the limit.
    with pytest.raises(MalformedRequest, match="array of 1000000 items with 1 bytes left"):
        decode(list_groups_v4_body(1_000_000, elements=0))


def test_more_than_ten_thousand_tagged_fields_are_refused() -> None:
    decode = body_decoder(request_class(ApiKey.API_VERSIONS), 3)
    with pytest.raises(MalformedRequest, match="10001 tagged fields, more than the 10000"):
        decode(api_versions_v3_body(10_001))
    with pytest.raises(MalformedRequest, match="10001 tagged fields, more than the 10000"):
        decode(api_versions_v3_body(10_001, fields=0))


def test_exactly_ten_thousand_tagged_fields_are_read() -> None:
    message = body_decoder(request_class(ApiKey.API_VERSIONS), 3)(api_versions_v3_body(10_000))
    assert message.client_software_name == "name"
    assert len(message.unknown_tags) == 10_000


def test_a_compact_string_over_32767_bytes_is_refused() -> None:
    # FindCoordinator v4 (flexible): key type int8, then the coordinator keys, a compact array of
    # compact strings. Kafka's readers refuse a string over Short.MAX_VALUE bytes.
    decode = body_decoder(FindCoordinatorRequest, 4)

    def body(key: bytes) -> bytes:
        return b"\x00" + _uvarint(2) + _uvarint(len(key) + 1) + key + b"\x00"

    assert decode(body(b"g" * 32_767)).coordinator_keys == ["g" * 32_767]
    with pytest.raises(MalformedRequest, match="string of 32768 bytes, more than the 32767"):
        decode(body(b"g" * 32_768))
    # The length alone is refused, bytes left or not; a null string is still null.
    with pytest.raises(MalformedRequest, match="string of 1000000 bytes"):
        decode(b"\x00" + _uvarint(2) + _uvarint(1_000_001))
    heartbeat = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    request = heartbeat[1](group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
                           rebalance_timeout_ms=1, subscribed_topic_names=None, subscribed_topic_regex=None,
                           server_assignor=None, topic_partitions=[])
    assert body_decoder(heartbeat, 1)(request.encode(version=1)).subscribed_topic_regex is None
