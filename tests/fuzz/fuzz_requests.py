"""Every request body decoder, for every api and version the server advertises.

Edge: the body of a request frame, after the header, as ``ServerConnection`` decodes it
(``protocol.request_codec.body_decoder``) and then checks for nulls the schema forbids
(``protocol.nullability``). The (api, version) pairs come from ``api_version_entries()``, the
very list an ApiVersions response carries, so an api is fuzzed the day it is advertised.

Input: byte 0 is the api key, byte 1 the version, the rest the body. A pair the server does not
advertise is mapped onto one it does (by its two bytes modulo the table), so every input
exercises some decoder while saved inputs of advertised pairs keep their meaning as the table
grows.

Properties: the decoder returns a message or raises ``MalformedRequest``; a message either passes
the null check or fails it with ``NullInNonNullableField``. Nothing else, and every input fast.
And what our decoder accepts, kafka-python's own ``decode`` (whose generated code ours reuses
with stricter reads) decodes to the same message: stricter, never different.
"""

from __future__ import annotations

from collections.abc import Callable

from kafka.protocol.admin import DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)

from protocol.apis import ApiKey, request_class
from protocol.nullability import NullInNonNullableField, null_checker
from protocol.records import build_batch
from protocol.request_codec import MalformedRequest, body_decoder
from protocol.responses import api_version_entries
from tests.fuzz import golden
from tests.fuzz.harness import Finding, expect

NAME = "requests"
INSTRUMENT = ("protocol.request_codec", "protocol.nullability", "kafka.protocol.generated")

#: The decoders' own errors.
OURS = (MalformedRequest, NullInNonNullableField)

#: (api key, version) -> (decode, check nulls), for everything ApiVersions advertises. Built at
#: import, which also compiles the decoders (generated code) before run.py instruments them.
PLANS = {
    (entry.api_key, version): (body_decoder(request_class(entry.api_key), version),
                               null_checker(request_class(entry.api_key), version))
    for entry in api_version_entries()
    for version in range(entry.min_version, entry.max_version + 1)
}
_PAIRS = sorted(PLANS)


def _pair(data: bytes) -> tuple[int, int]:
    pair = (data[0], data[1])
    return pair if pair in PLANS else _PAIRS[(data[0] << 8 | data[1]) % len(_PAIRS)]


def _transaction_message(api_key: ApiKey, version: int) -> object | None:
    """A request of each transaction api (issue 32), and a transactional Produce, with every array
    and string filled in, as
    a transactional producer, a broker's KIP-890 verification, a coordinator's markers and an
    admin client send them: a default message has empty arrays and null strings, so the decoders
    of their elements would start from nothing. Fields a version lacks are left out by ``encode``."""
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    Marker = WriteTxnMarkersRequest.WritableTxnMarker
    Commit = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    topics = [Topic(name="orders", partitions=[0, 1, 2]), Topic(name="__consumer_offsets", partitions=[17])]
    Data = ProduceRequest.TopicProduceData
    batch = build_batch([(b"k", b"v"), (None, b"w")], timestamp_ms=1_700_000_000_000, producer_id=4000,
                        producer_epoch=3, base_sequence=0, transactional=True)
    build: dict[ApiKey, Callable[[], object]] = {
        ApiKey.PRODUCE: lambda: ProduceRequest(
            version=version, transactional_id="txn-1", acks=-1, timeout_ms=30_000,
            topic_data=[Data(name="orders", partition_data=[Data.PartitionProduceData(index=0, records=batch)])]),
        ApiKey.INIT_PRODUCER_ID: lambda: InitProducerIdRequest(
            version=version, transactional_id="txn-1", transaction_timeout_ms=60_000, producer_id=4000,
            producer_epoch=3),
        ApiKey.ADD_PARTITIONS_TO_TXN: lambda: AddPartitionsToTxnRequest(
            version=version, v3_and_below_transactional_id="txn-1", v3_and_below_producer_id=4000,
            v3_and_below_producer_epoch=3, v3_and_below_topics=topics,
            transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=f"txn-{i}", producer_id=4000 + i, producer_epoch=3, verify_only=bool(i),
                topics=topics) for i in range(2)]),
        ApiKey.ADD_OFFSETS_TO_TXN: lambda: AddOffsetsToTxnRequest(
            version=version, transactional_id="txn-1", producer_id=4000, producer_epoch=3, group_id="group-1"),
        ApiKey.END_TXN: lambda: EndTxnRequest(
            version=version, transactional_id="txn-1", producer_id=4000, producer_epoch=3, committed=True),
        ApiKey.WRITE_TXN_MARKERS: lambda: WriteTxnMarkersRequest(version=version, markers=[Marker(
            producer_id=4000, producer_epoch=3, transaction_result=commit, coordinator_epoch=7,
            topics=[Marker.WritableTxnMarkerTopic(name="orders", partition_indexes=[0, 2])]) for commit in (True, False)]),
        ApiKey.TXN_OFFSET_COMMIT: lambda: TxnOffsetCommitRequest(
            version=version, transactional_id="txn-1", group_id="group-1", producer_id=4000, producer_epoch=3,
            generation_id=5, member_id="member-1", group_instance_id="instance-1",
            topics=[Commit(name="orders", partitions=[Commit.TxnOffsetCommitRequestPartition(
                partition_index=p, committed_offset=100 + p, committed_leader_epoch=2, committed_metadata="m")
                for p in range(2)])]),
        ApiKey.DESCRIBE_PRODUCERS: lambda: DescribeProducersRequest(version=version, topics=[
            DescribeProducersRequest.TopicRequest(name="orders", partition_indexes=[0, 1])]),
        ApiKey.DESCRIBE_TRANSACTIONS: lambda: DescribeTransactionsRequest(
            version=version, transactional_ids=["txn-1", "txn-2"]),
        ApiKey.LIST_TRANSACTIONS: lambda: ListTransactionsRequest(
            version=version, state_filters=["Ongoing", "PrepareCommit"], producer_id_filters=[4000, 4001],
            duration_filter=60_000),
    }
    make = build.get(api_key)
    return None if make is None else make()


def seeds() -> list[bytes]:
    """Every recorded client body, the codec's encoding of a default message of every
    advertised pair (so pairs no recorded client sent start from a valid body too), and filled-in
    messages of the transaction apis at every advertised version."""
    out = []
    for frame in golden.frames():
        api_key, version, body = golden.split(frame)
        if (api_key, version) in PLANS:
            out.append(bytes([api_key, version]) + body)
    for api_key, version in _PAIRS:
        out.append(bytes([api_key, version]) + request_class(api_key)(version=version).encode(version=version))
    for api_key, version in _PAIRS:
        message = _transaction_message(ApiKey(api_key), version)
        if message is not None:
            out.append(bytes([api_key, version]) + message.encode(version=version))  # type: ignore[attr-defined]
    return out


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    api_key, version = _pair(data)
    decode, check_nulls = PLANS[api_key, version]
    body = data[2:]
    with expect(*OURS):
        message = decode(memoryview(body))
        theirs = request_class(api_key).decode(body, version=version)
        if repr(theirs) != repr(message):
            raise Finding(f"api {api_key} v{version}: we decode {message!r}, kafka-python {theirs!r}")
        check_nulls(message)
