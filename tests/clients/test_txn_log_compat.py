"""Byte compatibility of transactional partitions' files with Kafka's (issue 32, "Done when").

A real ``groupcoord serve`` takes, over the wire, transactional data of two producers with
interleaved committed and aborted transactions (Produce with a transactional id, KIP-98), plain
idempotent and non-idempotent batches, and the transaction markers (WriteTxnMarkers, API 27, as a
transaction coordinator sends them; one with a bumped producer epoch, as an abort on timeout, one
for a producer that wrote nothing here). Small segments spread it over several files. It also
runs a committed and an aborted transaction through its own transaction coordinator
(``__transaction_state`` records, markers it sends itself) and one offset commit. The server
stops, then:

* ``tests/clients/java/TxnSegmentCheck.java`` reads every ``.log`` segment with Kafka's own
  ``FileRecords`` (kafka-clients 3.9.1): ``ensureValid()`` (CRC-32C) per batch, the header fields,
  ``EndTransactionMarker.deserialize`` per control record, and each control batch rebuilt by
  Kafka's ``MemoryRecords.withEndTransactionMarker`` from what it read, compared byte for byte;
* ``tests/clients/java/TxnLogCheck.java`` reads the ``__transaction_state`` records (and our
  codec's bytes for every value shape) with Kafka's protocol type classes against the
  TransactionLogKey/Value schemas, and writes them back: the same bytes;
* the ``.txnindex`` files (no Kafka jar here holds ``TransactionIndex``; it is in kafka-storage)
  are read at the field offsets of Kafka's ``AbortedTxn.java`` and checked against the aborted
  transactions written, with ``TransactionIndex.java``'s file rules.

The producer-state snapshot is not compared: ours is ``producer_state.snapshot`` in a layout of
our own (``storage/producer_state.py``), not Kafka's ``<offset>.snapshot`` (ProducerSnapshot.json).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeTransactionsRequest
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.records import build_batch
from protocol.transaction_log import TransactionLogKey, TransactionLogValue, encode_key, encode_value
from storage.txn_index import AbortedTxn, decode_entries
from tests.clients.tools import run_java, unique_topic
from tests.conftest import ServerProcess
from tests.wire_client import WireClient

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

#: A transactional id no coordinator knows: with ``transaction.partition.verification.enable=false``
#: (KIP-890 part 1 off, as Kafka allows) Produce only needs one present for transactional batches,
#: so the test alone decides what the partition holds, markers included.
TXN_ID = "made-up-txn-id"
#: Small segments (bytes): a few batches each, so transactions span segments and the ``.txnindex``
#: entries land in several files.
SEGMENT_BYTES = 400


@dataclass
class Expected:
    """What was written, batch by batch, and the aborted transactions Kafka's rules index."""

    topic: str
    batches: list[dict[str, Any]] = field(default_factory=list)
    #: (producer id, first offset, marker offset, last stable offset at the abort)
    aborted: list[tuple[int, int, int, int]] = field(default_factory=list)
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    next_offset: int = 0


