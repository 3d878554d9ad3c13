"""The server SIGKILLed twice (single node) while the stock Java transactional producer
(java/TxnProducer.java) runs a stream of transactions, every fourth aborted, and restarted on the
same data directory. Afterwards a read_committed consumer must find every transaction the client
saw committed, whole and once; none the client saw aborted; and each transaction whose outcome the
client never learned (the server died under it) either whole or absent — never torn. read_uncommitted
holds everything read_committed does. (Kafka's coordinator: a transaction in PrepareCommit when the
coordinator dies is committed on load; one still Ongoing is aborted when the producer's next
initTransactions fences it.)"""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from tests.clients.background import start_java
from tests.clients.records_io import create_topic
from tests.clients.tools import unique_topic
from tests.clients.txn_io import TXN_SERVER, read_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(150)]

P = 3
TXNS = 60
PER_TXN = 6


def outcomes(lines: list[str]) -> dict[int, str]:
    out = {}
    for line in lines:
        if m := re.match(r"(COMMITTED|ABORTED|FAILED) (\d+)", line):
            out[int(m.group(2))] = m.group(1)
    return out


def test_server_sigkilled_under_transactions(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(TXN_SERVER)
    topic = unique_topic("txn-crash")
    create_topic(server.bootstrap, topic, P)
    prod = start_java("TxnProducer", [server.bootstrap, topic, str(P), str(TXNS), str(PER_TXN),
                                      unique_topic("txn-crash-id")], ["TxnProducer.java"])
    try:
        # Down 0.5 s: the producer's retries ride it out. Down 5 s, past its max.block.ms: the
        # call in progress fails, and the next producer's initTransactions settles the transaction.
        for at, down in ((12, 0.5), (30, 5.0)):
            reached = prod.wait_for(lambda ls, n=at: len(outcomes(ls)) >= n, 60)
            assert reached, prod.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
            server.kill()
            time.sleep(down)
            server.start()
        rc = prod.wait(90)
    finally:
        prod.stop()
    ctx = prod.describe(80) + "\n--- server log ---\n" + server.log_text()[-5000:]
    assert rc == 0 and any(x.startswith("producer.done") for x in prod.lines), ctx
    fate = outcomes(prod.lines)
    assert sorted(fate) == list(range(TXNS)), ctx
    print("outcomes:", Counter(fate.values()), "retries of initTransactions:",
          sum(x.startswith("init.retry") for x in prod.lines))

    committed = read_topic(server.bootstrap, topic, P, "read_committed",
                           PER_TXN * sum(v == "COMMITTED" for v in fate.values()))
    counts = Counter(r.value for r in committed)
    assert not [v for v, c in counts.items() if c > 1], f"duplicates {[v for v, c in counts.items() if c > 1]}\n{ctx}"
    per_txn = Counter(int(v.split("-")[0][1:]) for v in counts)
    for n, what in sorted(fate.items()):
        have = per_txn.get(n, 0)
        if what == "COMMITTED":
            assert have == PER_TXN, f"committed transaction {n} lost: {have} of {PER_TXN} records\n{ctx}"
        elif what == "ABORTED":
            assert have == 0, f"aborted transaction {n} resurrected: {have} records\n{ctx}"
        else:
            assert have in (0, PER_TXN), f"transaction {n} (outcome unknown) torn: {have} of {PER_TXN}\n{ctx}"
    # Each partition holds its transactions' records in transaction order.
    for q in range(P):
        seq = [(int(r.value.split("-")[0][1:]), int(r.value.split("-")[1])) for r in committed if r.partition == q]
        assert seq == sorted(seq), f"partition {q} out of order\n{ctx}"
    uncommitted = {r.value for r in read_topic(server.bootstrap, topic, P, "read_uncommitted", len(committed))}
    assert set(counts) <= uncommitted, ctx
