"""Sans-IO tests of :class:`protocol.connection.ServerConnection`: framing, headers, violations.

No sockets: frames are built by hand here (request header v1 / v2 written byte by byte, so the
test does not share the parser it checks) around bodies encoded by kafka-python, fed to the
connection in every split we can think of, and the events compared.

The helpers at the top (``request_frame`` and friends) are imported by the other protocol tests.
"""

from __future__ import annotations

import struct
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)

from protocol.apis import SUPPORTED_VERSIONS, ApiKey, is_flexible, request_class
from protocol.connection import DEFAULT_MAX_REQUEST_SIZE, RawFrame, ServerConnection, encode_response
from protocol.events import NEED_DATA, ProtocolViolation, RequestReceived, UnsupportedApiVersions

# --------------------------------------------------------------------------------------------
# Frame builders (independent of protocol.connection)
# --------------------------------------------------------------------------------------------


def uvarint(value: int) -> bytes:
    """Unsigned varint, as in KIP-482 tagged fields."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tagged_section(fields: list[tuple[int, bytes]] | None = None) -> bytes:
    """A tagged-field section: count, then (tag, size, data) per field."""
    fields = fields or []
    out = uvarint(len(fields))
    for tag, data in fields:
        out += uvarint(tag) + uvarint(len(data)) + data
    return out


def request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | bytes | None,
    *,
    flexible: bool,
    header_tags: bytes | None = None,
) -> bytes:
    """Request header v1 (``flexible=False``) or v2 (``flexible=True``).

    The client id is a classic int16-length nullable string in both; v2 appends a tagged-field
    section (``header_tags``, empty by default).
    """
    out = struct.pack(">hhi", api_key, api_version, correlation_id)
    if client_id is None:
        out += struct.pack(">h", -1)
    else:
        raw = client_id.encode("utf-8") if isinstance(client_id, str) else client_id
        out += struct.pack(">h", len(raw)) + raw
    if flexible:
        out += header_tags if header_tags is not None else tagged_section()
    return out


def frame(payload: bytes) -> bytes:
    """Prefix the int32 size."""
    return struct.pack(">i", len(payload)) + payload


def request_frame(
    request: object,
    api_version: int,
    correlation_id: int,
    client_id: str | None = "test-client",
    *,
    header_tags: bytes | None = None,
) -> bytes:
    """A complete framed request for a kafka-python request message."""
    api_key = request.API_KEY  # type: ignore[attr-defined]
    flexible = request_class(api_key).flexible_version_q(api_version)
    header = request_header(
        api_key, api_version, correlation_id, client_id, flexible=flexible, header_tags=header_tags
    )
    return frame(header + request.encode(version=api_version))  # type: ignore[attr-defined]


def drain(conn: ServerConnection) -> list[object]:
    """Every event available now, stopping at NEED_DATA or at the first violation."""
    events: list[object] = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return events
        events.append(event)
        if isinstance(event, ProtocolViolation):
            return events


def feed_all(data: bytes, **kwargs: int) -> list[object]:
    conn = ServerConnection(**kwargs)
    conn.receive_data(data)
    return drain(conn)


def only_violation(events: list[object]) -> ProtocolViolation:
    assert len(events) == 1, events
    assert isinstance(events[0], ProtocolViolation), events
    return events[0]


# --------------------------------------------------------------------------------------------
# A pipelined stream of several requests, non-flexible and flexible headers mixed
# --------------------------------------------------------------------------------------------

ARBITRARY_HEADER_TAGS = tagged_section([(0, b"abc"), (7, b""), (1000, bytes(range(130)))])


def pipelined_requests() -> list[tuple[bytes, RequestReceived]]:
    """(frame, expected event) pairs covering header v1, v2, null client id and header tags."""
    cases = [
        (ApiVersionsRequest[0](), 0, 1, "client-a", None),
        (ApiVersionsRequest[3](client_software_name="py-k", client_software_version="3.0.12"), 3,
         2, "client-b", None),
        (MetadataRequest[1](topics=[MetadataRequest.MetadataRequestTopic(name="orders")]), 1, 3,
         None, None),
        (MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                             include_topic_authorized_operations=True), 12, 4, "ünïcode-id",
         ARBITRARY_HEADER_TAGS),
        (ApiVersionsRequest[4](client_software_name="x", client_software_version="y"), 4,
         -2147483648, "", tagged_section([(3, b"\x00" * 5)])),
        (MetadataRequest[9](topics=[], allow_auto_topic_creation=True), 9, 2147483647, None,
         None),
    ]
    out = []
    for request, version, correlation_id, client_id, tags in cases:
        data = request_frame(request, version, correlation_id, client_id, header_tags=tags)
        expected = RequestReceived(
            request.API_KEY, version, correlation_id, client_id, request, len(data) - 4
        )
        out.append((data, expected))
    return out


PIPELINE = pipelined_requests()
STREAM = b"".join(data for data, _ in PIPELINE)
EXPECTED = [event for _, event in PIPELINE]


def test_pipelined_stream_all_at_once() -> None:
    events = feed_all(STREAM)
    assert events == EXPECTED
    # field-level spot checks, in case RequestReceived equality were ever loosened
    assert events[1].request.client_software_name == "py-k"
    assert events[2].client_id is None
    assert events[2].request.topics[0].name == "orders"
    assert events[3].client_id == "ünïcode-id"
    assert events[3].request.topics is None
    assert events[3].request.allow_auto_topic_creation is False


def test_pipelined_stream_byte_by_byte_needs_data_until_each_frame_completes() -> None:
    conn = ServerConnection()
    boundaries = set()
    pos = 0
    for data, _ in PIPELINE:
        pos += len(data)
        boundaries.add(pos)
    events = []
    for i, byte in enumerate(STREAM, start=1):
        conn.receive_data(bytes([byte]))
        event = conn.next_event()
        if i in boundaries:
            assert isinstance(event, RequestReceived), (i, event)
            events.append(event)
            assert conn.next_event() is NEED_DATA
        else:
            assert event is NEED_DATA, (i, event)
    assert events == EXPECTED
    assert conn.buffered == 0


def test_next_event_without_data_needs_data() -> None:
    conn = ServerConnection()
    assert conn.next_event() is NEED_DATA
    assert conn.next_event() is NEED_DATA
    assert conn.buffered == 0


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=40))
def test_pipelined_stream_any_split_yields_the_same_events(cuts: list[int]) -> None:
    conn = ServerConnection()
    events: list[object] = []
    points = [0, *sorted(cuts), len(STREAM)]
    for start, end in pairwise(points):
        conn.receive_data(STREAM[start:end])
        events += drain(conn)
    assert events == EXPECTED
    assert conn.buffered == 0


_UNSUPPORTED = frame(request_header(18, 99, 555, "future", flexible=True) + b"\x01\x02\x03")
_BAD = frame(request_header(12345, 0, 556, "bad", flexible=False))
MIXED_STREAM = PIPELINE[0][0] + _UNSUPPORTED + PIPELINE[1][0] + _BAD + PIPELINE[2][0]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(MIXED_STREAM)), max_size=40))
def test_mixed_stream_any_split_yields_the_same_events(cuts: list[int]) -> None:
    """UnsupportedApiVersions in the middle, a violation near the end: same events, any split."""
    conn = ServerConnection()
    events: list[object] = []
    points = [0, *sorted(cuts), len(MIXED_STREAM)]
    for start, end in pairwise(points):
        conn.receive_data(MIXED_STREAM[start:end])
        if events and isinstance(events[-1], ProtocolViolation):
            assert conn.next_event() == events[-1]
            continue
        events += drain(conn)
    assert events[:3] == [EXPECTED[0], UnsupportedApiVersions(99, 555, "future"), EXPECTED[1]]
    assert len(events) == 4
    assert isinstance(events[3], ProtocolViolation)
    assert "12345" in events[3].reason
    assert conn.buffered == 0


@settings(max_examples=50)
@given(chunks=st.lists(st.integers(min_value=1, max_value=7), min_size=1))
def test_receive_without_parsing_then_drain(chunks: list[int]) -> None:
    """receive_data only buffers: many receives, then one drain, gives the same events."""
    conn = ServerConnection()
    pos = 0
    i = 0
    while pos < len(STREAM):
        step = chunks[i % len(chunks)]
        conn.receive_data(STREAM[pos : pos + step])
        pos += step
        i += 1
    assert drain(conn) == EXPECTED


# --------------------------------------------------------------------------------------------
# Request headers
# --------------------------------------------------------------------------------------------


def test_header_v1_non_flexible_parsed() -> None:
    body = ApiVersionsRequest[2]().encode(version=2)
    data = frame(request_header(18, 2, 77, "abc", flexible=False) + body)
    (event,) = feed_all(data)
    assert event == RequestReceived(18, 2, 77, "abc", ApiVersionsRequest[2](), len(data) - 4)


def test_header_v2_flexible_with_empty_tagged_fields() -> None:
    request = ApiVersionsRequest[3](client_software_name="n", client_software_version="v")
    data = frame(request_header(18, 3, 78, "abc", flexible=True) + request.encode(version=3))
    (event,) = feed_all(data)
    assert isinstance(event, RequestReceived)
    assert (event.api_key, event.api_version, event.correlation_id, event.client_id) == (
        18, 3, 78, "abc")
    assert event.request == request


@pytest.mark.parametrize(
    "tags",
    [
        tagged_section([(0, b"x")]),
        tagged_section([(0, b""), (1, b"\xff\xff"), (2, b"hello")]),
        # tag and size needing multi-byte varints
        tagged_section([(300, bytes(200)), (2**20, b"z")]),
    ],
    ids=["one", "three", "multibyte-varints"],
)
def test_header_v2_non_empty_tagged_fields_are_skipped(tags: bytes) -> None:
    request = ApiVersionsRequest[4](client_software_name="name", client_software_version="1")
    data = frame(request_header(18, 4, 5, "cid", flexible=True, header_tags=tags)
                 + request.encode(version=4))
    (event,) = feed_all(data)
    assert isinstance(event, RequestReceived)
    assert event.request == request
    assert event.client_id == "cid"


def test_header_v2_tagged_fields_past_kafkas_limit_are_a_violation() -> None:
    """Kafka 4.4 refuses more than 10,000 tagged fields in any section, the header's included."""
    request = ApiVersionsRequest[4](client_software_name="name", client_software_version="1")
    at_limit = tagged_section([(100 + i, b"") for i in range(10_000)])
    (event,) = feed_all(frame(request_header(18, 4, 5, "cid", flexible=True, header_tags=at_limit)
                              + request.encode(version=4)))
    assert isinstance(event, RequestReceived)
    assert event.request == request
    over = tagged_section([(100 + i, b"") for i in range(10_001)])
    (event,) = feed_all(frame(request_header(18, 4, 5, "cid", flexible=True, header_tags=over)
                              + request.encode(version=4)))
    assert isinstance(event, ProtocolViolation)
    assert "10001 tagged fields, more than the 10000" in event.reason