class Writer:
    def __init__(self, c: WireClient, topic: str) -> None:
        self.c = c
        self.expected = Expected(topic)
        self.seq: dict[tuple[int, int], int] = {}

    def init_pid(self) -> int:
        resp = self.c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            version=4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
        assert resp.error_code == 0 and resp.producer_epoch == 0, resp
        return int(resp.producer_id)

    def data(self, pid: int, epoch: int, values: list[bytes], transactional: bool) -> None:
        seq = self.seq.get((pid, epoch), 0) if pid >= 0 else -1
        batch = build_batch([(None, v) for v in values], timestamp_ms=int(time.time() * 1000), producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq, transactional=transactional)
        P = ProduceRequest.TopicProduceData
        req = ProduceRequest(version=9, transactional_id=TXN_ID if transactional else None, acks=-1,
                             timeout_ms=5000, topic_data=[P(name=self.expected.topic, partition_data=[
                                 P.PartitionProduceData(index=0, records=batch)])])
        resp = self.c.request(ApiKey.PRODUCE, 9, req).responses[0].partition_responses[0]
        e = self.expected
        assert (resp.error_code, resp.base_offset) == (0, e.next_offset), resp
        if pid >= 0:
            self.seq[(pid, epoch)] = seq + len(values)
        e.batches.append({"base": e.next_offset, "last": e.next_offset + len(values) - 1, "count": len(values),
                          "pid": pid, "epoch": epoch, "base_seq": seq,
                          "last_seq": seq + len(values) - 1 if pid >= 0 else -1,
                          "txn": transactional, "control": False,
                          "records": [{"offset": e.next_offset + i, "value": v.hex()} for i, v in enumerate(values)]})
        if transactional:
            e.open.setdefault(pid, e.next_offset)
        e.next_offset += len(values)

    def marker(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int) -> None:
        M = WriteTxnMarkersRequest.WritableTxnMarker
        req = WriteTxnMarkersRequest(version=1, markers=[M(
            producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
            topics=[M.WritableTxnMarkerTopic(name=self.expected.topic, partition_indexes=[0])])])
        (result,) = self.c.request(ApiKey.WRITE_TXN_MARKERS, 1, req).markers
        assert [(p.partition_index, p.error_code) for t in result.topics for p in t.partitions] == [(0, 0)]
        e = self.expected
        offset = e.next_offset
        e.batches.append({"base": offset, "last": offset, "count": 1, "pid": pid, "epoch": epoch, "base_seq": -1,
                          "last_seq": -1, "txn": True, "control": True,
                          "markers": [{"offset": offset, "type": "COMMIT" if commit else "ABORT",
                                       "coordinator_epoch": coordinator_epoch, "key_version": 0,
                                       "value_version": 0, "value_size": 6}],
                          "same_as_kafka_writer": True})
        first = e.open.pop(pid, None)
        if first is not None and not commit:
            # Kafka's rule (ProducerStateManager.lastStableOffset, reference §3.4): the first offset
            # of the earliest other open transaction, else the marker's offset + 1.
            e.aborted.append((pid, first, offset, min(e.open.values(), default=offset + 1)))
        e.next_offset += 1


def create_topic(c: WireClient, name: str, configs: dict[str, str] | None = None) -> None:
    CT = CreateTopicsRequest.CreatableTopic
    resp = c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=5000, topics=[CT(
        name=name, num_partitions=1, replication_factor=1, assignments=[],
        configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])]))
    assert resp.topics[0].error_code == 0, resp


#: The transactional id of the transactions run through the server's transaction coordinator.
REAL_TXN_ID = "txn-compat-real"
RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS)


def _until(call: Any, ok: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        answer = call()
        if ok(answer):
            return answer
        assert time.monotonic() < deadline, f"{what}: {answer}"
        time.sleep(0.05)


def real_transactions(c: WireClient, topic: str) -> tuple[int, int]:
    """A committed then an aborted transaction of one producer, as a client runs them (classic
    protocol: InitProducerId with the id, AddPartitionsToTxn v3, Produce, EndTxn v3); returns its
    producer id and epoch once the coordinator wrote CompleteAbort."""
    _until(lambda: c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(version=4, key_type=1, coordinator_keys=[REAL_TXN_ID]))
           .coordinators[0], lambda r: r.error_code == 0, "FindCoordinator")
    init = _until(lambda: c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        version=4, transactional_id=REAL_TXN_ID, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)),
        lambda r: r.error_code not in RETRIABLE, "InitProducerId")
    assert init.error_code == 0, init
    pid, epoch = int(init.producer_id), int(init.producer_epoch)
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    P = ProduceRequest.TopicProduceData
    for seq, commit, state in ((0, True, "CompleteCommit"), (1, False, "CompleteAbort")):
        added = _until(lambda: c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, AddPartitionsToTxnRequest(
            version=3, v3_and_below_transactional_id=REAL_TXN_ID, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=[Topic(name=topic, partitions=[0])])),
            lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            not in RETRIABLE, "AddPartitionsToTxn")
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0, added
        batch = build_batch([(None, b"real-%d" % seq)], timestamp_ms=int(time.time() * 1000), producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq, transactional=True)
        resp = c.request(ApiKey.PRODUCE, 9, ProduceRequest(
            version=9, transactional_id=REAL_TXN_ID, acks=-1, timeout_ms=5000, topic_data=[
                P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]))
        assert resp.responses[0].partition_responses[0].error_code == 0, resp
        ended = c.request(ApiKey.END_TXN, 3, EndTxnRequest(version=3, transactional_id=REAL_TXN_ID, producer_id=pid,
                                                           producer_epoch=epoch, committed=commit))
        assert ended.error_code == 0, ended
        _until(lambda: c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(
            version=0, transactional_ids=[REAL_TXN_ID])).transaction_states[0].transaction_state,
            lambda s, state=state: s == state, f"the coordinator reaching {state}")
    return pid, epoch


