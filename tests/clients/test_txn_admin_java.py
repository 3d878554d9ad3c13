"""The KIP-664 admin tools with the stock Java ``Admin`` (kafka-clients 3.9.1, ``java/TxnAdmin.java``)
against a transaction a confluent-kafka producer leaves open
(https://cwiki.apache.org/confluence/display/KAFKA/KIP-664%3A+Provide+tooling+to+detect+and+abort+hanging+transactions):
listTransactions with its filters, describeTransactions, describeProducers, the find-hanging
procedure of ``kafka-transactions.sh`` (nothing hangs), and abortTransaction, which writes an
ABORT marker from the admin client (WriteTxnMarkers to the leader) so that a read_committed
consumer gets past the last stable offset. Then the producer aborts its transaction itself: the
coordinator's markers land on top of the admin's one."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from coordinator.transactions.service import COORDINATOR_EPOCH_FILE
from tests.clients.tools import NODE_ID, run_java, unique_topic
from tests.clients.txn_io import TXN_SERVER, by_partition, create_topic, end_offsets, read_topic
from tests.conftest import ServerProcess

pytestmark = [pytest.mark.clients, pytest.mark.timeout(60)]

SRC = ["TxnAdmin.java"]
TXN_TIMEOUT_MS = 60_000
COORDINATOR_EPOCH = 5


@pytest.fixture(scope="module")
def txn_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("txn-admin") / "data"
    data.mkdir()
    # The single node's coordinator epoch, raised at every start (docs/transactions.md): this start is
    # the sixth, so markers carry 5 and an admin abort with 4 is a fenced coordinator's.
    (data / COORDINATOR_EPOCH_FILE).write_text(f"{COORDINATOR_EPOCH - 1}\n")
    s = ServerProcess(data, TXN_SERVER)
    s.start()
    yield s
    if s.alive():
        s.stop()


def admin(server: ServerProcess, *args: str) -> list[str]:
    res = run_java("TxnAdmin", [server.bootstrap, *args], sources=SRC, timeout=40)
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and lines and lines[-1] == "OK", \
        f"TxnAdmin {args}: {res.describe()}\n{server.log_text()[-3000:]}"
    return lines[:-1]


def fields(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split()[1:])


def plain(bootstrap: str, topic: str, values: dict[int, list[str]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for q, vs in values.items():
        for v in vs:
            p.produce(topic, value=v.encode(), partition=q)
    assert p.flush(15) == 0


def producers(lines: list[str]) -> dict[int, list[list[str]]]:
    out: dict[int, list[list[str]]] = {}
    for ln in lines:
        if ln.startswith("P "):
            f = ln.split(" ")
            out.setdefault(int(f[1]), []).append(f[2:])
    return out


def test_txn_admin_tools(txn_server: ServerProcess) -> None:
    from confluent_kafka import Producer

    server = txn_server
    bs = server.bootstrap
    topic, txn_id = unique_topic("txn-adm-t"), unique_topic("txn-adm-id")
    create_topic(bs, topic, 2)
    plain(bs, topic, {0: ["before-0", "before-1"]})

    # A committed transaction on p0 (offsets 2, marker 3: the partition learns the coordinator's
    # epoch), then one left open on both partitions: offsets 4..6 on p0, 0..2 on p1.
    txp = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "linger.ms": 0,
                    "transaction.timeout.ms": TXN_TIMEOUT_MS})
    txp.init_transactions(15)
    txp.begin_transaction()
    txp.produce(topic, value=b"committed-0", partition=0)
    txp.commit_transaction(15)
    started_ms = int(time.time() * 1000)
    txp.begin_transaction()
    for q in (0, 1):
        for i in range(3):
            txp.produce(topic, value=f"txn-{q}-{i}".encode(), partition=q)
    assert txp.flush(15) == 0
    plain(bs, topic, {0: ["after-0", "after-1"], 1: ["after-0"]})
    assert end_offsets(bs, topic, 2, "read_committed") == [4, 0], "the open transaction pins the LSO"
    time.sleep(0.05)  # so that the transaction is older than the 1 ms duration filter

    lines = admin(server, "inspect", txn_id, topic, "2")
    listed: dict[str, list[list[str]]] = {}
    for ln in lines:
        if ln.startswith("L "):
            f = ln.split(" ")
            listed.setdefault(f[1], []).append(f[2:])
    mine = {k: [e for e in v if e[0] == txn_id] for k, v in listed.items()}
    d = fields(next(ln for ln in lines if ln.startswith("D ")))
    pid, epoch = d["pid"], d["epoch"]
    entry = [txn_id, pid, "Ongoing"]
    assert mine.get("all") == [entry] and mine.get("ongoing") == [entry] and mine.get("pid") == [entry], \
        f"listTransactions: {listed}"
    assert all(e[2] == "Ongoing" for e in listed["ongoing"]), listed["ongoing"]
    assert listed.get("pid") == [entry], f"listTransactions(filterProducerIds {pid}): {listed.get('pid')}"
    assert not mine.get("complete-commit") and not listed.get("other-pid"), listed
    assert mine.get("dur-short") == [entry] and not mine.get("dur-long"), f"filterOnDuration: {listed}"

    assert d["state"] == "Ongoing" and d["timeout"] == str(TXN_TIMEOUT_MS) and d["coordinator"] == str(NODE_ID), d
    assert started_ms - 1000 <= int(d["start"]) <= int(time.time() * 1000), (started_ms, d)
    assert d["partitions"] == f"{topic}-0,{topic}-1", d

    prods = producers(lines)
    txn_rows = {q: [r for r in rows if r[0] == pid] for q, rows in prods.items()}
    assert [r[1] for q in (0, 1) for r in txn_rows.get(q, [])] == [epoch, epoch], f"describeProducers: {prods}"
    assert txn_rows[0][0][5] == "4" and txn_rows[1][0][5] == "0", \
        f"currentTransactionStartOffset of the open transaction: {prods}"
    assert txn_rows[0][0][2] == "3" and txn_rows[1][0][2] == "2", f"lastSequence: {prods}"
    coordinator_epoch = txn_rows[0][0][4]
    assert coordinator_epoch == str(COORDINATOR_EPOCH) and txn_rows[1][0][4] == "-", \
        f"coordinatorEpoch: p0's commit marker's, none on p1 (no marker yet): {prods}"
    assert started_ms - 1000 <= int(txn_rows[0][0][3]) <= int(time.time() * 1000), prods
    others = [r for q in (0, 1) for r in prods[q] if r[0] != pid]
    assert len(others) == 3 and all(r[5] == "-" for r in others), f"idempotent producers, no transaction: {prods}"

    hang = fields(next(ln for ln in lines if ln.startswith("H ")))
    assert hang == {"candidates": "2", "ids": f"{pid}:{txn_id}", "hanging": "-"}, f"find-hanging: {hang}"
    assert "U TransactionalIdNotFoundException" in lines, lines

    # abortTransaction on p0 only: the admin client's ABORT marker closes the producer's
    # transaction there; p1 stays pinned by the same transaction.
    lines = admin(server, "abort", topic, "0")
    assert "F TransactionCoordinatorFencedException open=4" in lines, \
        f"abortTransaction with a stale coordinator epoch: {lines}"
    a = fields(next(ln for ln in lines if ln.startswith("A ")))
    assert a == {"pid": pid, "epoch": epoch, "coordinatorEpoch": coordinator_epoch}, a
    after = producers(lines)[0]
    assert [r for r in after if r[0] == pid and r[5] != "-"] == [], f"p0 still has an open transaction: {after}"
    assert end_offsets(bs, topic, 2, "read_committed") == [10, 0], "LSO after the admin abort of p0"
    got = by_partition(read_topic(bs, topic, 2, "read_committed", expected=5, timeout=10))
    assert got.get(0) == ["before-0", "before-1", "committed-0", "after-0", "after-1"], got
    assert not got.get(1), f"p1 is still behind the open transaction: {got}"

    # The coordinator still has the transaction Ongoing; the producer aborts it (markers on both
    # partitions, p0's on top of the admin's).
    txp.abort_transaction(15)
    lines = admin(server, "describe", txn_id)
    d = fields(lines[0])
    assert d["state"] == "CompleteAbort" and d["partitions"] == "", d
    assert f"L complete-abort {txn_id} {pid} CompleteAbort" in lines, lines
    assert end_offsets(bs, topic, 2, "read_committed") == [11, 5], "LSO after the producer's abort"
    got = by_partition(read_topic(bs, topic, 2, "read_committed", expected=6, timeout=10))
    assert got == {0: ["before-0", "before-1", "committed-0", "after-0", "after-1"], 1: ["after-0"]}, got
