"""``dump-log`` on the logs a real node wrote for kafka-python's exactly-once loop (one committed
and one aborted transaction with offsets, then the id expired): ``--transaction-log-decoder`` on
``__transaction_state``, ``--offsets-decoder`` on the group's ``__consumer_offsets`` partition (the
transactional batches of TxnOffsetCommit, their COMMIT/ABORT markers and the .txnindex of the
abort), and the markers on the data partition."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from coordinator.app import App
from coordinator.dump_log import dump_log
from protocol.errors import ErrorCode as E
from protocol.hashing import partition_for
from tests.coordinator.transactions.test_wire import describe, retry, with_node
from tests.wire_client import WireClient

TXN_PARTITIONS = 4  # with_node's transaction.state.log.num.partitions
OFFSETS_PARTITIONS = 50


def dump(directory: Path, *, offsets: bool = False, transactions: bool = False) -> list[str]:
    out = io.StringIO()
    assert dump_log(directory, offsets, out, transaction_log_decoder=transactions) == 0, out.getvalue()
    return out.getvalue().splitlines()


@pytest.mark.asyncio
async def test_dump_log_of_a_consume_transform_produce_run(tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    source = TopicPartition("orders", 0)
    seen: dict[str, int] = {}

    def work(app: App, port: int) -> None:
        boot = f"127.0.0.1:{port}"
        consumer = KafkaConsumer(bootstrap_servers=boot, group_id="eos", enable_auto_commit=False,
                                 consumer_timeout_ms=300, auto_offset_reset="earliest")
        producer = KafkaProducer(bootstrap_servers=boot, transactional_id="eos-1", max_block_ms=15_000)
        try:
            consumer.assign([source])
            list(consumer)
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("orders", b"out", partition=1)
            producer.send_offsets_to_transaction({source: OffsetAndMetadata(3, "", -1)}, consumer.group_metadata())
            producer.commit_transaction()
            producer.begin_transaction()
            producer.send("orders", b"dropped", partition=1)
            producer.flush()
            producer.send_offsets_to_transaction({source: OffsetAndMetadata(2, "", -1)}, consumer.group_metadata())
            producer.abort_transaction()
            with WireClient("127.0.0.1", port) as c:
                state = retry(lambda: describe(c, "eos-1"), lambda s: s.transaction_state == "CompleteAbort")
                seen["pid"] = state.producer_id
                # The id expires (transactional.id.expiration.ms below): its tombstone is written.
                gone = retry(lambda: describe(c, "eos-1"), lambda s: s.error_code == E.TRANSACTIONAL_ID_NOT_FOUND)
                assert gone.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        finally:
            producer.close(timeout=5)
            consumer.close()

    await with_node(tmp_path, None, work, settings=("transactional.id.expiration.ms=2500",
                                                    "transaction.remove.expired.transaction.cleanup.interval.ms=100"))
    pid = seen["pid"]
    offsets_partition = f"__consumer_offsets-{partition_for('eos', OFFSETS_PARTITIONS)}"

    # __transaction_state: every transition of the id, then its tombstone.
    lines = dump(tmp_path / f"__transaction_state-{partition_for('eos-1', TXN_PARTITIONS)}", transactions=True)
    decoded = [line[4:] for line in lines if line.startswith("|   ")]
    assert len(decoded) == len([line for line in lines if line.startswith("| offset:")])
    key = "key: transaction_metadata::transactionalId=eos-1 payload: "
    assert all(line.startswith(key) for line in decoded), decoded
    assert decoded[-1] == key + "<DELETE>"
    fields = [dict(re.findall(r"(\w+)[:=](\[[^]]*\]|[^,]+)", line[len(key):])) for line in decoded[:-1]]
    states = [f["state"] for f in fields]
    assert [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]] == [
        "Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort", "CompleteAbort"]
    assert {(f["producerId"], f["producerEpoch"], f["txnTimeoutMs"]) for f in fields} == {(str(pid), "0", "60000")}
    prepare = fields[states.index("PrepareCommit")]
    assert prepare["partitions"] in (f"[{offsets_partition},orders-1]", f"[orders-1,{offsets_partition}]")
    assert fields[states.index("CompleteCommit")]["partitions"] == "[]"
    assert [int(f["txnLastUpdateTimestamp"]) for f in fields] == sorted(int(f["txnLastUpdateTimestamp"])
                                                                       for f in fields)

    # The data partition: the records of both transactions, each followed by its marker.
    data = dump(tmp_path / "orders-1")
    markers = [line for line in data if "endTxnMarker" in line]
    assert [m.split("endTxnMarker: ")[1].split()[0] for m in markers] == ["COMMIT", "ABORT"]
    epoch = markers[0].split("coordinatorEpoch: ")[1]

    # The group's __consumer_offsets partition: TxnOffsetCommit's transactional batches decode as
    # offset commits; the control batches print their marker and no decoded line.
    lines = dump(tmp_path / offsets_partition, offsets=True)
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert [("isControl: true" in b, f"producerId: {pid} producerEpoch: 0 " in b, "isTransactional: true" in b)
            for b in batches] == [(False, True, True), (True, True, True)] * 2
    decoded = [line[4:] for line in lines if line.startswith("|   ")]
    assert [d.split(", leaderEpoch")[0] for d in decoded] == [
        "[eos,orders,0]::OffsetAndMetadata(offset=3", "[eos,orders,0]::OffsetAndMetadata(offset=2"]
    records = [line for line in lines if line.startswith("| offset:")]
    assert records[1].endswith(f"endTxnMarker: COMMIT coordinatorEpoch: {epoch}")
    assert records[3].endswith(f"endTxnMarker: ABORT coordinatorEpoch: {epoch}")
    # The aborted offset commit is in the segment's .txnindex, printed after it.
    assert lines[-1] == f"version: 0 producerId: {pid} firstOffset: 2 lastOffset: 3 lastStableOffset: 4"
