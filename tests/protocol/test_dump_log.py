"""``dump_log`` over segment files written with our codecs: batch/record lines, the offsets
decoder's Kafka-formatter output, the transaction log decoder's kafka-dump-log lines, directories,
and corrupt or torn files (never a traceback)."""

from __future__ import annotations

import io
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.dump_log import dump_log, format_offsets_record, format_transaction_log_record
from protocol import consumer_group_records as cgr
from protocol.compression import Compression
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    serialize,
)
from protocol.records import ControlRecordType, Record, build_batch, control_record, encode_batch
from protocol.transaction_log import TransactionLogKey, TransactionLogValue
from protocol.transaction_log import encode_key as txn_key
from protocol.transaction_log import encode_value as txn_value


def segment(directory: Path, base_offset: int, *batches: bytes) -> Path:
    path = directory / f"{base_offset:020d}.log"
    path.write_bytes(b"".join(batches))
    return path


def run(path: Path, offsets_decoder: bool = True, transaction_log_decoder: bool = False) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = dump_log(path, offsets_decoder, out, transaction_log_decoder=transaction_log_decoder)
    return code, out.getvalue().splitlines()


MEMBER = MemberMetadata("m1", "cli", "/10.0.0.1", 300000, 10000, b"\x00" * 12, b"\x00" * 7, group_instance_id=None)


def offsets_batches() -> list[bytes]:
    commit = serialize(OffsetCommitKey("g", "t", 0), OffsetCommitValue(42, "meta", 1000, leader_epoch=3))
    expiring = serialize(OffsetCommitKey("g", "t", 1), OffsetCommitValue(7, "", 1000, expire_timestamp=5000))
    tomb = serialize(OffsetCommitKey("g", "t", 2), None)
    group = serialize(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, "range", "m1", 1000, (MEMBER,)))
    group_tomb = serialize(GroupMetadataKey("old"), None)
    return [
        build_batch([commit, expiring], timestamp_ms=1000, base_offset=0),
        build_batch([tomb, group], timestamp_ms=2000, base_offset=2, compression=Compression.ZSTD),
        build_batch([group_tomb], timestamp_ms=3000, base_offset=4, compression=Compression.SNAPPY),
    ]


def test_offsets_segment_with_decoder(tmp_path: Path) -> None:
    path = segment(tmp_path, 0, *offsets_batches())
    code, lines = run(path)
    assert code == 0
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    batch_lines = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batch_lines) == 3
    assert batch_lines[0].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 ")
    assert " position: 0 CreateTime: 1000 " in batch_lines[0] and batch_lines[0].endswith("isvalid: true")
    assert "compresscodec: zstd" in batch_lines[1] and "compresscodec: snappy" in batch_lines[2]
    decoded = [line[4:] for line in lines if line.startswith("|   ")]
    assert decoded == [
        "[g,t,0]::OffsetAndMetadata(offset=42, leaderEpoch=Optional[3], metadata=meta, commitTimestamp=1000, "
        "expireTimestamp=None)",
        "[g,t,1]::OffsetAndMetadata(offset=7, leaderEpoch=Optional.empty, metadata=, commitTimestamp=1000, "
        "expireTimestamp=Some(5000))",
        "[g,t,2]::null",
        "g::GroupMetadata(protocolType=consumer, generation=1, protocol=range, leader=m1, "
        "currentStateTimestamp=Optional[1000], members=[MemberMetadata(memberId=m1, groupInstanceId=Optional.empty, "
        "clientId=cli, clientHost=/10.0.0.1, rebalanceTimeoutMs=300000, sessionTimeoutMs=10000, "
        "subscription=12 bytes, assignment=7 bytes)])",
        "old::null",
    ]
    records = [line for line in lines if line.startswith("| offset:")]
    assert records[2] == "| offset: 2 CreateTime: 2000 keySize: 12 valueSize: -1 sequence: -1 headerKeys: []"


