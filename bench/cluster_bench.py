"""Cluster mode benchmarks (issue 13 item 8): produce throughput and latency by replication
factor, failover time, and replication lag under load.

Kept in one file (~700 lines): a benchmark is one command, and its workloads share one harness
(servers, load, result table) that no other module uses.

All configurations run in one invocation, on one machine: a ZooKeeper server and three node
processes (``coordinator.cluster.local_cluster.LocalCluster``, tickTime 2000 ms,
``zookeeper.session.timeout.ms=6000``), and, for comparison, one node in single-node mode
(``groupcoord serve`` without ``zookeeper.connect``). The client is confluent-kafka (librdkafka),
the fastest stock Python producer; every record carries a delivery callback, so latency is
send (``produce()``) to acknowledgement (callback), per record.

1. throughput: one topic of 6 partitions per configuration, records assigned round-robin,
   acks=all, min.insync.replicas = min(2, RF). Two measurements per configuration:
   * "burst": N records of S bytes produced as fast as the client can queue them (the
     kafka-producer-perf-test ``--throughput -1`` case); the latency includes the time a record
     waits in the client's queue behind the records before it.
   * "paced": a fixed rate well below the ceiling (default 2,000 records/s for 5 s), so the
     latency is the service time of one acks=all round, not queueing.
2. failover: a 1-partition RF=3, min.insync.replicas=2 topic, a producer writing one record
   every ~2 ms (acks=all, linger 0). SIGKILL the current leader; the successor's first
   acknowledged write is the acknowledgement of the first record at or above the offset where
   the successor's new leader epoch starts (found by walking the batch headers of the
   successor's segment file for the first batch stamped with a newer partitionLeaderEpoch, so an
   ack cannot be mistaken for one of the old leader's). Reported: kill -> that ack, and
   kill -> the new leader appearing in the ZooKeeper state znode (polled every 20 ms). Between
   kills the node is restarted and the script waits for it to rejoin the ISR (the ``isr`` list in
   ``/brokers/topics/<t>/partitions/0/state``). Then the same with SIGTERM (controlled shutdown).
3. lag: a 1-partition RF=3 topic produced at a fixed high rate; every 100 ms the script reads
   the log end offset of each replica straight from its segment file (walking the Kafka batch
   headers appended since the previous sample: baseOffset + lastOffsetDelta + 1 of the last
   complete batch; followers copy the leader's batches byte for byte, offsets included) and the
   maxTimestamp (CreateTime, set by the producer) of that last batch. The follower is read before
   the leader, so the leader's figure is never older. Lag in records = leader LEO - follower LEO;
   lag in ms = leader's newest record timestamp - follower's newest record timestamp (how old
   the follower's data is relative to the leader's). Also reported: the leader's LEO minus the
   producer's acknowledged position (what acks=all waits for).

Run: ``.venv/bin/python bench/cluster_bench.py [--only throughput,failover,lag] [--quick]``.
Uses fresh directories under /tmp and free loopback ports; removes everything at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer

from coordinator.cluster.local_cluster import LocalCluster

SESSION_MS = 6000
TICK_MS = 2000
PARTITIONS = 6
HEADER = 43  # baseOffset .. maxTimestamp of a v2 record batch header


# ---------------------------------------------------------------------------------------------
# helpers


def free_ports(count: int) -> int:
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(20000, 32000 - count)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free consecutive ports")


def wait_for(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * len(s) + 0.5)) - 1))]


def machine_info() -> str:
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    import confluent_kafka

    return (f"nproc {os.cpu_count()}, {model}, {mem_kb / 1024 / 1024:.1f} GiB RAM, Linux {platform.release()}, "
            f"CPython {platform.python_version()}, confluent-kafka {confluent_kafka.version()[0]} "
            f"(librdkafka {confluent_kafka.libversion()[0]}), load avg {os.getloadavg()[0]:.2f} at start")


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU cores used over an interval by the server processes and by this (client) process."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.t0 = time.perf_counter()
        self.servers0 = sum(cpu_seconds(p) for p in pids)
        self.client0 = time.process_time()

    def done(self) -> tuple[float, float]:
        wall = time.perf_counter() - self.t0
        return ((sum(cpu_seconds(p) for p in self.pids) - self.servers0) / wall,
                (time.process_time() - self.client0) / wall)


class SegmentTail:
    """Log end offset and newest record timestamp of one partition replica, read from its segment
    files by walking v2 batch headers incrementally (only complete batches count)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path: Path | None = None
        self.fd: int | None = None
        self.pos = 0
        self.leo = 0
        self.max_ts = -1

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _current(self) -> None:
        logs = sorted(self.directory.glob("*.log"))
        if not logs:
            return
        if logs[-1] != self.path:
            self.close()
            self.path = logs[-1]
            self.fd = os.open(self.path, os.O_RDONLY)
            self.pos = 0

    def poll(self) -> tuple[int, int]:
        self._current()
        if self.fd is None:
            return self.leo, self.max_ts
        size = os.fstat(self.fd).st_size
        while self.pos + HEADER <= size:
            h = os.pread(self.fd, HEADER, self.pos)
            base = int.from_bytes(h[0:8], "big")
            length = int.from_bytes(h[8:12], "big")
            if length < HEADER - 12 or h[16] != 2 or self.pos + 12 + length > size:
                break  # not (yet) a complete batch: a write still in progress
            self.leo = base + int.from_bytes(h[23:27], "big") + 1
            self.max_ts = int.from_bytes(h[35:43], "big", signed=True)
            self.pos += 12 + length
        return self.leo, self.max_ts