def commit_offset(c: WireClient, topic: str) -> None:
    """One offset commit (a simple consumer's), so a ``__consumer_offsets`` segment exists too."""
    C = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(version=8, group_id="txn-compat-group", generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, topics=[C(name=topic, partitions=[
                                  C.OffsetCommitRequestPartition(partition_index=0, committed_offset=3,
                                                                 committed_leader_epoch=-1, committed_metadata="")])])
    # FindCoordinator creates __consumer_offsets, as a client's first call does.
    c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(version=4, key_type=0,
                                                                 coordinator_keys=["txn-compat-group"]))
    deadline = time.monotonic() + 20
    while True:
        resp = c.request(ApiKey.OFFSET_COMMIT, 8, req)
        code = resp.topics[0].partitions[0].error_code
        if code == 0:
            return
        assert time.monotonic() < deadline, f"OffsetCommit kept answering {code}"
        time.sleep(0.1)


@dataclass
class Written:
    data_dir: Path
    expected: Expected
    #: Every line TxnSegmentCheck printed for every ``.log`` file of the data directory.
    java: list[dict[str, Any]]
    #: The transactions run through the transaction coordinator: topic, producer id and epoch.
    real: tuple[str, int, int]
    #: Every record TxnLogCheck read from the ``__transaction_state`` segments.
    txn_log: list[dict[str, Any]]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    data = tmp_path_factory.mktemp("txn-log-compat") / "data"
    server = ServerProcess(data, {"transaction.partition.verification.enable": "false"})
    server.start()
    topic = unique_topic("txn-compat")
    try:
        with WireClient(server.host, server.port) as c:
            create_topic(c, topic, {"segment.bytes": str(SEGMENT_BYTES)})
            w = Writer(c, topic)
            a, b, idem, stranger = w.init_pid(), w.init_pid(), w.init_pid(), w.init_pid()
            w.data(a, 0, [b"a0", b"a1"], True)
            w.data(b, 0, [b"b0"], True)
            w.data(idem, 0, [b"i0", b"i1", b"i2"], False)
            w.data(a, 0, [b"a2"], True)
            w.marker(a, 0, False, 5)               # aborted while b's is open: LSO = b's first
            w.data(b, 0, [b"b1"], True)
            w.marker(b, 0, True, 5)
            w.data(-1, -1, [b"plain"], False)      # neither idempotent nor transactional
            w.data(idem, 0, [b"i3"], False)
            w.data(a, 0, [b"a3"], True)
            w.data(b, 0, [b"b2", b"b3"], True)
            w.marker(a, 0, True, 5)
            w.marker(stranger, 0, False, 5)        # wrote nothing here: a marker, no index entry
            w.data(a, 0, [b"a4"], True)
            w.marker(a, 1, False, 6)               # the coordinator bumped the epoch (a timeout)
            w.marker(b, 0, False, 6)               # nothing else open: LSO = marker + 1
            w.data(a, 1, [b"a5"], True)            # the new epoch starts at sequence 0
            w.marker(a, 1, True, 6)
            w.data(idem, 0, [b"i4"], False)
            commit_offset(c, topic)
            real_topic = unique_topic("txn-compat-real")
            create_topic(c, real_topic)
            real_pid, real_epoch = real_transactions(c, real_topic)
        assert not w.expected.open
    finally:
        assert server.stop() == 0, server.log_text()[-4000:]
    logs = sorted(data.glob("*/*.log"))
    assert any(p.parent.name == f"{topic}-0" for p in logs), sorted(data.iterdir())
    res = run_java("TxnSegmentCheck", [str(p) for p in logs]).check()
    java = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    state_logs = [p for p in logs if p.parent.name.startswith("__transaction_state-")]
    res = run_java("TxnLogCheck", ["segment", *map(str, state_logs)]).check()
    txn_log = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    return Written(data, w.expected, java, (real_topic, real_pid, real_epoch), txn_log)


def _segments(w: Written) -> list[Path]:
    segments = sorted((w.data_dir / f"{w.expected.topic}-0").glob("*.log"))
    assert len(segments) >= 3, "the small segment.bytes should have rolled the log a few times"
    return segments