def test_header_v2_client_id_is_not_compact() -> None:
    """Header v2 keeps the int16 client-id length; a compact (varint+1) length is misread."""
    request = ApiVersionsRequest[3](client_software_name="n", client_software_version="v")
    good = request_header(18, 3, 1, "abc", flexible=True)
    assert good[8:10] == b"\x00\x03"
    (event,) = feed_all(frame(good + request.encode(version=3)))
    assert event.client_id == "abc"


def test_null_client_id() -> None:
    for version in (0, 3):
        request = ApiVersionsRequest[version]()
        flexible = is_flexible(18, version)
        data = frame(request_header(18, version, 9, None, flexible=flexible)
                     + request.encode(version=version))
        (event,) = feed_all(data)
        assert isinstance(event, RequestReceived)
        assert event.client_id is None


def test_empty_client_id_is_not_null() -> None:
    data = request_frame(ApiVersionsRequest[0](), 0, 1, "")
    (event,) = feed_all(data)
    assert event.client_id == ""


def test_size_is_the_frame_length_without_prefix() -> None:
    data = request_frame(ApiVersionsRequest[0](), 0, 1, "abc")
    (event,) = feed_all(data)
    assert event.size == len(data) - 4


# --------------------------------------------------------------------------------------------
# Size prefix: refused as soon as the four bytes are there
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [-1, -2, -(2**31), DEFAULT_MAX_REQUEST_SIZE + 1, 2**31 - 1])
def test_bad_size_prefix_is_a_violation_after_exactly_four_bytes(size: int) -> None:
    conn = ServerConnection()
    prefix = struct.pack(">i", size)
    for byte in prefix[:3]:
        conn.receive_data(bytes([byte]))
        assert conn.next_event() is NEED_DATA
    conn.receive_data(prefix[3:])
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation)
    assert str(size) in event.reason
    # the buffer does not grow after a violation: nothing more is kept
    conn.receive_data(b"\x00" * 65536)
    assert conn.buffered == 0
    assert conn.next_event() == event


