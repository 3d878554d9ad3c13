"""Transactions (issue 32 item 6): transactions per second and commit latency by partitions per
transaction, on one node (side by side with Tansu, the peer with transactions that runs here) and
on a 3-node cluster; and the cost of a read_committed fetch over a read_uncommitted one.

    .venv/bin/python bench/txn_bench.py                       # everything
    .venv/bin/python bench/txn_bench.py --only commit --servers groupcoord
    .venv/bin/python bench/txn_bench.py --quick               # fewer transactions, for a smoke run

The client is confluent-kafka (librdkafka 2.16), the producer most exactly-once applications
outside the JVM use. One transaction = ``begin_transaction()``, one 100-byte record to each of
``k`` partitions of a 100-partition topic, ``commit_transaction()``; latency is the wall time of
``commit_transaction()`` (flush of the records, EndTxn, and librdkafka waiting for the answer —
the markers are written after the answer, as Kafka does). Transactions run back to back from one
producer, so txn/s is 1 / (time per transaction); server CPU per transaction comes from
/proc/<pid>/stat of the server processes.

``fetch``: 200,000 records of 100 bytes written in committed transactions of 1,000 records, with
every 10th transaction aborted, to a 1-partition topic; then read from the start with
``isolation.level`` read_uncommitted and read_committed (librdkafka consumer, assigned, no
group), five times each alternating; reported: records/s and server CPU per 1,000 records.

Durability: groupcoord fsyncs before it answers (its default); Tansu runs on its memory engine
(it has no fsync setting), so its numbers are an upper bound for it. Results: bench/RESULTS.md,
"Transactions (issue 32)".
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(REPO), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import peers  # noqa: E402
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC_PARTITIONS = 100
PAYLOAD = b"x" * 100


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / peers.TICK
    return total


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free loopback ports (LocalCluster takes base + i)."""
    import socket

    for _ in range(100):
        base = peers.free_port()
        try:
            for i in range(count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + i))
        except OSError:
            continue
        return base
    raise RuntimeError("no run of free ports")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def create_topic(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, rf)], operation_timeout=30)
    for fut in futures.values():
        try:
            fut.result(60)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 and p.error is None for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{name}: no leaders within 60 s")


def commit_run(bootstrap: str, pids: list[int], topic: str, k: int, count: int, txn_id: str) -> dict[str, Any]:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    for _ in range(3):  # warm-up: metadata, coordinator lookup, connections to every leader
        producer.begin_transaction()
        for p in range(k):
            producer.produce(topic, PAYLOAD, partition=p)
        producer.commit_transaction(60)
    latencies = []
    cpu0, t0 = cpu_seconds(pids), time.perf_counter()
    for i in range(count):
        producer.begin_transaction()
        for p in range(k):
            producer.produce(topic, PAYLOAD, partition=(i + p) % TOPIC_PARTITIONS)
        s = time.perf_counter()
        producer.commit_transaction(60)
        latencies.append((time.perf_counter() - s) * 1000)
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(pids) - cpu0
    return {"k": k, "count": count, "txn_per_s": count / wall, "p50_ms": pct(latencies, 0.5),
            "p99_ms": pct(latencies, 0.99), "max_ms": max(latencies), "cpu_ms_per_txn": cpu * 1000 / count}