def test_without_decoder_only_sizes_are_printed(tmp_path: Path) -> None:
    batch = build_batch([(b"k", b"value", [("trace", b"1"), ("x", None)])], timestamp_ms=5, base_offset=9)
    code, lines = run(segment(tmp_path, 9, batch), offsets_decoder=False)
    assert code == 0
    assert lines[-1] == "| offset: 9 CreateTime: 5 keySize: 1 valueSize: 5 sequence: -1 headerKeys: [trace, x]"
    assert not any(line.startswith("|   ") for line in lines)


def test_producer_batch_and_control_marker(tmp_path: Path) -> None:
    data = encode_batch(
        [Record(0, 0, b"k", b"v"), Record(1, 0, b"k2", b"v2")],
        base_offset=10, base_timestamp=100, producer_id=77, producer_epoch=1, base_sequence=5, transactional=True,
    )
    marker = encode_batch(
        [control_record(ControlRecordType.COMMIT, 9)],
        base_offset=12, base_timestamp=200, producer_id=77, producer_epoch=1, transactional=True, control=True,
    )
    code, lines = run(segment(tmp_path, 10, data, marker), offsets_decoder=False)
    assert code == 0
    assert "baseSequence: 5 lastSequence: 6 producerId: 77 producerEpoch: 1" in lines[2]
    assert "isTransactional: true isControl: false" in lines[2]
    assert lines[4].endswith("sequence: 6 headerKeys: []")
    assert "isControl: true" in lines[5]
    assert lines[6].endswith("endTxnMarker: COMMIT coordinatorEpoch: 9")
    # Control records are not offsets records: the decoder adds no line for them.
    _, decoded = run(tmp_path / "00000000000000000010.log")
    assert decoded[-1] == lines[6]


def test_log_append_time_and_delete_horizon(tmp_path: Path) -> None:
    data = encode_batch([Record(0, 0, b"k", None)], base_timestamp=1, max_timestamp=999, log_append_time=True,
                        delete_horizon=5000)
    _, lines = run(segment(tmp_path, 0, data), offsets_decoder=False)
    assert "deleteHorizonMs: OptionalLong[5000]" in lines[2] and "LogAppendTime: 999" in lines[2]
    assert lines[3].startswith("| offset: 0 LogAppendTime: 999 ")


def test_directory_is_dumped_in_base_offset_order(tmp_path: Path) -> None:
    second = segment(tmp_path, 100, build_batch([(b"b", b"2")], timestamp_ms=1, base_offset=100))
    first = segment(tmp_path, 0, build_batch([(b"a", b"1")], timestamp_ms=1))
    (tmp_path / "00000000000000000000.index").write_bytes(b"\x00" * 8)  # not a log: ignored
    code, lines = run(tmp_path, offsets_decoder=False)
    assert code == 0
    dumping = [line for line in lines if line.startswith("Dumping")]
    assert dumping == [f"Dumping {first}", f"Dumping {second}"]


def test_crc_corruption_names_file_and_position_and_stops_that_file(tmp_path: Path) -> None:
    good = build_batch([(b"a", b"1")], timestamp_ms=1)
    bad = bytearray(build_batch([(b"b", b"2")], timestamp_ms=1, base_offset=1))
    bad[-1] ^= 0xFF
    after = build_batch([(b"c", b"3")], timestamp_ms=1, base_offset=2)
    broken = segment(tmp_path, 0, good, bytes(bad), after)
    fine = segment(tmp_path, 3, build_batch([(b"d", b"4")], timestamp_ms=1, base_offset=3))
    code, lines = run(tmp_path, offsets_decoder=False)
    assert code == 1
    assert f"Corrupt batch in {broken} at byte position {len(good)}: CRC mismatch; stopped reading this file" in lines
    assert any("isvalid: false" in line for line in lines)
    assert not any("baseOffset: 2 " in line for line in lines)  # the file was abandoned
    assert f"Dumping {fine}" in lines and "baseOffset: 3 " in lines[-2]


def test_impossible_batch_length_is_reported(tmp_path: Path) -> None:
    data = bytearray(build_batch([(b"a", b"1")], timestamp_ms=1))
    struct.pack_into(">i", data, 8, 3)
    path = segment(tmp_path, 0, bytes(data))
    code, lines = run(path)
    assert code == 1
    assert lines[-1].startswith(f"Corrupt batch in {path} at byte position 0: batch length 3 too small")