def test_size_limit_is_inclusive() -> None:
    conn = ServerConnection(max_request_size=1000)
    conn.receive_data(struct.pack(">i", 1000))
    assert conn.next_event() is NEED_DATA
    conn = ServerConnection(max_request_size=1000)
    conn.receive_data(struct.pack(">i", 1001))
    assert isinstance(conn.next_event(), ProtocolViolation)


def test_max_request_size_applies_to_a_real_request() -> None:
    data = request_frame(ApiVersionsRequest[0](), 0, 1, "abc")
    size = len(data) - 4
    assert isinstance(feed_all(data, max_request_size=size)[0], RequestReceived)
    only_violation(feed_all(data, max_request_size=size - 1))


def test_bad_size_after_a_good_frame() -> None:
    good = request_frame(ApiVersionsRequest[0](), 0, 1, "abc")
    events = feed_all(good + struct.pack(">i", -7))
    assert isinstance(events[0], RequestReceived)
    assert isinstance(events[1], ProtocolViolation)


# --------------------------------------------------------------------------------------------
# Malformed headers
# --------------------------------------------------------------------------------------------

MALFORMED_HEADERS = {
    "empty-frame": b"",
    "truncated-api-key": b"\x00",
    "truncated-before-client-id": struct.pack(">hhi", 18, 0, 1),
    "truncated-client-id-length": struct.pack(">hhi", 18, 0, 1) + b"\x00",
    "client-id-longer-than-frame": struct.pack(">hhih", 18, 0, 1, 50) + b"abc",
    "client-id-length-minus-two": struct.pack(">hhih", 18, 0, 1, -2) + b"abc",
    "client-id-length-most-negative": struct.pack(">hhih", 18, 0, 1, -32768),
    "client-id-invalid-utf8": struct.pack(">hhih", 18, 0, 1, 2) + b"\xff\xfe",
    "client-id-lone-surrogate": struct.pack(">hhih", 18, 0, 1, 3) + b"\xed\xa0\x80",
    "client-id-truncated-utf8-sequence": struct.pack(">hhih", 18, 0, 1, 1) + b"\xc3",
    # flexible header whose tagged-field section is missing or runs past the frame
    "tagged-section-missing": struct.pack(">hhih", 18, 3, 1, 1) + b"a",
    "tagged-field-size-past-end": struct.pack(">hhih", 18, 3, 1, 1) + b"a" + b"\x01\x00\x10xy",
    "tagged-count-without-fields": struct.pack(">hhih", 18, 3, 1, 1) + b"a" + b"\x05",
    "tagged-varint-unterminated": struct.pack(">hhih", 18, 3, 1, 1) + b"a" + b"\x80\x80",
    "tagged-varint-too-long": struct.pack(">hhih", 18, 3, 1, 1) + b"a" + b"\xff" * 6 + b"\x00",
}