def test_kafka_reads_every_segment_whole_with_valid_crcs(written: Written) -> None:
    # ensureValid() threw for no batch (the program exited 0), and Kafka's iterator covered every
    # byte of every file: no torn or unreadable tail.
    files = [j for j in written.java if "size" in j]
    assert len(files) == len(sorted(written.data_dir.glob("*/*.log")))
    assert all(f["size"] == f["read"] for f in files), files
    # The group coordinator's records too (their keys and values are not in kafka-clients; the
    # program reads only their batches).
    offsets = [j for j in written.java if j["file"].startswith("__consumer_offsets-") and "base" in j]
    assert offsets and all(not b["txn"] and "records" not in b for b in offsets), offsets


def test_kafka_reads_the_batches_and_markers_we_wrote(written: Written) -> None:
    e = written.expected
    segments = _segments(written)
    names = {f"{e.topic}-0/{p.name}" for p in segments}
    got = [j for j in written.java if j["file"] in names and "base" in j]
    # The fields Kafka's RecordBatch reports that the server chose, not the test.
    for batch in got:
        assert (batch["magic"], batch["codec"], batch["ts_type"]) == (2, "none", "CreateTime"), batch
        assert batch["crc"] >= 0
    # Every batch carries the partition's leader epoch (0 on one node, KIP-101): markers from
    # writeEndTransactionalMarker's argument, data batches stamped over the producer's -1 as
    # Kafka's LogValidator does.
    assert {b["leader_epoch"] for b in got} == {0}
    chosen = ("file", "magic", "crc", "codec", "ts_type", "max_ts", "leader_epoch")
    assert [{k: v for k, v in b.items() if k not in chosen} for b in got] == e.batches
    # Each segment's name is its first batch's base offset (Kafka's LogFileUtils.logFile).
    for path in segments:
        first = next(b for b in got if b["file"] == f"{e.topic}-0/{path.name}")
        assert path.name == f"{first['base']:020d}.log"


# --- .txnindex: Kafka's AbortedTxn.java layout, field by field ----------------------------------
# apache/kafka storage/src/main/java/org/apache/kafka/storage/internals/log/AbortedTxn.java
# (commit 1eb7644): VERSION_OFFSET 0 (int16, CURRENT_VERSION 0), PRODUCER_ID_OFFSET 2 (int64),
# FIRST_OFFSET_OFFSET 10 (int64), LAST_OFFSET_OFFSET 18 (int64), LAST_STABLE_OFFSET_OFFSET 26
# (int64), TOTAL_SIZE 34; big-endian (java.nio.ByteBuffer's default).
VERSION_OFFSET, PRODUCER_ID_OFFSET, FIRST_OFFSET_OFFSET, LAST_OFFSET_OFFSET, LAST_STABLE_OFFSET_OFFSET = 0, 2, 10, 18, 26
TOTAL_SIZE = 34


def _field(entry: bytes, offset: int, size: int) -> int:
    return int.from_bytes(entry[offset:offset + size], "big", signed=True)


def test_txnindex_entry_golden_bytes() -> None:
    # The entry of Kafka's TransactionIndexTest.testAbortedTxnSerde (producer id 983493, first
    # offset 137, last offset 299, last stable offset 200), laid out by hand at the offsets above.
    golden = bytes.fromhex("0000" "00000000000f01c5" "0000000000000089" "000000000000012b" "00000000000000c8")
    assert len(golden) == TOTAL_SIZE
    assert AbortedTxn(983493, 137, 299, 200).encode() == golden
    assert decode_entries(golden) == [AbortedTxn(983493, 137, 299, 200)]


