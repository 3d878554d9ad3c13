"""protocol.varints: the one unsigned-varint reader, and each decoder's own error for what it refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.apis import ApiKey, request_class
from protocol.connection import ServerConnection
from protocol.consumer_offsets import MalformedRecordError, decode_group_metadata_value
from protocol.events import ProtocolViolation
from protocol.request_codec import MalformedRequest, body_decoder
from protocol.varints import VarintError, encode_uvarint, read_uvarint
from tests.protocol.test_connection import drain, frame, request_header


@given(st.integers(0, 2**32 - 1), st.binary(max_size=3))
def test_reads_what_encode_writes(value: int, after: bytes) -> None:
    data = b"\x07" + encode_uvarint(value) + after
    assert read_uvarint(data, 1) == (value, len(data) - len(after))
    assert read_uvarint(memoryview(data), 1) == (value, len(data) - len(after))


def test_five_bytes_for_a_varint_ten_for_a_varlong() -> None:
    five = b"\xff\xff\xff\xff\x0f"
    assert read_uvarint(five, 0) == (2**32 - 1, 5)
    with pytest.raises(VarintError, match="longer than 5 bytes"):
        read_uvarint(b"\x80" * 5 + b"\x00", 0)
    assert read_uvarint(b"\xff" * 9 + b"\x01", 0, max_bytes=10) == (2**64 - 1, 10)
    with pytest.raises(VarintError, match="longer than 10 bytes"):
        read_uvarint(b"\x80" * 10 + b"\x00", 0, max_bytes=10)


def test_cut_short_by_the_end_of_the_data() -> None:
    for data in (b"", b"\x80", b"\xff\xff\x80"):
        with pytest.raises(VarintError, match=f"cut short at byte {len(data)}"):
            read_uvarint(data, 0)
    with pytest.raises(VarintError, match="cut short"):
        read_uvarint(b"\x01\x02\x83", 2)


@pytest.mark.parametrize("varint", [b"\x80\x80", b"\x80" * 5 + b"\x00"], ids=["cut-short", "six-bytes"])
def test_each_decoder_keeps_its_own_error(varint: bytes) -> None:
    reason = "cut short" if len(varint) == 2 else "longer than 5 bytes"
    # A request header's tagged fields (ApiVersions v3: header v2): a protocol violation.
    conn = ServerConnection()
    conn.receive_data(frame(request_header(ApiKey.API_VERSIONS, 3, 1, "c", flexible=True, header_tags=varint)))
    (event,) = drain(conn)
    assert isinstance(event, ProtocolViolation)
    assert f"MalformedRequest: varint {reason}" in event.reason
    # A request body (Metadata v12 starts with a compact array length), inline or not.
    with pytest.raises(MalformedRequest, match=reason):
        body_decoder(request_class(ApiKey.METADATA), 12)(varint)
    # A flexible __consumer_offsets value (GroupMetadataValue v4: a compact protocol type first).
    with pytest.raises(MalformedRecordError, match=reason):
        decode_group_metadata_value(b"\x00\x04" + varint)