def test_bad_record_content_with_valid_crc_is_reported(tmp_path: Path) -> None:
    data = bytearray(build_batch([(b"a", b"1")], timestamp_ms=1))
    struct.pack_into(">i", data, 57, 5)  # claims 5 records
    from kafka.record._crc32c import crc

    struct.pack_into(">I", data, 17, crc(bytes(data[21:])))
    code, lines = run(segment(tmp_path, 0, bytes(data)))
    assert code == 1 and lines[-1].startswith("Corrupt batch in ") and "at byte position 0" in lines[-1]


def test_torn_tail_is_reported(tmp_path: Path) -> None:
    good = build_batch([(b"a", b"1")], timestamp_ms=1)
    path = segment(tmp_path, 0, good, good[:30])
    code, lines = run(path)
    assert code == 1
    assert lines[-1] == f"Incomplete batch in {path} at byte position {len(good)}: 30 trailing bytes do not form a whole batch"


def test_nothing_to_dump(tmp_path: Path) -> None:
    assert run(tmp_path)[0] == 2
    assert run(tmp_path / "missing.log")[0] == 2


def test_empty_segment_is_fine(tmp_path: Path) -> None:
    assert run(segment(tmp_path, 0))[0] == 0


def test_formatter_on_records_it_does_not_know() -> None:
    # Record type 9 is a KIP-932 share-group record.
    assert format_offsets_record(b"\x00\x09\x00\x01g", b"\x00\x00").startswith("unknown record type:")
    assert format_offsets_record(b"\x00\x03\x00\x01g", b"\x00\x00").startswith("undecodable:")
    assert format_offsets_record(b"\x00\x03\x00\x01g", b"\x00\x05\x00").startswith("unknown record type:")
    assert format_offsets_record(b"\x00\x01\xff", None).startswith("undecodable:")
    assert format_offsets_record(None, b"x").startswith("undecodable:")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=5), cut=st.integers(0, 10**6))
def test_damaged_files_never_raise(tmp_path: Path, flips: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(b"".join(offsets_batches()))
    for where, xor in flips:
        data[where % len(data)] ^= xor
    data = data[: len(data) - cut % 40]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    code, _ = run(path)
    assert code in (0, 1)


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_dumps(tmp_path: Path, codec: Compression) -> None:
    batch = build_batch([serialize(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, "", 2))], timestamp_ms=1,
                        compression=codec)
    code, lines = run(segment(tmp_path, 0, batch))
    assert code == 0 and f"compresscodec: {codec.name.lower()}" in lines[2]
    assert lines[-1].startswith("|   [g,t,0]::OffsetAndMetadata(offset=1,")