@pytest.mark.parametrize("payload", list(MALFORMED_HEADERS.values()), ids=list(MALFORMED_HEADERS))
def test_malformed_header_is_a_violation(payload: bytes) -> None:
    only_violation(feed_all(frame(payload)))


@pytest.mark.parametrize(
    "body",
    [b"", b"\x05", b"\x02a\x05ab"],
    ids=["missing", "truncated-string", "string-past-end"],
)
def test_malformed_body_is_a_violation(body: bytes) -> None:
    header = request_header(18, 3, 1, "abc", flexible=True)
    only_violation(feed_all(frame(header + body)))


def test_unknown_api_key_is_a_violation() -> None:
    for api_key in (-1, 12345, 32767, 999):
        data = frame(request_header(api_key, 0, 1, "abc", flexible=False) + b"\x00" * 8)
        violation = only_violation(feed_all(data))
        assert str(api_key) in violation.reason


# Kafka APIs we do not serve: share group heartbeats (KIP-932), client telemetry (which clients
# only send when a broker advertises it).
KAFKA_APIS_NOT_SERVED = [76, 71]


def test_kafka_apis_we_do_not_serve_are_violations() -> None:
    for key in KAFKA_APIS_NOT_SERVED:
        assert key not in SUPPORTED_VERSIONS
        data = frame(request_header(key, 0, 1, "abc", flexible=False) + b"\x00" * 8)
        only_violation(feed_all(data))