def fill_for_fetch(bootstrap: str, topic: str, records: int, per_txn: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"fill-{topic}", "linger.ms": 5})
    producer.init_transactions(60)
    committed = 0
    for t in range(records // per_txn):
        producer.begin_transaction()
        for _ in range(per_txn):
            producer.produce(topic, PAYLOAD, partition=0)
        if t % 10 == 9:
            # abort_transaction() purges what the client has not sent yet: send it first, so the
            # aborted records are in the log (read_uncommitted returns them, read_committed skips them).
            producer.flush(60)
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
            committed += per_txn
    return committed


def read_all(bootstrap: str, topic: str, isolation: str, expect: int, pids: list[int]) -> tuple[float, float, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}-{time.time_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    cpu0, t0 = cpu_seconds(pids), time.perf_counter()
    last = t0
    while True:
        # consume() returns after num_messages or the timeout: the clock stops at the last record
        # (or the EOF event), so the final partial wait is not counted.
        msgs = consumer.consume(1000, 1)
        if not msgs:
            break
        eof = False
        for m in msgs:
            if m.error() is None:
                seen += 1
            elif m.error().code() == -191:  # _PARTITION_EOF
                eof = True
        last = time.perf_counter()
        if eof:
            break
    wall = last - t0
    cpu = cpu_seconds(pids) - cpu0
    consumer.close()
    if seen != expect:
        print(f"[bench] {isolation}: read {seen}, expected {expect}", file=sys.stderr)
    return seen / wall, cpu * 1000 * 1000 / max(seen, 1), seen


def run_target(name: str, bootstrap: str, pids: list[int], rf: int, args: argparse.Namespace,
               out: list[str]) -> None:
    if "commit" in args.only:
        topic = f"txn-commit-{int(time.time())}"
        create_topic(bootstrap, topic, TOPIC_PARTITIONS, rf)
        out.append(f"\n#### {name}: commit_transaction() latency and txn/s (one producer, back to back)\n")
        out.append("| partitions per txn | transactions | txn/s | p50 ms | p99 ms | max ms | server CPU ms/txn |")
        out.append("|---|---|---|---|---|---|---|")
        for k in (1, 10, 100):
            count = args.count if k < 100 else max(args.count // 4, 20)
            r = commit_run(bootstrap, pids, topic, k, count, f"bench-{name}-{k}-{time.time_ns()}")
            out.append(f"| {k} | {r['count']} | {r['txn_per_s']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                       f"{r['max_ms']:.2f} | {r['cpu_ms_per_txn']:.2f} |")
            print(out[-1], file=sys.stderr, flush=True)
    if "fetch" in args.only:
        topic = f"txn-fetch-{int(time.time())}"
        create_topic(bootstrap, topic, 1, rf)
        expect_committed = fill_for_fetch(bootstrap, topic, args.fetch_records, 1000)
        total = args.fetch_records
        rows: dict[str, list[tuple[float, float]]] = {"read_uncommitted": [], "read_committed": []}
        returned: dict[str, int] = {}
        for _ in range(args.fetch_rounds):
            for iso in rows:
                rate, cpu, returned[iso] = read_all(bootstrap, topic, iso, total if iso == "read_uncommitted"
                                                    else expect_committed, pids)
                rows[iso].append((rate, cpu))
        out.append(f"\n#### {name}: full read of {total:,} transactional records (10% aborted), "
                   f"{args.fetch_rounds} rounds each, medians\n")
        out.append("| isolation | records returned | records/s | server CPU µs / record |")
        out.append("|---|---|---|---|")
        for iso, vals in rows.items():
            out.append(f"| {iso} | {returned[iso]:,} | "
                       f"{statistics.median(v[0] for v in vals):,.0f} | {statistics.median(v[1] for v in vals):.2f} |")
            print(out[-1], file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="commit,fetch")
    parser.add_argument("--servers", default="groupcoord,tansu,cluster")
    parser.add_argument("--count", type=int, default=400, help="transactions per size (100 partitions: a quarter)")
    parser.add_argument("--fetch-records", type=int, default=200_000)
    parser.add_argument("--fetch-rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.count, args.fetch_records, args.fetch_rounds = 40, 20_000, 1
    args.only = set(args.only.split(","))
    servers = args.servers.split(",")
    commit = os.popen(f"git -C {REPO} rev-parse --short HEAD").read().strip()
    out = [f"### {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, code {commit} — `bench/txn_bench.py "
           f"{' '.join(sys.argv[1:])}`", "",
           f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
           f"load average {os.getloadavg()[0]:.1f} at start; Python {platform.python_version()}."]
    tmp = Path(tempfile.mkdtemp(prefix="txn-bench-"))
    try:
        if "groupcoord" in servers:
            with peers.start_groupcoord(tmp / "gc" / "data") as server:
                run_target("groupcoord, one node (fsync)", f"127.0.0.1:{server.port}", [server.pid], 1, args, out)
        if "tansu" in servers:
            with peers.start_tansu(tmp / "tansu") as server:
                run_target(f"Tansu {peers.tansu_version()}, memory engine", f"127.0.0.1:{server.port}",
                           [server.pid], 1, args, out)
        if "cluster" in servers:
            from coordinator.cluster.local_cluster import LocalCluster

            base = free_ports(3)
            cluster = LocalCluster(tmp / "cluster", 3, base, tick_time_ms=2000,
                                   settings=["zookeeper.session.timeout.ms=6000", "auto.leader.rebalance.enable=false"])
            cluster.start()
            try:
                pids = [p.pid for p in cluster.procs.values()]
                run_target("groupcoord, 3 nodes (RF 3, acks=all)", cluster.bootstrap, pids, 3, args, out)
            finally:
                cluster.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
