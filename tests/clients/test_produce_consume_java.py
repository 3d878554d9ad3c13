"""Stock Java KafkaProducer (idempotent, acks=all) and KafkaConsumer (assign, no group) 3.9.1:
records go in with keys, values, headers and timestamps and come out the same, per codec."""

from __future__ import annotations

import pytest

from tests.clients.records_io import assert_same, create_topic, make_records, parse_acks, parse_got, write_records
from tests.clients.tools import run_java, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]

PC = ["ProduceConsume.java"]


def java_produce(bootstrap: str, topic: str, path, compression: str, *props: str):  # type: ignore[no-untyped-def]
    return run_java("ProduceConsume", ["produce", bootstrap, topic, str(path), compression, *props],
                    sources=PC, timeout=60)


def java_consume(bootstrap: str, topic: str, partitions: int, total: int, timeout_ms: int = 20000,
                 offsets: list[int] | None = None):  # type: ignore[no-untyped-def]
    args = ["consume", bootstrap, topic, str(partitions), str(total), str(timeout_ms)]
    if offsets is not None:
        args.append(",".join(map(str, offsets)))
    return run_java("ProduceConsume", args, sources=PC, timeout=timeout_ms / 1000 + 30)


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_java_produce_consume(server, tmp_path, compression) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic(f"java-pc-{compression}")
    create_topic(server.bootstrap, topic, 3)
    recs = make_records(300, 3)
    path = write_records(tmp_path / "in.txt", recs)

    res = java_produce(server.bootstrap, topic, path, compression)
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
    assert res.returncode == 0, ctx
    acks = parse_acks(res.stdout)
    assert len(acks) == len(recs), ctx
    # Each partition's acks are its consecutive offsets 0..n-1, in send order.
    for p in range(3):
        idx = [i for i, r in enumerate(recs) if r.partition == p]
        assert [acks[i] for i in idx] == [(p, o) for o in range(len(idx))], ctx

    res = java_consume(server.bootstrap, topic, 3, len(recs))
    ctx = res.describe()[-8000:] + "\n--- server log ---\n" + server.log_text()[-4000:]
    assert res.returncode == 0, ctx
    assert_same(recs, parse_got(res.stdout), ctx)


def test_java_consume_from_offsets(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """seek() to explicit offsets in the middle of compressed batches: the consumer gets exactly
    the records from there on (it drops the batch's earlier records itself)."""
    topic = unique_topic("java-seek")
    create_topic(server.bootstrap, topic, 3)
    recs = make_records(300, 3)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "lz4").check()
    starts = [17, 0, 99]
    expected = []
    for p in range(3):
        expected += [r for r in recs if r.partition == p][starts[p]:]
    res = java_consume(server.bootstrap, topic, 3, len(expected), offsets=starts)
    ctx = res.describe()[-8000:]
    assert res.returncode == 0, ctx
    got = parse_got(res.stdout)
    for p in range(3):
        exp_p = [r for r in expected if r.partition == p]
        got_p = [g for g in got if g.partition == p]
        assert [g.offset for g in got_p] == list(range(starts[p], starts[p] + len(exp_p))), ctx
        assert [g.rec() for g in got_p] == exp_p, ctx


def test_java_seek_with_leader_epoch(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """seek(tp, OffsetAndMetadata(offset, leaderEpoch=0)): the Java consumer validates the
    position with OffsetsForLeaderEpoch (epoch 0 ends at the log end) and reads from there, and
    the same after a restart (the epoch stays 0)."""
    topic = unique_topic("java-epoch")
    create_topic(server.bootstrap, topic, 3)
    recs = make_records(300, 3)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "snappy").check()
    starts = [10, 50, 99]
    for _round in range(2):
        res = run_java("ProduceConsume", ["consume", server.bootstrap, topic, "3", str(300 - sum(starts)), "15000",
                                          ",".join(map(str, starts)), "0"], sources=PC, timeout=45)
        ctx = res.describe()[-6000:] + "\n--- server log ---\n" + server.log_text()[-3000:]
        assert res.returncode == 0, ctx
        got = parse_got(res.stdout)
        for p in range(3):
            exp_p = [r for r in recs if r.partition == p][starts[p]:]
            got_p = [g for g in got if g.partition == p]
            assert [g.offset for g in got_p] == list(range(starts[p], 100)), ctx
            assert [g.rec() for g in got_p] == exp_p, ctx
        server.restart()
