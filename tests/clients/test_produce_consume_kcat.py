"""Stock kcat 1.7.1 (librdkafka 2.0.2): ``kcat -P`` with ``-K:`` keys, ``-H`` headers and each
of its codecs, then ``kcat -C -e`` reads the same records back (format string and JSON), and
kafka-python agrees. kcat cannot set per-message timestamps: librdkafka stamps them at send
time, so timestamps are checked against the send window and against another client's view."""

from __future__ import annotations

import json
import time

import pytest

from tests.clients import py_clients as pc
from tests.clients.records_io import create_topic
from tests.clients.tools import run_kcat, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(60)]

P = 3
PER = 100


def _lines(p: int) -> list[tuple[str, str]]:
    out = []
    for i in range(PER):
        key = f"k{p}-{i}"
        value = f"value {p}/{i} " + ("payload-" * (i % 9)) + "\u00e9"
        out.append((key, value))
    return out


def _produce(bootstrap: str, topic: str, tmp_path, codec: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    t0 = int(time.time() * 1000)
    for p in range(P):
        path = tmp_path / f"in-{p}.txt"
        path.write_text("".join(f"{k}:{v}\n" for k, v in _lines(p)), encoding="utf-8")
        args = ["-P", "-b", bootstrap, "-t", topic, "-p", str(p), "-K:", "-H", "trace=abc",
                "-H", f"part={p}", "-H", "trace=second", "-X", "enable.idempotence=true", "-X", "acks=all",
                "-l", str(path)]
        if codec != "none":
            args[1:1] = ["-z", codec]
        run_kcat(args).check()
    return t0, int(time.time() * 1000)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_kcat_produce_consume(server, tmp_path, codec) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic(f"kcat-pc-{codec}")
    create_topic(server.bootstrap, topic, P)
    t0, t1 = _produce(server.bootstrap, topic, tmp_path, codec)

    # kafka-python's view: keys, values, headers (in order, duplicates kept), timestamps
    got = pc.kafka_python_consume(server.bootstrap, topic, P, P * PER)
    ctx = server.log_text()[-3000:]
    ts: dict[tuple[int, int], int] = {}
    for p in range(P):
        gp = [g for g in got if g.partition == p]
        assert [g.offset for g in gp] == list(range(PER)), ctx
        assert [(g.key.decode(), g.value.decode()) for g in gp] == _lines(p), ctx
        assert {g.headers for g in gp} == {(("trace", b"abc"), ("part", str(p).encode()), ("trace", b"second"))}
        assert all(g.timestamp_type == "CreateTime" and t0 <= g.timestamp <= t1 for g in gp), (t0, t1, gp[:3])
        ts.update({(p, g.offset): g.timestamp for g in gp})

    for p in range(P):
        # format-string output
        res = run_kcat(["-C", "-b", server.bootstrap, "-t", topic, "-p", str(p), "-o", "beginning", "-e",
                        "-f", "%p|%o|%T|%k|%s|%h\n"]).check()
        rows = [line.split("|") for line in res.stdout.splitlines() if line]
        assert [(int(r[0]), int(r[1])) for r in rows] == [(p, o) for o in range(PER)], res.describe()
        assert [(r[3], r[4]) for r in rows] == _lines(p), res.describe()
        assert {r[5] for r in rows} == {f"trace=abc,part={p},trace=second"}, res.describe()
        assert [int(r[2]) for r in rows] == [ts[(p, o)] for o in range(PER)], res.describe()

        # JSON output
        res = run_kcat(["-C", "-b", server.bootstrap, "-t", topic, "-p", str(p), "-o", "beginning", "-e",
                        "-J"]).check()
        msgs = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
        assert [(m["partition"], m["offset"], m["tstype"], m["ts"], m["key"], m["payload"]) for m in msgs] == \
            [(p, o, "create", ts[(p, o)], k, v) for o, (k, v) in enumerate(_lines(p))], res.describe()
        assert all(m.get("headers") == ["trace", "abc", "part", str(p), "trace", "second"] for m in msgs), \
            msgs[0]


def test_kcat_reads_from_offset_and_null_values(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``-Z``: empty input lines become null values; ``-o <n>`` starts mid-log; -c limits."""
    topic = unique_topic("kcat-null")
    create_topic(server.bootstrap, topic, 1)
    path = tmp_path / "in.txt"
    path.write_text("a:one\nb:\nc:three\nd:four\n")
    run_kcat(["-P", "-b", server.bootstrap, "-t", topic, "-p", "0", "-K:", "-Z", "-l", str(path)]).check()
    res = run_kcat(["-C", "-b", server.bootstrap, "-t", topic, "-p", "0", "-o", "1", "-e", "-Z",
                    "-f", "%o %k %s %S\n"]).check()
    assert res.stdout.splitlines() == ["1 b NULL -1", "2 c three 5", "3 d four 4"], res.describe()
    res = run_kcat(["-C", "-b", server.bootstrap, "-t", topic, "-p", "0", "-o", "-2", "-c", "1", "-e",
                    "-f", "%o %k\n"]).check()
    assert res.stdout.splitlines() == ["2 c"], res.describe()


def test_kcat_query_offsets_for_times(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``kcat -Q -t topic:partition:timestamp`` (ListOffsets through librdkafka's
    offsetsForTimes) names the first offset at or after the timestamp, -1 past the end."""
    from tests.clients.records_io import Rec, write_records
    from tests.clients.test_produce_consume_java import java_produce

    topic = unique_topic("kcat-q")
    create_topic(server.bootstrap, topic, 2)
    base = int(time.time() * 1000) - 100_000
    recs = [Rec(i % 2, base + i * 100, b"k", b"v", ()) for i in range(40)]
    java_produce(server.bootstrap, topic, write_records(tmp_path / "in.txt", recs), "lz4").check()
    p0 = [r.timestamp for r in recs if r.partition == 0]
    probes = {0: p0[5] + 1, 1: base}
    res = run_kcat(["-Q", "-b", server.bootstrap, "-t", f"{topic}:0:{probes[0]}", "-t", f"{topic}:1:{probes[1]}"])
    res.check()
    assert " [0] offset 6" in res.stdout and " [1] offset 0" in res.stdout, res.describe()
    res = run_kcat(["-Q", "-b", server.bootstrap, "-t", f"{topic}:0:{base + 10_000_000}"]).check()
    assert " [0] offset -1" in res.stdout, res.describe()
