"""Exactly-once consume-transform-produce with the stock Java clients (kafka-clients 3.9.1), as
Kafka's transactions system test does it (tests/kafkatest/tests/core/transactions_test.py, with
tools/.../TransactionalMessageCopier.java): a copier (java/TxnCopier.java) reads a seeded topic
read_committed and copies it to an output topic in transactions that also commit its offsets
(sendOffsetsToTransaction with the consumer's group metadata, KIP-447), aborting some at random;
a read_committed reader (java/TxnVerifier.java) running alongside must see every input once, in
order. Then the copier is SIGKILLed at random points and restarted: each new incarnation's
initTransactions fences the previous one and aborts its open transaction, and it resumes from the
committed offsets (fetched with RequireStable), so the output still holds every input once."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterator

import pytest

from tests.clients.background import start_java
from tests.clients.records_io import create_topic
from tests.clients.tools import run_java, unique_topic
from tests.clients.txn_io import (
    TXN_SERVER,
    Read,
    assert_exactly_once,
    committed_offsets,
    read_topic,
    seed_input,
)
from tests.conftest import ServerProcess

pytestmark = [pytest.mark.clients, pytest.mark.timeout(150)]

COPIER = ["TxnCopier.java"]
VERIFIER = ["TxnVerifier.java"]


@pytest.fixture(scope="module")
def txn_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("txn-java") / "data", TXN_SERVER)
    s.start()
    yield s
    if s.alive():
        s.stop()


def copier_args(server: ServerProcess, inp: str, out: str, group: str, txn_id: str, batch: int,
                abort_probability: float, mode: str, seed: int, *props: str) -> list[str]:
    return [server.bootstrap, inp, out, group, txn_id, str(batch), str(abort_probability), mode, str(seed), *props]


def parse_reads(stdout: str) -> list[Read]:
    out = []
    for line in stdout.splitlines():
        if line.startswith("R "):
            _, p, o, k, v = line.split(" ")
            out.append(Read(int(p), int(o), None if k == "-" else k, v))
    return out


def aborted_records(lines: list[str]) -> int:
    return sum(int(m.group(1)) for line in lines if (m := re.fullmatch(r"A \d+ (\d+)", line)))


def test_java_copier_copies_exactly_once(txn_server) -> None:  # type: ignore[no-untyped-def]
    """A subscribed copier (TxnOffsetCommit with member id and generation) with 25 % of its
    transactions aborted; a concurrent read_committed reader sees each input once, in order; a
    read_uncommitted one also sees the aborted copies; the group's offsets end at the input's end."""
    server = txn_server
    partitions, per_partition = 3, 200
    inp, out, group = unique_topic("txn-in"), unique_topic("txn-out"), unique_topic("txn-copier")
    inputs = seed_input(server.bootstrap, inp, partitions, per_partition)
    create_topic(server.bootstrap, out, partitions)
    total = partitions * per_partition

    reader = start_java("TxnVerifier", [server.bootstrap, out, str(partitions), str(total), "90000"], VERIFIER)
    try:
        res = run_java("TxnCopier", copier_args(server, inp, out, group, unique_topic("txn-id"), 40, 0.25,
                                                "subscribe", 7), sources=COPIER, timeout=90)
        ctx = res.describe()[-6000:] + "\n--- server log ---\n" + server.log_text()[-4000:]
        assert res.returncode == 0 and "copier.done" in res.stdout, ctx
        lines = res.stdout.splitlines()
        assert any(x.startswith("A ") for x in lines), "seed 7 aborts some transactions\n" + ctx
        assert reader.wait(60) == 0, reader.describe()
    finally:
        reader.stop()
    rctx = reader.describe(20) + "\n" + ctx
    assert_exactly_once(inputs, parse_reads(reader.stdout), rctx)

    # The aborted transactions' records are in the log: read_uncommitted sees them as well.
    aborted = aborted_records(lines)
    uncommitted = read_topic(server.bootstrap, out, partitions, "read_uncommitted", total + aborted)
    assert len(uncommitted) == total + aborted, ctx
    assert committed_offsets(server.bootstrap, group, inp, partitions) == [per_partition] * partitions, ctx


def test_java_copier_sigkilled_and_restarted(txn_server) -> None:  # type: ignore[no-untyped-def]
    """The copier (assigned partitions, 10 % aborts) SIGKILLed three times at random points and
    restarted with the same transactional id: read_committed output = input, once each, in order."""
    server = txn_server
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    partitions, per_partition = 3, 500
    inp, out, group = unique_topic("txn-kin"), unique_topic("txn-kout"), unique_topic("txn-kcopier")
    txn_id = unique_topic("txn-kid")
    inputs = seed_input(server.bootstrap, inp, partitions, per_partition)
    create_topic(server.bootstrap, out, partitions)
    args = copier_args(server, inp, out, group, txn_id, 30, 0.1, "assign", seed)
    # The incarnations to be killed pause 80 ms after each transaction: unpaused, a copier on a
    # fast machine ran 16 transactions past its kill point and one incarnation finished the input.
    paused = [*args, "copier.pause.ms=80"]
    history: list[str] = []
    for kill in range(3):
        copier = start_java("TxnCopier", paused, COPIER)
        commits = rng.randint(1, 5)
        try:
            reached = copier.wait_for(lambda ls, n=commits: sum(x.startswith("C ") for x in ls) >= n, 60)
            assert reached, copier.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
            # Somewhere inside the next transaction (or between two).
            time.sleep(rng.uniform(0.0, 0.4))
        finally:
            copier.stop()  # SIGKILL
            copier.wait(10)
        history.append(f"incarnation {kill} (seed {seed}): killed after {commits} commits:\n" + copier.stdout)
        assert "copier.done" not in copier.stdout, "the copier finished before its kill: more input needed\n" + \
            "\n".join(history)
    res = run_java("TxnCopier", args, sources=COPIER, timeout=90)
    ctx = "\n".join(history) + "\n" + res.describe()[-4000:] + "\n--- server log ---\n" + server.log_text()[-4000:]
    assert res.returncode == 0 and "copier.done" in res.stdout, ctx
    output = read_topic(server.bootstrap, out, partitions, "read_committed", partitions * per_partition)
    assert_exactly_once(inputs, output, ctx)
    assert committed_offsets(server.bootstrap, group, inp, partitions) == [per_partition] * partitions, ctx



def test_two_java_copiers_in_one_group(txn_server) -> None:  # type: ignore[no-untyped-def]
    """Kafka's group mode: two subscribed copiers, each with its own transactional id, the second
    joining while the first copies. The rebalance moves partitions between transactional producers,
    each resuming from the offsets the other committed in its transactions (offsets sent with a
    stale generation would be refused, KIP-447: that copier aborts and goes back to the committed
    offsets); the output still holds every input once, in order."""
    server = txn_server
    # Enough input that the first copier (20 records per transaction, 150 ms apart: 75
    # transactions, over 11 s) is still copying when the second's JVM has started and joined: with
    # 200 per partition a loaded CI run saw the first finish everything before the rebalance.
    partitions, per_partition = 3, 500
    inp, out, group = unique_topic("txn-gin"), unique_topic("txn-gout"), unique_topic("txn-gcopier")
    inputs = seed_input(server.bootstrap, inp, partitions, per_partition)
    create_topic(server.bootstrap, out, partitions)
    # The first pauses 150 ms after each transaction, so the second joins while it copies.
    first = start_java("TxnCopier", copier_args(server, inp, out, group, unique_topic("txn-gid"), 20, 0.1,
                                                "subscribe", 11, "copier.pause.ms=150"), COPIER)
    second = None
    try:
        assert first.wait_for(lambda ls: sum(x.startswith("C ") for x in ls) >= 2, 60), first.describe()
        second = start_java("TxnCopier", copier_args(server, inp, out, group, unique_topic("txn-gid"), 20, 0.1,
                                                     "subscribe", 12), COPIER)
        rcs = [first.wait(90), second.wait(90)]
    finally:
        first.stop()
        if second is not None:
            second.stop()
    ctx = first.describe(30) + "\n" + second.describe(30) + "\n--- server log ---\n" + server.log_text()[-4000:]
    assert rcs == [0, 0], ctx
    assert any(x.startswith("C ") for x in second.lines), "the second copier copied nothing\n" + ctx
    print("refused by the rebalance:", [x for x in first.lines + second.lines if x.startswith("copier.abortable")])
    output = read_topic(server.bootstrap, out, partitions, "read_committed", partitions * per_partition)
    assert_exactly_once(inputs, output, ctx)
