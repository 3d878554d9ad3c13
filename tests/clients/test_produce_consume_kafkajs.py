"""Stock kafkajs 2.2.4 producer (plain and idempotent; none and gzip — kafkajs ships no
snappy/lz4/zstd codec) and a raw Fetch through kafkajs' own broker connection.

kafkajs' consumer needs a consumer group, which the server does not implement yet, so records
are read with ``Broker.fetch`` (the request kafkajs' consumer itself sends) and also with
kafka-python. kafkajs models headers as an object, so interleaved duplicate header keys come out
grouped by key: expected records are normalised the same way (a client property)."""

from __future__ import annotations

import pytest

from tests.clients import py_clients as pc
from tests.clients.records_io import Rec, assert_same, create_topic, make_records, parse_acks, parse_got, write_records
from tests.clients.test_produce_consume_java import java_produce
from tests.clients.tools import run_node, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]

N = 300
P = 3


def grouped(recs: list[Rec]) -> list[Rec]:
    """Headers as kafkajs sees them: grouped by key in first-appearance order."""
    out = []
    for r in recs:
        keys: list[str] = []
        for k, _ in r.headers:
            if k not in keys:
                keys.append(k)
        hs = tuple((k, v) for key in keys for k, v in r.headers if k == key)
        out.append(Rec(r.partition, r.timestamp, r.key, r.value, hs))
    return out


def node_fetch(bootstrap: str, topic: str, total: int, offsets: list[int] | None = None):  # type: ignore[no-untyped-def]
    args = ["fetch", bootstrap, topic, str(P), str(total), "20000"]
    if offsets:
        args.append(",".join(map(str, offsets)))
    return run_node("produce_consume.js", args, timeout=45)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_kafkajs_produce_consume(server, tmp_path, codec, idempotent) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic(f"kjs-pc-{codec}")
    create_topic(server.bootstrap, topic, P)
    recs = grouped(make_records(N, P, null_header_values=False))
    path = write_records(tmp_path / "in.txt", recs)
    res = run_node("produce_consume.js", ["produce", server.bootstrap, topic, str(path), codec,
                                          "1" if idempotent else "0", "40"], timeout=60)
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
    assert res.returncode == 0, ctx
    acks = parse_acks(res.stdout)
    assert len(acks) == N, ctx
    for p in range(P):
        idx = [i for i, r in enumerate(recs) if r.partition == p]
        assert [acks[i] for i in idx] == [(p, o) for o in range(len(idx))], ctx

    # kafkajs' own Fetch
    res = node_fetch(server.bootstrap, topic, N)
    ctx = res.describe()[-8000:] + "\n--- server log ---\n" + server.log_text()[-4000:]
    assert res.returncode == 0, ctx
    assert_same(recs, parse_got(res.stdout), ctx)
    # and another client
    assert_same(recs, pc.kafka_python_consume(server.bootstrap, topic, P, N), server.log_text()[-3000:])


def test_kafkajs_fetch_reads_other_clients(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Java-produced gzip batches (with null header values) read by kafkajs' Fetch, from the start
    and from offsets in the middle of batches."""
    topic = unique_topic("kjs-cross")
    create_topic(server.bootstrap, topic, P)
    recs = make_records(N, P)
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "gzip").check()
    res = node_fetch(server.bootstrap, topic, N)
    ctx = res.describe()[-8000:]
    assert res.returncode == 0, ctx
    assert_same(grouped(recs), parse_got(res.stdout), ctx)

    starts = [5, 50, 99]
    res = node_fetch(server.bootstrap, topic, N - sum(starts), starts)
    ctx = res.describe()[-8000:]
    assert res.returncode == 0, ctx
    got = parse_got(res.stdout)
    exp = grouped(recs)
    for p in range(P):
        exp_p = [r for r in exp if r.partition == p][starts[p]:]
        got_p = [g for g in got if g.partition == p]
        assert [g.offset for g in got_p] == list(range(starts[p], starts[p] + len(exp_p))), ctx
        assert [g.rec() for g in got_p] == exp_p, ctx


@pytest.mark.parametrize("how", ["restart", "kill"])
def test_kafkajs_idempotent_stream_across_restart(server_factory, how) -> None:  # type: ignore[no-untyped-def]
    """kafkajs idempotent producer (maxInFlightRequests 1) keeps sending through a graceful
    restart or a SIGKILL: every acknowledged record is in the log exactly once, in order."""
    import time

    from tests.clients.background import start_node
    from tests.clients.test_produce_consume_restart import check_log

    server = server_factory()
    topic = unique_topic(f"kjs-stream-{how}")
    create_topic(server.bootstrap, topic, P, {"flush.messages": "1"})
    count = 6000
    prod = start_node("produce_consume.js", ["stream", server.bootstrap, topic, str(P), str(count), "50"])
    try:
        assert prod.wait_for(lambda ls: sum(1 for x in ls if x.startswith("A ")) >= count // 4, 60), prod.describe()
        at = sum(1 for x in prod.lines if x.startswith("A "))
        if how == "kill":
            server.kill()
            time.sleep(1.0)
            server.start()
        else:
            server.restart()
        rc = prod.wait(90)
        ctx = f"acked at {how}: {at}\n" + prod.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
        assert rc == 0, ctx
        assert at < count, ctx
        acks = parse_acks(prod.stdout)
        log = pc.kafka_python_consume(server.bootstrap, topic, P, count, timeout=30)
        check_log(log, acks, count, ctx)
    finally:
        prod.stop()