def test_consumer_group_records_print_as_kafka_json(tmp_path: Path) -> None:
    """KIP-848 records print as the JSON of Kafka 4.0's GroupMetadataMessageFormatter; classic
    records in the same batch keep their classic lines."""
    topic = uuid.UUID(bytes=bytes(range(16)))
    records = [
        (cgr.ConsumerGroupMetadataKey("g"), cgr.ConsumerGroupMetadataValue(5)),
        (
            cgr.ConsumerGroupMemberMetadataKey("g", "m"),
            cgr.ConsumerGroupMemberMetadataValue(None, "r1", "cli", "/h", ("t",), None, 30000, "uniform"),
        ),
        (
            cgr.ConsumerGroupMemberMetadataKey("g", "c"),
            cgr.ConsumerGroupMemberMetadataValue(
                "i", None, "cli", "/h", ("t",), None, 5000, None,
                cgr.ClassicMemberMetadata(45000, (cgr.ClassicProtocol("range", b"\x00\x01\xff"),)),
            ),
        ),
        (
            cgr.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
            cgr.ConsumerGroupCurrentMemberAssignmentValue(3, 2, 0, (cgr.TopicPartitions(topic, (0, 1)),), ()),
        ),
        (cgr.ConsumerGroupRegularExpressionKey("g", "t.*"), cgr.ConsumerGroupRegularExpressionValue(("t",), 7, 9)),
        (cgr.ConsumerGroupTargetAssignmentMemberKey("g", "m"), None),
    ]
    items = [(cgr.encode_key(k), None if v is None else cgr.encode_value(v)) for k, v in records]
    items.append(serialize(OffsetCommitKey("g", "t", 0), OffsetCommitValue(42, "meta", 1000, leader_epoch=3)))
    path = segment(tmp_path, 0, build_batch(items, timestamp_ms=1000))
    code, lines = run(path)
    assert code == 0
    decoded = [line[4:] for line in lines if line.startswith("|   ")]
    assert decoded == [
        '{"key":{"version":3,"data":{"groupId":"g"}},"value":{"version":0,"data":{"epoch":5}}}',
        '{"key":{"version":5,"data":{"groupId":"g","memberId":"m"}},"value":{"version":0,"data":{"instanceId":null,'
        '"rackId":"r1","clientId":"cli","clientHost":"/h","subscribedTopicNames":["t"],"subscribedTopicRegex":null,'
        '"rebalanceTimeoutMs":30000,"serverAssignor":"uniform"}}}',
        '{"key":{"version":5,"data":{"groupId":"g","memberId":"c"}},"value":{"version":0,"data":{"instanceId":"i",'
        '"rackId":null,"clientId":"cli","clientHost":"/h","subscribedTopicNames":["t"],"subscribedTopicRegex":null,'
        '"rebalanceTimeoutMs":5000,"serverAssignor":null,"classicMemberMetadata":{"sessionTimeoutMs":45000,'
        '"supportedProtocols":[{"name":"range","metadata":"AAH/"}]}}}}',
        '{"key":{"version":8,"data":{"groupId":"g","memberId":"m"}},"value":{"version":0,"data":{"memberEpoch":3,'
        '"previousMemberEpoch":2,"state":0,"assignedPartitions":[{"topicId":"AAECAwQFBgcICQoLDA0ODw",'
        '"partitions":[0,1]}],"partitionsPendingRevocation":[]}}}',
        '{"key":{"version":16,"data":{"groupId":"g","regularExpression":"t.*"}},"value":{"version":0,"data":'
        '{"topics":["t"],"version":7,"timestamp":9}}}',
        '{"key":{"version":7,"data":{"groupId":"g","memberId":"m"}},"value":null}',
        "[g,t,0]::OffsetAndMetadata(offset=42, leaderEpoch=Optional[3], metadata=meta, commitTimestamp=1000, "
        "expireTimestamp=None)",
    ]


def test_kip848_tagged_fields_print_when_set() -> None:
    """MetadataHash/CreationTimeMs (KIP-1101) and AssignmentEpochs (KIP-1251) appear only when
    not at their defaults, as they are written."""
    from coordinator.dump_log import format_offsets_record

    topic = uuid.UUID(bytes=bytes(range(16)))
    line = format_offsets_record(cgr.encode_key(cgr.ConsumerGroupMetadataKey("g")),
                                 cgr.encode_value(cgr.ConsumerGroupMetadataValue(5, 77, 1000)))
    assert '"data":{"epoch":5,"metadataHash":77,"creationTimeMs":1000}' in line
    key = cgr.ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    value = cgr.ConsumerGroupCurrentMemberAssignmentValue(3, 2, 0, (cgr.TopicPartitions(topic, (0, 1), (2, 3)),), ())
    line = format_offsets_record(cgr.encode_key(key), cgr.encode_value(value))
    assert '"partitions":[0,1],"assignmentEpochs":[2,3]}' in line


def txn_record(txn: str, status: int | None, partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None,
               version: int = 0, **tags: int) -> tuple[bytes, bytes | None]:
    if status is None:
        return txn_key(TransactionLogKey(txn)), None
    value = TransactionLogValue(4000, 3, 60000, status, partitions, 1700000000500, 1700000000000, **tags)
    return txn_key(TransactionLogKey(txn)), txn_value(value, version)