def first_offset_of_epoch_above(directory: Path, epoch: int) -> int | None:
    """Base offset of the first batch whose partitionLeaderEpoch > ``epoch``, in any segment."""
    for path in sorted(directory.glob("*.log")):
        with open(path, "rb") as f:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            pos = 0
            while pos + HEADER <= size:
                h = os.pread(fd, 17, pos)
                length = int.from_bytes(h[8:12], "big")
                if length < HEADER - 12 or h[16] != 2 or pos + 12 + length > size:
                    break
                if int.from_bytes(h[12:16], "big", signed=True) > epoch:
                    return int.from_bytes(h[0:8], "big")
                pos += 12 + length
    return None


class Zk:
    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient

        self.client = KazooClient(hosts=connect, timeout=10.0)
        self.client.start(timeout=10)

    def state(self, topic: str, partition: int) -> dict[str, Any]:
        data, _ = self.client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data)

    def close(self) -> None:
        self.client.stop()
        self.client.close()


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int, min_isr: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, partitions, rf, topic_configs={"min.insync.replicas": str(min_isr)})])
    finally:
        admin.close()


def wait_topic_ready(bootstrap: str, topic: str, partitions: int) -> None:
    """Every partition has a leader in the metadata the producer will see."""
    p = Producer({"bootstrap.servers": bootstrap})

    def ready() -> bool:
        md = p.list_topics(topic, timeout=5).topics.get(topic)
        return bool(md and md.error is None and len(md.partitions) == partitions
                    and all(pm.leader >= 0 and pm.error is None for pm in md.partitions.values()))

    wait_for(ready, 30, f"leaders for {topic}", 0.2)


class SingleNode:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_ports(1)
        self.log = directory / "single.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "coordinator", "serve", "--data-dir",
                                          str(self.directory / "data"), "--listen", self.bootstrap],
                                         cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        needle = f"msg=listening listen={self.bootstrap} ".encode()
        wait_for(lambda: needle in self.log.read_bytes() or self.proc.poll() is not None, 60, "single node listening", 0.1)
        if self.proc.poll() is not None:
            raise RuntimeError(f"single node exited: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------------------------------------
# 1. throughput and latency


def producer_conf(bootstrap: str, **extra: Any) -> dict[str, Any]:
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "none",
            "enable.idempotence": False, "queue.buffering.max.messages": 100000,
            "queue.buffering.max.kbytes": 1048576, "message.timeout.ms": 60000}
    conf.update(extra)
    return conf


