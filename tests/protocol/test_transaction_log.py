"""``__transaction_state`` records, byte for byte Kafka's (TransactionLogKey/Value.json of
https://github.com/apache/kafka/tree/trunk/transaction-coordinator/src/main/resources/common/message).
The golden bytes are written out field by field from the schemas, not produced by the encoder."""

from __future__ import annotations

import pytest

from protocol.transaction_log import (
    MalformedRecordError,
    TransactionLogKey,
    TransactionLogValue,
    UnknownRecordVersion,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    serialize,
)

KEY_GOLDEN = bytes.fromhex(
    "0000"            # version 0
    "0005" "74786e2d61"  # "txn-a"
)

ONGOING = TransactionLogValue(producer_id=4001, producer_epoch=3, transaction_timeout_ms=60000,
                              transaction_status=1,
                              transaction_partitions=(("orders", (0, 2)), ("__consumer_offsets", (17,))),
                              transaction_last_update_timestamp_ms=1_700_000_000_123,
                              transaction_start_timestamp_ms=1_700_000_000_100)

ONGOING_V0 = bytes.fromhex(
    "0000"                      # version 0
    "0000000000000fa1"          # ProducerId 4001
    "0003"                      # ProducerEpoch
    "0000ea60"                  # TransactionTimeoutMs 60000
    "01"                        # TransactionStatus Ongoing
    "00000002"                  # 2 topics
    "0006" "6f7264657273"       # "orders"
    "00000002" "00000000" "00000002"
    "0012" "5f5f636f6e73756d65725f6f666673657473"  # "__consumer_offsets"
    "00000001" "00000011"
    "0000018bcfe5687b"          # last update 1700000000123
    "0000018bcfe56864"          # start 1700000000100
)

EMPTY = TransactionLogValue(7, 0, 60000, 0, None, 1_700_000_000_000, -1)
EMPTY_V0 = bytes.fromhex(
    "0000" "0000000000000007" "0000" "0000ea60" "00"
    "ffffffff"                  # null partitions (Empty)
    "0000018bcfe56800" "ffffffffffffffff"
)

# Version 1 (flexible): compact strings/arrays (length + 1), tagged fields after each struct and
# at the end: tag 0 PreviousProducerId, tag 1 NextProducerId, tag 2 ClientTransactionVersion.
ONGOING_V1_TAGGED = bytes.fromhex(
    "0001"
    "0000000000000fa1" "0003" "0000ea60" "01"
    "02"                        # 1 topic (compact: n + 1)
    "07" "6f7264657273"         # "orders"
    "03" "00000000" "00000002"  # 2 partitions
    "00"                        # topic entry: no tagged fields
    "0000018bcfe5687b" "0000018bcfe56864"
    "03"                        # 3 tagged fields
    "00" "08" "0000000000000fa0"  # PreviousProducerId 4000
    "01" "08" "0000000000000fa2"  # NextProducerId 4002
    "02" "02" "0001"              # ClientTransactionVersion 1
)


def test_key_golden_bytes() -> None:
    assert encode_key(TransactionLogKey("txn-a")) == KEY_GOLDEN
    assert decode_key(KEY_GOLDEN) == TransactionLogKey("txn-a")


def test_value_v0_golden_bytes_both_ways() -> None:
    assert encode_value(ONGOING) == ONGOING_V0
    assert decode_value(ONGOING_V0) == ONGOING
    assert encode_value(EMPTY) == EMPTY_V0
    assert decode_value(EMPTY_V0) == EMPTY


def test_value_v1_with_tagged_fields_is_read() -> None:
    value = decode_value(ONGOING_V1_TAGGED)
    assert value.transaction_partitions == (("orders", (0, 2)),)
    assert (value.previous_producer_id, value.next_producer_id, value.client_transaction_version) == (4000, 4002, 1)
    assert value.producer_id == 4001 and value.transaction_start_timestamp_ms == 1_700_000_000_100
    assert encode_value(value, version=1) == ONGOING_V1_TAGGED


def test_value_v1_skips_unknown_tags_and_defaults_missing_ones() -> None:
    data = bytes.fromhex("0001" "0000000000000007" "0000" "0000ea60" "00" "00"
                         "0000018bcfe56800" "ffffffffffffffff" "01" "09" "03" "aabbcc")
    value = decode_value(data)
    assert value.transaction_partitions is None
    assert (value.previous_producer_id, value.next_producer_id, value.client_transaction_version) == (-1, -1, 0)


def test_unknown_versions_raise_what_the_loader_skips() -> None:
    with pytest.raises(UnknownRecordVersion):
        decode_key(bytes.fromhex("0001") + KEY_GOLDEN[2:])
    with pytest.raises(UnknownRecordVersion):
        decode_value(bytes.fromhex("0002") + ONGOING_V0[2:])


def test_truncated_value_is_malformed() -> None:
    with pytest.raises(MalformedRecordError):
        decode_value(ONGOING_V0[:-3])


def test_a_topic_over_32767_bytes_is_malformed_in_either_version() -> None:
    """Kafka's generated readers refuse a string over 0x7fff bytes in the compact form of value
    v1 too. Found by tests/fuzz/fuzz_transaction_log.py: such a v1 value loaded, and then no
    record of its id (all written as v0, whose int16 length cannot hold it) could be written,
    nor any snapshot of the partition."""
    longest = TransactionLogValue(5, 1, 100, 1, (("t" * 32767, (0,)),), 1, 2)
    assert decode_value(encode_value(longest, 1)) == longest
    assert decode_value(encode_value(longest, 0)) == longest
    too_long = encode_value(TransactionLogValue(5, 1, 100, 1, (("é" * 16384, (0,)),), 1, 2), 1)
    with pytest.raises(MalformedRecordError, match="string of 32768 bytes"):
        decode_value(too_long)


def test_serialize_tombstone() -> None:
    assert serialize(TransactionLogKey("txn-a"), None) == (KEY_GOLDEN, None)
    assert serialize(TransactionLogKey("txn-a"), ONGOING) == (KEY_GOLDEN, ONGOING_V0)