def test_transaction_log_segment_with_decoder(tmp_path: Path) -> None:
    """Kafka 3.x kafka-dump-log's ``key: ... payload: ...``: the id, then producer, state by
    name, partitions as topic-partition, last update and timeout; a tombstone is <DELETE>."""
    batches = [
        build_batch([txn_record("tx", 0)], timestamp_ms=1000),
        build_batch([txn_record("tx", 1, (("orders", (0, 1)), ("__consumer_offsets", (17,))))], timestamp_ms=1001,
                    base_offset=1),
        build_batch([txn_record("tx", 2, (("orders", (0, 1)),), version=1, next_producer_id=4001),
                     txn_record("tx", 4, ()), txn_record("gone", None)], timestamp_ms=1002, base_offset=2,
                    compression=Compression.LZ4),
    ]
    path = segment(tmp_path, 0, *batches)
    code, lines = run(path, offsets_decoder=False, transaction_log_decoder=True)
    assert code == 0
    decoded = [line[4:] for line in lines if line.startswith("|   ")]
    head = "key: transaction_metadata::transactionalId=tx payload: producerId:4000,producerEpoch:3,"
    tail = ",txnLastUpdateTimestamp=1700000000500,txnTimeoutMs=60000"
    assert decoded == [
        head + "state=Empty,partitions=[]" + tail,
        head + "state=Ongoing,partitions=[orders-0,orders-1,__consumer_offsets-17]" + tail,
        head + "state=PrepareCommit,partitions=[orders-0,orders-1]" + tail,
        head + "state=CompleteCommit,partitions=[]" + tail,
        "key: transaction_metadata::transactionalId=gone payload: <DELETE>",
    ]
    # Without the option the same records show only their sizes.
    _, plain = run(path, offsets_decoder=False)
    assert not any(line.startswith("|   ") for line in plain)
    assert [line for line in plain if not line.startswith("|   ")] == [
        line for line in lines if not line.startswith("|   ")]


def test_transaction_log_formatter_on_what_it_cannot_read() -> None:
    key = txn_key(TransactionLogKey("tx"))
    prefix = "key: transaction_metadata::transactionalId=tx payload: "
    # Kafka's reader adds no partitions to an Empty id, whatever the record holds.
    assert "state=Empty,partitions=[]," in format_transaction_log_record(*txn_record("tx", 0, (("t", (0,)),)))
    assert "state=unknown(9),partitions=[t-0]," in format_transaction_log_record(*txn_record("tx", 9, (("t", (0,)),)))
    # A key version Kafka does not know: the version and no payload, as Kafka prints it.
    assert format_transaction_log_record(b"\x00\x01\x00\x02tx", b"\x00\x00") == "key: unknown::version=1"
    assert format_transaction_log_record(b"\x00\x00\x00\x09tx", None).startswith("undecodable:")
    assert format_transaction_log_record(None, b"x").startswith("undecodable:")
    assert format_transaction_log_record(key, b"\x00\x07" + bytes(30)) == (
        prefix + "undecodable: unknown transaction log value version 7")
    assert format_transaction_log_record(key, b"\x00\x00\x00").startswith(prefix + "undecodable:")


def test_command_line_decodes_transaction_log_and_refuses_two_decoders(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from coordinator.cli import main

    path = segment(tmp_path, 0, build_batch([txn_record("tx", 5, ())], timestamp_ms=1))
    assert main(["dump-log", "--transaction-log-decoder", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "|   key: transaction_metadata::transactionalId=tx payload: producerId:4000,producerEpoch:3,"
        "state=CompleteAbort,")
    with pytest.raises(SystemExit) as exited:
        main(["dump-log", "--offsets-decoder", "--transaction-log-decoder", str(path)])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, 200), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=4),
       version=st.sampled_from([0, 1]), noise=st.binary(max_size=40))
def test_transaction_log_formatter_never_raises(cut: int, flips: list[tuple[int, int]], version: int,
                                                 noise: bytes) -> None:
    key, value = txn_record("tx-é", 1, (("orders", (0, 1)),), version=version, previous_producer_id=3)
    assert value is not None
    damaged = bytearray(value[: len(value) - cut % len(value)] + noise)
    for where, xor in flips:
        damaged[where % len(damaged)] ^= xor
    assert format_transaction_log_record(key, bytes(damaged)).startswith("key: ")
    assert isinstance(format_transaction_log_record(bytes(damaged), value), str)
