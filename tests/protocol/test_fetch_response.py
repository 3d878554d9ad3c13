"""The hand-written FetchResponse encoder against kafka-python's general codec, every version."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse

from protocol.errors import ErrorCode
from protocol.fetch_response import (
    FIRST_FLEXIBLE,
    MAX_VERSION,
    MIN_VERSION,
    FetchPartitionData,
    FetchTopicData,
    RecordsRef,
    encode_fetch_response,
)
from tests.wire_client import decode_response

partitions = st.builds(
    FetchPartitionData,
    partition_index=st.integers(0, 1000),
    error_code=st.sampled_from([0, 1, 3, 6]),
    high_watermark=st.integers(-1, 2**40),
    last_stable_offset=st.integers(-1, 2**40),
    log_start_offset=st.integers(-1, 2**40),
    aborted_transactions=st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)), max_size=2)),
    preferred_read_replica=st.integers(-1, 5),
    records=st.one_of(st.none(), st.binary(max_size=300)),
)
topics = st.lists(st.builds(FetchTopicData, name=st.text(min_size=1, max_size=20), topic_id=st.uuids(),
                            partitions=st.lists(partitions, max_size=3)), max_size=3)


def _join(parts: list) -> bytes:  # type: ignore[type-arg]
    return b"".join(p if isinstance(p, bytes) else p.source for p in parts)


@settings(max_examples=60, deadline=None)
@given(version=st.integers(MIN_VERSION, MAX_VERSION), data=topics, session=st.integers(0, 2**31 - 1),
       throttle=st.integers(0, 1000))
def test_matches_the_general_decoder(version: int, data: list[FetchTopicData], session: int, throttle: int) -> None:
    frame = _join(encode_fetch_response(version, 42, data, throttle_time_ms=throttle, session_id=session))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    cid, resp = decode_response(1, version, frame[4:])
    assert cid == 42 and resp.throttle_time_ms == throttle
    if version >= 7:
        assert resp.session_id == session
    assert len(resp.responses) == len(data)
    for got, want in zip(resp.responses, data, strict=True):
        if version >= 13:
            assert got.topic_id == want.topic_id
        else:
            assert got.topic == want.name
        for gp, wp in zip(got.partitions, want.partitions, strict=True):
            assert (gp.partition_index, gp.error_code, gp.high_watermark, gp.last_stable_offset) == (
                wp.partition_index, wp.error_code, wp.high_watermark, wp.last_stable_offset)
            if version >= 5:
                assert gp.log_start_offset == wp.log_start_offset
            if version >= 11:
                assert gp.preferred_read_replica == wp.preferred_read_replica
            want_aborted = None if wp.aborted_transactions is None else [list(a) for a in wp.aborted_transactions]
            got_aborted = None if gp.aborted_transactions is None else [
                [a.producer_id, a.first_offset] for a in gp.aborted_transactions]
            assert got_aborted == want_aborted
            # None is accepted but written as an empty record set, never null.
            assert gp.records == (b"" if wp.records is None else wp.records)


def test_records_refs_become_separate_parts_and_equal_inline_bytes() -> None:
    data = b"\x01" * 100
    inline = [FetchTopicData("t", uuid.uuid4(), [FetchPartitionData(0, records=data), FetchPartitionData(1, records=None)])]
    by_ref = [FetchTopicData("t", inline[0].topic_id, [FetchPartitionData(0, records=RecordsRef(100, data)),
                                                       FetchPartitionData(1, records=None)])]
    for version in (4, 11, 12, 17):
        parts = encode_fetch_response(version, 1, by_ref)
        assert any(isinstance(p, RecordsRef) for p in parts)
        assert _join(parts) == _join(encode_fetch_response(version, 1, inline))


ERROR_PARTITION_CODES = [ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
                         ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_ID]


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
def test_error_partitions_carry_an_empty_record_set_not_null(version: int) -> None:
    """Kafka answers an error partition with MemoryRecords.EMPTY (length 0); librdkafka 2.16 fails
    to parse the whole response on a null record set (MessageSetSize -1) and never surfaces the
    partition's error. Checked on the raw length field and through kafka-python's FetchResponse."""
    topic_id = uuid.uuid4()
    for code in ERROR_PARTITION_CODES:
        # As coordinator/topics/fetch.py builds an error partition: records left at their default; and
        # an explicit None, which the encoder must also write as empty.
        for partition in (FetchPartitionData(0, error_code=code, high_watermark=5),
                          FetchPartitionData(0, error_code=code, records=None)):
            frame = _join(encode_fetch_response(version, 7, [FetchTopicData("t", topic_id, [partition])]))
            # The records field is the last thing in the frame, followed only by the partition,
            # topic and response tagged fields (one empty byte each) in flexible versions.
            if version >= FIRST_FLEXIBLE:
                assert frame[-4:] == b"\x01\x00\x00\x00", frame.hex()  # compact length 0 + 1; null is 0
            else:
                assert frame[-4:] == b"\x00\x00\x00\x00", frame.hex()  # int32 0; null is -1 (ff ff ff ff)
            body = frame[4 + 4 + (1 if version >= FIRST_FLEXIBLE else 0):]  # size, correlation id, header tags
            resp = FetchResponse.decode(body, version=version)
            (got,) = resp.responses[0].partitions
            assert got.error_code == code
            assert got.records is not None and len(got.records) == 0, (version, code, got.records)
