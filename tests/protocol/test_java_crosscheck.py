"""Cross-check our record and ``__consumer_offsets`` codecs against Apache Kafka's Java classes.

We write a segment with our encoders (several batches, every codec, multi-block compressed
batches, transactional data and a commit marker, offset-commit and group-metadata records of
every value version, tombstones), then ``tests/java/SegmentCheck.java`` reads it with Kafka's
``FileRecords`` (``ensureValid()`` on every batch: size, magic, CRC) and decodes keys and values
from the schemas by hand. Its lines must equal the ones our decoders produce for the same file.

The kafka-clients 3.9.1 jars come from ``tests/clients/setup_clients.sh``. Without them (or
without ``javac``) the test fails: a cross-check that silently skips checks nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.compression import Compression
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    deserialize,
    encode_key,
    encode_value,
)
from protocol.records import (
    ControlRecordType,
    Record,
    batch_crc_ok,
    control_record,
    decode_control_record,
    decode_records,
    encode_batch,
    iter_batch_positions,
)

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests" / "java" / "SegmentCheck.java"
JARS = ["kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"]


def _java_dir() -> Path:
    cache = os.environ.get("GROUPCOORD_CLIENTS_CACHE") or str(Path.home() / ".cache" / "groupcoord-clients")
    return Path(cache) / "java"


@pytest.fixture(scope="session")
def segment_check(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The command line that runs SegmentCheck, compiled once per session into a temp dir."""
    java_dir = _java_dir()
    missing = [jar for jar in JARS if not (java_dir / jar).is_file()]
    if missing:
        pytest.fail(f"missing {', '.join(missing)} in {java_dir}: run tests/clients/setup_clients.sh", pytrace=False)
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        pytest.fail("javac/java not on PATH (Java 17 is expected)", pytrace=False)
    classpath = os.pathsep.join(str(java_dir / jar) for jar in JARS)
    classes = tmp_path_factory.mktemp("segment-check-classes")
    done = subprocess.run(
        [javac, "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", str(classes), str(SOURCE)],
        capture_output=True, text=True, timeout=180,
    )
    if done.returncode != 0:
        pytest.fail(f"javac failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    yield [java, "-cp", os.pathsep.join([str(classes), classpath]), "SegmentCheck"]


# ---------------------------------------------------------------------------------------------
# The segment


MEMBERS = (
    MemberMetadata("consumer-1-aa", "consumer-1", "/10.0.0.1", 300000, 45000, b"\x00\x03" + b"s" * 30, b"a" * 20,
                   group_instance_id="static-1"),
    MemberMetadata("consumer-2-bb", "consumer-2", "/10.0.0.2", 60000, 10000, b"", b"", group_instance_id=None),
)


def _group_value(version: int) -> GroupMetadataValue:
    members = MEMBERS
    if version < 3:
        members = tuple(MemberMetadata(m.member_id, m.client_id, m.client_host, m.rebalance_timeout,
                                       m.session_timeout, m.subscription, m.assignment) for m in members)
    if version < 1:
        members = tuple(MemberMetadata(m.member_id, m.client_id, m.client_host, m.session_timeout,
                                       m.session_timeout, m.subscription, m.assignment) for m in members)
    return GroupMetadataValue("consumer", 5 + version, "range", "consumer-1-aa",
                              1_700_000_000_000 if version >= 2 else -1, members)


def _rec(delta: int, key: bytes, value: bytes | None, ts_delta: int = 0) -> Record:
    return Record(delta, ts_delta, key, value)


def _build_segment() -> bytes:
    batches: list[bytes] = []
    next_offset = 0

    def add(records: list[Record], **options: object) -> None:
        nonlocal next_offset
        batches.append(encode_batch(records, base_offset=next_offset, **options))  # type: ignore[arg-type]
        next_offset += max([r.offset_delta for r in records] + [0]) + 1

    commit_key = encode_key(OffsetCommitKey("group-a", "orders", 0))
    # 1. Current-broker records, uncompressed: v1 key + v3 value, a v2 group record.
    add([
        _rec(0, commit_key, encode_value(OffsetCommitValue(100, "", 1_700_000_000_000, leader_epoch=4))),
        _rec(1, encode_key(OffsetCommitKey("group-a", "orders", 1)), encode_value(OffsetCommitValue(7, "meta ü", 5)), 3),
        _rec(2, encode_key(GroupMetadataKey("group-a")), encode_value(_group_value(3))),
    ], base_timestamp=1_700_000_000_000)
    # 2. Every OffsetCommitValue version and a v0 key, gzip.
    add([
        _rec(0, b"\x00\x00" + commit_key[2:], encode_value(OffsetCommitValue(1, "v0", 10), 0)),
        _rec(1, commit_key, encode_value(OffsetCommitValue(2, "v1", 20, expire_timestamp=99), 1)),
        _rec(2, commit_key, encode_value(OffsetCommitValue(3, "v2", 30), 2)),
        _rec(3, commit_key, encode_value(OffsetCommitValue(4, "v3", 40, leader_epoch=9), 3)),
        _rec(4, commit_key, encode_value(OffsetCommitValue(5, "v4", 50, leader_epoch=9), 4)),
    ], base_timestamp=1000, compression=Compression.GZIP)
    # 3. Every GroupMetadataValue version, snappy.
    add([_rec(v, encode_key(GroupMetadataKey(f"group-v{v}")), encode_value(_group_value(v), v)) for v in range(5)],
        base_timestamp=2000, compression=Compression.SNAPPY)
    # 4. Tombstones, lz4.
    add([
        _rec(0, commit_key, None),
        _rec(1, encode_key(GroupMetadataKey("group-v0")), None),
    ], base_timestamp=3000, compression=Compression.LZ4)
    # 5. Transactional offsets (TxnOffsetCommit) and their commit marker, zstd.
    add([_rec(i, encode_key(OffsetCommitKey("txn-group", "t", i)), encode_value(OffsetCommitValue(i * 10, "", 4000)))
         for i in range(3)], base_timestamp=4000, compression=Compression.ZSTD, producer_id=4242, producer_epoch=3,
        base_sequence=0, transactional=True)
    add([control_record(ControlRecordType.COMMIT, 17)], base_timestamp=4001, producer_id=4242, producer_epoch=3,
        transactional=True, control=True)
    # 6. Big batches: several snappy (32 KiB xerial blocks) and lz4 (64 KiB frame blocks) blocks.
    many = [_rec(i, encode_key(OffsetCommitKey("bulk", f"topic-{i % 37}", i)),
                 encode_value(OffsetCommitValue(i * 1000, "m" * (i % 50), 5000 + i)), i) for i in range(3000)]
    for codec in (Compression.SNAPPY, Compression.LZ4, Compression.ZSTD, Compression.GZIP):
        add(many, base_timestamp=5000, compression=codec)
    # 7. A LogAppendTime batch: record timestamps are the batch's max timestamp.
    add([_rec(0, commit_key, encode_value(OffsetCommitValue(1, "", 1)))], base_timestamp=6000, max_timestamp=7777,
        log_append_time=True)
    return b"".join(batches)


# ---------------------------------------------------------------------------------------------
# Our side of the comparison, in SegmentCheck's line format


def _q(text: str | None) -> str:
    return "null" if text is None else f"'{text}'"


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _python_lines(data: bytes) -> list[str]:
    lines = []
    for pos, h in iter_batch_positions(data):
        assert batch_crc_ok(data, pos, h)
        lines.append(
            f"batch base={h.base_offset} last={h.last_offset} count={h.records_count} "
            f"codec={Compression(h.compression).name.lower()} control={_b(h.is_control)} "
            f"txn={_b(h.is_transactional)} pid={h.producer_id} epoch={h.producer_epoch}"
        )
        for record in decode_records(data, pos, h):
            if h.is_control:
                _version, kind = decode_control_record(record)
                lines.append(f"control offset={record.offset(h)} type={ControlRecordType(kind).name}")
                continue
            assert record.key is not None
            key, value = deserialize(record.key, record.value)
            key_version = int.from_bytes(record.key[:2], "big", signed=True)
            if isinstance(key, OffsetCommitKey):
                key_text = f"offset_commit(v{key_version},{_q(key.group)},{_q(key.topic)},{key.partition})"
            else:
                assert isinstance(key, GroupMetadataKey)
                key_text = f"group_metadata(v{key_version},{_q(key.group)})"
            lines.append(f"record offset={record.offset(h)} ts={record.timestamp(h)} key={key_text} "
                         f"value={_value_text(record.value, value)}")
    return lines


def _value_text(raw: bytes | None, value: object) -> str:
    if raw is None:
        return "null"
    v = int.from_bytes(raw[:2], "big", signed=True)
    if isinstance(value, OffsetCommitValue):
        expire = -1 if value.expire_timestamp is None else value.expire_timestamp
        return (f"offset_commit(v{v},{value.offset},{value.leader_epoch},{_q(value.metadata)},"
                f"{value.commit_timestamp},{expire})")
    assert isinstance(value, GroupMetadataValue)
    members = ";".join(
        f"member({_q(m.member_id)},{_q(m.group_instance_id)},{_q(m.client_id)},{_q(m.client_host)},"
        f"{m.rebalance_timeout if v >= 1 else -1},{m.session_timeout},{len(m.subscription)},{len(m.assignment)})"
        for m in value.members
    )
    return (f"group_metadata(v{v},{_q(value.protocol_type)},{value.generation},{_q(value.protocol)},"
            f"{_q(value.leader)},{value.current_state_timestamp},[{members}])")


# ---------------------------------------------------------------------------------------------


def test_kafka_reads_our_segment_as_we_do(segment_check: list[str], tmp_path: Path) -> None:
    data = _build_segment()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    done = subprocess.run([*segment_check, str(path)], capture_output=True, timeout=180)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, f"SegmentCheck failed:\n{stderr}"
    java_lines = done.stdout.decode("utf-8").splitlines()
    ours = _python_lines(data)
    assert len(ours) > 12000  # the big batches are in
    for i, (theirs, mine) in enumerate(zip(java_lines, ours, strict=False)):
        assert theirs == mine, f"line {i} differs"
    assert len(java_lines) == len(ours)


def test_kafka_rejects_a_corrupted_batch(segment_check: list[str], tmp_path: Path) -> None:
    # The other direction of the check: a byte our CRC says is wrong, Kafka's says too.
    data = bytearray(_build_segment())
    data[200] ^= 0x01
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    done = subprocess.run([*segment_check, str(path)], capture_output=True, timeout=180)
    assert done.returncode != 0
    assert b"CorruptRecordException" in done.stderr or b"InvalidRecordException" in done.stderr
    first = next(iter_batch_positions(bytes(data)))
    assert not batch_crc_ok(bytes(data), first[0], first[1])


def _java_written_record(i: int) -> tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """Record i of SegmentCheck's ``write`` mode (see ``writeRecords()`` there)."""
    key = None if i % 7 == 0 else f"key-{i}".encode()
    value = None if i % 11 == 0 else (f"value-{i}" * (i % 13)).encode()
    headers: list[tuple[str, bytes | None]] = []
    if i % 5 == 0:
        headers.append((f"h{i % 3}", f"v{i}".encode()))
    if i % 10 == 0:
        headers.append(("empty", None))
    return 1_700_000_000_000 + i, key, value, headers


def test_we_read_batches_written_by_kafka(segment_check: list[str], tmp_path: Path) -> None:
    # Kafka's MemoryRecords builder and compressors: xerial snappy from snappy-java, lz4 frames from
    # KafkaLZ4BlockOutputStream, zstd-jni, java.util.zip gzip.
    path = tmp_path / "java-written.log"
    done = subprocess.run([*segment_check, "write", str(path)], capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    data = path.read_bytes()
    per_batch = 2000
    expected = [_java_written_record(i) for i in range(per_batch)]
    seen = []
    for pos, h in iter_batch_positions(data):
        records = decode_records(data, pos, h)
        got = [(r.timestamp(h), r.key, r.value, list(r.headers)) for r in records]
        assert got == expected
        assert [r.offset(h) for r in records] == list(range(h.base_offset, h.base_offset + per_batch))
        seen.append((Compression(h.compression), h.is_transactional, h.producer_id, h.producer_epoch,
                     h.partition_leader_epoch))
    assert seen == [(c, False, -1, -1, -1) for c in Compression] + [(Compression.SNAPPY, True, 4242, 3, 7)]
    assert data.count(b"\x82SNAPPY\x00") == 2  # Java really wrote the xerial framing