def test_txnindex_files_are_kafkas_layout(written: Written) -> None:
    e = written.expected
    segments = _segments(written)
    bases = [int(p.stem) for p in segments]
    found: list[tuple[int, int, int, int]] = []
    indexed_segments = set()
    for path in sorted((written.data_dir / f"{e.topic}-0").glob("*.txnindex")):
        # TransactionIndex.java: one file per segment, named as the segment with .txnindex
        # (LogFileUtils.transactionIndexFile).
        base = int(path.stem)
        assert path.name == f"{base:020d}.txnindex" and base in bases, path
        raw = path.read_bytes()
        # Its iterator reads whole TOTAL_SIZE entries from position 0, nothing else in the file.
        assert raw and len(raw) % TOTAL_SIZE == 0, len(raw)
        last_offsets = []
        for pos in range(0, len(raw), TOTAL_SIZE):
            entry = raw[pos:pos + TOTAL_SIZE]
            # AbortedTxn.version() reads the byte at VERSION_OFFSET, and the iterator refuses a
            # version above CURRENT_VERSION (0): both bytes of our int16 are 0.
            assert entry[VERSION_OFFSET] == 0 and _field(entry, VERSION_OFFSET, 2) == 0
            txn = (_field(entry, PRODUCER_ID_OFFSET, 8), _field(entry, FIRST_OFFSET_OFFSET, 8),
                   _field(entry, LAST_OFFSET_OFFSET, 8), _field(entry, LAST_STABLE_OFFSET_OFFSET, 8))
            found.append(txn)
            last_offsets.append(txn[2])
            # LogSegment.updateTxnIndex: the entry is in the segment holding its marker, so
            # sanityCheck's "lastOffset >= the segment's start offset" holds, and it is below the
            # next segment's base.
            following = [b for b in bases if b > base]
            assert base <= txn[2] < (following[0] if following else e.next_offset), (path.name, txn)
        # TransactionIndex.append: last offsets strictly increase within a file.
        assert last_offsets == sorted(set(last_offsets))
        indexed_segments.add(base)
    assert found == e.aborted
    assert len(e.aborted) == 3 and len(indexed_segments) >= 2  # the scenario spreads them


def test_txnindex_matches_the_abort_markers_kafka_read(written: Written) -> None:
    # The other way round: every ABORT marker Kafka's reader found that closed a transaction of
    # data written before it has exactly one entry, whose last offset is that marker's offset.
    e = written.expected
    names = {f"{e.topic}-0/{p.name}" for p in _segments(written)}
    aborts = [b for b in written.java if b["file"] in names and b.get("control")
              and b["markers"][0]["type"] == "ABORT"]
    entries = {last: pid for pid, _first, last, _lso in e.aborted}
    data_pids = {b["pid"] for b in written.java if b["file"] in names and "base" in b and not b["control"]}
    assert {b["base"]: b["pid"] for b in aborts if b["pid"] in data_pids} == entries


# --- A transaction through the server's own coordinator -------------------------------------------


def test_coordinator_markers_and_txnindex_kafka_reads(written: Written) -> None:
    # The markers the transaction coordinator sent (not the test): Kafka's layout byte for byte,
    # and the abort's .txnindex entry.
    topic, pid, epoch = written.real
    got = [b for b in written.java if b["file"].startswith(f"{topic}-0/") and "base" in b]
    assert [(b["base"], b["pid"], b["epoch"], b["txn"], b["control"]) for b in got] == [
        (0, pid, epoch, True, False), (1, pid, epoch, True, True), (2, pid, epoch, True, False),
        (3, pid, epoch, True, True)]
    markers = [b["markers"][0] for b in got if b["control"]]
    assert [m["type"] for m in markers] == ["COMMIT", "ABORT"]
    assert all(b["same_as_kafka_writer"] for b in got if b["control"])
    # The coordinator epoch is the __transaction_state partition's leader epoch: one for both.
    assert markers[0]["coordinator_epoch"] == markers[1]["coordinator_epoch"] >= 0
    raw = (written.data_dir / f"{topic}-0" / f"{0:020d}.txnindex").read_bytes()
    assert len(raw) == TOTAL_SIZE and _field(raw, VERSION_OFFSET, 2) == 0
    assert (_field(raw, PRODUCER_ID_OFFSET, 8), _field(raw, FIRST_OFFSET_OFFSET, 8), _field(raw, LAST_OFFSET_OFFSET, 8),
            _field(raw, LAST_STABLE_OFFSET_OFFSET, 8)) == (pid, 2, 3, 4)


def test_transaction_state_records_kafka_reads(written: Written) -> None:
    # Every __transaction_state record the coordinator wrote, read by Kafka's type code against
    # the TransactionLogKey/Value schemas (TxnLogCheck), and written back identically by it.
    topic, pid, epoch = written.real
    assert written.txn_log and all(r["roundtrip"] for r in written.txn_log), written.txn_log
    ours = [r for r in written.txn_log if r.get("transactional_id") == REAL_TXN_ID]
    assert all(r["key_version"] == 0 and r["value"]["version"] == 0 for r in ours)
    values = [r["value"] for r in ours]
    # Reference §1.4 (TV0/TV1): Empty on InitProducerId, Ongoing on the first AddPartitionsToTxn,
    # PrepareCommit on EndTxn, CompleteCommit once the markers are written; then the same for
    # an abort (PrepareAbort 3, CompleteAbort 5).
    assert [v["transaction_status"] for v in values] == [0, 1, 2, 4, 1, 3, 5]
    assert {(v["producer_id"], v["producer_epoch"], v["transaction_timeout_ms"]) for v in values} == {
        (pid, epoch, 60000)}
    partitions = [v["transaction_partitions"] for v in values]
    assert partitions == [None, [[topic, [0]]], [[topic, [0]]], [], [[topic, [0]]], [[topic, [0]]], []]
    assert values[0]["transaction_start_timestamp_ms"] == -1
    assert all(v["transaction_last_update_timestamp_ms"] >= v["transaction_start_timestamp_ms"] > 0
               for v in values[1:])