def _out_of_range_versions() -> list[tuple[ApiKey, int]]:
    cases = []
    for key, (low, high) in SUPPORTED_VERSIONS.items():
        for version in {low - 1, -1, -32768}:
            if version < low:
                cases.append((key, version))
        if key != ApiKey.API_VERSIONS:
            cases += [(key, high + 1), (key, 99), (key, 32767)]
    return cases


@pytest.mark.parametrize(("api_key", "api_version"), _out_of_range_versions())
def test_version_outside_the_table_is_a_violation(api_key: ApiKey, api_version: int) -> None:
    data = frame(request_header(api_key, api_version, 1, "abc", flexible=False) + b"\x00" * 8)
    violation = only_violation(feed_all(data))
    assert str(api_version) in violation.reason


@pytest.mark.parametrize("api_version", [SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1] + 1, 99, 32767])
@pytest.mark.parametrize("flexible", [False, True])
def test_api_versions_above_max_is_unsupported_not_a_violation(
    api_version: int, flexible: bool
) -> None:
    # The body is in a format we do not know; it must not be decoded.
    unknown_body = b"\x07future\x01\xff\xff\xff"
    data = frame(request_header(18, api_version, 4242, "cli", flexible=flexible) + unknown_body)
    follow_up = request_frame(ApiVersionsRequest[0](), 0, 4243, "cli")
    events = feed_all(data + follow_up)
    assert events[0] == UnsupportedApiVersions(api_version, 4242, "cli")
    # the connection stays usable: a client retries with a lower version
    assert isinstance(events[1], RequestReceived)
    assert events[1].correlation_id == 4243


def test_api_versions_above_max_with_null_client_id() -> None:
    data = frame(request_header(18, 50, 1, None, flexible=False))
    assert feed_all(data) == [UnsupportedApiVersions(50, 1, None)]


def test_violation_is_sticky() -> None:
    conn = ServerConnection()
    conn.receive_data(frame(request_header(12345, 0, 1, "a", flexible=False)))
    first = conn.next_event()
    assert isinstance(first, ProtocolViolation)
    assert conn.buffered == 0
    # a perfectly good request afterwards cannot resynchronise the stream
    conn.receive_data(request_frame(ApiVersionsRequest[0](), 0, 2, "a"))
    assert conn.buffered == 0
    for _ in range(3):
        assert conn.next_event() == first


def test_violation_discards_pipelined_requests_behind_it() -> None:
    bad = frame(request_header(12345, 0, 1, "a", flexible=False))
    good = request_frame(ApiVersionsRequest[0](), 0, 2, "a")
    conn = ServerConnection()
    conn.receive_data(good + bad + good)
    assert isinstance(conn.next_event(), RequestReceived)
    violation = conn.next_event()
    assert isinstance(violation, ProtocolViolation)
    assert conn.next_event() == violation
    assert conn.buffered == 0


# --------------------------------------------------------------------------------------------
# Fuzzing: next_event never raises, whatever the bytes
# --------------------------------------------------------------------------------------------

EVENT_TYPES = (RequestReceived, UnsupportedApiVersions, ProtocolViolation)


def _drain_checked(conn: ServerConnection) -> list[object]:
    events = drain(conn)
    for event in events:
        assert isinstance(event, EVENT_TYPES), event
    return events


@settings(max_examples=500)
@given(payload=st.binary(max_size=300))
def test_fuzz_arbitrary_payload_after_valid_size_never_raises(payload: bytes) -> None:
    conn = ServerConnection()
    conn.receive_data(frame(payload))
    events = _drain_checked(conn)
    assert len(events) == 1
    assert conn.buffered == 0


_SERVED = [(key, version) for key, (low, high) in SUPPORTED_VERSIONS.items()
           for version in range(low, high + 1)]


@settings(max_examples=1000)
@given(
    target=st.sampled_from(_SERVED),
    client_id=st.one_of(st.none(), st.text(max_size=10)),
    body=st.binary(max_size=200),
)
def test_fuzz_random_body_behind_a_valid_header_never_raises(
    target: tuple[ApiKey, int], client_id: str | None, body: bytes
) -> None:
    """Reaches the body decoders of every served api version with garbage."""
    api_key, version = target
    header = request_header(api_key, version, 1, client_id, flexible=is_flexible(api_key, version))
    conn = ServerConnection()
    conn.receive_data(frame(header + body))
    events = _drain_checked(conn)
    assert len(events) == 1
    if isinstance(events[0], RequestReceived):
        assert (events[0].api_key, events[0].api_version) == (api_key, version)