def burst(bootstrap: str, topic: str, count: int, size: int, pids: list[int]) -> dict[str, Any]:
    producer = Producer(producer_conf(bootstrap))
    value = os.urandom(size)
    lat: list[float] = []
    errors = [0]
    last = [0.0]
    pc = time.perf_counter

    def cb(err: Any, _msg: Any, t0: float) -> None:
        now = pc()
        if err is not None:
            errors[0] += 1
        else:
            lat.append(now - t0)
        last[0] = now

    # warm-up: connections and metadata for every partition
    for i in range(PARTITIONS * 10):
        producer.produce(topic, value, partition=i % PARTITIONS)
    producer.flush(30)
    cpu = CpuMeter(pids)
    start = pc()
    produce = producer.produce
    for i in range(count):
        while True:
            t0 = pc()
            try:
                produce(topic, value, partition=i % PARTITIONS, on_delivery=lambda e, m, t0=t0: cb(e, m, t0))
                break
            except BufferError:
                producer.poll(0.005)
        if i & 1023 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = last[0] - start
    server_cpu, client_cpu = cpu.done()
    return {"server_cpu": server_cpu, "client_cpu": client_cpu, "records": len(lat), "errors": errors[0] + remaining, "elapsed": elapsed,
            "rps": len(lat) / elapsed, "mbps": len(lat) * size / elapsed / 1e6,
            "p50": pct(lat, 50) * 1000, "p99": pct(lat, 99) * 1000, "max": max(lat) * 1000}


def paced(bootstrap: str, topic: str, rate: int, seconds: float, size: int, pids: list[int]) -> dict[str, Any]:
    producer = Producer(producer_conf(bootstrap, **{"linger.ms": 1}))
    value = os.urandom(size)
    lat: list[float] = []
    errors = [0]
    pc = time.perf_counter

    def cb(err: Any, _msg: Any, t0: float) -> None:
        if err is not None:
            errors[0] += 1
        else:
            lat.append(pc() - t0)

    for i in range(PARTITIONS * 10):
        producer.produce(topic, value, partition=i % PARTITIONS)
    producer.flush(30)
    total = int(rate * seconds)
    cpu = CpuMeter(pids)
    start = pc()
    for i in range(total):
        due = start + i / rate
        while True:
            now = pc()
            if now >= due:
                break
            producer.poll(min(0.001, due - now))
        sent = pc()
        producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=lambda e, m, t0=sent: cb(e, m, t0))
        producer.poll(0)
    remaining = producer.flush(60)
    server_cpu, client_cpu = cpu.done()
    return {"server_cpu": server_cpu, "client_cpu": client_cpu, "records": len(lat), "errors": errors[0] + remaining, "rate": rate,
            "p50": pct(lat, 50) * 1000, "p99": pct(lat, 99) * 1000, "max": max(lat) * 1000}