# --- TransactionLogKey/Value: our codec against Kafka's type code ------------------------------
# The schemas are TransactionLogKey.json (version 0: TransactionalId string) and
# TransactionLogValue.json (versions 0-1, flexible from 1; tagged 0 PreviousProducerId,
# 1 NextProducerId, 2 ClientTransactionVersion) of apache/kafka
# transaction-coordinator/src/main/resources/common/message (commit 1eb7644); TxnLogCheck declares
# them with Kafka's Schema/Field/Type classes.

TS = 1_700_000_000_000
VALUES: list[tuple[TransactionLogValue, int]] = [
    (TransactionLogValue(1000, 0, 60000, 0, None, TS, -1), 0),                               # Empty
    (TransactionLogValue(1000, 1, 60000, 1, (("orders", (0, 1, 2)), ("payments", (7,))), TS + 5, TS), 0),
    (TransactionLogValue(1000, 1, 60000, 2, (("orders", (0, 1, 2)),), TS + 6, TS), 0),        # PrepareCommit
    (TransactionLogValue(1000, 1, 60000, 4, (), TS + 7, TS), 0),                              # CompleteCommit
    (TransactionLogValue(2**62 + 3, 32766, 900000, 3, (("t" * 249, tuple(range(40))),), TS, TS), 0),
    (TransactionLogValue(1000, 0, 60000, 0, None, TS, -1), 1),                                # v1, no tags
    (TransactionLogValue(1000, 2, 60000, 1, (("orders", (5,)),), TS, TS, 999, 1001, 2), 1),   # every tag
    (TransactionLogValue(1000, 2, 60000, 5, (), TS, TS, -1, -1, 1), 1),                       # tag 2 only
]


def test_transaction_log_codec_matches_kafkas_type_code() -> None:
    keys = [TransactionLogKey(t) for t in ("txn-1", "tx-\u00e9-\u2713", "k" * 300)]
    args: list[str] = ["hex"]
    for i, (value, version) in enumerate(VALUES):
        args += [encode_key(keys[i % len(keys)]).hex(), encode_value(value, version).hex()]
    args += [encode_key(keys[0]).hex(), "-"]  # a tombstone
    res = run_java("TxnLogCheck", args).check()
    read = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(read) == len(VALUES) + 1
    for i, ((value, version), theirs) in enumerate(zip(VALUES, read, strict=False)):
        assert theirs["roundtrip"] and theirs["key_version"] == 0, theirs
        assert theirs["transactional_id"] == keys[i % len(keys)].transactional_id
        expected: dict[str, Any] = {
            "version": version, "producer_id": value.producer_id, "producer_epoch": value.producer_epoch,
            "transaction_timeout_ms": value.transaction_timeout_ms, "transaction_status": value.transaction_status,
            "transaction_partitions": None if value.transaction_partitions is None else [
                [t, list(ids)] for t, ids in value.transaction_partitions],
            "transaction_last_update_timestamp_ms": value.transaction_last_update_timestamp_ms,
            "transaction_start_timestamp_ms": value.transaction_start_timestamp_ms}
        if version >= 1:
            defaults = ((0, value.previous_producer_id, -1), (1, value.next_producer_id, -1),
                        (2, value.client_transaction_version, 0))
            expected |= {"previous_producer_id": value.previous_producer_id,
                         "next_producer_id": value.next_producer_id,
                         "client_transaction_version": value.client_transaction_version,
                         # Kafka's generated writer puts only the tags that differ from their defaults.
                         "tags": [tag for tag, v, default in defaults if v != default]}
        assert theirs["value"] == expected, i
    assert read[-1] == {"offset": -1, "key_version": 0, "transactional_id": "txn-1", "value": None,
                        "roundtrip": True}