@settings(max_examples=300)
@given(
    target=st.sampled_from(_SERVED),
    data=st.data(),
)
def test_fuzz_mutated_valid_requests_never_raise(
    target: tuple[ApiKey, int], data: st.DataObject
) -> None:
    """Flip, drop and insert bytes in a valid frame's payload (the size prefix is kept right)."""
    api_key, version = target
    request = request_class(api_key)[version]()
    payload = bytearray(request_frame(request, version, 7, "fuzz")[4:])
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        op = data.draw(st.sampled_from(["flip", "drop", "insert"]))
        pos = data.draw(st.integers(min_value=0, max_value=max(len(payload) - 1, 0)))
        if op == "flip" and payload:
            payload[pos] ^= data.draw(st.integers(min_value=1, max_value=255))
        elif op == "drop" and payload:
            del payload[pos]
        else:
            payload.insert(pos, data.draw(st.integers(min_value=0, max_value=255)))
    conn = ServerConnection()
    conn.receive_data(frame(bytes(payload)))
    assert len(_drain_checked(conn)) == 1


@settings(max_examples=300)
@given(stream=st.binary(max_size=600), cuts=st.lists(st.integers(min_value=0, max_value=600)))
def test_fuzz_arbitrary_stream_any_split_never_raises(stream: bytes, cuts: list[int]) -> None:
    conn = ServerConnection(max_request_size=1 << 16)
    points = [0, *sorted(c for c in cuts if c <= len(stream)), len(stream)]
    for start, end in pairwise(points):
        conn.receive_data(stream[start:end])
        _drain_checked(conn)


# --------------------------------------------------------------------------------------------
# Response encoding: header v0 / v1, ApiVersions always v0
# --------------------------------------------------------------------------------------------


def _split_response(data: bytes) -> tuple[int, int, bytes]:
    (size,) = struct.unpack_from(">i", data, 0)
    assert size == len(data) - 4
    (correlation_id,) = struct.unpack_from(">i", data, 4)
    return size, correlation_id, data[8:]


def _metadata_response(version: int) -> object:
    broker = MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)
    return MetadataResponse[version](brokers=[broker], cluster_id="c", controller_id=1, topics=[])


@pytest.mark.parametrize("version", [0, 1, 8])
def test_response_header_v0_for_non_flexible(version: int) -> None:
    response = _metadata_response(version)
    data = encode_response(3, version, 123456, response)
    _, correlation_id, rest = _split_response(data)
    assert correlation_id == 123456
    assert rest == response.encode(version=version)