def run_throughput(cluster: LocalCluster | None, single: SingleNode | None, args: argparse.Namespace,
                   out: list[str]) -> None:
    configs: list[tuple[str, str, int, list[int]]] = []
    if single is not None:
        configs.append(("single node", single.bootstrap, 1, [single.proc.pid]))
    if cluster is not None:
        pids = [p.pid for p in cluster.procs.values()]
        configs += [("3 nodes", cluster.bootstrap, rf, pids) for rf in (1, 2, 3)]
    rows = []
    for label, bootstrap, rf, pids in configs:
        min_isr = min(2, rf)
        topic = f"tp-{'single' if label == 'single node' else 'cluster'}-rf{rf}"
        create_topic(bootstrap, topic, PARTITIONS, rf, min_isr)
        wait_topic_ready(bootstrap, topic, PARTITIONS)
        print(f"[throughput] {label} RF={rf}: burst of {args.records} x {args.size} B", file=sys.stderr, flush=True)
        b = burst(bootstrap, topic, args.records, args.size, pids)
        print(f"[throughput]   {b}", file=sys.stderr, flush=True)
        ps = []
        for rate in args.rates:
            print(f"[throughput] {label} RF={rf}: paced {rate}/s for {args.paced_s} s", file=sys.stderr, flush=True)
            ps.append(paced(bootstrap, topic, rate, args.paced_s, args.size, pids))
            print(f"[throughput]   {ps[-1]}", file=sys.stderr, flush=True)
        rows.append((label, rf, min_isr, b, ps))
    out.append(f"### Produce throughput and latency (acks=all, {PARTITIONS} partitions, burst of {args.records:,} "
               f"records x {args.size} B, linger 5 ms)\n")
    out.append("| nodes | RF | min.insync.replicas | records/s | MB/s | latency p50 / p99 / max (ms) "
               "| CPU cores: servers / client | errors |")
    out.append("|---|---|---|---|---|---|---|---|")
    for label, rf, min_isr, b, _ in rows:
        out.append(f"| {label} | {rf} | {min_isr} | {b['rps']:,.0f} | {b['mbps']:.2f} | "
                   f"{b['p50']:.1f} / {b['p99']:.1f} / {b['max']:.1f} | {b['server_cpu']:.2f} / {b['client_cpu']:.2f} | "
                   f"{b['errors']} |")
    out.append("")
    out.append(f"### Produce latency at a fixed rate (acks=all, {PARTITIONS} partitions, {args.size} B records, "
               f"linger 1 ms, {args.paced_s:g} s per rate)\n")
    out.append("| nodes | RF | min.insync.replicas | rate (records/s) | latency p50 / p99 / max (ms) "
               "| CPU cores: servers / client | errors |")
    out.append("|---|---|---|---|---|---|---|")
    for label, rf, min_isr, _, ps in rows:
        for p in ps:
            out.append(f"| {label} | {rf} | {min_isr} | {p['rate']:,} | {p['p50']:.2f} / {p['p99']:.2f} / {p['max']:.2f} | "
                       f"{p['server_cpu']:.2f} / {p['client_cpu']:.2f} | {p['errors']} |")
    out.append("")


# ---------------------------------------------------------------------------------------------
# 2. failover