@pytest.mark.parametrize("version", [9, 12])
def test_response_header_v1_for_flexible_has_empty_tagged_fields(version: int) -> None:
    response = _metadata_response(version)
    data = encode_response(3, version, -5, response)
    _, correlation_id, rest = _split_response(data)
    assert correlation_id == -5
    assert rest[:1] == b"\x00"
    assert rest[1:] == response.encode(version=version)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_header_is_always_v0(version: int) -> None:
    response = ApiVersionsResponse[version](
        error_code=0,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
    )
    data = encode_response(18, version, 99, response)
    _, correlation_id, rest = _split_response(data)
    assert correlation_id == 99
    assert rest == response.encode(version=version)  # no tagged-field byte after the id
    # kafka-python's client-side reader agrees
    decoded = ApiVersionsResponse.decode(data, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 99
    assert decoded.api_keys[0].max_version == 4


def test_api_versions_error_response_in_v0_format() -> None:
    """What the server sends for UnsupportedApiVersions: a v0 body with error 35."""
    response = ApiVersionsResponse[0](
        error_code=35,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
    )
    data = encode_response(18, 0, 7, response)
    assert data[8:10] == b"\x00\x23"
    decoded = ApiVersionsResponse.decode(data, version=4, header=True, framed=True)
    assert decoded.error_code == 35


# --- nulls where the schema forbids them (issue 22) --------------------------------------------


def _string(value: bytes | None) -> bytes:
    return struct.pack(">h", -1) if value is None else struct.pack(">h", len(value)) + value


def test_a_null_in_a_non_nullable_field_is_a_malformed_request() -> None:
    """The codec reads length -1 as None for any string or array; Kafka's readers refuse it where
    the schema is not nullable, and so do we: the connection closes, no handler sees None."""
    # FindCoordinator v1: key (string, not nullable), key_type.
    good = _string(b"g") + b"\x00"
    events = feed_all(frame(request_header(ApiKey.FIND_COORDINATOR, 1, 7, "c", flexible=False) + good))
    assert isinstance(events[0], RequestReceived)
    bad = _string(None) + b"\x00"
    violation = only_violation(feed_all(frame(request_header(ApiKey.FIND_COORDINATOR, 1, 7, "c", flexible=False) + bad)))
    assert "non-nullable field key was serialized as null" in violation.reason
    # DescribeGroups v0: groups, a non-nullable array of strings: a null array is refused too.
    violation = only_violation(feed_all(frame(request_header(ApiKey.DESCRIBE_GROUPS, 0, 8, "c", flexible=False)
                                              + struct.pack(">i", -1))))
    assert "non-nullable field groups" in violation.reason
    # Where the schema allows null (CreateTopics config values), null passes.
    from kafka.protocol.admin import CreateTopicsRequest as CT

    T = CT.CreatableTopic
    body = CT(version=4, timeout_ms=1000, validate_only=False, topics=[T(
        name="t", num_partitions=1, replication_factor=1, assignments=[],
        configs=[T.CreatableTopicConfig(name="retention.ms", value=None)])]).encode(version=4)
    events = feed_all(frame(request_header(ApiKey.CREATE_TOPICS, 4, 9, "c", flexible=False) + bytes(body)))
    assert isinstance(events[0], RequestReceived)


# --- before SASL authentication (the server's gate drives these three knobs) -----------------------


def test_admission_sees_the_header_before_the_body_is_parsed() -> None:
    conn = ServerConnection()
    seen: list[tuple[int, int]] = []

    def admit(api_key: int, api_version: int) -> str | None:
        seen.append((api_key, api_version))
        return "refused before parsing" if api_key == ApiKey.METADATA else None

    conn.admit = admit
    # A Metadata header whose body is garbage: refused by admission, not reported as malformed.
    conn.receive_data(frame(request_header(ApiKey.METADATA, 9, 1, "c", flexible=True) + b"\xff" * 5))
    assert only_violation(drain(conn)).reason == "refused before parsing"
    assert seen == [(ApiKey.METADATA, 9)]


def test_frame_limit_caps_frames_below_the_request_size() -> None:
    conn = ServerConnection()
    conn.frame_limit = 100
    conn.receive_data(struct.pack(">i", 101))
    assert "outside 0..100" in only_violation(drain(conn)).reason


def test_raw_next_reads_one_frame_without_a_header() -> None:
    conn = ServerConnection()
    conn.raw_next = True
    conn.receive_data(frame(b"\x00alice\x00secret") + request_frame(MetadataRequest[0](topics=[]), 0, 5))
    events = drain(conn)
    assert isinstance(events[0], RawFrame) and events[0].data == b"\x00alice\x00secret"
    assert isinstance(events[1], RequestReceived) and events[1].correlation_id == 5


def test_a_connection_admits_by_its_servers_versions_table() -> None:
    """A node in ZooKeeper mode admits OffsetFetch v0 (protocol/apis.py ZOOKEEPER_MODE_VERSIONS); a node
    without ZooKeeper still refuses it, also after a ZooKeeper-mode connection in the same process
    decoded one (the decoding plans are kept per table)."""
    from kafka.protocol.consumer import OffsetFetchRequest

    from protocol.apis import ZOOKEEPER_MODE_VERSIONS

    frame = request_frame(OffsetFetchRequest(version=0, group_id="g", topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]), 0, 7)
    zk_mode = ServerConnection()
    zk_mode.serve_versions(ZOOKEEPER_MODE_VERSIONS)
    zk_mode.receive_data(frame)
    (event,) = drain(zk_mode)
    assert isinstance(event, RequestReceived) and event.api_version == 0 and event.request.group_id == "g"
    assert "OFFSET_FETCH version 0 outside 1..9" in only_violation(feed_all(frame)).reason