class ContinuousProducer:
    """One record every ``interval`` s to partition 0; ack times and offsets recorded."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.002) -> None:
        self.bootstrap, self.topic, self.interval = bootstrap, topic, interval
        self.acks: list[tuple[float, int]] = []  # (monotonic ack time, offset)
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": False,
            "message.timeout.ms": 120000, "request.timeout.ms": 5000, "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 100, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
            "topic.metadata.refresh.fast.interval.ms": 50, "topic.metadata.refresh.interval.ms": 5000})
        mono = time.monotonic

        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acks.append((mono(), msg.offset()))

        i = 0
        nxt = mono()
        while not self.stop_event.is_set():
            producer.produce(self.topic, b"r%09d" % i, partition=0, on_delivery=cb)
            i += 1
            nxt += self.interval
            while True:
                left = nxt - mono()
                if left <= 0:
                    break
                producer.poll(min(left, 0.001))
        producer.flush(30)

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(60)

    def first_ack_at_or_above(self, offset: int) -> float | None:
        times = [t for t, o in list(self.acks) if o >= offset]
        return min(times) if times else None


def node_log_lines(cluster: LocalCluster, wall_from: float, wall_to: float, pattern: str) -> list[str]:
    rx = re.compile(pattern)
    lines = []
    for broker_id in cluster.procs:
        try:
            text = cluster.log_path(broker_id).read_text(errors="replace")
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            m = re.match(r"ts=(\S+)Z ", line)
            if not m:
                continue
            try:
                ts = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
            except ValueError:
                continue
            if wall_from <= ts <= wall_to and rx.search(line):
                lines.append((ts, f"node-{broker_id}: {line}"))
    return [line for _, line in sorted(lines)]


def one_failover(cluster: LocalCluster, zk: Zk, producer: ContinuousProducer, topic: str, hard: bool) -> dict[str, Any]:
    wait_for(lambda: len(zk.state(topic, 0)["isr"]) == 3, 90, "all three replicas in the ISR", 0.1)
    # some acks on the current leader first
    n0 = len(producer.acks)
    wait_for(lambda: len(producer.acks) > n0 + 200, 30, "acks before the kill")
    state = zk.state(topic, 0)
    leader, epoch = int(state["leader"]), int(state["leader_epoch"])
    proc = cluster.procs[leader]
    wall0 = time.time()
    t0 = time.monotonic()
    if hard:
        proc.kill()
    else:
        proc.terminate()

    def new_leader() -> tuple[float, int] | None:
        s = zk.state(topic, 0)
        if int(s["leader_epoch"]) > epoch and int(s["leader"]) not in (-1, leader):
            return time.monotonic(), int(s["leader"])
        return None

    zk_seen, successor = wait_for(new_leader, SESSION_MS / 1000 + 60, "a new leader in ZooKeeper", 0.02)
    part_dir = cluster.directory / f"node-{successor}" / f"{topic}-0"
    start_offset = wait_for(lambda: first_offset_of_epoch_above(part_dir, epoch), 60,
                            "a batch of the new epoch on the successor", 0.2)
    t_ack = wait_for(lambda: producer.first_ack_at_or_above(start_offset), 60, "an ack from the successor", 0.05)
    stopped = None
    rc = proc.wait(60)
    if not hard:
        stopped = time.monotonic() - t0
    # longest pause between consecutive acks around the event
    times = [t for t, _ in list(producer.acks) if t > t0 - 1]
    gaps = [b - a for a, b in pairwise(times)]
    result = {"hard": hard, "leader": leader, "successor": successor, "epoch": epoch,
              "first_ack_s": t_ack - t0, "zk_s": zk_seen - t0, "max_gap_s": max(gaps) if gaps else float("nan"),
              "stop_s": stopped, "rc": rc, "wall0": wall0, "wall_ack": wall0 + (t_ack - t0),
              "new_epoch_start": start_offset}
    cluster.restart(leader)
    wait_for(lambda: leader in zk.state(topic, 0)["isr"], 120, f"node {leader} back in the ISR", 0.1)
    result["rejoin_s"] = time.monotonic() - t0
    return result


def run_failover(cluster: LocalCluster, args: argparse.Namespace, out: list[str]) -> None:
    topic = "failover"
    create_topic(cluster.bootstrap, topic, 1, 3, 2)
    wait_topic_ready(cluster.bootstrap, topic, 1)
    zk = Zk(cluster.zookeeper.connect)
    producer = ContinuousProducer(cluster.bootstrap, topic)
    producer.start()
    results: list[dict[str, Any]] = []
    try:
        for hard, n in ((True, args.kills), (False, args.terms)):
            for k in range(n):
                r = one_failover(cluster, zk, producer, topic, hard)
                results.append(r)
                print(f"[failover] {'SIGKILL' if hard else 'SIGTERM'} #{k + 1}: node {r['leader']} -> {r['successor']} "
                      f"first ack {r['first_ack_s']:.3f} s, in ZK {r['zk_s']:.3f} s, longest ack gap "
                      f"{r['max_gap_s']:.3f} s, back in ISR after {r['rejoin_s']:.1f} s", file=sys.stderr, flush=True)
    finally:
        producer.stop()
        zk.close()
    out.append(f"### Failover (1 partition, RF=3, min.insync.replicas=2, zookeeper.session.timeout.ms={SESSION_MS}, "
               f"ZooKeeper tickTime {TICK_MS} ms; producer: 1 record / 2 ms, acks=all, linger 0)\n")
    out.append("| event | n | kill → first ack on successor p50 / max (s) | min (s) | kill → new leader in ZK p50 / max (s) "
               "| longest pause between acks p50 / max (s) | producer errors |")
    out.append("|---|---|---|---|---|---|---|")
    for hard, name in ((True, "SIGKILL of the leader"), (False, "SIGTERM of the leader (controlled shutdown)")):
        rs = [r for r in results if r["hard"] == hard]
        if not rs:
            continue
        fa = [r["first_ack_s"] for r in rs]
        zs = [r["zk_s"] for r in rs]
        gs = [r["max_gap_s"] for r in rs]
        out.append(f"| {name} | {len(rs)} | {statistics.median(fa):.3f} / {max(fa):.3f} | {min(fa):.3f} | "
                   f"{statistics.median(zs):.3f} / {max(zs):.3f} | {statistics.median(gs):.3f} / {max(gs):.3f} | "
                   f"{len(producer.errors) if hard else ''} |")
    out.append("")
    out.append("Per event (s): " + "; ".join(
        f"{'K' if r['hard'] else 'T'}{r['leader']}→{r['successor']} {r['first_ack_s']:.2f}" for r in results))
    terms = [r for r in results if not r["hard"]]
    if terms:
        out.append(f"\nSIGTERM: node exit {statistics.median([r['stop_s'] for r in terms]):.2f} s after the signal "
                   f"(median), exit codes {sorted({r['rc'] for r in terms})}.")
    rejoin = [r["rejoin_s"] for r in results]
    out.append(f"\nKilled/stopped node back in the ISR (from the signal, restart included): p50 "
               f"{statistics.median(rejoin):.1f} s, max {max(rejoin):.1f} s.")
    if producer.errors:
        out.append(f"\nProducer errors ({len(producer.errors)}): {sorted(set(producer.errors))[:3]}")
    slow = [r for r in results if r["hard"] and r["first_ack_s"] > SESSION_MS / 1000 + 1]
    if slow:
        worst = max(slow, key=lambda r: r["first_ack_s"])
        out.append(f"\nSlowest SIGKILL failover ({worst['first_ack_s']:.2f} s, node {worst['leader']} killed): node log "
                   "lines from the kill to the first ack:\n")
        out.append("```")
        lines = node_log_lines(cluster, worst["wall0"] - 0.5, worst["wall_ack"] + 0.5,
                               r"failover-0|live brokers|session|expire|fetcher|controller msg=(?!\"partition state)|level=ERROR")
        # the retry loop of a follower whose leader died logs once per backoff: keep its first and last line
        retry = [i for i, line in enumerate(lines) if "fetch from the leader failed" in line]
        keep = set(range(len(lines))) - set(retry)
        for node in {line.split(":", 1)[0] for line in lines}:
            mine = [i for i in retry if lines[i].startswith(node + ":")]
            if mine:
                keep |= {mine[0], mine[-1]}
                if len(mine) > 2:
                    lines[mine[-1]] += f"   [{len(mine) - 2} such lines of {node} between these two left out]"
        out.extend(lines[i][:500] for i in sorted(keep)[:60])
        out.append("```")
    out.append("")


# ---------------------------------------------------------------------------------------------
# 3. replication lag


def run_lag(cluster: LocalCluster, args: argparse.Namespace, out: list[str]) -> None:
    topic = "lag"
    create_topic(cluster.bootstrap, topic, 1, 3, 2)
    wait_topic_ready(cluster.bootstrap, topic, 1)
    zk = Zk(cluster.zookeeper.connect)
    try:
        state = zk.state(topic, 0)
        wait_for(lambda: len(zk.state(topic, 0)["isr"]) == 3, 30, "full ISR", 0.1)
    finally:
        zk.close()
    leader = int(state["leader"])
    followers = [b for b in (1, 2, 3) if b != leader]
    tails = {b: SegmentTail(cluster.directory / f"node-{b}" / f"{topic}-0") for b in (1, 2, 3)}
    producer = Producer(producer_conf(cluster.bootstrap, **{"linger.ms": 5}))
    value = os.urandom(args.size)
    acked = [0]
    errors = [0]

    def cb(err: Any, msg: Any) -> None:
        if err is not None:
            errors[0] += 1
        elif msg.offset() + 1 > acked[0]:
            acked[0] = msg.offset() + 1

    samples: dict[int, list[tuple[int, int]]] = {b: [] for b in followers}
    ack_lag: list[int] = []
    rate, seconds = args.lag_rate, args.lag_s
    total = int(rate * seconds)
    start = time.perf_counter()
    next_sample = start + 0.5  # the first samples after the producer got going
    i = 0
    late = 0
    while i < total:
        now = time.perf_counter()
        due_count = min(total, int((now - start) * rate) + 1)
        if due_count - i > rate * 0.05:
            late += 1
        while i < due_count:
            try:
                producer.produce(topic, value, partition=0, on_delivery=cb)
                i += 1
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
        if now >= next_sample:
            next_sample += 0.1
            f_state = {b: tails[b].poll() for b in followers}  # followers first, then the leader
            leo, ts = tails[leader].poll()
            for b in followers:
                f_leo, f_ts = f_state[b]
                samples[b].append((leo - f_leo, max(0, ts - f_ts) if f_ts >= 0 else 0))
            ack_lag.append(leo - acked[0])
        producer.poll(0.0005)
    achieved = i / (time.perf_counter() - start)
    producer.flush(60)
    for t in tails.values():
        t.close()
    out.append(f"### Replication lag under load (1 partition, RF=3, min.insync.replicas=2, {rate:,} records/s "
               f"x {args.size} B for {seconds:g} s, acks=all; sampled every 100 ms from the segment files)\n")
    out.append(f"Achieved produce rate {achieved:,.0f} records/s; {errors[0]} errors; leader node {leader}.\n")
    out.append("| replica | samples | lag p50 / p99 / max (records) | lag p50 / p99 / max (ms of data) |")
    out.append("|---|---|---|---|")
    for b in followers:
        recs = [float(r) for r, _ in samples[b]]
        ms = [float(m) for _, m in samples[b]]
        out.append(f"| follower node {b} | {len(recs)} | {pct(recs, 50):.0f} / {pct(recs, 99):.0f} / {max(recs):.0f} | "
                   f"{pct(ms, 50):.0f} / {pct(ms, 99):.0f} / {max(ms):.0f} |")
    al = [float(x) for x in ack_lag]
    out.append(f"| leader LEO − producer's acked position | {len(al)} | {pct(al, 50):.0f} / {pct(al, 99):.0f} / "
               f"{max(al):.0f} | — |")
    out.append("")


# ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="throughput,failover,lag")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (node logs)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra setting for the cluster nodes (diagnostics; the reference run uses none)")
    parser.add_argument("--lag-rate", type=int, default=50_000)
    args = parser.parse_args()
    only = set(args.only.split(","))
    unknown = only - {"throughput", "failover", "lag"}
    if unknown:
        parser.error(f"unknown: {unknown}")
    args.size = 100
    args.records = 20_000 if args.quick else 1_000_000
    args.rates = [200, 2000]
    args.paced_s = 2.0 if args.quick else 5.0
    args.kills = 3 if args.quick else 20
    args.terms = 1 if args.quick else 5
    args.lag_s = 5.0 if args.quick else 20.0

    def on_signal(sig: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGTERM, on_signal)
    out: list[str] = []
    header = [f"Machine: {machine_info()}.",
              f"Command: `.venv/bin/python bench/cluster_bench.py{' --quick' if args.quick else ''}"
              f"{' --only ' + args.only if args.only != 'throughput,failover,lag' else ''}"
              f"{''.join(' --set ' + s for s in args.set)}`, "
              f"started {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.", ""]
    tmp = Path(tempfile.mkdtemp(prefix="gc-cluster-bench-"))
    cluster: LocalCluster | None = None
    single: SingleNode | None = None
    began = time.monotonic()
    try:
        if "throughput" in only:
            single = SingleNode(tmp / "single")
            single.start()
        cluster = LocalCluster(tmp / "cluster", 3, free_ports(3), tick_time_ms=TICK_MS,
                               settings=[f"zookeeper.session.timeout.ms={SESSION_MS}",
                                         "auto.leader.rebalance.enable=false", *args.set])
        cluster.start()
        print(f"[bench] cluster up in {tmp}", file=sys.stderr, flush=True)
        if "throughput" in only:
            run_throughput(cluster, single, args, out)
            single.stop()
        if "lag" in only:
            run_lag(cluster, args, out)
        if "failover" in only:
            run_failover(cluster, args, out)
    finally:
        if single is not None:
            single.stop()
        if cluster is not None:
            cluster.stop()
        if args.keep:
            print(f"[bench] kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    header[1] += f" Total {time.monotonic() - began:.0f} s."
    print("\n".join(header + out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
